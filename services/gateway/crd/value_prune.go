package crd

import (
	"fmt"
	"sort"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Prune removes from obj, in place, every field its structural schema does
// not specify and returns one warning per removed field, sorted, worded as
// upstream's unknown-field warnings:
//
//	unknown field "spec.foo"
//	unknown field "spec.list[0].bar"
//
// Fields are kept
//   - when a property or additionalProperties of the enclosing object
//     specifies them (their values are pruned in turn with that schema);
//   - under a node with x-kubernetes-preserve-unknown-fields: true, where
//     only the fields that properties or additionalProperties specify are
//     pruned further (array items of such a node preserve unknown fields
//     too, as upstream does);
//   - for apiVersion, kind and metadata at the root and in objects with
//     x-kubernetes-embedded-resource: true; metadata is kept as it is (the
//     caller reduces it to ObjectMeta).
//
// A nil schema prunes everything but apiVersion, kind and metadata. Arrays
// and values without a schema (e.g. inside additionalProperties: true or an
// array without items) lose all their object fields, as upstream does.
func Prune(schema *apiextensionsv1.JSONSchemaProps, obj map[string]any) []string {
	if obj == nil {
		return nil
	}
	root := schema
	if root == nil {
		root = &apiextensionsv1.JSONSchemaProps{}
	}
	p := &valuePruner{}
	p.prune(obj, root, true, "")
	if len(p.removed) == 0 {
		return nil
	}
	sort.Strings(p.removed)
	warnings := make([]string, len(p.removed))
	for i, path := range p.removed {
		warnings[i] = fmt.Sprintf("unknown field %q", path)
	}
	return warnings
}

// valueUnknownFields returns, sorted, the paths (relative to v, in Prune's
// notation) of the fields that pruning v, a value of schema s, would remove,
// without modifying v, which must hold only what valueDecodeJSON returns.
// Unlike Prune, it does not take v for a resource root, but an
// x-kubernetes-embedded-resource s keeps apiVersion, kind and metadata.
func valueUnknownFields(s *apiextensionsv1.JSONSchemaProps, v any) []string {
	p := &valuePruner{}
	p.prune(runtime.DeepCopyJSONValue(v), s, false, "")
	sort.Strings(p.removed)
	return p.removed
}

// valuePruner collects the paths of the fields Prune removes.
type valuePruner struct {
	removed []string
}

// prune prunes x with schema s (nil: nothing is specified). resource says
// that x is the resource root, whose apiVersion, kind and metadata are kept
// as for an embedded resource. path is the path of x in upstream's notation.
func (p *valuePruner) prune(x any, s *apiextensionsv1.JSONSchemaProps, resource bool, path string) {
	if s != nil && preservesUnknownFields(s) {
		p.pruneSpecified(x, s, resource, path)
		return
	}
	switch x := x.(type) {
	case map[string]any:
		keepMeta := s != nil && (resource || s.XEmbeddedResource)
		for k, v := range x {
			if keepMeta && valueMetaFields[k] {
				continue
			}
			if s != nil {
				if prop, ok := s.Properties[k]; ok {
					p.prune(v, &prop, false, valueJoinKey(path, k))
					continue
				}
				if ap, ok := valueAdditional(s); ok {
					p.prune(v, ap, false, valueJoinKey(path, k))
					continue
				}
			}
			p.removed = append(p.removed, valueJoinKey(path, k))
			delete(x, k)
		}
	case []any:
		items := valueItems(s)
		for i, v := range x {
			p.prune(v, items, false, valueJoinIndex(path, i))
		}
	}
}

// pruneSpecified handles a node with x-kubernetes-preserve-unknown-fields:
// unknown fields stay, specified ones are pruned with their schema.
func (p *valuePruner) pruneSpecified(x any, s *apiextensionsv1.JSONSchemaProps, resource bool, path string) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		keepMeta := resource || s.XEmbeddedResource
		for k, v := range x {
			if keepMeta && valueMetaFields[k] {
				continue
			}
			if prop, ok := s.Properties[k]; ok {
				p.prune(v, &prop, false, valueJoinKey(path, k))
			} else if ap, ok := valueAdditional(s); ok {
				p.prune(v, ap, false, valueJoinKey(path, k))
			}
		}
	case []any:
		items := valueItems(s)
		for i, v := range x {
			p.pruneSpecified(v, items, false, valueJoinIndex(path, i))
		}
	}
}

// PruneNulls removes, in place, the null values of fields whose schema is
// not nullable and has no default, as upstream does right after pruning:
// such a null means "unset" to clients, and would otherwise fail
// validation. Non-nullable nulls that have a default are left for Default
// to replace. Array items are never removed, and the root's apiVersion, kind
// and metadata are left alone.
//
// Call it between Prune and Default to serve custom resources exactly as
// upstream does; without it ValidateValue reports such nulls.
func PruneNulls(schema *apiextensionsv1.JSONSchemaProps, obj map[string]any) {
	if schema == nil || obj == nil {
		return
	}
	valuePruneNulls(obj, schema, true)
}

// valuePruneNulls is PruneNulls for the value x of schema s.
func valuePruneNulls(x any, s *apiextensionsv1.JSONSchemaProps, root bool) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if root && valueMetaFields[k] {
				continue
			}
			fs := valueFieldSchema(s, k)
			if v == nil && fs != nil && !fs.Nullable && !valueHasDefault(fs) {
				delete(x, k)
				continue
			}
			valuePruneNulls(v, fs, false)
		}
	case []any:
		items := valueItems(s)
		for _, v := range x {
			valuePruneNulls(v, items, false)
		}
	}
}

// valueJoinKey appends an object field to a path: "spec" + "foo" is
// "spec.foo", "" + "spec" is "spec".
func valueJoinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// valueJoinIndex appends an array index to a path: "spec.list[0]".
func valueJoinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
