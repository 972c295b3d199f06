package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	utilproto "k8s.io/kube-openapi/pkg/util/proto"

	"platform.io/libs/naming"
)

const protobufV2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

// fetchV2 fetches /openapi/v2 as JSON and decodes it.
func fetchV2(t *testing.T, srv *httptest.Server) (map[string]any, string) {
	t.Helper()
	resp, data := get(t, srv.URL+V2Path)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s %.200s", V2Path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, resp.Header.Get("Etag")
}

// models reads /openapi/v2 as client-go's discovery and kubectl read it: Protobuf, parsed into
// kube-openapi's models.
func models(t *testing.T, srv *httptest.Server) utilproto.Models {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	m, err := utilproto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("NewOpenAPIData: %v", err)
	}
	return m
}

// checkV2Refs fails for every $ref that names no definition.
func checkV2Refs(t *testing.T, doc map[string]any) {
	t.Helper()
	defs := doc["definitions"].(map[string]any)
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, ok := defs[strings.TrimPrefix(ref, v2RefPrefix)]; !ok || !strings.HasPrefix(ref, v2RefPrefix) {
					t.Errorf("dangling %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

// validate validates an object with kubectl's v2 client-side validation and returns the
// messages.
func validate(t *testing.T, m utilproto.Models, model string, obj string) string {
	t.Helper()
	s := m.LookupModel(model)
	if s == nil {
		t.Fatalf("no model %s", model)
	}
	var o any
	if err := yaml.Unmarshal([]byte(obj), &o); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, err := range validation.ValidateModel(o, s, model) {
		msgs = append(msgs, err.Error())
	}
	return strings.Join(msgs, "\n")
}

// /openapi/v2 as upstream serves it: JSON and Protobuf (both names of its media type), one ETag
// for both, 304 for a matching If-None-Match, 406 for anything else; every reference resolves;
// the built-in kinds are definitions kubectl's client-side validation uses.
func TestOpenAPIV2(t *testing.T) {
	_, srv := start(t)
	doc, etag := fetchV2(t, srv)
	checkV2Refs(t, doc)
	if doc["swagger"] != "2.0" || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("swagger %v, ETag %q", doc["swagger"], etag)
	}
	for _, accept := range []string{protobufV2, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"} {
		resp, data := get(t, srv.URL+V2Path, "Accept", accept)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" || resp.Header.Get("Etag") != etag {
			t.Fatalf("Accept %s: %d %s ETag %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Etag"))
		}
		var pdoc openapi_v2.Document
		if err := proto.Unmarshal(data, &pdoc); err != nil || pdoc.GetSwagger() != "2.0" {
			t.Fatalf("Protobuf body: %v", err)
		}
	}
	if resp, data := get(t, srv.URL+V2Path, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(data) != 0 {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, _ := get(t, srv.URL+V2Path, "Accept", "text/plain"); resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("Accept text/plain: %d", resp.StatusCode)
	}

	// Paths: parameters typed, bodies as "body" parameters, consumes and produces.
	item := doc["paths"].(map[string]any)["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].(map[string]any)
	patch := item["patch"].(map[string]any)
	if c := patch["consumes"].([]any); len(c) != 4 || c[0] != "application/json-patch+json" || c[3] != "application/apply-patch+yaml" {
		t.Errorf("patch consumes %v", c)
	}
	params := patch["parameters"].([]any)
	body := params[0].(map[string]any)
	if body["in"] != "body" || body["required"] != true || body["schema"].(map[string]any)["$ref"] != v2RefPrefix+patchName {
		t.Errorf("patch body parameter %v", body)
	}
	found := false
	for _, p := range params[1:] {
		pm := p.(map[string]any)
		found = found || pm["name"] == "fieldValidation" && pm["type"] == "string" && pm["in"] == "query"
	}
	if !found {
		t.Errorf("no fieldValidation parameter: %v", params)
	}
	list := doc["paths"].(map[string]any)["/apis/apps/v1/namespaces/{namespace}/deployments"].(map[string]any)["get"].(map[string]any)
	if p := list["produces"].([]any); len(p) != 5 || p[0] != "application/json" || p[2] != naming.ProtobufMediaType || p[4] != naming.ProtobufMediaType+";stream=watch" {
		t.Errorf("list produces %v", p)
	}
	if ref := list["responses"].(map[string]any)["200"].(map[string]any)["schema"].(map[string]any)["$ref"]; ref != v2RefPrefix+"io.k8s.api.apps.v1.DeploymentList" {
		t.Errorf("list response %v", ref)
	}
	// Definitions in v2's shapes.
	defs := doc["definitions"].(map[string]any)
	if ios := defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].(map[string]any); ios["type"] != "string" || ios["format"] != "int-or-string" || ios["anyOf"] != nil {
		t.Errorf("IntOrString %v", ios)
	}
	if strategy := defs["io.k8s.api.apps.v1.DeploymentSpec"].(map[string]any)["properties"].(map[string]any)["strategy"].(map[string]any); strategy["$ref"] == nil || strategy[extPatchStrategy] != "retainKeys" {
		t.Errorf("a reference with siblings: %v", strategy)
	}

	// kubectl's client-side validation, through client-go's discovery (Protobuf).
	m := models(t, srv)
	msgs := validate(t, m, "io.k8s.api.apps.v1.Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: three\n  bogus: 1\n  selector: {}\n  template: {}\n")
	for _, want := range []string{`invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", expected "integer"`, `unknown field "bogus" in io.k8s.api.apps.v1.DeploymentSpec`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("validation %q lacks %q", msgs, want)
		}
	}
}

// Custom resources in /openapi/v2, as upstream's CRD builder publishes them: every served
// version's kind and list kind under <reversed group>.<version>.<kind>, in v2's shapes; updated
// when a version is renamed, stops being served or its schema changes.
func TestOpenAPIV2CustomResources(t *testing.T) {
	reg := newRegistry(t)
	crd := cronTab(t)
	putCustom(reg, crd)
	_, srv := startWith(t, reg)
	doc, etag := fetchV2(t, srv)
	checkV2Refs(t, doc)
	defs := doc["definitions"].(map[string]any)
	for _, name := range []string{"com.example.stable.v1.CronTab", "com.example.stable.v1.CronTabList", "com.example.stable.v2.CronTab", "com.example.stable.v2.CronTabList"} {
		if defs[name] == nil {
			t.Errorf("no definition %s", name)
		}
	}
	if defs["com.example.stable.v0.CronTab"] != nil {
		t.Error("the unserved version v0 is published")
	}
	v1 := defs["com.example.stable.v1.CronTab"].(map[string]any)
	props := v1["properties"].(map[string]any)
	if props["metadata"].(map[string]any)["$ref"] != v2RefPrefix+objectMetaName || props["apiVersion"] == nil || props["kind"] == nil {
		t.Errorf("v1 kind properties %v", props)
	}
	gvk := v1[extGVK].([]any)[0].(map[string]any)
	if gvk["group"] != "stable.example.com" || gvk["version"] != "v1" || gvk["kind"] != "CronTab" || v1[extSelectableFields] == nil {
		t.Errorf("v1 kind extensions %v", v1)
	}
	spec2 := defs["com.example.stable.v2.CronTab"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	if size := spec2["size"].(map[string]any); size["anyOf"] != nil || size["type"] != nil || size[extIntOrString] != true {
		t.Errorf("int-or-string in v2: %v", size)
	}
	if tmpl := spec2["template"].(map[string]any); tmpl["properties"] != nil || tmpl["type"] != nil || tmpl[extPreserveUnknown] != true {
		t.Errorf("an embedded resource keeping unknown fields: %v", tmpl)
	}
	for _, p := range []string{"/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}", "/apis/stable.example.com/v2/crontabs", "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"} {
		if doc["paths"].(map[string]any)[p] == nil {
			t.Errorf("no path %s", p)
		}
	}
	m := models(t, srv)
	msgs := validate(t, m, "com.example.stable.v1.CronTab", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: c}\nspec:\n  cronSpec: '* * * * */5'\n  replicas: three\n  bogus: 1\n")
	for _, want := range []string{`invalid type for com.example.stable.v1.CronTab.spec.replicas: got "string", expected "integer"`, `unknown field "bogus" in com.example.stable.v1.CronTab.spec`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("validation %q lacks %q", msgs, want)
		}
	}

	// Rename v2 to v3, stop serving v1 and add a field to v3's schema: the document follows.
	changed := crd.DeepCopy()
	changed.Spec.Versions[0].Served = false
	changed.Spec.Versions[1].Name = "v3"
	changed.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["added"] = apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	putCustom(reg, changed)
	doc, etag2 := fetchV2(t, srv)
	checkV2Refs(t, doc)
	defs = doc["definitions"].(map[string]any)
	if etag2 == etag {
		t.Error("the ETag did not change with the definition")
	}
	for name, want := range map[string]bool{"com.example.stable.v1.CronTab": false, "com.example.stable.v2.CronTab": false, "com.example.stable.v2.CronTabList": false, "com.example.stable.v3.CronTab": true, "com.example.stable.v3.CronTabList": true} {
		if (defs[name] != nil) != want {
			t.Errorf("%s published: %v, want %v", name, defs[name] != nil, want)
		}
	}
	if defs["com.example.stable.v3.CronTab"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["added"] == nil {
		t.Error("the schema change is not published")
	}
	for p := range doc["paths"].(map[string]any) {
		if strings.HasPrefix(p, "/apis/stable.example.com/v1/") || strings.HasPrefix(p, "/apis/stable.example.com/v2/") {
			t.Errorf("path %s of a version no longer served", p)
		}
	}
	reg.DeleteCustom(crd.Name)
	doc, _ = fetchV2(t, srv)
	for name := range doc["definitions"].(map[string]any) {
		if strings.HasPrefix(name, "com.example.stable.") {
			t.Errorf("%s published after the definition went", name)
		}
	}
}

// Schemaless versions and versions whose root keeps unknown fields are bare objects in v2 (so
// that no v2 client refuses a field), nullable nodes lose their type, and a nullable property is
// not required: upstream's v2 rules.
func TestOpenAPIV2CustomResourceShapes(t *testing.T) {
	reg := newRegistry(t)
	const shapes = `
apiVersion: apiextensions.platform.io/v1
kind: CustomResourceDefinition
metadata: {name: shapes.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {plural: shapes, singular: shape, kind: Shape}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [a, b]
            properties:
              a: {type: string, nullable: true}
              b: {type: string}
              c: {type: array, x-kubernetes-preserve-unknown-fields: true, items: {type: string}}
              d: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {x: {type: string}}}
              e: {type: string, anyOf: [{pattern: '^a'}, {pattern: '^b'}], enum: [ab, ba]}
              f:
                type: object
                x-kubernetes-embedded-resource: true
                properties: {spec: {type: object}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {spec: {type: object}}}
  - name: v3
    served: true
    storage: false
`
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(shapes), crd); err != nil {
		t.Fatal(err)
	}
	putCustom(reg, crd)
	_, srv := startWith(t, reg)
	doc, _ := fetchV2(t, srv)
	checkV2Refs(t, doc)
	defs := doc["definitions"].(map[string]any)
	for _, v := range []string{"v2", "v3"} {
		kind := defs["com.example."+v+".Shape"].(map[string]any)
		if kind["type"] != "object" || kind["properties"] != nil || kind[extGVK] == nil || len(kind) != 2 {
			t.Errorf("%s: %v, want a bare object with its group-version-kind", v, kind)
		}
	}
	s := defs["com.example.v1.Shape"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
	props := s["properties"].(map[string]any)
	if req, _ := s["required"].([]any); len(req) != 1 || req[0] != "b" {
		t.Errorf("required %v, want [b] (a is nullable)", s["required"])
	}
	if a := props["a"].(map[string]any); a["type"] != nil || a["nullable"] != nil {
		t.Errorf("nullable a: %v", a)
	}
	if c := props["c"].(map[string]any); c["type"] != nil || c["items"] != nil {
		t.Errorf("array keeping unknown fields: %v", c)
	}
	if d := props["d"].(map[string]any); d["type"] != nil || d["properties"] != nil || d[extPreserveUnknown] != true {
		t.Errorf("object keeping unknown fields: %v", d)
	}
	if e := props["e"].(map[string]any); e["anyOf"] != nil || e["type"] != "string" || e["enum"] == nil {
		t.Errorf("junctors: %v", e)
	}
	f := props["f"].(map[string]any)
	if fp := f["properties"].(map[string]any); fp["metadata"].(map[string]any)["$ref"] != v2RefPrefix+objectMetaName || fp["kind"] == nil || fp["apiVersion"] == nil || len(f["required"].([]any)) != 2 {
		t.Errorf("embedded resource: %v", f)
	}
	// Such documents still parse for kubectl.
	models(t, srv)
}

// Aggregated APIServices' documents are merged as upstream's kube-aggregator merges them:
// their paths added, definitions they share with the gateway's kept once (group-version-kinds
// merged), conflicting ones renamed; the gateway's own definitions are never changed.
func TestOpenAPIV2Aggregated(t *testing.T) {
	h, srv := start(t)
	before, etag := fetchV2(t, srv)
	metaBefore, _ := json.Marshal(before["definitions"].(map[string]any)[objectMetaName])
	ext := &spec.Swagger{}
	if err := json.Unmarshal([]byte(`{"swagger":"2.0","info":{"title":"ext","version":"v1"},
	  "paths":{"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders":{"get":{"operationId":"listFlunders","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/com.example.wardle.v1alpha1.Flunder"}}}}}},
	  "definitions":{
	    "com.example.wardle.v1alpha1.Flunder":{"type":"object","properties":{"metadata":{"$ref":"#/definitions/`+objectMetaName+`"},"spec":{"type":"object","properties":{"reference":{"type":"string"}}}},
	      "x-kubernetes-group-version-kind":[{"group":"wardle.example.com","version":"v1alpha1","kind":"Flunder"}]},
	    "`+objectMetaName+`":{"type":"object","properties":{"name":{"type":"string"}}}}}`), ext); err != nil {
		t.Fatal(err)
	}
	version := "1"
	h.SetAggregatedV2(func() (map[string]*spec.Swagger, string) {
		return map[string]*spec.Swagger{"v1alpha1.wardle.example.com": ext}, version
	})
	doc, etag2 := fetchV2(t, srv)
	checkV2Refs(t, doc)
	if etag2 == etag {
		t.Error("the ETag did not change")
	}
	defs := doc["definitions"].(map[string]any)
	flunder, _ := defs["com.example.wardle.v1alpha1.Flunder"].(map[string]any)
	if flunder == nil || doc["paths"].(map[string]any)["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"] == nil {
		t.Fatalf("the extension server's kind or path is missing")
	}
	// Its ObjectMeta differs from the gateway's: renamed, and its kind refers to the renamed one.
	if ref := flunder["properties"].(map[string]any)["metadata"].(map[string]any)["$ref"]; ref != v2RefPrefix+objectMetaName+"_v2" || defs[objectMetaName+"_v2"] == nil {
		t.Errorf("conflicting definition: metadata refers to %v", ref)
	}
	metaAfter, _ := json.Marshal(defs[objectMetaName])
	if string(metaAfter) != string(metaBefore) {
		t.Error("the gateway's ObjectMeta changed")
	}
	m := models(t, srv)
	if msgs := validate(t, m, "com.example.wardle.v1alpha1.Flunder", "spec: {reference: {a: b}}\n"); !strings.Contains(msgs, `invalid type for com.example.wardle.v1alpha1.Flunder.spec.reference: got "map", expected "string"`) {
		t.Errorf("validation of the aggregated kind: %q", msgs)
	}
	// The extension server goes away: so do its paths and definitions.
	h.SetAggregatedV2(func() (map[string]*spec.Swagger, string) { return nil, "2" })
	doc, _ = fetchV2(t, srv)
	if doc["definitions"].(map[string]any)["com.example.wardle.v1alpha1.Flunder"] != nil {
		t.Error("the extension server's kind outlived it")
	}
}
