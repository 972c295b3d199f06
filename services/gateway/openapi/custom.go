package openapi

// Documents of custom resource group versions.
//
// They follow the registry: the Handler remembers the registry generation its snapshot (root
// and documents) was built for, and the first request after the generation moved rebuilds the
// snapshot under the Handler's mutex. A custom group version's document is rebuilt only when
// its resources changed (the registry registers a changed definition as new Resources, so
// pointer identity tells); group versions no longer served drop out of the root and answer 404.
// Built-in documents are built once by New and never change.
//
// A document has the paths and operations of built-in ones (pathsBuilder) and, as upstream's
// apiextensions OpenAPI builder (controller/openapi/builder) makes them, these components:
//
//   - the kind, named like upstream's (group reversed, version, kind: com.example.stable.v1.CronTab):
//     the version's schema as published in the definition, with apiVersion and kind string
//     properties and metadata pointing at ObjectMeta (the definition may only restrict name and
//     generateName there, so its own metadata schema is replaced, as upstream does), the same on
//     every x-kubernetes-embedded-resource node (which also requires apiVersion and kind),
//     x-kubernetes-int-or-string nodes unfolded into anyOf [integer, string], and
//     x-kubernetes-group-version-kind naming the kind (plus x-kubernetes-selectable-fields when
//     the version has selectable fields). A version without a schema is an object that keeps
//     unknown fields;
//   - the list kind: apiVersion, kind, metadata (ListMeta) and items (the kind), with its own
//     group-version-kind extension;
//   - the meta kinds the operations use (DeleteOptions, Status, WatchEvent, Patch,
//     APIResourceList), ObjectMeta and ListMeta, and autoscaling/v1 Scale when a resource has a
//     scale subresource, all shared with the built-in documents.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/registry"
)

// Vendor extensions only custom resource schemas carry.
const (
	extEmbeddedResource = "x-kubernetes-embedded-resource"
	extSelectableFields = "x-kubernetes-selectable-fields"
)

// Components custom resource documents use beyond the meta kinds of the operations.
var (
	objectMetaName = componentName(reflect.TypeFor[metav1.ObjectMeta]())
	listMetaName   = componentName(reflect.TypeFor[metav1.ListMeta]())
	scaleName      = componentName(reflect.TypeFor[autoscalingv1.Scale]())
	customRoots    = []reflect.Type{
		reflect.TypeFor[metav1.ObjectMeta](), reflect.TypeFor[metav1.ListMeta](), reflect.TypeFor[autoscalingv1.Scale](),
	}
)

// customDocument is the document of one custom group version and the resources it was built from.
type customDocument struct {
	resources []*registry.Resource
	doc       *document
	err       error
}

// current returns the snapshot of the registry's present generation, building what changed.
func (h *Handler) current() (*snapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The generation is read before the groups: if the registry changes in between, the
	// snapshot is newer than its generation says and is rebuilt once more on the next request.
	gen := h.reg.Generation()
	if h.snapshot != nil && gen == h.generation {
		return h.snapshot, nil
	}
	custom := map[string]*customDocument{}
	for _, g := range h.reg.Groups() {
		if h.reg.BuiltinGroup(g.Name) {
			continue
		}
		for _, gv := range g.Versions {
			key := strings.TrimPrefix(groupVersionPrefix(gv.GroupVersion), "/")
			if prev, ok := h.custom[key]; ok && sameResources(prev.resources, gv.Resources) {
				custom[key] = prev
				continue
			}
			doc, err := h.customDocument(gv)
			custom[key] = &customDocument{resources: gv.Resources, doc: doc, err: err}
		}
	}
	snap := &snapshot{docs: make(map[string]*document, len(h.builtin)+len(custom)), failed: map[string]error{}}
	root := discoveryRoot{Paths: map[string]discoveryEntry{}}
	add := func(key string, doc *document) {
		snap.docs[key] = doc
		root.Paths[key] = discoveryEntry{ServerRelativeURL: Prefix + "/" + key + "?hash=" + doc.hash}
	}
	for key, doc := range h.builtin {
		add(key, doc)
	}
	for key, c := range custom {
		if c.err != nil {
			snap.failed[key] = c.err
			continue
		}
		add(key, c.doc)
	}
	var err error
	if snap.root, err = newDocument(root); err != nil {
		return nil, err
	}
	h.generation, h.custom, h.snapshot = gen, custom, snap
	return snap, nil
}

// groupVersionPrefix is the URL path of a group version: /api/v1 or /apis/<group>/<version>.
func groupVersionPrefix(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

func sameResources(a, b []*registry.Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// customParts are what the documents of one custom resource group version are made of: its
// paths, the schemas of its kinds and list kinds (v3), and the shared components they refer to.
func customParts(gv *registry.GroupVersion) (pb *pathsBuilder, own map[string]obj, roots []string, err error) {
	pb = newPathsBuilder(gv)
	pb.addDiscovery()
	roots = []string{objectMetaName, listMetaName}
	own = map[string]obj{}
	for _, res := range gv.Resources {
		if res.Custom == nil {
			continue
		}
		kind := customComponentName(res.GroupVersionKind())
		list := customComponentName(gv.WithKind(res.ListKind))
		ks, err := customKindSchema(res)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("openapi: schema of %s: %w", res.GroupVersionKind(), err)
		}
		own[kind] = ks
		own[list] = customListSchema(res, kind)
		if res.HasSubresource("scale") {
			pb.scaleKind = scaleName
			roots = append(roots, scaleName)
		}
		pb.addResource(res, kind, list)
	}
	return pb, own, roots, nil
}

// customDocument builds the document of one custom resource group version.
func (h *Handler) customDocument(gv *registry.GroupVersion) (*document, error) {
	pb, own, roots, err := customParts(gv)
	if err != nil {
		return nil, err
	}
	schemas := h.b.closure(append(roots, h.metaNames...))
	for name, s := range own {
		if _, taken := schemas[name]; taken {
			return nil, fmt.Errorf("openapi: %s: component %s is taken by a built-in type", gv.GroupVersion, name)
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("openapi: encoding %s: %w", name, err)
		}
		schemas[name] = raw
	}
	doc, err := newDocument(obj{
		"openapi": "3.0.0",
		"info":    obj{"title": "Platform", "version": gv.GroupVersion.String()},
		"paths":   pb.paths,
		"components": obj{
			"schemas": schemas,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("openapi: encoding %s: %w", gv.GroupVersion, err)
	}
	return doc, nil
}

// customComponentName names a custom kind's schema as upstream does: the group's labels
// reversed, the version and the kind (stable.example.com/v1 CronTab is com.example.stable.v1.CronTab).
func customComponentName(gvk schema.GroupVersionKind) string {
	labels := strings.Split(gvk.Group, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(append(labels, gvk.Version, gvk.Kind), ".")
}

// customKindSchema is the schema of a custom resource's kind (see the file comment).
func customKindSchema(res *registry.Resource) (obj, error) {
	var s obj
	if res.Custom.Schema == nil {
		s = obj{"type": "object", extPreserveUnknown: true}
	} else {
		data, err := json.Marshal(res.Custom.Schema)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // defaults, enums and bounds keep their exact digits
		if err := dec.Decode(&s); err != nil {
			return nil, err
		}
		unfold(s)
		setResourceProperties(s)
	}
	s[extGVK] = []any{gvkObject(res.GroupVersionKind())}
	if fields := selectableFields(res); fields != nil {
		s[extSelectableFields] = fields
	}
	return s, nil
}

// customListSchema is the schema of a custom resource's list kind.
func customListSchema(res *registry.Resource, kind string) obj {
	s := obj{
		"type":     "object",
		"required": []string{"items"},
		"properties": obj{
			"apiVersion": obj{"type": "string"},
			"kind":       obj{"type": "string"},
			"metadata":   obj{"$ref": refPrefix + listMetaName},
			"items":      obj{"type": "array", "items": obj{"$ref": refPrefix + kind}},
		},
		extGVK: []any{gvkObject(res.GroupVersion().WithKind(res.ListKind))},
	}
	if fields := selectableFields(res); fields != nil {
		s[extSelectableFields] = fields
	}
	return s
}

func selectableFields(res *registry.Resource) []any {
	if len(res.SelectableFields) == 0 {
		return nil
	}
	out := make([]any, len(res.SelectableFields))
	for i, f := range res.SelectableFields {
		out[i] = obj{"fieldPath": f}
	}
	return out
}

// setResourceProperties gives an object schema the properties of every resource: apiVersion and
// kind strings and metadata as ObjectMeta.
func setResourceProperties(s obj) { setResourcePropertiesAt(s, refPrefix) }

// setResourcePropertiesAt is setResourceProperties with ObjectMeta referenced under prefix (v3's
// components or v2's definitions).
func setResourcePropertiesAt(s obj, prefix string) {
	props, _ := s["properties"].(obj)
	if props == nil {
		props = obj{}
		s["properties"] = props
	}
	props["apiVersion"] = obj{"type": "string"}
	props["kind"] = obj{"type": "string"}
	props["metadata"] = obj{"$ref": prefix + objectMetaName}
}

// unfold walks a decoded schema through properties, items and additionalProperties, expanding
// x-kubernetes-int-or-string into its anyOf and giving embedded resources their resource
// properties (apiVersion and kind required), as upstream publishes them.
func unfold(s obj) {
	if props, ok := s["properties"].(obj); ok {
		for _, p := range props {
			if p, ok := p.(obj); ok {
				unfold(p)
			}
		}
	}
	switch items := s["items"].(type) {
	case obj:
		unfold(items)
	case []any:
		for _, it := range items {
			if it, ok := it.(obj); ok {
				unfold(it)
			}
		}
	}
	if ap, ok := s["additionalProperties"].(obj); ok {
		unfold(ap)
	}
	if s[extIntOrString] == true {
		unfoldIntOrString(s)
	}
	if s[extEmbeddedResource] == true {
		setResourceProperties(s)
		required, _ := s["required"].([]any)
		for _, name := range []string{"kind", "apiVersion"} {
			found := false
			for _, r := range required {
				found = found || r == name
			}
			if !found {
				required = append(required, name)
			}
		}
		s["required"] = required
	}
}

// unfoldIntOrString adds anyOf [{type: integer}, {type: string}] to an int-or-string node that
// does not spell it (directly or as the first allOf), as upstream's structural Unfold does.
func unfoldIntOrString(s obj) {
	if isIntOrStringAnyOf(s["anyOf"]) {
		return
	}
	allOf, _ := s["allOf"].([]any)
	if len(allOf) > 0 {
		if first, ok := allOf[0].(obj); ok && isIntOrStringAnyOf(first["anyOf"]) {
			return
		}
	}
	pattern := []any{obj{"type": "integer"}, obj{"type": "string"}}
	if _, has := s["anyOf"]; !has {
		s["anyOf"] = pattern
		return
	}
	s["allOf"] = append([]any{obj{"anyOf": pattern}}, allOf...)
}

func isIntOrStringAnyOf(v any) bool {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return false
	}
	for i, want := range []string{"integer", "string"} {
		m, ok := l[i].(obj)
		if !ok || len(m) != 1 || m["type"] != want {
			return false
		}
	}
	return true
}
