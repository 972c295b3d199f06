package openapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// refPrefix starts every reference to a component schema.
const refPrefix = "#/components/schemas/"

// Vendor extensions the documents carry, spelled as upstream spells them.
const (
	extGVK             = "x-kubernetes-group-version-kind"
	extAction          = "x-kubernetes-action"
	extPatchStrategy   = "x-kubernetes-patch-strategy"
	extPatchMergeKey   = "x-kubernetes-patch-merge-key"
	extIntOrString     = "x-kubernetes-int-or-string"
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
)

// obj is one JSON object of a document under construction.
type obj = map[string]any

// component is one named schema of components.schemas, shared by every document that reaches it.
type component struct {
	schema obj
	// refs are the components the schema names directly.
	refs []string
	// raw is the schema's JSON, encoded once.
	raw json.RawMessage
}

// schemaBuilder derives component schemas from Go types by reflection, the way encoding/json
// sees them: exported fields by their json tags, embedded structs inlined.
type schemaBuilder struct {
	// gvks are the kinds the scheme registers each Go type under (Platform group names).
	gvks  map[reflect.Type][]schema.GroupVersionKind
	names map[reflect.Type]string
	comps map[string]*component
}

func newSchemaBuilder(s *runtime.Scheme) *schemaBuilder {
	b := &schemaBuilder{
		gvks:  map[reflect.Type][]schema.GroupVersionKind{},
		names: map[reflect.Type]string{},
		comps: map[string]*component{},
	}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		b.gvks[t] = append(b.gvks[t], gvk)
	}
	for _, l := range b.gvks {
		sort.Slice(l, func(i, j int) bool {
			if l[i].Group != l[j].Group {
				return l[i].Group < l[j].Group
			}
			if l[i].Version != l[j].Version {
				return l[i].Version < l[j].Version
			}
			return l[i].Kind < l[j].Kind
		})
	}
	return b
}

// leafSchemas are the types whose JSON form is not their Go structure (custom marshalling),
// in upstream's shapes.
var leafSchemas = map[reflect.Type]func() obj{
	reflect.TypeFor[metav1.Time]():      func() obj { return obj{"type": "string", "format": "date-time"} },
	reflect.TypeFor[metav1.MicroTime](): func() obj { return obj{"type": "string", "format": "date-time"} },
	reflect.TypeFor[metav1.Duration]():  func() obj { return obj{"type": "string"} },
	reflect.TypeFor[resource.Quantity](): func() obj {
		return obj{"type": "string"}
	},
	reflect.TypeFor[intstr.IntOrString](): func() obj {
		return obj{
			"anyOf":        []any{obj{"type": "integer"}, obj{"type": "string"}},
			"format":       "int-or-string",
			extIntOrString: true,
		}
	},
	reflect.TypeFor[runtime.RawExtension](): func() obj { return obj{"type": "object"} },
	reflect.TypeFor[metav1.FieldsV1]():      func() obj { return obj{"type": "object"} },
}

// namedLeaves are the leaf types that fields reference as components rather than inline, as
// upstream does, so that kubectl explain names their type (<IntOrString>).
var namedLeaves = map[reflect.Type]bool{reflect.TypeFor[intstr.IntOrString](): true}

var (
	jsonMarshaler  = reflect.TypeFor[json.Marshaler]()
	openAPITyped   = reflect.TypeFor[interface{ OpenAPISchemaType() []string }]()
	openAPIFormats = reflect.TypeFor[interface{ OpenAPISchemaFormat() string }]()
)

// implements tells whether t or *t has the methods of iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// leaf returns the schema of a type with custom JSON marshalling, or nil for ordinary types.
func leaf(t reflect.Type) obj {
	if f, ok := leafSchemas[t]; ok {
		return f()
	}
	if implements(t, openAPITyped) {
		v := reflect.New(t)
		types := v.Interface().(interface{ OpenAPISchemaType() []string }).OpenAPISchemaType()
		if len(types) != 1 {
			return obj{extPreserveUnknown: true}
		}
		s := obj{"type": types[0]}
		if implements(t, openAPIFormats) {
			if f := v.Interface().(interface{ OpenAPISchemaFormat() string }).OpenAPISchemaFormat(); f != "" {
				s["format"] = f
			}
		}
		return s
	}
	if implements(t, jsonMarshaler) {
		return obj{extPreserveUnknown: true}
	}
	return nil
}

// componentName spells a struct type's schema name as upstream does: the package path with its
// domain reversed, dotted, then the type name (k8s.io/api/core/v1.Pod is io.k8s.api.core.v1.Pod).
func componentName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	if len(parts) > 0 && strings.Contains(parts[0], ".") {
		labels := strings.Split(parts[0], ".")
		for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
			labels[i], labels[j] = labels[j], labels[i]
		}
		parts[0] = strings.Join(labels, ".")
	}
	return strings.Join(append(parts, t.Name()), ".")
}

// ref returns the component name of a struct type, building its schema (and those it reaches)
// the first time.
func (b *schemaBuilder) ref(t reflect.Type) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Name() == "" {
		return "", fmt.Errorf("openapi: %v is not a named struct type", t)
	}
	if name, ok := b.names[t]; ok {
		return name, nil
	}
	name := componentName(t)
	if _, taken := b.comps[name]; taken {
		return "", fmt.Errorf("openapi: two Go types are both named %s", name)
	}
	b.names[t] = name
	c := &component{}
	b.comps[name] = c // before the fields, so recursive types end in a $ref
	refs := map[string]bool{}
	if s := leaf(t); s != nil {
		c.schema = s
	} else {
		props, required := obj{}, []string{}
		if err := b.fields(t, props, &required, refs); err != nil {
			return "", err
		}
		c.schema = obj{"type": "object"}
		if len(props) > 0 {
			c.schema["properties"] = props
		}
		if len(required) > 0 {
			c.schema["required"] = required
		}
	}
	if gvks := b.gvks[t]; len(gvks) > 0 {
		list := make([]any, len(gvks))
		for i, gvk := range gvks {
			list[i] = gvkObject(gvk)
		}
		c.schema[extGVK] = list
	}
	for r := range refs {
		c.refs = append(c.refs, r)
	}
	sort.Strings(c.refs)
	return name, nil
}

// gvkObject is the value of the x-kubernetes-group-version-kind extension for one kind.
func gvkObject(gvk schema.GroupVersionKind) obj {
	return obj{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

// fields adds the JSON fields of struct type t to props, following encoding/json: untagged
// embedded structs (and ",inline" ones) contribute their fields, "-" and unexported fields none.
func (b *schemaBuilder) fields(t reflect.Type, props obj, required *[]string, refs map[string]bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && leaf(ft) == nil {
				if err := b.fields(ft, props, required, refs); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := b.schemaFor(f.Type, refs)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		ext := obj{}
		if v := f.Tag.Get("patchStrategy"); v != "" {
			ext[extPatchStrategy] = v
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			ext[extPatchMergeKey] = v
		}
		if len(ext) > 0 {
			if r, ok := s["$ref"]; ok {
				// A $ref has no siblings in OpenAPI 3.0: wrap it, as upstream does.
				s = obj{"allOf": []any{obj{"$ref": r}}}
			}
			for k, v := range ext {
				s[k] = v
			}
		}
		props[name] = s
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !optional && name != "metadata" && name != "status" {
			*required = append(*required, name)
		}
	}
	return nil
}

// schemaFor returns the inline schema of a field of type t: a $ref for named structs, the
// JSON type and format for everything else. It records the components it names in refs.
func (b *schemaBuilder) schemaFor(t reflect.Type, refs map[string]bool) (obj, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if namedLeaves[t] {
		name, err := b.ref(t)
		if err != nil {
			return nil, err
		}
		refs[name] = true
		return obj{"$ref": refPrefix + name}, nil
	}
	if s := leaf(t); s != nil {
		return s, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.Name() == "" {
			props, required := obj{}, []string{}
			if err := b.fields(t, props, &required, refs); err != nil {
				return nil, err
			}
			s := obj{"type": "object", "properties": props}
			if len(required) > 0 {
				s["required"] = required
			}
			return s, nil
		}
		name, err := b.ref(t)
		if err != nil {
			return nil, err
		}
		refs[name] = true
		return obj{"$ref": refPrefix + name}, nil
	case reflect.String:
		return obj{"type": "string"}, nil
	case reflect.Bool:
		return obj{"type": "boolean"}, nil
	case reflect.Int64, reflect.Uint64:
		return obj{"type": "integer", "format": "int64"}, nil
	case reflect.Int, reflect.Int32, reflect.Int16, reflect.Int8, reflect.Uint, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		return obj{"type": "integer", "format": "int32"}, nil
	case reflect.Float64:
		return obj{"type": "number", "format": "double"}, nil
	case reflect.Float32:
		return obj{"type": "number", "format": "float"}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return obj{"type": "string", "format": "byte"}, nil
		}
		items, err := b.schemaFor(t.Elem(), refs)
		if err != nil {
			return nil, err
		}
		return obj{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key %v is not a string", t.Key())
		}
		values, err := b.schemaFor(t.Elem(), refs)
		if err != nil {
			return nil, err
		}
		return obj{"type": "object", "additionalProperties": values}, nil
	case reflect.Interface:
		return obj{extPreserveUnknown: true}, nil
	}
	return nil, fmt.Errorf("no schema for Go kind %v", t.Kind())
}

// encode marshals every component once.
func (b *schemaBuilder) encode() error {
	for name, c := range b.comps {
		raw, err := json.Marshal(c.schema)
		if err != nil {
			return fmt.Errorf("openapi: encoding %s: %w", name, err)
		}
		c.raw = raw
	}
	return nil
}

// closure returns the encoded components reachable from roots.
func (b *schemaBuilder) closure(roots []string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	stack := append([]string(nil), roots...)
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := out[name]; seen {
			continue
		}
		c := b.comps[name]
		out[name] = c.raw
		stack = append(stack, c.refs...)
	}
	return out
}
