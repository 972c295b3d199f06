package crd

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateValue checks obj, a custom resource decoded as unstructured JSON
// (integers as int64 or float64), against the structural schema of its
// version and returns every violation, never stopping at the first one. It
// does not modify obj. Paths and messages follow upstream's, e.g.
//
//	spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"
//	spec.items[2].name: Required value
//	spec.size: Unsupported value: "huge": supported values: "small", "large"
//
// It checks
//   - type (integer accepts integral floats such as 3.0 but not 3.5, number
//     accepts integers; x-kubernetes-int-or-string accepts integers and
//     strings) and nullable (null only where nullable: true);
//   - enum, required, minProperties/maxProperties, additionalProperties
//     (a schema for map values, or false: no fields besides properties);
//   - minLength/maxLength (in runes), pattern (Go regexp syntax) and the
//     string formats upstream supports: date, date-time, byte (base64), uuid
//     (and uuid3/4/5), email, hostname, ipv4, ipv6, cidr, uri, mac,
//     duration, password, hexcolor, rgbcolor, ssn, isbn(10/13), creditcard
//     and bsonobjectid; other formats are ignored;
//   - format int32 and int64 on numbers: integral values must fit in the
//     range (upstream ignores these formats; this is stricter);
//   - minimum/maximum (and their exclusive forms) and multipleOf;
//   - minItems/maxItems, items, and x-kubernetes-list-type set (unique
//     items) and map (items unique by x-kubernetes-list-map-keys);
//   - the value validations allOf, anyOf, oneOf and not (a failing anyOf
//     or oneOf also reports the errors of its closest branch);
//   - apiVersion and kind of x-kubernetes-embedded-resource objects (both
//     required, apiVersion a group/version, kind DNS-1035-like); their
//     metadata is only checked against what the schema declares.
//
// Fields the schema does not describe are accepted (after Prune they only
// exist under x-kubernetes-preserve-unknown-fields). At the root, apiVersion,
// kind and metadata are not checked at all: the caller validates TypeMeta
// and ObjectMeta.
func ValidateValue(schema *apiextensionsv1.JSONSchemaProps, obj map[string]any) field.ErrorList {
	if schema == nil {
		return nil
	}
	errs := valueValidate(schema, obj, nil, valueContext{structural: true, root: true})
	return valueDedup(errs)
}

// valueContext says where a schema node sits.
type valueContext struct {
	// structural is false inside allOf, anyOf, oneOf and not, where list
	// types and embedded resources do not apply.
	structural bool
	// root marks the resource root, whose apiVersion, kind and metadata
	// are the caller's.
	root bool
	// intOrStringAnyOf says that the node's anyOf is the expansion of the
	// x-kubernetes-int-or-string of the node it refines (allOf[0]), which
	// the type check already covers.
	intOrStringAnyOf bool
	// forDefault says that the value is the default of a schema node being
	// checked by Validate, whose errors name the default: messages have no
	// "<path> in body" subject, and a value of the wrong type or format is
	// an Invalid value that "must be of type <t>".
	forDefault bool
	// noJunctors skips allOf, anyOf, oneOf and not, for a default whose
	// schema is not structural (they may then describe anything).
	noJunctors bool
}

// child is the context of the items and fields of a value of context c.
func (c valueContext) child() valueContext {
	return valueContext{structural: c.structural, forDefault: c.forDefault, noJunctors: c.noJunctors}
}

// detail words a message about the value at p: upstream's
// "spec.replicas in body should be ..." or, for a default, "should be ...".
func (c valueContext) detail(p *field.Path, format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	if c.forDefault {
		return msg
	}
	return valueInBody(p) + " " + msg
}

// valueValidate validates v against s; p is the path of v (nil at the root).
// As upstream does, every keyword that applies to the actual kind of v is
// checked even after a type error.
func valueValidate(s *apiextensionsv1.JSONSchemaProps, v any, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	types := valueSchemaTypes(s)
	if v == nil {
		if len(types) > 0 && !s.Nullable {
			errs = append(errs, valueTypeError(p, types, nil, c))
		}
		if len(s.Enum) > 0 && !valueInEnum(nil, s.Enum) {
			errs = append(errs, valueEnumError(p, nil, s.Enum))
		}
		return errs
	}

	if len(types) > 0 && !valueTypeMatches(types, v) {
		errs = append(errs, valueTypeError(p, types, v, c))
	}
	if !c.noJunctors {
		errs = append(errs, valueValidateJunctors(s, v, p, c)...)
	}
	switch x := v.(type) {
	case string:
		errs = append(errs, valueValidateString(s, x, p, c)...)
	case []any:
		errs = append(errs, valueValidateArray(s, x, p, c)...)
	case map[string]any, bool:
	default:
		if _, ok := valueFloat(v); ok {
			errs = append(errs, valueValidateNumber(s, v, p, c)...)
		}
	}
	if len(s.Enum) > 0 && !valueInEnum(v, s.Enum) {
		errs = append(errs, valueEnumError(p, v, s.Enum))
	}
	if x, ok := v.(map[string]any); ok {
		errs = append(errs, valueValidateObject(s, x, p, c)...)
	}
	return errs
}

// valueSchemaTypes returns the types a non-null value of s may have: integer
// and string for x-kubernetes-int-or-string, else the declared type, or none
// (anything goes).
func valueSchemaTypes(s *apiextensionsv1.JSONSchemaProps) []string {
	switch {
	case s.XIntOrString:
		return []string{"integer", "string"}
	case s.Type != "" && contains(schemaTypes, s.Type):
		return []string{s.Type}
	}
	return nil
}

// valueTypeMatches reports whether the non-null v has one of types; an
// integral float (3.0) is an integer and an integer is a number.
func valueTypeMatches(types []string, v any) bool {
	actual := valueJSONType(v)
	for _, t := range types {
		if t == actual || (t == "number" && actual == "integer") {
			return true
		}
	}
	return false
}

// valueTypeError is upstream's type error for the value v, e.g.
// `spec.replicas in body must be of type integer: "string"`, or for a
// default `Invalid value: "three": must be of type integer`.
func valueTypeError(p *field.Path, types []string, v any, c valueContext) *field.Error {
	if c.forDefault {
		return field.Invalid(p, valueForError(v), "must be of type "+strings.Join(types, " or "))
	}
	actual := valueJSONType(v)
	return field.TypeInvalid(p, actual, fmt.Sprintf("%s must be of type %s: %q", valueInBody(p), strings.Join(types, ","), actual))
}

// valueValidateString checks the string keywords and the format of s.
func valueValidateString(s *apiextensionsv1.JSONSchemaProps, x string, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	n := int64(utf8.RuneCountInString(x))
	if s.MaxLength != nil && n > *s.MaxLength {
		errs = append(errs, field.TooLong(p, "", int(*s.MaxLength)))
	}
	if s.MinLength != nil && n < *s.MinLength {
		errs = append(errs, field.Invalid(p, x, c.detail(p, "should be at least %d chars long", *s.MinLength)))
	}
	if s.Pattern != "" {
		if re := valuePattern(s.Pattern); re != nil && !re.MatchString(x) {
			errs = append(errs, field.Invalid(p, x, c.detail(p, "should match '%s'", s.Pattern)))
		}
	}
	if check := valueFormatCheck(s.Format); check != nil && !check(x) {
		if c.forDefault {
			errs = append(errs, field.Invalid(p, x, "must be of type "+s.Format))
		} else {
			errs = append(errs, field.TypeInvalid(p, x, fmt.Sprintf("%s must be of type %s: %q", valueInBody(p), s.Format, x)))
		}
	}
	return errs
}

// valuePatterns caches compiled patterns (nil for those that do not
// compile, which Validate rejects anyway).
var valuePatterns sync.Map

// valuePattern returns the compiled pattern, or nil if it is invalid.
func valuePattern(pattern string) *regexp.Regexp {
	if re, ok := valuePatterns.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = nil
	}
	valuePatterns.Store(pattern, re)
	return re
}

// valueValidateNumber checks multipleOf, minimum, maximum and the int32 and
// int64 formats against the number v.
func valueValidateNumber(s *apiextensionsv1.JSONSchemaProps, v any, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	f, _ := valueFloat(v)
	shown := valueForError(v)
	if m := s.MultipleOf; m != nil && *m > 0 && !valueIsMultipleOf(v, f, *m) {
		errs = append(errs, field.Invalid(p, shown, c.detail(p, "should be a multiple of %s", valueFormatNumber(*m))))
	}
	if m := s.Minimum; m != nil {
		if s.ExclusiveMinimum && f <= *m {
			errs = append(errs, field.Invalid(p, shown, c.detail(p, "should be greater than %s", valueFormatNumber(*m))))
		} else if !s.ExclusiveMinimum && f < *m {
			errs = append(errs, field.Invalid(p, shown, c.detail(p, "should be greater than or equal to %s", valueFormatNumber(*m))))
		}
	}
	if m := s.Maximum; m != nil {
		if s.ExclusiveMaximum && f >= *m {
			errs = append(errs, field.Invalid(p, shown, c.detail(p, "should be less than %s", valueFormatNumber(*m))))
		} else if !s.ExclusiveMaximum && f > *m {
			errs = append(errs, field.Invalid(p, shown, c.detail(p, "should be less than or equal to %s", valueFormatNumber(*m))))
		}
	}
	if !valueFitsFormat(v, f, s.Format) {
		if c.forDefault {
			errs = append(errs, field.Invalid(p, shown, "must be of type "+s.Format))
		} else {
			errs = append(errs, field.TypeInvalid(p, shown, fmt.Sprintf("%s must be of type %s", valueInBody(p), s.Format)))
		}
	}
	return errs
}

// valueIsMultipleOf reports whether v (numeric value f) is a multiple of m >
// 0: exactly for integers and integral factors, else up to float rounding.
func valueIsMultipleOf(v any, f, m float64) bool {
	if i, ok := valueExactInt(v); ok && m == math.Trunc(m) && m < math.MaxInt64 {
		return i%int64(m) == 0
	}
	q := f / m
	if m < 1 {
		q = 1 / m * f
	}
	return valueIsJSONIntegerFloat(q)
}

// valueFitsFormat reports whether the number v (value f) fits the int32 or
// int64 format; fractions and other formats always fit (fractions are the
// type check's business).
func valueFitsFormat(v any, f float64, format string) bool {
	i, exact := valueExactInt(v)
	switch format {
	case "int32":
		if exact {
			return i >= math.MinInt32 && i <= math.MaxInt32
		}
		return f != math.Trunc(f) || (f >= math.MinInt32 && f <= math.MaxInt32)
	case "int64":
		// float64(math.MaxInt64) rounds up to 2^63, which is out of range
		return exact || f != math.Trunc(f) || (f >= math.MinInt64 && f < math.MaxInt64)
	}
	return true
}

// valueValidateArray checks the items, item counts and list type of x.
func valueValidateArray(s *apiextensionsv1.JSONSchemaProps, x []any, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	if items := valueItems(s); items != nil {
		child := c.child()
		for i, item := range x {
			errs = append(errs, valueValidate(items, item, p.Index(i), child)...)
		}
	}
	n := len(x)
	if s.MinItems != nil && int64(n) < *s.MinItems {
		errs = append(errs, field.Invalid(p, n, c.detail(p, "should have at least %d items", *s.MinItems)))
	}
	if s.MaxItems != nil && int64(n) > *s.MaxItems {
		errs = append(errs, field.TooMany(p, n, int(*s.MaxItems)))
	}
	if c.structural && s.XListType != nil {
		switch *s.XListType {
		case "set":
			errs = append(errs, valueListSetErrors(x, p)...)
		case "map":
			errs = append(errs, valueListMapErrors(x, s.XListMapKeys, p)...)
		}
	}
	return errs
}

// valueListSetErrors reports, as upstream does, one Duplicate per repeated
// value of an x-kubernetes-list-type=set array, at its second occurrence.
func valueListSetErrors(x []any, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]int, len(x))
	for i, item := range x {
		k := valueCanonical(item)
		seen[k]++
		if seen[k] == 2 {
			errs = append(errs, field.Duplicate(p.Index(i), valueForError(item)))
		}
	}
	return errs
}

// valueListMapErrors checks an x-kubernetes-list-type=map array: items must
// be objects (or null), and no two may have the same values for the map
// keys (a missing key is a value of its own). Each repeated key is reported
// once, at its second occurrence, with the key fields as the value.
func valueListMapErrors(x []any, keys []string, p *field.Path) field.ErrorList {
	for i, item := range x {
		if _, ok := item.(map[string]any); item != nil && !ok {
			return field.ErrorList{field.Invalid(p.Index(i), valueForError(item), "must be an object for an array of list-type map")}
		}
	}
	var errs field.ErrorList
	seen := make(map[string]int, len(x))
	for i, item := range x {
		key := map[string]any{}
		if m, ok := item.(map[string]any); ok {
			for _, kf := range keys {
				if kv, ok := m[kf]; ok {
					key[kf] = kv
				}
			}
		}
		k := valueCanonical(key)
		seen[k]++
		if seen[k] == 2 {
			errs = append(errs, field.Duplicate(p.Index(i), valueForError(key)))
		}
	}
	return errs
}

// valueValidateObject checks the property counts, the fields (with their
// property or additionalProperties schema), the required fields and, for
// embedded resources, apiVersion and kind.
func valueValidateObject(s *apiextensionsv1.JSONSchemaProps, x map[string]any, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	n := len(x)
	if s.MinProperties != nil && int64(n) < *s.MinProperties {
		errs = append(errs, field.Invalid(p, n, c.detail(p, "should have at least %d properties", *s.MinProperties)))
	}
	if s.MaxProperties != nil && int64(n) > *s.MaxProperties {
		errs = append(errs, field.TooMany(p, n, int(*s.MaxProperties)))
	}

	ap, hasAP := valueAdditional(s)
	noneAllowed := hasAP && ap == nil && !s.AdditionalProperties.Allows
	child := c.child()
	for _, k := range sortedKeys(x) {
		if c.root && valueMetaFields[k] {
			continue
		}
		if prop, ok := s.Properties[k]; ok {
			errs = append(errs, valueValidate(&prop, x[k], p.Child(k), child)...)
		} else if ap != nil {
			errs = append(errs, valueValidate(ap, x[k], p.Child(k), child)...)
		} else if noneAllowed {
			msg := "is a forbidden property"
			if !c.forDefault {
				msg = fmt.Sprintf("%s.%s in body %s", valuePathName(p), k, msg)
			}
			errs = append(errs, field.Invalid(p, k, msg))
		}
	}

	for _, r := range s.Required {
		if c.root && valueMetaFields[r] {
			continue
		}
		if _, ok := x[r]; !ok {
			errs = append(errs, field.Required(p.Child(r), ""))
		}
	}

	if c.structural && !c.root && s.XEmbeddedResource {
		errs = append(errs, valueValidateEmbedded(x, p)...)
	}
	return errs
}

// valueValidateEmbedded checks the apiVersion and kind of an embedded
// resource as upstream does: both are required, apiVersion must be a
// group/version and kind a DNS-1035 label but for its case.
func valueValidateEmbedded(x map[string]any, p *field.Path) field.ErrorList {
	errs := valueValidateTypeField(x, "apiVersion", p, func(s string) []string {
		if _, err := schema.ParseGroupVersion(s); err != nil {
			return []string{err.Error()}
		}
		return nil
	})
	return append(errs, valueValidateTypeField(x, "kind", p, func(s string) []string {
		if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(s)); len(msgs) > 0 {
			return []string{"may have mixed case, but should otherwise match: " + strings.Join(msgs, ",")}
		}
		return nil
	})...)
}

// valueValidateTypeField checks one of an embedded resource's apiVersion and kind: present, a
// non-empty string, and well-formed by check.
func valueValidateTypeField(x map[string]any, name string, p *field.Path, check func(string) []string) field.ErrorList {
	v, ok := x[name]
	if !ok {
		return field.ErrorList{field.Required(p.Child(name), "must not be empty")}
	}
	fp := p.Child(name)
	s, isString := v.(string)
	switch {
	case !isString:
		return field.ErrorList{field.Invalid(fp, valueForError(v), "must be a string")}
	case s == "":
		return field.ErrorList{field.Invalid(fp, s, "must not be empty")}
	}
	var errs field.ErrorList
	for _, msg := range check(s) {
		errs = append(errs, field.Invalid(fp, s, msg))
	}
	return errs
}

// valueValidateJunctors checks the anyOf, oneOf, allOf and not of s with
// upstream's messages. A failing anyOf or oneOf also reports the errors of
// the branch that failed with the fewest errors; allOf reports the errors
// of every branch.
func valueValidateJunctors(s *apiextensionsv1.JSONSchemaProps, v any, p *field.Path, c valueContext) field.ErrorList {
	var errs field.ErrorList
	// upstream names the value: `"spec.x" must validate ...`
	subject := fmt.Sprintf("%q ", valuePathName(p))
	if c.forDefault {
		subject = ""
	}
	shown := valueForComposite(v)
	branch := valueContext{forDefault: c.forDefault}

	skipAnyOf := c.intOrStringAnyOf || (s.XIntOrString && isIntOrStringAnyOf(s.AnyOf))
	if len(s.AnyOf) > 0 && !skipAnyOf {
		var best field.ErrorList
		matched := false
		for i := range s.AnyOf {
			e := valueValidate(&s.AnyOf[i], v, p, branch)
			if len(e) == 0 {
				matched = true
				break
			}
			if best == nil || len(e) < len(best) {
				best = e
			}
		}
		if !matched {
			errs = append(errs, field.Invalid(p, shown, subject+"must validate at least one schema (anyOf)"))
			errs = append(errs, best...)
		}
	}

	if len(s.OneOf) > 0 {
		var best field.ErrorList
		valid := 0
		for i := range s.OneOf {
			e := valueValidate(&s.OneOf[i], v, p, branch)
			if len(e) == 0 {
				valid++
			} else if best == nil || len(e) < len(best) {
				best = e
			}
		}
		switch valid {
		case 1:
		case 0:
			errs = append(errs, field.Invalid(p, shown, subject+"must validate one and only one schema (oneOf). Found none valid"))
			errs = append(errs, best...)
		default:
			errs = append(errs, field.Invalid(p, shown, fmt.Sprintf("%smust validate one and only one schema (oneOf). Found %d valid alternatives", subject, valid)))
		}
	}

	if len(s.AllOf) > 0 {
		valid := 0
		for i := range s.AllOf {
			bc := branch
			bc.intOrStringAnyOf = i == 0 && s.XIntOrString && isIntOrStringAnyOf(s.AllOf[0].AnyOf)
			e := valueValidate(&s.AllOf[i], v, p, bc)
			if len(e) == 0 {
				valid++
			}
			errs = append(errs, e...)
		}
		if valid != len(s.AllOf) {
			suffix := ""
			if valid == 0 {
				suffix = ". None validated"
			}
			errs = append(errs, field.Invalid(p, shown, fmt.Sprintf("%smust validate all the schemas (allOf)%s", subject, suffix)))
		}
	}

	if s.Not != nil && len(valueValidate(s.Not, v, p, branch)) == 0 {
		errs = append(errs, field.Invalid(p, shown, subject+"must not validate the schema (not)"))
	}
	return errs
}

// valueInEnum reports whether v equals one of the enum values (numbers by
// value, so 3.0 matches 3).
func valueInEnum(v any, enum []apiextensionsv1.JSON) bool {
	for _, e := range enum {
		if ev, err := valueDecodeEnum(e); err == nil && valueEqual(v, ev) {
			return true
		}
	}
	return false
}

// valueDecodeEnum decodes one enum value; a null value is stored as an
// empty Raw by the v1 JSON type.
func valueDecodeEnum(e apiextensionsv1.JSON) (any, error) {
	if len(bytes.TrimSpace(e.Raw)) == 0 {
		return nil, nil
	}
	return valueDecodeJSON(e.Raw)
}

// valueEnumError is upstream's enum error: NotSupported listing string
// values as they are and other values as JSON.
func valueEnumError(p *field.Path, v any, enum []apiextensionsv1.JSON) *field.Error {
	allowed := make([]string, 0, len(enum))
	for _, e := range enum {
		ev, err := valueDecodeEnum(e)
		switch str, isString := ev.(string); {
		case err != nil:
			allowed = append(allowed, string(bytes.TrimSpace(e.Raw)))
		case isString:
			allowed = append(allowed, str)
		default:
			allowed = append(allowed, valueCanonical(ev))
		}
	}
	return field.NotSupported(p, valueForError(v), allowed)
}

// valueForComposite is the value shown with allOf/anyOf/oneOf/not errors:
// scalars as they are, objects and arrays omitted (they may be large).
func valueForComposite(v any) any {
	switch v.(type) {
	case map[string]any, []any:
		return field.OmitValueType{}
	}
	return valueForError(v)
}

// valuePathName is the path of a value in messages; the root is "".
func valuePathName(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// valueInBody is the subject of upstream's messages: "spec.replicas in body".
func valueInBody(p *field.Path) string {
	if p == nil {
		return "in body"
	}
	return p.String() + " in body"
}

// valueDedup drops repeated errors (the same check reached through the
// schema and one of its allOf branches, say), keeping the first.
func valueDedup(errs field.ErrorList) field.ErrorList {
	if len(errs) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(errs))
	out := errs[:0:0]
	for _, e := range errs {
		key := string(e.Type) + "\x00" + e.Error()
		if !seen[key] {
			seen[key] = true
			out = append(out, e)
		}
	}
	return out
}
