package crd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// printerColumnTypes are the allowed additionalPrinterColumns[].type values.
	printerColumnTypes = []string{"boolean", "date", "integer", "number", "string"}
	// printerColumnFormats are the allowed additionalPrinterColumns[].format values.
	printerColumnFormats = []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}
	// conversionReviewVersions are the ConversionReview versions a webhook may speak.
	conversionReviewVersions = []string{"v1", "v1beta1"}
	// rootFieldsWithStatus are the only keywords allowed at the root of a
	// schema whose version enables the status subresource (so that the
	// schema of .status can be extracted without losing validation).
	rootFieldsWithStatus = []string{
		"description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "required",
		"items", "properties", "externalDocs", "example", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
	}
)

// maxSelectableFields is the most selectableFields a version may declare.
const maxSelectableFields = 8

// Validate returns every violation of the v1 CRD rules in crd (old is the
// stored version on update, nil on create). The caller turns a non-empty list
// into a 422 Invalid Status.
//
// It checks metadata.name, spec.group, spec.names, spec.scope, spec.versions
// (names, storage/served flags, schemas that must be structural and whose
// defaults must be valid, subresources, printer columns, selectable fields),
// spec.conversion, spec.preserveUnknownFields and status.storedVersions; on
// update also that scope, group and names.plural did not change. The
// x-kubernetes-validations rules of structural schemas are compiled and their
// estimated costs checked (cel_definition.go).
//
// Validate expects the object as stored after v1 defaulting, but tolerates
// fields defaulting would fill: an empty singular or listKind, a nil
// conversion or an empty conversion strategy (treated as None).
func Validate(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if crd == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "a CustomResourceDefinition is required")}
	}
	var errs field.ErrorList
	errs = append(errs, validateMetadataName(crd)...)
	errs = append(errs, validateApproval(crd, old)...)
	errs = append(errs, validateSpec(&crd.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateNames(&crd.Status.AcceptedNames, false, field.NewPath("status", "acceptedNames"))...)

	if crd.Spec.PreserveUnknownFields && (old == nil || !old.Spec.PreserveUnknownFields) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "preserveUnknownFields"), true,
			"cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
	}

	storedVersions := crd.Status.StoredVersions
	if old != nil {
		sp := field.NewPath("spec")
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(string(crd.Spec.Scope), string(old.Spec.Scope), sp.Child("scope"))...)
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(crd.Spec.Group, old.Spec.Group, sp.Child("group"))...)
		errs = append(errs, apimachineryvalidation.ValidateImmutableField(crd.Spec.Names.Plural, old.Spec.Names.Plural, sp.Child("names", "plural"))...)
		if len(storedVersions) == 0 {
			// status is not changed through the main resource: keep the stored one
			storedVersions = old.Status.StoredVersions
		}
	}
	errs = append(errs, validateStoredVersions(storedVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	errs = append(errs, validateRules(crd, old, errs)...)
	return errs
}

// ApprovalAnnotation must be on definitions in protected groups, as upstream requires: a URL of
// the approved design, or a value starting with "unapproved" saying why there is none.
const ApprovalAnnotation = "api-approved.kubernetes.io"

// protectedGroup tells whether a group belongs to the project: upstream's k8s.io and
// kubernetes.io, and platform.io, Platform's name for what upstream calls k8s.io.
func protectedGroup(group string) bool {
	for _, d := range []string{"k8s.io", "kubernetes.io", "platform.io"} {
		if group == d || strings.HasSuffix(group, "."+d) {
			return true
		}
	}
	return false
}

// validateApproval checks the approval annotation of a definition in a protected group, on create
// and whenever it changes (as upstream, a definition stored before the rule keeps working).
func validateApproval(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if !protectedGroup(crd.Spec.Group) {
		return nil
	}
	v, ok := crd.Annotations[ApprovalAnnotation]
	if old != nil && old.Annotations[ApprovalAnnotation] == v {
		return nil
	}
	p := field.NewPath("metadata", "annotations").Key(ApprovalAnnotation)
	switch {
	case !ok:
		return field.ErrorList{field.Required(p, fmt.Sprintf("protected groups must have approval annotation %q", ApprovalAnnotation))}
	case strings.HasPrefix(v, "unapproved"):
		return nil
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return field.ErrorList{field.Invalid(p, v, `must be a URL of the approved design, or start with "unapproved"`)}
	}
	return nil
}

// validateMetadataName checks that metadata.name is <plural>.<group>.
func validateMetadataName(crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	p := field.NewPath("metadata", "name")
	name := crd.Name
	if name == "" {
		return field.ErrorList{field.Required(p, "name or generateName is required")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if name != crd.Spec.Names.Plural+"."+crd.Spec.Group {
		errs = append(errs, field.Invalid(p, name, `must be spec.names.plural+"."+spec.group`))
	}
	return errs
}

// validateSpec checks everything under spec except immutability.
func validateSpec(spec *apiextensionsv1.CustomResourceDefinitionSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList

	switch {
	case spec.Group == "":
		errs = append(errs, field.Required(p.Child("group"), ""))
	case len(utilvalidation.IsDNS1123Subdomain(spec.Group)) > 0:
		errs = append(errs, field.Invalid(p.Child("group"), spec.Group, strings.Join(utilvalidation.IsDNS1123Subdomain(spec.Group), ",")))
	case !strings.Contains(spec.Group, "."):
		errs = append(errs, field.Invalid(p.Child("group"), spec.Group, "should be a domain with at least one dot"))
	}

	switch spec.Scope {
	case "":
		errs = append(errs, field.Required(p.Child("scope"), ""))
	case apiextensionsv1.ClusterScoped, apiextensionsv1.NamespaceScoped:
	default:
		errs = append(errs, field.NotSupported(p.Child("scope"), string(spec.Scope), []string{string(apiextensionsv1.ClusterScoped), string(apiextensionsv1.NamespaceScoped)}))
	}

	errs = append(errs, validateNames(&spec.Names, true, p.Child("names"))...)
	errs = append(errs, validateVersions(spec.Versions, p.Child("versions"))...)
	errs = append(errs, validateConversion(spec.Conversion, p.Child("conversion"))...)
	return errs
}

// validateNames checks spec.names (required=true: plural and kind must be
// set) or status.acceptedNames.
func validateNames(names *apiextensionsv1.CustomResourceDefinitionNames, required bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(name, value string) {
		if errs1035 := utilvalidation.IsDNS1035Label(value); len(errs1035) > 0 {
			errs = append(errs, field.Invalid(p.Child(name), value, strings.Join(errs1035, ",")))
		}
	}
	kindLike := func(name, value string) {
		if errs1035 := utilvalidation.IsDNS1035Label(strings.ToLower(value)); len(errs1035) > 0 {
			errs = append(errs, field.Invalid(p.Child(name), value, "may have mixed case, but should otherwise match: "+strings.Join(errs1035, ",")))
		}
	}

	if names.Plural == "" {
		if required {
			errs = append(errs, field.Required(p.Child("plural"), ""))
		}
	} else {
		label("plural", names.Plural)
	}
	if names.Singular != "" {
		label("singular", names.Singular)
	}
	if names.Kind == "" {
		if required {
			errs = append(errs, field.Required(p.Child("kind"), ""))
		}
	} else {
		kindLike("kind", names.Kind)
	}
	if names.ListKind != "" {
		kindLike("listKind", names.ListKind)
	}
	for i, s := range names.ShortNames {
		if errs1035 := utilvalidation.IsDNS1035Label(s); len(errs1035) > 0 {
			errs = append(errs, field.Invalid(p.Child("shortNames").Index(i), s, strings.Join(errs1035, ",")))
		}
	}
	if names.Kind != "" && names.Kind == names.ListKind {
		errs = append(errs, field.Invalid(p.Child("listKind"), names.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range names.Categories {
		if errs1035 := utilvalidation.IsDNS1035Label(c); len(errs1035) > 0 {
			errs = append(errs, field.Invalid(p.Child("categories").Index(i), c, strings.Join(errs1035, ",")))
		}
	}
	return errs
}

// validateVersions checks spec.versions: each version, then that names are
// unique, exactly one is the storage version and at least one is served.
func validateVersions(versions []apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must have at least one version")}
	}
	var errs field.ErrorList
	names := make([]string, len(versions))
	seen := map[string]bool{}
	unique := true
	storage, served := 0, 0
	for i := range versions {
		v := &versions[i]
		names[i] = v.Name
		if seen[v.Name] {
			unique = false
		}
		seen[v.Name] = true
		if v.Storage {
			storage++
		}
		if v.Served {
			served++
		}
		errs = append(errs, validateVersion(v, p.Index(i))...)
	}
	if !unique {
		errs = append(errs, field.Invalid(p, names, "must contain unique version names"))
	}
	if storage != 1 {
		errs = append(errs, field.Invalid(p, names, "must have exactly one version marked as storage version"))
	}
	if served == 0 {
		errs = append(errs, field.Invalid(p, names, "must have at least one version marked as served"))
	}
	return errs
}

// validateVersion checks one entry of spec.versions.
func validateVersion(v *apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if e := utilvalidation.IsDNS1035Label(v.Name); len(e) > 0 {
		errs = append(errs, field.Invalid(p.Child("name"), v.Name, strings.Join(e, ",")))
	}
	errs = append(errs, validateDeprecationWarning(v, p.Child("deprecationWarning"))...)

	var schema *apiextensionsv1.JSONSchemaProps
	schemaPath := p.Child("schema", "openAPIV3Schema")
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		errs = append(errs, field.Required(schemaPath, "schemas are required"))
	} else {
		schema = v.Schema.OpenAPIV3Schema
		statusEnabled := v.Subresources != nil && v.Subresources.Status != nil
		errs = append(errs, validateRootSchema(schema, statusEnabled, schemaPath)...)
	}

	errs = append(errs, validateSubresources(v.Subresources, schema, p.Child("subresources"))...)
	errs = append(errs, validatePrinterColumns(v.AdditionalPrinterColumns, p.Child("additionalPrinterColumns"))...)
	errs = append(errs, validateSelectableFields(v.SelectableFields, schema, p.Child("selectableFields"))...)
	return errs
}

// validateDeprecationWarning checks versions[].deprecationWarning.
func validateDeprecationWarning(v *apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	w := v.DeprecationWarning
	if w == nil {
		return nil
	}
	if !v.Deprecated {
		return field.ErrorList{field.Invalid(p, *w, "can only be set for deprecated versions")}
	}
	var errs field.ErrorList
	if len(*w) > 256 {
		errs = append(errs, field.Invalid(p, *w, "must be <= 256 characters long"))
	}
	if len(*w) == 0 {
		errs = append(errs, field.Invalid(p, *w, "must not be an empty string"))
	}
	for i, r := range *w {
		if !unicode.IsPrint(r) {
			errs = append(errs, field.Invalid(p, *w, fmt.Sprintf("must only contain printable UTF-8 characters; non-printable character found at index %d", i)))
			break
		}
	}
	return errs
}

// validateRootSchema checks a version's openAPIV3Schema (at p).
func validateRootSchema(s *apiextensionsv1.JSONSchemaProps, statusEnabled bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if statusEnabled {
		if extra := fieldsOutside(s, rootFieldsWithStatus, "nullable", "additionalProperties"); len(extra) > 0 {
			errs = append(errs, field.Invalid(p, strings.Join(extra, ","),
				fmt.Sprintf("only %s fields are allowed at the root of the schema if the status subresource is enabled", strings.Join(rootFieldsWithStatus, ", "))))
		}
	}
	if s.Nullable {
		errs = append(errs, field.Forbidden(p.Child("nullable"), "nullable cannot be true at the root"))
	}
	structErrs := ValidateStructural(s, p)
	errs = append(errs, structErrs...)
	errs = append(errs, validateSchemaValues(s, p, structErrs)...)
	return errs
}

// fieldsOutside returns, sorted, the JSON keywords set in s that are neither
// allowed nor ignored.
func fieldsOutside(s *apiextensionsv1.JSONSchemaProps, allowed []string, ignored ...string) []string {
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	var extra []string
	for k := range m {
		if !contains(allowed, k) && !contains(ignored, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return extra
}

// validateSubresources checks versions[].subresources; the scale paths are
// checked against schema when it defines them.
func validateSubresources(sub *apiextensionsv1.CustomResourceSubresources, schema *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	if sub == nil || sub.Scale == nil {
		return nil
	}
	var errs field.ErrorList
	scale := sub.Scale
	replicasPath := func(name, value, prefix string) {
		fp := p.Child("scale", name)
		switch {
		case value == "":
			errs = append(errs, field.Required(fp, ""))
		case len(validateSimpleJSONPath(value, fp)) > 0:
			errs = append(errs, validateSimpleJSONPath(value, fp)...)
		case !strings.HasPrefix(value, prefix+"."):
			errs = append(errs, field.Invalid(fp, value, "should be a json path under "+prefix))
		default:
			if node := lookupPath(schema, value); node != nil && node.Type != "" && node.Type != "integer" {
				errs = append(errs, field.Invalid(fp, value, fmt.Sprintf("must point to a field of type integer, but the schema declares type %s", node.Type)))
			}
		}
	}
	replicasPath("specReplicasPath", scale.SpecReplicasPath, ".spec")
	replicasPath("statusReplicasPath", scale.StatusReplicasPath, ".status")
	if lsp := scale.LabelSelectorPath; lsp != nil && *lsp != "" {
		fp := p.Child("scale", "labelSelectorPath")
		if e := validateSimpleJSONPath(*lsp, fp); len(e) > 0 {
			errs = append(errs, e...)
		} else if !strings.HasPrefix(*lsp, ".spec.") && !strings.HasPrefix(*lsp, ".status.") {
			errs = append(errs, field.Invalid(fp, *lsp, "should be a json path under either .spec or .status"))
		}
	}
	return errs
}

// lookupPath resolves a simple dotted path (".spec.replicas") through the
// properties of schema; it returns nil when the schema does not define it.
func lookupPath(schema *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	node := schema
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		if node == nil {
			return nil
		}
		prop, ok := node.Properties[part]
		if !ok {
			return nil
		}
		node = &prop
	}
	return node
}

// validateSimpleJSONPath checks that s is a JSON path in dot notation.
func validateSimpleJSONPath(s string, p *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Invalid(p, s, "must not be empty")}
	case s[0] != '.':
		return field.ErrorList{field.Invalid(p, s, "must be a simple json path starting with .")}
	}
	return nil
}

// validatePrinterColumns checks versions[].additionalPrinterColumns.
func validatePrinterColumns(cols []apiextensionsv1.CustomResourceColumnDefinition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, col := range cols {
		cp := p.Index(i)
		if col.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), ""))
		} else if seen[col.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), col.Name))
		}
		seen[col.Name] = true

		typesMsg := "must be one of " + strings.Join(printerColumnTypes, ",")
		if col.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), typesMsg))
		} else if !contains(printerColumnTypes, col.Type) {
			errs = append(errs, field.Invalid(cp.Child("type"), col.Type, typesMsg))
		}
		if col.Format != "" && !contains(printerColumnFormats, col.Format) {
			errs = append(errs, field.Invalid(cp.Child("format"), col.Format, "must be one of "+strings.Join(printerColumnFormats, ",")))
		}
		if col.JSONPath == "" {
			errs = append(errs, field.Required(cp.Child("jsonPath"), ""))
		} else {
			errs = append(errs, validateSimpleJSONPath(col.JSONPath, cp.Child("jsonPath"))...)
		}
		if col.Priority < 0 {
			errs = append(errs, field.Invalid(cp.Child("priority"), col.Priority, "must be greater than or equal to 0"))
		}
	}
	return errs
}

// validateSelectableFields checks versions[].selectableFields against the
// version's schema.
func validateSelectableFields(fields []apiextensionsv1.SelectableField, schema *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	if len(fields) == 0 {
		return nil
	}
	if schema == nil {
		return field.ErrorList{field.Invalid(p, "", "selectableFields may only be set when version.schema.openAPIV3Schema is not included")}
	}
	var errs field.ErrorList
	if len(fields) > maxSelectableFields {
		errs = append(errs, field.TooMany(p, len(fields), maxSelectableFields))
	}
	seen := map[string]bool{}
	for i, f := range fields {
		jp := p.Index(i).Child("jsonPath")
		switch {
		case f.JSONPath == "":
			errs = append(errs, field.Required(jp, ""))
			continue
		case f.JSONPath[0] != '.' || strings.Contains(f.JSONPath, "..") || strings.HasSuffix(f.JSONPath, "."):
			errs = append(errs, field.Invalid(jp, f.JSONPath, "is an invalid path: must be a simple json path in dot notation starting with ."))
		case f.JSONPath == ".metadata" || strings.HasPrefix(f.JSONPath, ".metadata."):
			errs = append(errs, field.Invalid(jp, f.JSONPath, "must not point to fields in metadata"))
		default:
			node := lookupPath(schema, f.JSONPath)
			if node != nil && (typeMissing(node) || (node.Type != "" && !contains(schemaTypes, node.Type))) {
				break // the broken type is reported by the schema checks
			}
			if node == nil || (node.Type != "string" && node.Type != "boolean" && node.Type != "integer") {
				errs = append(errs, field.Invalid(jp, f.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
			}
		}
		if seen[f.JSONPath] {
			errs = append(errs, field.Duplicate(jp, f.JSONPath))
		}
		seen[f.JSONPath] = true
	}
	return errs
}

// validateConversion checks spec.conversion. Only the None strategy is
// served by this API server, so Webhook is reported as not supported, along
// with whatever else is wrong with the webhook settings.
func validateConversion(c *apiextensionsv1.CustomResourceConversion, p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	wp := p.Child("webhook")
	switch c.Strategy {
	case "", apiextensionsv1.NoneConverter:
		if c.Webhook != nil {
			errs = append(errs, field.Forbidden(wp, "should not be set when strategy is not set to Webhook"))
		}
		return errs
	case apiextensionsv1.WebhookConverter:
		e := field.NotSupported(p.Child("strategy"), string(c.Strategy), []string{string(apiextensionsv1.NoneConverter)})
		e.Detail += " (conversion webhooks are not supported by this server; only None is)"
		errs = append(errs, e)
	default:
		return append(errs, field.NotSupported(p.Child("strategy"), string(c.Strategy),
			[]string{string(apiextensionsv1.NoneConverter), string(apiextensionsv1.WebhookConverter)}))
	}

	if c.Webhook == nil {
		return append(errs, field.Required(wp, "required when strategy is set to Webhook"))
	}
	cp := wp.Child("clientConfig")
	if cc := c.Webhook.ClientConfig; cc == nil {
		errs = append(errs, field.Required(cp, "required when strategy is set to Webhook"))
	} else {
		switch {
		case (cc.URL == nil) == (cc.Service == nil):
			errs = append(errs, field.Required(cp, "exactly one of url or service is required"))
		case cc.URL != nil:
			errs = append(errs, validateWebhookURL(*cc.URL, cp.Child("url"))...)
		default:
			errs = append(errs, validateWebhookService(cc.Service, cp.Child("service"))...)
		}
	}

	vp := wp.Child("conversionReviewVersions")
	if len(c.Webhook.ConversionReviewVersions) == 0 {
		return append(errs, field.Required(vp, ""))
	}
	seen := map[string]bool{}
	known := false
	for i, v := range c.Webhook.ConversionReviewVersions {
		if seen[v] {
			errs = append(errs, field.Invalid(vp.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(vp.Index(i), v, msg))
		}
		known = known || contains(conversionReviewVersions, v)
	}
	if !known {
		errs = append(errs, field.Invalid(vp, c.Webhook.ConversionReviewVersions,
			"must include at least one of "+strings.Join(conversionReviewVersions, ", ")))
	}
	return errs
}

// validateWebhookURL checks a conversion webhook URL.
func validateWebhookURL(raw string, p *field.Path) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, raw, "must be a valid URL: "+err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" || u.RawFragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateWebhookService checks a conversion webhook service reference.
func validateWebhookService(s *apiextensionsv1.ServiceReference, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "service name is required"))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), "service namespace is required"))
	}
	if s.Port != nil && (*s.Port < 1 || *s.Port > 65535) {
		errs = append(errs, field.Invalid(p.Child("port"), *s.Port, "port is not valid: must be between 1 and 65535, inclusive"))
	}
	if s.Path != nil && !strings.HasPrefix(*s.Path, "/") {
		errs = append(errs, field.Invalid(p.Child("path"), *s.Path, "must start with a '/'"))
	}
	return errs
}

// validateStoredVersions checks that every version in status.storedVersions
// is still listed in spec.versions: objects may still be persisted in it.
func validateStoredVersions(stored []string, versions []apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	present := map[string]bool{}
	for _, v := range versions {
		present[v.Name] = true
	}
	var errs field.ErrorList
	for i, v := range stored {
		if !present[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, fmt.Sprintf(
				"missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
		}
	}
	return errs
}
