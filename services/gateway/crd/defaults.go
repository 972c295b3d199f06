package crd

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validationReasons are the values x-kubernetes-validations[].reason may take.
var validationReasons = []string{"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"}

// validateSchemaValues walks the structural nodes of a root schema (at p) and
// checks what ValidateStructural does not: that default values are allowed
// where they are and are valid instances of their schema (so that defaulting
// could never make a stored object invalid), and the static parts of
// x-kubernetes-validations (CEL rules are not compiled here). structErrs
// are the errors of ValidateStructural for root: the defaults of a node with
// errors in its subtree are checked against its structure only, not its
// allOf, anyOf, oneOf and not.
func validateSchemaValues(root *apiextensionsv1.JSONSchemaProps, p *field.Path, structErrs field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	var walk func(s *apiextensionsv1.JSONSchemaProps, p *field.Path, forbidDefaults string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, p *field.Path, forbidDefaults string) {
		if s.Default != nil {
			if forbidDefaults != "" {
				errs = append(errs, field.Forbidden(p.Child("default"), "must not be set "+forbidDefaults))
			} else {
				errs = append(errs, validateDefault(s, p, !hasErrorsUnder(structErrs, p))...)
			}
		}
		errs = append(errs, validateXValidations(s, p)...)
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, p.Child("items"), forbidDefaults)
		}
		for _, k := range sortedKeys(s.Properties) {
			prop := s.Properties[k]
			reason := forbidDefaults
			if s == root && (k == "metadata" || k == "kind" || k == "apiVersion") {
				reason = "in top-level " + k
			}
			walk(&prop, p.Child("properties").Key(k), reason)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, p.Child("additionalProperties"), forbidDefaults)
		}
	}
	walk(root, p, "")
	return errs
}

// validateXValidations checks the parts of x-kubernetes-validations that do
// not need a CEL compiler.
func validateXValidations(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range s.XValidations {
		rp := p.Child("x-kubernetes-validations").Index(i)
		if strings.TrimSpace(rule.Rule) == "" {
			errs = append(errs, field.Required(rp.Child("rule"), "rule is not specified"))
		}
		if rule.Message != "" {
			if strings.TrimSpace(rule.Message) == "" {
				errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "message must be non-empty if specified"))
			} else if strings.ContainsAny(rule.Message, "\r\n") {
				errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "message must not contain line breaks"))
			}
		} else if strings.ContainsAny(rule.Rule, "\r\n") {
			errs = append(errs, field.Required(rp.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if rule.MessageExpression != "" && strings.TrimSpace(rule.MessageExpression) == "" {
			errs = append(errs, field.Required(rp.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if rule.Reason != nil && !contains(validationReasons, string(*rule.Reason)) {
			errs = append(errs, field.NotSupported(rp.Child("reason"), string(*rule.Reason), validationReasons))
		}
		if rule.FieldPath != "" {
			if strings.TrimSpace(rule.FieldPath) == "" {
				errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "fieldPath must be non-empty if specified"))
			} else if strings.ContainsAny(rule.FieldPath, "\r\n") {
				errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "fieldPath must not contain line breaks"))
			}
		}
	}
	return errs
}

// hasErrorsUnder reports whether one of errs is about p or a path below it.
func hasErrorsUnder(errs field.ErrorList, p *field.Path) bool {
	ps := p.String()
	for _, e := range errs {
		if rest, ok := strings.CutPrefix(e.Field, ps); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// validateDefault checks that the default of s (at p) is a valid instance of
// s, with the validator of custom objects (ValidateValue), and has no fields
// that pruning would drop. A null default is ignored, as upstream does.
// Unless structural, allOf, anyOf, oneOf and not are not checked.
func validateDefault(s *apiextensionsv1.JSONSchemaProps, p *field.Path, structural bool) field.ErrorList {
	dp := p.Child("default")
	v, err := valueDecodeJSON(s.Default.Raw)
	if err != nil {
		return field.ErrorList{field.Invalid(dp, string(s.Default.Raw), fmt.Sprintf("must be valid JSON: %v", err))}
	}
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if len(valueUnknownFields(s, v)) > 0 {
		errs = append(errs, field.Invalid(dp, valueForError(v), "must not have unknown fields"))
	}
	return append(errs, valueDedup(valueValidate(s, v, dp, valueContext{structural: true, forDefault: true, noJunctors: !structural}))...)
}
