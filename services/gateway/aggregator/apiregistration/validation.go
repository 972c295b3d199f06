package apiregistration

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultPort is the Service port of an APIService that names none.
const DefaultPort int32 = 443

// Default applies upstream's defaults: a service reference without a port uses 443.
func Default(a *APIService) {
	if s := a.Spec.Service; s != nil && s.Port == nil {
		p := DefaultPort
		s.Port = &p
	}
}

// ValidateName is the name rule before the spec is known: a path segment name (the full
// "<version>.<group>" rule is checked by Validate, which knows the spec).
func ValidateName(name string) []string {
	var errs []string
	if name == "." || name == ".." {
		errs = append(errs, fmt.Sprintf("may not be '%s'", name))
	}
	for _, c := range []string{"/", "%"} {
		if strings.Contains(name, c) {
			errs = append(errs, fmt.Sprintf("may not contain '%s'", c))
		}
	}
	return errs
}

// Validate checks an APIService as upstream's validation does: the name is
// "<version>.<group>", the group a DNS subdomain (only v1 may have none), the version a DNS
// label, the priorities in range, and either a local APIService (no CA bundle, no
// insecureSkipTLSVerify) or a service reference with namespace, name and a valid port, with
// insecureSkipTLSVerify and caBundle not both set.
func Validate(a *APIService) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if required := a.Spec.Version + "." + a.Spec.Group; a.Name != required {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), a.Name, fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)))
	}
	if a.Spec.Group == "" && a.Spec.Version != "v1" {
		errs = append(errs, field.Required(spec.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if a.Spec.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(a.Spec.Group) {
			errs = append(errs, field.Invalid(spec.Child("group"), a.Spec.Group, msg))
		}
	}
	for _, msg := range validation.IsDNS1035Label(a.Spec.Version) {
		errs = append(errs, field.Invalid(spec.Child("version"), a.Spec.Version, msg))
	}
	if p := a.Spec.GroupPriorityMinimum; p <= 0 || p > 20000 {
		errs = append(errs, field.Invalid(spec.Child("groupPriorityMinimum"), p, "must be positive and less than 20000"))
	}
	if p := a.Spec.VersionPriority; p <= 0 || p > 1000 {
		errs = append(errs, field.Invalid(spec.Child("versionPriority"), p, "must be positive and less than 1000"))
	}
	svc := a.Spec.Service
	if svc == nil {
		if len(a.Spec.CABundle) != 0 {
			errs = append(errs, field.Invalid(spec.Child("caBundle"), fmt.Sprintf("%d bytes", len(a.Spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if a.Spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), a.Spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	if svc.Namespace == "" {
		errs = append(errs, field.Required(spec.Child("service", "namespace"), ""))
	}
	if svc.Name == "" {
		errs = append(errs, field.Required(spec.Child("service", "name"), ""))
	}
	port := DefaultPort
	if svc.Port != nil {
		port = *svc.Port
	}
	if msgs := validation.IsValidPortNum(int(port)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(spec.Child("service", "port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if a.Spec.InsecureSkipTLSVerify && len(a.Spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), a.Spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return errs
}

// ValidateStatus checks the conditions a status write sets: each has a type and a status of
// True, False or Unknown.
func ValidateStatus(a *APIService) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status", "conditions")
	for i, c := range a.Status.Conditions {
		if c.Type == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		}
		switch c.Status {
		case ConditionTrue, ConditionFalse, ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(p.Index(i).Child("status"), c.Status, []string{string(ConditionTrue), string(ConditionFalse), string(ConditionUnknown)}))
		}
	}
	return errs
}
