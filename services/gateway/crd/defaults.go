package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validationReasons are the values x-kubernetes-validations[].reason may take.
var validationReasons = []string{"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"}

// validateSchemaValues walks the structural nodes of a root schema (at p) and
// checks what ValidateStructural does not: that default values are allowed
// where they are and are valid instances of their schema (so that defaulting
// could never make a stored object invalid), and the static parts of
// x-kubernetes-validations (CEL rules are not compiled here).
func validateSchemaValues(root *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	var walk func(s *apiextensionsv1.JSONSchemaProps, p *field.Path, forbidDefaults string)
	walk = func(s *apiextensionsv1.JSONSchemaProps, p *field.Path, forbidDefaults string) {
		if s.Default != nil {
			if forbidDefaults != "" {
				errs = append(errs, field.Forbidden(p.Child("default"), "must not be set "+forbidDefaults))
			} else {
				errs = append(errs, validateDefault(s, p)...)
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

// validateDefault checks that the default of s (at p) is a valid instance of
// s and has no fields that pruning would drop. A null default is ignored,
// as upstream does.
func validateDefault(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	dp := p.Child("default")
	v, err := decodeJSON(s.Default.Raw)
	if err != nil {
		return field.ErrorList{field.Invalid(dp, string(s.Default.Raw), fmt.Sprintf("must be valid JSON: %v", err))}
	}
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if hasUnknownFields(s, v) {
		errs = append(errs, field.Invalid(dp, displayValue(v), "must not have unknown fields"))
	}
	return append(errs, validateValue(s, v, dp)...)
}

// decodeJSON decodes raw keeping numbers as json.Number so that integers and
// floats can be told apart.
func decodeJSON(raw []byte) (interface{}, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the value")
	}
	return v, nil
}

// hasUnknownFields reports whether pruning v with schema s would drop any field.
func hasUnknownFields(s *apiextensionsv1.JSONSchemaProps, v interface{}) bool {
	switch val := v.(type) {
	case map[string]interface{}:
		for k, x := range val {
			if prop, ok := s.Properties[k]; ok {
				if hasUnknownFields(&prop, x) {
					return true
				}
				continue
			}
			if s.XEmbeddedResource && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
				if hasUnknownFields(ap.Schema, x) {
					return true
				}
				continue
			}
			if (s.AdditionalProperties != nil && s.AdditionalProperties.Allows) || preservesUnknownFields(s) {
				continue
			}
			return true
		}
	case []interface{}:
		if s.Items != nil && s.Items.Schema != nil {
			for _, x := range val {
				if hasUnknownFields(s.Items.Schema, x) {
					return true
				}
			}
		}
	}
	return false
}

// validateValue checks that v is a valid instance of the structural schema s;
// p is the path of v in the error messages (e.g. ...properties[a].default.b).
// It covers type, nullable, enum, required, lengths, bounds, pattern and
// item/property counts; format and value validations (allOf, ...) are not
// checked.
func validateValue(s *apiextensionsv1.JSONSchemaProps, v interface{}, p *field.Path) field.ErrorList {
	if s.Type != "" && !contains(schemaTypes, s.Type) {
		return nil // the bad type itself is reported by ValidateStructural
	}
	if v == nil {
		if s.Nullable || (s.Type == "" && !s.XIntOrString) {
			return nil
		}
		return field.ErrorList{field.Invalid(p, nil, "must be of type "+expectedType(s))}
	}

	if s.XIntOrString {
		switch x := v.(type) {
		case string:
		case json.Number:
			if !isInteger(x) {
				return field.ErrorList{field.Invalid(p, displayValue(v), "must be of type integer or string")}
			}
		default:
			return field.ErrorList{field.Invalid(p, displayValue(v), "must be of type integer or string")}
		}
	} else if s.Type != "" && !hasType(v, s.Type) {
		return field.ErrorList{field.Invalid(p, displayValue(v), "must be of type "+s.Type)}
	}

	var errs field.ErrorList
	if len(s.Enum) > 0 && !inEnum(v, s.Enum) {
		allowed := make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			ev, err := decodeJSON(e.Raw)
			if str, ok := ev.(string); ok && err == nil {
				allowed = append(allowed, str)
			} else {
				allowed = append(allowed, string(e.Raw))
			}
		}
		errs = append(errs, field.NotSupported(p, displayValue(v), allowed))
	}

	switch x := v.(type) {
	case string:
		n := int64(utf8.RuneCountInString(x))
		if s.MaxLength != nil && n > *s.MaxLength {
			errs = append(errs, field.TooLong(p, "", int(*s.MaxLength)))
		}
		if s.MinLength != nil && n < *s.MinLength {
			errs = append(errs, field.Invalid(p, x, fmt.Sprintf("should be at least %d chars long", *s.MinLength)))
		}
		if s.Pattern != "" {
			if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(x) {
				errs = append(errs, field.Invalid(p, x, fmt.Sprintf("should match '%s'", s.Pattern)))
			}
		}
	case json.Number:
		f, _ := x.Float64()
		if m := s.Maximum; m != nil {
			if s.ExclusiveMaximum && f >= *m {
				errs = append(errs, field.Invalid(p, displayValue(v), fmt.Sprintf("should be less than %v", *m)))
			} else if f > *m {
				errs = append(errs, field.Invalid(p, displayValue(v), fmt.Sprintf("should be less than or equal to %v", *m)))
			}
		}
		if m := s.Minimum; m != nil {
			if s.ExclusiveMinimum && f <= *m {
				errs = append(errs, field.Invalid(p, displayValue(v), fmt.Sprintf("should be greater than %v", *m)))
			} else if f < *m {
				errs = append(errs, field.Invalid(p, displayValue(v), fmt.Sprintf("should be greater than or equal to %v", *m)))
			}
		}
		if m := s.MultipleOf; m != nil && *m > 0 {
			if q := f / *m; math.Abs(q-math.Round(q)) > 1e-9 {
				errs = append(errs, field.Invalid(p, displayValue(v), fmt.Sprintf("should be a multiple of %v", *m)))
			}
		}
	case []interface{}:
		if s.MaxItems != nil && int64(len(x)) > *s.MaxItems {
			errs = append(errs, field.TooMany(p, len(x), int(*s.MaxItems)))
		}
		if s.MinItems != nil && int64(len(x)) < *s.MinItems {
			errs = append(errs, field.Invalid(p, len(x), fmt.Sprintf("should have at least %d items", *s.MinItems)))
		}
		if s.Items != nil && s.Items.Schema != nil {
			for i, item := range x {
				errs = append(errs, validateValue(s.Items.Schema, item, p.Index(i))...)
			}
		}
	case map[string]interface{}:
		if s.MaxProperties != nil && int64(len(x)) > *s.MaxProperties {
			errs = append(errs, field.TooMany(p, len(x), int(*s.MaxProperties)))
		}
		if s.MinProperties != nil && int64(len(x)) < *s.MinProperties {
			errs = append(errs, field.Invalid(p, len(x), fmt.Sprintf("should have at least %d properties", *s.MinProperties)))
		}
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				errs = append(errs, field.Required(p.Child(r), ""))
			}
		}
		for _, k := range sortedKeys(x) {
			if prop, ok := s.Properties[k]; ok {
				errs = append(errs, validateValue(&prop, x[k], p.Child(k))...)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil &&
				!(s.XEmbeddedResource && (k == "apiVersion" || k == "kind" || k == "metadata")) {
				errs = append(errs, validateValue(s.AdditionalProperties.Schema, x[k], p.Child(k))...)
			}
		}
	}
	return errs
}

// expectedType names the type(s) a non-null value of s must have.
func expectedType(s *apiextensionsv1.JSONSchemaProps) string {
	if s.XIntOrString {
		return "integer or string"
	}
	return s.Type
}

// hasType reports whether the decoded JSON value v is of OpenAPI type t.
func hasType(v interface{}, t string) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		return t == "object"
	case []interface{}:
		return t == "array"
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case json.Number:
		return t == "number" || (t == "integer" && isInteger(x))
	}
	return false
}

// isInteger reports whether n has no fractional part (1 and 1.0 both are).
func isInteger(n json.Number) bool {
	if _, err := n.Int64(); err == nil {
		return true
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// inEnum reports whether v equals one of the enum values.
func inEnum(v interface{}, enum []apiextensionsv1.JSON) bool {
	for _, e := range enum {
		ev, err := decodeJSON(e.Raw)
		if err == nil && jsonEqual(v, ev) {
			return true
		}
	}
	return false
}

// jsonEqual compares two decoded JSON values, numbers by value.
func jsonEqual(a, b interface{}) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, errX := x.Float64()
		fy, errY := y.Float64()
		return errX == nil && errY == nil && fx == fy
	case map[string]interface{}:
		y, ok := b.(map[string]interface{})
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []interface{}:
		y, ok := b.([]interface{})
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// jsonText is a value shown as JSON in error messages.
type jsonText string

// String returns the JSON text.
func (j jsonText) String() string { return string(j) }

// displayValue turns a decoded JSON value into something field errors print
// readably: numbers as numbers, strings quoted, objects and arrays as JSON.
func displayValue(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]interface{}, []interface{}:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return jsonText(b)
	default:
		return v
	}
}
