package apiserver

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	webhookvalidation "platform.io/libs/admissionregistration/validation"
	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/registry"
)

// validateKind checks the rules the spec states for particular kinds (422 Invalid, listing every
// violation). old is nil on create.
func validateKind(res *registry.Resource, obj, old runtime.Object) error {
	var errs field.ErrorList
	switch o := obj.(type) {
	case *eventsv1.Event:
		errs = validateEvent(o, old == nil)
	case *apiextensionsv1.CustomResourceDefinition:
		prev, _ := old.(*apiextensionsv1.CustomResourceDefinition)
		errs = crd.Validate(o, prev)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
		errs = webhookvalidation.ValidateMutatingWebhookConfiguration(o, prev)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		errs = webhookvalidation.ValidateValidatingWebhookConfiguration(o, prev)
	case *certificatesv1.CertificateSigningRequest:
		if prev, ok := old.(*certificatesv1.CertificateSigningRequest); ok {
			errs = validateCSRUpdate(o, prev)
		} else {
			errs = validateCSRCreate(o)
		}
	case *unstructured.Unstructured:
		if isCustom(res) {
			errs = validateCustom(res, o, old)
		}
	default:
		errs = validateRBAC(obj, old)
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), mustMeta(obj).GetName(), errs)
}

// validateEvent applies the spec's rules for events.platform.io/v1 Events: type Normal or
// Warning; action, reason, reportingController and reportingInstance required on create; the
// renamed deprecated fields not allowed in new objects.
func validateEvent(e *eventsv1.Event, create bool) field.ErrorList {
	var errs field.ErrorList
	if e.Type != "Normal" && e.Type != "Warning" {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, []string{"Normal", "Warning"}))
	}
	if !create {
		return errs
	}
	for name, v := range map[string]string{"action": e.Action, "reason": e.Reason, "reportingController": e.ReportingController, "reportingInstance": e.ReportingInstance} {
		if v == "" {
			errs = append(errs, field.Required(field.NewPath(name), ""))
		}
	}
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	deprecated := map[string]bool{
		"deprecatedFirstTimestamp":   !e.DeprecatedFirstTimestamp.IsZero(),
		"deprecatedLastTimestamp":    !e.DeprecatedLastTimestamp.IsZero(),
		"deprecatedCount":            e.DeprecatedCount != 0,
		"deprecatedSource.component": e.DeprecatedSource.Component != "",
		"deprecatedSource.host":      e.DeprecatedSource.Host != "",
	}
	for name, set := range deprecated {
		if set {
			errs = append(errs, field.Forbidden(field.NewPath(name), "deprecated field is not allowed in new objects; use its replacement"))
		}
	}
	if s := e.Series; s != nil {
		if s.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series", "count"), s.Count, "should be at least 2"))
		}
		if s.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	return errs
}
