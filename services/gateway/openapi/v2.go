package openapi

// OpenAPI v2 (/openapi/v2), as upstream still serves it for the clients that read it: client-go's
// discovery OpenAPISchema (kubectl's client-side validation and `explain
// --output=plaintext-openapiv2`), kustomize and GitOps tools.
//
// One document describes everything, built from the same model as the v3 documents: the paths
// and operations the pathsBuilder derives from the registry and the component schemas derived
// from the Go types (built-in kinds) or from the definitions (custom resources), written in v2's
// shapes:
//
//   - references point to #/definitions/ instead of #/components/schemas/, and a reference with
//     siblings (a field's patch strategy) is the $ref itself with the siblings beside it, as
//     upstream writes v2 (v3 wraps it in allOf);
//   - IntOrString is {type: string, format: int-or-string}, upstream's v2 definition of it;
//   - parameters carry their type directly (uniqueItems set, as upstream's), a request body is a
//     "body" parameter, each operation lists what it consumes and produces (the media types of
//     its v3 request body and responses) and its responses' schema;
//   - a custom resource's kind is its version's schema made v2-compatible as upstream's CRD
//     builder makes it (v2customKindSchema): no allOf/anyOf/oneOf/not, nullable and
//     x-kubernetes-preserve-unknown-fields nodes without type, properties and items; a version
//     without schema, or whose root keeps unknown fields, is a bare {type: object}, so that v2
//     clients never refuse fields the server accepts.
//
// The document is built when it is first asked for (the built-in part too: most gateways never
// serve v2) and again when asked for after the registry (custom resources) or the aggregated
// APIServices' documents changed; k8s.io/kube-openapi's handler serves it (JSON,
// and Protobuf as application/com.github.proto-openapi.spec.v2@v1.0+protobuf, with upstream's
// ETag, 304s and gzip), and its aggregator merges the extension servers' documents, as
// upstream's kube-aggregator does.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/gorilla/mux"
	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
)

// V2Path is where the OpenAPI v2 document is served.
const V2Path = "/openapi/v2"

// v2RefPrefix starts every reference to a definition in v2.
const v2RefPrefix = "#/definitions/"

// AggregatedV2 returns the OpenAPI v2 documents of the extension API servers behind remote
// APIServices, keyed by APIService name, each already restricted to its group version's paths,
// and a version that changes whenever one of them does. The documents are read-only.
type AggregatedV2 func() (map[string]*spec.Swagger, string)

// v2Part is the v2 paths and definitions of one custom group version.
type v2Part struct {
	resources   []*registry.Resource
	paths       map[string]spec.PathItem
	definitions spec.Definitions
	err         error
}

// SetAggregatedV2 makes the v2 document include the extension servers' documents that f
// returns (the aggregator's).
func (h *Handler) SetAggregatedV2(f AggregatedV2) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aggregatedV2 = f
}

// installV2 registers GET and HEAD of /openapi/v2, served by kube-openapi's handler.
func (h *Handler) installV2(r *mux.Router) {
	h.v2Service = handler.NewOpenAPIServiceLazy(cached.Func(h.v2Spec))
	h.v2Service.RegisterOpenAPIVersionedService(V2Path, routeAdder{r})
}

// routeAdder registers kube-openapi's handlers on a mux router.
type routeAdder struct{ r *mux.Router }

func (a routeAdder) Handle(path string, h http.Handler) {
	a.r.Handle(path, h).Methods(http.MethodGet, http.MethodHead)
}

// v2Spec returns the current v2 document and a version that changes with it: built-in paths and
// definitions (made by New), each custom group version's, and the aggregated documents merged.
func (h *Handler) v2Spec() (*spec.Swagger, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gen := h.reg.Generation()
	var agg map[string]*spec.Swagger
	aggVersion := ""
	if h.aggregatedV2 != nil {
		agg, aggVersion = h.aggregatedV2()
	}
	etag := fmt.Sprintf("%d/%s", gen, aggVersion)
	if h.v2Merged != nil && etag == h.v2Etag {
		return h.v2Merged, h.v2Etag, nil
	}
	if h.v2Builtin == nil {
		// Built when first asked for: most gateways never serve v2 (kubectl and Helm read v3).
		plans, err := builtinPlans(h.reg, h.b, h.metaNames)
		if err != nil {
			return nil, "", err
		}
		if err := h.buildV2Builtin(plans); err != nil {
			return nil, "", err
		}
	}
	parts := map[string]*v2Part{}
	for _, g := range h.reg.Groups() {
		if h.reg.BuiltinGroup(g.Name) {
			continue
		}
		for _, gv := range g.Versions {
			key := gv.GroupVersion.String()
			if prev, ok := h.v2Custom[key]; ok && sameResources(prev.resources, gv.Resources) {
				parts[key] = prev
				continue
			}
			p := &v2Part{resources: gv.Resources}
			p.paths, p.definitions, p.err = h.v2CustomPart(gv)
			parts[key] = p
		}
	}
	out := *h.v2Builtin
	out.Paths = &spec.Paths{Paths: make(map[string]spec.PathItem, len(h.v2Builtin.Paths.Paths))}
	for k, v := range h.v2Builtin.Paths.Paths {
		out.Paths.Paths[k] = v
	}
	out.Definitions = make(spec.Definitions, len(h.v2Builtin.Definitions))
	for k, v := range h.v2Builtin.Definitions {
		out.Definitions[k] = v
	}
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := parts[k]
		if p.err != nil {
			continue // the group version is left out; its v3 document answers the error
		}
		for name, d := range p.definitions {
			out.Definitions[name] = d
		}
		for path, item := range p.paths {
			out.Paths.Paths[path] = item
		}
	}
	names := make([]string, 0, len(agg))
	for name := range agg {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		src := agg[name]
		// The merge may add group-version-kinds to a definition both documents have: give the
		// merged document its own copy of those, never the built-in one.
		for def := range src.Definitions {
			if d, ok := out.Definitions[def]; ok {
				out.Definitions[def] = copySchema(d)
			}
		}
		if err := aggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(&out, aggregator.FilterSpecByPathsWithoutSideEffects(src, pathsOf(src))); err != nil {
			return nil, "", fmt.Errorf("openapi: merging the v2 document of APIService %s: %w", name, err)
		}
	}
	h.v2Custom, h.v2Merged, h.v2Etag = parts, &out, etag
	return h.v2Merged, h.v2Etag, nil
}

// pathsOf lists a document's paths (FilterSpecByPathsWithoutSideEffects copies what it keeps).
func pathsOf(s *spec.Swagger) []string {
	if s.Paths == nil {
		return nil
	}
	out := make([]string, 0, len(s.Paths.Paths))
	for p := range s.Paths.Paths {
		out = append(out, p)
	}
	return out
}

func copySchema(s spec.Schema) spec.Schema {
	data, err := json.Marshal(&s)
	if err != nil {
		return s
	}
	var out spec.Schema
	if err := json.Unmarshal(data, &out); err != nil {
		return s
	}
	return out
}

// buildV2Builtin builds the v2 paths and definitions of the built-in group versions.
func (h *Handler) buildV2Builtin(plans []plan) error {
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger: "2.0",
		Info:    &spec.Info{InfoProps: spec.InfoProps{Title: "Platform", Version: "unversioned"}},
		Paths:   &spec.Paths{Paths: map[string]spec.PathItem{}},
		// As upstream: every operation takes a bearer token.
		SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		Security:    []map[string][]string{{"BearerToken": {}}},
		Definitions: spec.Definitions{},
	}}
	var roots []string
	for _, p := range plans {
		paths, err := v2Paths(p.paths.paths)
		if err != nil {
			return fmt.Errorf("openapi: v2 paths of %s: %w", p.gv, err)
		}
		for k, v := range paths {
			sw.Paths.Paths[k] = v
		}
		roots = append(roots, p.roots...)
	}
	// The components custom resources refer to are there whether or not a built-in kind uses them.
	roots = append(roots, objectMetaName, listMetaName, scaleName)
	for name, raw := range h.b.closure(roots) {
		s, err := v2Definition(raw)
		if err != nil {
			return fmt.Errorf("openapi: v2 definition %s: %w", name, err)
		}
		sw.Definitions[name] = s
	}
	h.v2Builtin = sw
	return nil
}

// v2CustomPart builds the v2 paths and definitions of one custom group version.
func (h *Handler) v2CustomPart(gv *registry.GroupVersion) (map[string]spec.PathItem, spec.Definitions, error) {
	pb, own, _, err := customParts(gv)
	if err != nil {
		return nil, nil, err
	}
	paths, err := v2Paths(pb.paths)
	if err != nil {
		return nil, nil, err
	}
	defs := spec.Definitions{}
	for name, s := range own {
		if _, taken := h.v2Builtin.Definitions[name]; taken {
			return nil, nil, fmt.Errorf("openapi: %s: definition %s is taken by a built-in type", gv.GroupVersion, name)
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, nil, err
		}
		d, err := v2Definition(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("openapi: v2 definition %s: %w", name, err)
		}
		defs[name] = d
	}
	// The kinds themselves in their v2 form (the list kinds are as in v3).
	for _, res := range gv.Resources {
		if res.Custom == nil {
			continue
		}
		ks, err := v2CustomKindSchema(res)
		if err != nil {
			return nil, nil, fmt.Errorf("openapi: v2 schema of %s: %w", res.GroupVersionKind(), err)
		}
		raw, err := json.Marshal(ks)
		if err != nil {
			return nil, nil, err
		}
		var d spec.Schema
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, nil, err
		}
		defs[customComponentName(res.GroupVersionKind())] = d
	}
	return paths, defs, nil
}

// v2Definition converts a v3 component schema (as encoded by the schema builder or for a custom
// list kind) to its v2 definition.
func v2Definition(raw json.RawMessage) (spec.Schema, error) {
	raw = bytes.ReplaceAll(raw, []byte(`"`+refPrefix), []byte(`"`+v2RefPrefix))
	var s obj
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return spec.Schema{}, err
	}
	v2Schema(s)
	data, err := json.Marshal(s)
	if err != nil {
		return spec.Schema{}, err
	}
	var out spec.Schema
	if err := json.Unmarshal(data, &out); err != nil {
		return spec.Schema{}, err
	}
	return out, nil
}

// v2Schema rewrites, in place and recursively, what v3 spells differently from upstream's v2: a
// reference wrapped in allOf to carry siblings, and IntOrString's anyOf.
func v2Schema(s obj) {
	if allOf, ok := s["allOf"].([]any); ok && len(allOf) == 1 {
		if only, ok := allOf[0].(obj); ok && len(only) == 1 && only["$ref"] != nil {
			delete(s, "allOf")
			s["$ref"] = only["$ref"]
		}
	}
	if s[extIntOrString] == true && isIntOrStringAnyOf(s["anyOf"]) {
		delete(s, "anyOf")
		delete(s, extIntOrString)
		s["type"] = "string"
		s["format"] = "int-or-string"
	}
	if props, ok := s["properties"].(obj); ok {
		for _, p := range props {
			if p, ok := p.(obj); ok {
				v2Schema(p)
			}
		}
	}
	if items, ok := s["items"].(obj); ok {
		v2Schema(items)
	}
	if ap, ok := s["additionalProperties"].(obj); ok {
		v2Schema(ap)
	}
}

// v2CustomKindSchema is a custom resource's kind as upstream's CRD builder publishes it in v2.
func v2CustomKindSchema(res *registry.Resource) (obj, error) {
	var s obj
	preserve := res.Custom.CRD != nil && res.Custom.CRD.Spec.PreserveUnknownFields
	if res.Custom.Schema == nil || preserve || (res.Custom.Schema.XPreserveUnknownFields != nil && *res.Custom.Schema.XPreserveUnknownFields) {
		// Anything goes: no properties, not even apiVersion, kind and metadata, which would make
		// v2 clients refuse every other field.
		s = obj{"type": "object"}
	} else {
		data, err := json.Marshal(res.Custom.Schema)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&s); err != nil {
			return nil, err
		}
		v2Structural(s)
		setV2ResourceProperties(s)
		v2EmbeddedResources(s)
	}
	s[extGVK] = []any{gvkObject(res.GroupVersionKind())}
	if fields := selectableFields(res); fields != nil {
		s[extSelectableFields] = fields
	}
	return s, nil
}

// v2Structural makes a structural schema v2-compatible as upstream's ToStructuralOpenAPIV2:
// junctors (allOf, anyOf, oneOf, not) go; a nullable node loses its type, properties and items
// (v2 has no nullable); a node keeping unknown fields loses its properties and items, and its
// type when it is an object; an array left without items loses its type; nullable properties
// (and every property, when additionalProperties is nullable) are not required. Each node is
// changed before its children, so a parent still sees which children are nullable.
func v2Structural(s obj) {
	for _, k := range []string{"allOf", "anyOf", "oneOf", "not"} {
		delete(s, k)
	}
	props, _ := s["properties"].(obj)
	if required, ok := s["required"].([]any); ok {
		var keep []any
		for _, r := range required {
			if p, ok := props[fmt.Sprint(r)].(obj); ok && p["nullable"] == true {
				continue
			}
			keep = append(keep, r)
		}
		if ap, ok := s["additionalProperties"].(obj); ok && ap["nullable"] == true {
			keep = nil
		}
		if len(keep) == 0 {
			delete(s, "required")
		} else {
			s["required"] = keep
		}
	}
	if s["nullable"] == true {
		delete(s, "type")
		delete(s, "items")
		delete(s, "properties")
	}
	delete(s, "nullable")
	if s[extPreserveUnknown] == true {
		delete(s, "items")
		delete(s, "properties")
		if s["type"] == "object" {
			delete(s, "type")
		}
	}
	if _, hasItems := s["items"]; !hasItems && s["type"] == "array" {
		delete(s, "type")
	}
	if props, ok := s["properties"].(obj); ok {
		for _, p := range props {
			if p, ok := p.(obj); ok {
				v2Structural(p)
			}
		}
	}
	if items, ok := s["items"].(obj); ok {
		v2Structural(items)
	}
	if ap, ok := s["additionalProperties"].(obj); ok {
		v2Structural(ap)
	}
}

// setV2ResourceProperties gives an object schema apiVersion and kind strings and metadata as
// ObjectMeta (replacing what the definition says of metadata, as upstream).
func setV2ResourceProperties(s obj) { setResourcePropertiesAt(s, v2RefPrefix) }

// v2EmbeddedResources gives x-kubernetes-embedded-resource nodes the resource properties (and
// requires apiVersion and kind), except where they keep unknown fields: in v2 those stay
// without properties, as upstream publishes them.
func v2EmbeddedResources(s obj) {
	if props, ok := s["properties"].(obj); ok {
		for _, p := range props {
			if p, ok := p.(obj); ok {
				v2EmbeddedResources(p)
			}
		}
	}
	if items, ok := s["items"].(obj); ok {
		v2EmbeddedResources(items)
	}
	if ap, ok := s["additionalProperties"].(obj); ok {
		v2EmbeddedResources(ap)
	}
	if s[extPreserveUnknown] == true || s[extEmbeddedResource] != true {
		return
	}
	setV2ResourceProperties(s)
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

// mediaRank orders media types as upstream lists them in consumes and produces.
func mediaRank(m string) int {
	for i, t := range []string{mediaJSON, mediaYAML, naming.ProtobufMediaType,
		"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml",
		mediaJSONWatch, mediaProtobufWatch} {
		if m == t {
			return i
		}
	}
	return 100
}

// sortedMedia returns the media types of a v3 content object in upstream's order.
func sortedMedia(content obj) []string {
	out := make([]string, 0, len(content))
	for m := range content {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := mediaRank(out[i]), mediaRank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

// v2Paths converts the v3 paths of the model to v2 path items.
func v2Paths(paths obj) (map[string]spec.PathItem, error) {
	out := make(map[string]spec.PathItem, len(paths))
	for p, item := range paths {
		it, ok := item.(obj)
		if !ok {
			continue
		}
		v2 := obj{}
		if params, ok := it["parameters"].([]any); ok {
			v2["parameters"] = v2Parameters(params)
		}
		for _, method := range []string{"get", "put", "post", "delete", "patch", "head", "options"} {
			if op, ok := it[method].(obj); ok {
				v2[method] = v2Operation(op)
			}
		}
		raw, err := json.Marshal(v2)
		if err != nil {
			return nil, err
		}
		var pi spec.PathItem
		if err := json.Unmarshal(bytes.ReplaceAll(raw, []byte(`"`+refPrefix), []byte(`"`+v2RefPrefix)), &pi); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out[p] = pi
	}
	return out, nil
}

// v2Parameters converts path and query parameters: the schema's type moves onto the parameter.
func v2Parameters(params []any) []any {
	out := make([]any, 0, len(params))
	for _, p := range params {
		pm, ok := p.(obj)
		if !ok {
			continue
		}
		v2 := obj{"name": pm["name"], "in": pm["in"], "uniqueItems": true}
		if pm["required"] == true {
			v2["required"] = true
		}
		if sch, ok := pm["schema"].(obj); ok {
			v2["type"] = sch["type"]
		}
		out = append(out, v2)
	}
	return out
}

// v2Operation converts one operation: parameters (the request body as the "body" parameter),
// consumes, produces, and each response's schema.
func v2Operation(op obj) obj {
	v2 := obj{"schemes": []string{"https"}}
	for k, v := range op {
		switch k {
		case "parameters", "requestBody", "responses":
		default:
			v2[k] = v
		}
	}
	var params []any
	if ps, ok := op["parameters"].([]any); ok {
		params = v2Parameters(ps)
	}
	if rb, ok := op["requestBody"].(obj); ok {
		content, _ := rb["content"].(obj)
		media := sortedMedia(content)
		if len(media) > 0 {
			body := obj{"name": "body", "in": "body", "schema": content[media[0]].(obj)["schema"]}
			if rb["required"] == true {
				body["required"] = true
			}
			params = append([]any{body}, params...)
			v2["consumes"] = media
		}
	}
	if len(params) > 0 {
		v2["parameters"] = params
	}
	produces := map[string]bool{}
	responses := obj{}
	if rs, ok := op["responses"].(obj); ok {
		for code, r := range rs {
			rm, ok := r.(obj)
			if !ok {
				continue
			}
			out := obj{"description": rm["description"]}
			if content, ok := rm["content"].(obj); ok {
				media := sortedMedia(content)
				for _, m := range media {
					produces[m] = true
				}
				if len(media) > 0 {
					out["schema"] = content[media[0]].(obj)["schema"]
				}
			}
			responses[code] = out
		}
	}
	v2["responses"] = responses
	if len(produces) > 0 {
		content := obj{}
		for m := range produces {
			content[m] = true
		}
		v2["produces"] = sortedMedia(content)
	}
	return v2
}
