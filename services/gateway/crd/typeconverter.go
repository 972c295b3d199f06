package crd

// Server-side apply of custom resources.
//
// Field ownership is computed by structured-merge-diff on a typed view of the object, so the
// schema decides how fine-grained ownership is: a granular map or struct lets two managers own
// different keys, an atomic list or map is owned as a whole. Upstream's custom resource handler
// builds that view from the kind's OpenAPI model (apiextensions' controller/openapi/builder: the
// structural schema with apiVersion, kind and metadata → ObjectMeta $ref set on the root and on
// every x-kubernetes-embedded-resource node), merged with the static models of the built-in types
// so that the $ref resolves, and hands the models to managedfields.NewTypeConverter.
//
// TypeConverter does the same with less machinery:
//
//   - the kind's model is converted directly from the JSONSchemaProps, keeping what
//     structured-merge-diff reads (type, format, properties, items, additionalProperties,
//     default, and the x-kubernetes-list-type, -list-map-keys, -map-type,
//     -preserve-unknown-fields, -int-or-string and -embedded-resource extensions) and dropping
//     value validations, which it ignores;
//   - metadata (at the root and in embedded resources) is a $ref to ObjectMeta, whose models
//     (ObjectMeta, OwnerReference, ManagedFieldsEntry, Time, FieldsV1) are taken from the
//     definitions generated for apiextensions-apiserver (k8s.io/apiextensions-apiserver/pkg/
//     generated/openapi), the same generated code upstream's static models come from, so the
//     markers match upstream's exactly: labels and annotations granular maps, finalizers a set,
//     ownerReferences a map list keyed by uid, managedFields atomic. Only those five
//     definitions are kept; nothing else of the generated set is used;
//   - the kind's model carries x-kubernetes-group-version-kind, by which the converter finds it.
//
// schemaconv (inside NewTypeConverter) then applies upstream's rules: lists without
// x-kubernetes-list-type are atomic, maps without x-kubernetes-map-type granular, a node
// without a type (x-kubernetes-int-or-string) untyped, an object without properties, or below
// x-kubernetes-preserve-unknown-fields, takes unknown fields with a deduced type (maps granular,
// lists atomic).
//
// A nil schema differs slightly from upstream, which falls back to the fully deduced converter
// there: the root preserves unknown fields (so everything but metadata is deduced) while
// metadata keeps the ObjectMeta structure, so that labels, finalizers and owner references are
// owned as they are for every other kind.

import (
	"encoding/json"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	// modelRefPrefix starts the $ref of a model; schemaconv resolves a $ref by its last segment.
	modelRefPrefix = "#/components/schemas/"
	// objectMetaGoName is ObjectMeta's canonical (Go) name in the generated definitions.
	objectMetaGoName = "k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta"
)

// objectMetaModel is the model name ObjectMeta is referred to by (io.k8s.apimachinery...).
var objectMetaModel = util.ToRESTFriendlyName(objectMetaGoName)

// metaModels returns ObjectMeta's model and those it refers to, keyed by model name. The
// schemas are shared by every converter and never modified.
var metaModels = sync.OnceValue(func() map[string]*spec.Schema {
	defs := generatedopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(modelRefPrefix + util.ToRESTFriendlyName(name))
	})
	out := map[string]*spec.Schema{}
	var add func(string)
	add = func(name string) {
		key := util.ToRESTFriendlyName(name)
		if _, done := out[key]; done {
			return
		}
		def, ok := defs[name]
		if !ok {
			panic(fmt.Sprintf("crd: no generated OpenAPI definition for %s", name))
		}
		s := def.Schema
		out[key] = &s
		for _, dep := range def.Dependencies {
			add(dep)
		}
	}
	add(objectMetaGoName)
	return out
})

// TypeConverter returns the structured-merge-diff type converter for objects of a custom
// resource version (for k8s.io/apimachinery/pkg/util/managedfields.NewDefaultFieldManager).
//
// schema is the version's structural schema (nil when it has none); gvk is the kind objects of
// the version carry, which is how the converter recognises them; preserveUnknownFields is the
// definition's spec.preserveUnknownFields (every object anywhere keeps unknown fields).
func TypeConverter(schema *apiextensionsv1.JSONSchemaProps, gvk schema.GroupVersionKind, preserveUnknownFields bool) (managedfields.TypeConverter, error) {
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("crd: type converter for %v: kind and version are required", gvk)
	}
	models := map[string]*spec.Schema{}
	for name, s := range metaModels() {
		models[name] = s
	}
	name := util.ToRESTFriendlyName(gvk.Group + "/" + gvk.Version + "." + gvk.Kind)
	if _, taken := models[name]; taken {
		return nil, fmt.Errorf("crd: type converter for %v: model name %s is taken", gvk, name)
	}
	var kind *spec.Schema
	if schema == nil {
		kind = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
		kind.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	} else {
		var err error
		if kind, err = toModel(schema); err != nil {
			return nil, fmt.Errorf("crd: type converter for %v: %w", gvk, err)
		}
	}
	setResourceProperties(kind)
	kind.AddExtension("x-kubernetes-group-version-kind", []any{
		map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
	})
	models[name] = kind
	tc, err := managedfields.NewTypeConverter(models, preserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("crd: type converter for %v: %w", gvk, err)
	}
	return tc, nil
}

// toModel converts the structural part of a schema to a kube-openapi schema, setting apiVersion,
// kind and metadata on embedded resources.
func toModel(s *apiextensionsv1.JSONSchemaProps) (*spec.Schema, error) {
	out := &spec.Schema{}
	if s.Type != "" {
		out.Type = spec.StringOrArray{s.Type}
	}
	out.Format = s.Format
	if s.Default != nil && len(s.Default.Raw) > 0 {
		var v any
		if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
		out.Default = v
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]spec.Schema, len(s.Properties))
		for name, p := range s.Properties {
			m, err := toModel(&p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out.Properties[name] = *m
		}
	}
	if s.Items != nil {
		out.Items = &spec.SchemaOrArray{}
		if s.Items.Schema != nil {
			m, err := toModel(s.Items.Schema)
			if err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
			out.Items.Schema = m
		}
		for i := range s.Items.JSONSchemas {
			// Not structural; schemaconv reports it.
			m, err := toModel(&s.Items.JSONSchemas[i])
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			out.Items.Schemas = append(out.Items.Schemas, *m)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{Allows: ap.Allows}
		if ap.Schema != nil {
			m, err := toModel(ap.Schema)
			if err != nil {
				return nil, fmt.Errorf("additionalProperties: %w", err)
			}
			out.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: m}
		}
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		out.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	}
	if s.XIntOrString {
		out.AddExtension("x-kubernetes-int-or-string", true)
	}
	if s.XListType != nil {
		out.AddExtension("x-kubernetes-list-type", *s.XListType)
	}
	if len(s.XListMapKeys) > 0 {
		keys := make([]any, len(s.XListMapKeys))
		for i, k := range s.XListMapKeys {
			keys[i] = k
		}
		out.AddExtension("x-kubernetes-list-map-keys", keys)
	}
	if s.XMapType != nil {
		out.AddExtension("x-kubernetes-map-type", *s.XMapType)
	}
	if s.XEmbeddedResource {
		out.AddExtension("x-kubernetes-embedded-resource", true)
		setResourceProperties(out)
	}
	return out, nil
}

// setResourceProperties gives an object (the root, or an embedded resource) the properties
// every resource has: apiVersion and kind strings, and metadata as ObjectMeta. A schema's own
// metadata (which may restrict only name and generateName) is replaced, as upstream does.
func setResourceProperties(s *spec.Schema) {
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	str := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
	s.Properties["apiVersion"] = str
	s.Properties["kind"] = str
	s.Properties["metadata"] = *spec.RefSchema(modelRefPrefix + objectMetaModel)
}
