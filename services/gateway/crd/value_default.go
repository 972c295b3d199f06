package crd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Default sets the defaults of schema in obj, in place, as upstream's
// structural defaulting does. It is meant to run after Prune (and
// PruneNulls).
//
//   - A property that is absent from an object, or null while its schema is
//     not nullable, gets the property's default.
//   - A null array item or additionalProperties value gets the default of
//     the items or additionalProperties schema when that is not nullable.
//   - Defaulting is top-down: after a value has been set, the defaults
//     inside it apply too (e.g. a defaulted {} object gets the defaults of
//     its own properties), and so do those of array items and map values.
//   - Values the client set (including false, 0, "" and nullable nulls) are
//     never overwritten, and a null default (default: null) is ignored.
//
// Every default is decoded afresh from the schema, so objects never share
// maps or slices with the schema or with each other. Integral default
// numbers are set as int64, others as float64 (as upstream decodes them).
// The root's apiVersion, kind and metadata are left to the caller.
func Default(schema *apiextensionsv1.JSONSchemaProps, obj map[string]any) {
	if schema == nil || obj == nil {
		return
	}
	valueApplyDefaults(obj, schema, true)
}

// valueApplyDefaults defaults x, a value of schema s; root says that x is
// the resource root.
func valueApplyDefaults(x any, s *apiextensionsv1.JSONSchemaProps, root bool) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for _, k := range sortedKeys(s.Properties) {
			if root && valueMetaFields[k] {
				continue
			}
			prop := s.Properties[k]
			if v, found := x[k]; found && (v != nil || prop.Nullable) {
				continue
			}
			if d, ok := valueDefault(&prop); ok {
				x[k] = d
			}
		}
		ap, _ := valueAdditional(s)
		for k, v := range x {
			if root && valueMetaFields[k] {
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				valueApplyDefaults(v, &prop, false)
				continue
			}
			if ap == nil {
				continue
			}
			if v == nil && !ap.Nullable {
				if d, ok := valueDefault(ap); ok {
					x[k] = d
					v = d
				}
			}
			valueApplyDefaults(v, ap, false)
		}
	case []any:
		items := valueItems(s)
		if items == nil {
			return
		}
		for i, v := range x {
			if v == nil && !items.Nullable {
				if d, ok := valueDefault(items); ok {
					x[i] = d
					v = d
				}
			}
			valueApplyDefaults(v, items, false)
		}
	}
}
