package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsjson "sigs.k8s.io/json"
)

// This file holds the helpers shared by Prune, PruneNulls, Default and
// ValidateValue, which work on custom resources decoded into unstructured
// JSON: map[string]any, []any, string, bool, nil and numbers. Numbers may be
// float64 (encoding/json), int64 (sigs.k8s.io/json, as upstream decodes
// them) or any other Go integer or float type, or json.Number.

// valueMetaFields are the fields of a resource (the root object or an
// x-kubernetes-embedded-resource) that the schema never prunes: TypeMeta and
// ObjectMeta are the caller's business.
var valueMetaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// valueItems returns the schema of the items of an array node, or nil.
func valueItems(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if s == nil || s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

// valueAdditional returns the additionalProperties schema of s (nil when
// there is none or when additionalProperties is a bool) and whether s has
// additionalProperties at all.
func valueAdditional(s *apiextensionsv1.JSONSchemaProps) (*apiextensionsv1.JSONSchemaProps, bool) {
	if s == nil || s.AdditionalProperties == nil {
		return nil, false
	}
	return s.AdditionalProperties.Schema, true
}

// valueFieldSchema returns the schema that applies to field k of an object
// of schema s: its property, else the additionalProperties schema, else nil.
func valueFieldSchema(s *apiextensionsv1.JSONSchemaProps, k string) *apiextensionsv1.JSONSchemaProps {
	if s == nil {
		return nil
	}
	if prop, ok := s.Properties[k]; ok {
		return &prop
	}
	ap, _ := valueAdditional(s)
	return ap
}

// valueHasDefault reports whether s has a default other than null (a null
// default is ignored, as upstream does).
func valueHasDefault(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil || s.Default == nil {
		return false
	}
	raw := bytes.TrimSpace(s.Default.Raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// valueDefault returns a fresh copy of the default of s, decoded with
// integers as int64 and other numbers as float64. ok is false when s has no
// usable (non-null, valid JSON) default.
func valueDefault(s *apiextensionsv1.JSONSchemaProps) (v any, ok bool) {
	if !valueHasDefault(s) {
		return nil, false
	}
	v, err := valueDecodeJSON(s.Default.Raw)
	if err != nil || v == nil {
		return nil, false
	}
	return v, true
}

// valueDecodeJSON decodes raw the way upstream decodes custom resources:
// integers as int64, other numbers as float64.
func valueDecodeJSON(raw []byte) (any, error) {
	var v any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// valueJSONType returns the OpenAPI type name of a decoded JSON value:
// null, boolean, string, integer, number, object or array. A float with an
// integral value (within ±2^53) is an integer: encoding/json decodes the
// literal 3 as float64, which upstream would have decoded as int64.
func valueJSONType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case json.Number:
		if valueIsIntegral(x) {
			return "integer"
		}
		return "number"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	case float32, float64:
		if valueIsIntegral(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// valueExactInt returns v as an int64 when it is held as an integer (any Go
// integer type or an integral json.Number literal), not as a float.
func valueExactInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(x), x <= math.MaxInt64
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case json.Number:
		i, err := x.Int64()
		return i, err == nil
	}
	return 0, false
}

// valueFloat returns the numeric value of v and whether v is a number.
func valueFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	if i, ok := valueExactInt(v); ok {
		return float64(i), true
	}
	return 0, false
}

// valueMaxJSONInteger is the largest integer a float64 represents exactly
// (ECMA's Number.MAX_SAFE_INTEGER); beyond it a float is not taken for an
// integer, as in upstream's validation.
const valueMaxJSONInteger = float64(1<<53 - 1)

// valueIsJSONIntegerFloat reports whether f is an integer within
// ±valueMaxJSONInteger, tolerating a relative rounding error of 1e-9 (so
// 0.3/0.1 counts as 3).
func valueIsJSONIntegerFloat(f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > valueMaxJSONInteger {
		return false
	}
	r := math.Round(f)
	if f == r {
		return true
	}
	if r == 0 {
		return false
	}
	return math.Abs(f-r) < 1e-9*math.Abs(r)
}

// valueIsIntegral reports whether the number v has an integer value: any Go
// integer, or a float such as 3.0 (but not 3.5).
func valueIsIntegral(v any) bool {
	if _, ok := valueExactInt(v); ok {
		return true
	}
	if f, ok := valueFloat(v); ok {
		return valueIsJSONIntegerFloat(f)
	}
	return false
}

// valueCanonical renders v as JSON, numbers by value (3, 3.0 and int64(3)
// all become 3), for equality checks.
func valueCanonical(v any) string {
	b, err := json.Marshal(valueNormalize(v))
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// valueNormalize returns v with json.Number and all integer types turned
// into float64 or int64 so that encoding/json renders equal numbers alike.
func valueNormalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = valueNormalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = valueNormalize(e)
		}
		return out
	case json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		if i, ok := valueExactInt(x); ok {
			return i
		}
		f, _ := valueFloat(x)
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f)
		}
		return f
	}
	return v
}

// valueEqual reports whether two decoded JSON values are equal, comparing
// numbers by value.
func valueEqual(a, b any) bool {
	return valueCanonical(a) == valueCanonical(b)
}

// jsonText is a value shown as JSON in error messages.
type jsonText string

// String returns the JSON text.
func (j jsonText) String() string { return string(j) }

// valueForError returns v in a form field errors print readably: objects
// and arrays as JSON, json.Number as a number, everything else unchanged.
func valueForError(v any) any {
	switch x := v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(valueNormalize(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return jsonText(b)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	}
	return v
}

// valueFormatNumber renders a schema bound (minimum, maximum, multipleOf)
// for a message: integral bounds without an exponent, others as %v does.
func valueFormatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(f)
}
