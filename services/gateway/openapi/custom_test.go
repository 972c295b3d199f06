package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/yaml"

	"platform.io/services/gateway/registry"
)

// cronTabYAML is a namespaced definition with two served versions, both with status and scale
// subresources; v2 uses the extensions the document must carry through.
const cronTabYAML = `
apiVersion: apiextensions.platform.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, listKind: CronTabList, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          metadata:
            type: object
            properties:
              name: {type: string, maxLength: 20}
          spec:
            type: object
            required: [cronSpec]
            properties:
              cronSpec: {type: string, pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
              image: {type: string}
              replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
              bigNumber: {type: integer, default: 9007199254740993}
          status:
            type: object
            properties:
              replicas: {type: integer}
              labelSelector: {type: string}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.labelSelector}
    selectableFields:
    - jsonPath: .spec.image
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              schedule: {type: string}
              replicas: {type: integer}
              size:
                x-kubernetes-int-or-string: true
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer, format: int32}
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              replicas: {type: integer}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
  - name: v0
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
`

func cronTab(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(cronTabYAML), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func putCustom(reg *registry.Registry, crd *apiextensionsv1.CustomResourceDefinition) {
	reg.PutCustom(crd.Name, registry.CustomResources(crd))
}

// rootPaths fetches /openapi/v3.
func rootPaths(t *testing.T, srv *httptest.Server) map[string]discoveryEntry {
	t.Helper()
	resp, data := get(t, srv.URL+"/openapi/v3")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v3: %d %s", resp.StatusCode, data)
	}
	var root discoveryRoot
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	return root.Paths
}

// fetchSpec fetches a document by its root entry and decodes it as kubectl does.
func fetchSpec(t *testing.T, srv *httptest.Server, e discoveryEntry) (*spec3.OpenAPI, map[string]any) {
	t.Helper()
	resp, data := get(t, srv.URL+e.ServerRelativeURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", e.ServerRelativeURL, resp.StatusCode, data)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(data, doc); err != nil {
		t.Fatalf("GET %s: not an OpenAPI document: %v", e.ServerRelativeURL, err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return doc, raw
}

// checkRefs fails for every $ref of a decoded document that names no component of it.
func checkRefs(t *testing.T, key string, doc map[string]any) {
	t.Helper()
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, ok := comps[strings.TrimPrefix(ref, refPrefix)]; !ok {
					t.Errorf("%s: dangling %s", key, ref)
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

// methods tells which operations a path item has, as "get post delete".
func methods(item *spec3.Path) string {
	var out []string
	for _, m := range []struct {
		name string
		op   *spec3.Operation
	}{{"get", item.Get}, {"put", item.Put}, {"post", item.Post}, {"patch", item.Patch}, {"delete", item.Delete}} {
		if m.op != nil {
			out = append(out, m.name)
		}
	}
	return strings.Join(out, " ")
}

func TestCustomResourceDocuments(t *testing.T) {
	reg := newRegistry(t)
	h, srv := startWith(t, reg)
	builtinSize := h.Size()
	apps := rootPaths(t, srv)["apis/apps/v1"]
	for key := range rootPaths(t, srv) {
		if strings.Contains(key, "example.com") {
			t.Fatalf("root lists %s before any definition", key)
		}
	}

	putCustom(reg, cronTab(t))
	paths := rootPaths(t, srv)
	for _, key := range []string{"apis/stable.example.com/v1", "apis/stable.example.com/v2"} {
		e, ok := paths[key]
		if !ok || !strings.HasPrefix(e.ServerRelativeURL, "/openapi/v3/"+key+"?hash=") || len(e.ServerRelativeURL) <= len("/openapi/v3/"+key+"?hash=") {
			t.Fatalf("root entry of %s: %+v (present %v)", key, e, ok)
		}
	}
	if _, ok := paths["apis/stable.example.com/v0"]; ok {
		t.Error("root lists an unserved version")
	}
	if paths["apis/apps/v1"] != apps {
		t.Error("a built-in document changed with a custom resource")
	}
	if h.Size() <= builtinSize {
		t.Errorf("Size %d did not grow from %d", h.Size(), builtinSize)
	}

	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"}
	doc, raw := fetchSpec(t, srv, paths["apis/stable.example.com/v1"])
	checkRefs(t, "v1", raw)
	base := "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"
	for p, want := range map[string]string{
		"/apis/stable.example.com/v1/":         "get",
		"/apis/stable.example.com/v1/crontabs": "get",
		base:                                   "get post delete",
		base + "/{name}":                       "get put patch delete",
		base + "/{name}/status":                "get put patch",
		base + "/{name}/scale":                 "get put patch",
	} {
		item, ok := doc.Paths.Paths[p]
		if !ok {
			t.Errorf("no path %s", p)
			continue
		}
		if got := methods(item); got != want {
			t.Errorf("%s: operations %q, want %q", p, got, want)
		}
	}
	if len(doc.Paths.Paths) != 6 {
		t.Errorf("%d paths, want 6", len(doc.Paths.Paths))
	}
	for _, param := range []string{"fieldValidation", "fieldManager", "dryRun"} {
		if err := supportsQueryParam(doc, gvk, param); err != nil {
			t.Error(err)
		}
	}
	item := doc.Paths.Paths[base+"/{name}"]
	if item.Patch.OperationId != "patchStableExampleComV1NamespacedCronTab" || item.Patch.Extensions[extAction] != "patch" {
		t.Errorf("PATCH: %s %v", item.Patch.OperationId, item.Patch.Extensions[extAction])
	}
	if c := item.Patch.RequestBody.Content; c["application/apply-patch+yaml"] == nil || c["application/merge-patch+json"] == nil || c["application/strategic-merge-patch+json"] != nil {
		t.Errorf("PATCH body media types: %v (no strategic merge patch for custom resources)", c)
	}
	if c := item.Get.Responses.StatusCodeResponses[200].Content; len(c) != 2 || c["application/yaml"] == nil {
		t.Errorf("GET response media types: %v (JSON and YAML)", c)
	}
	if c := doc.Paths.Paths[base].Get.Responses.StatusCodeResponses[200].Content; c["application/json;stream=watch"] == nil || len(c) != 3 {
		t.Errorf("list response media types: %v", c)
	}
	if ref := item.Get.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); ref != refPrefix+"com.example.stable.v1.CronTab" {
		t.Errorf("GET response: %s", ref)
	}
	list := doc.Paths.Paths[base].Get
	if ref := list.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); ref != refPrefix+"com.example.stable.v1.CronTabList" {
		t.Errorf("list response: %s", ref)
	}
	statusPatch := false
	for _, p := range doc.Paths.Paths[base+"/{name}/status"].Patch.Parameters {
		statusPatch = statusPatch || (p.Name == "fieldValidation" && p.In == "query")
	}
	if !statusPatch {
		t.Error("status PATCH has no fieldValidation parameter")
	}
	scale := doc.Paths.Paths[base+"/{name}/scale"]
	if !hasGVK(scale.Patch.Extensions, registry.ScaleGroupVersionKind) {
		t.Errorf("scale PATCH GVK: %v", scale.Patch.Extensions[extGVK])
	}
	if ref := scale.Get.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); ref != refPrefix+scaleName {
		t.Errorf("scale GET response: %s", ref)
	}

	// Component schemas.
	comps := raw["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range []string{objectMetaName, listMetaName, scaleName, statusName, deleteOptionsName, patchName, watchEventName} {
		if _, ok := comps[name]; !ok {
			t.Errorf("no component %s", name)
		}
	}
	kind := comps["com.example.stable.v1.CronTab"].(map[string]any)
	if s := prop(t, kind, "spec", "cronSpec"); s["type"] != "string" || s["pattern"] == nil {
		t.Errorf("spec.cronSpec: %v", s)
	}
	if s := prop(t, kind, "spec", "replicas"); s["maximum"] != 10.0 || s["default"] != 1.0 {
		t.Errorf("spec.replicas: %v", s)
	}
	if _, data := get(t, srv.URL+paths["apis/stable.example.com/v1"].ServerRelativeURL); !strings.Contains(string(data), `"default":9007199254740993`) {
		t.Error("a large default lost digits")
	}
	if s := prop(t, kind, "spec"); !contains(s["required"], "cronSpec") {
		t.Errorf("spec.required: %v", s["required"])
	}
	if ref := prop(t, kind, "metadata")["$ref"]; ref != refPrefix+objectMetaName {
		t.Errorf("metadata: %v", prop(t, kind, "metadata"))
	}
	for _, f := range []string{"apiVersion", "kind"} {
		if s := prop(t, kind, f); s["type"] != "string" {
			t.Errorf("%s: %v", f, s)
		}
	}
	if got, want := fmt.Sprint(kind[extGVK]), fmt.Sprint([]any{map[string]any{"group": "stable.example.com", "version": "v1", "kind": "CronTab"}}); got != want {
		t.Errorf("kind GVK %s, want %s", got, want)
	}
	if got := fmt.Sprint(kind[extSelectableFields]); got != "[map[fieldPath:spec.image]]" {
		t.Errorf("selectable fields: %s", got)
	}
	listSchema := comps["com.example.stable.v1.CronTabList"].(map[string]any)
	if ref := prop(t, listSchema, "items")["items"].(map[string]any)["$ref"]; ref != refPrefix+"com.example.stable.v1.CronTab" {
		t.Errorf("list items: %v", ref)
	}
	if ref := prop(t, listSchema, "metadata")["$ref"]; ref != refPrefix+listMetaName {
		t.Errorf("list metadata: %v", ref)
	}
	if got := fmt.Sprint(listSchema[extGVK]); got != "[map[group:stable.example.com kind:CronTabList version:v1]]" {
		t.Errorf("list GVK: %s", got)
	}
	if _, ok := comps["io.k8s.api.core.v1.PodSpec"]; ok {
		t.Error("the document carries schemas it does not reach")
	}
	if s := doc.Components.Schemas["com.example.stable.v1.CronTab"]; s == nil || s.Properties["spec"].Properties["image"].Type[0] != "string" {
		t.Errorf("spec3 decoding lost the kind's schema: %v", s)
	}

	// v2: the extensions come through, int-or-string unfolded, embedded resources completed.
	_, raw2 := fetchSpec(t, srv, paths["apis/stable.example.com/v2"])
	checkRefs(t, "v2", raw2)
	kind2 := raw2["components"].(map[string]any)["schemas"].(map[string]any)["com.example.stable.v2.CronTab"].(map[string]any)
	if s := prop(t, kind2, "spec", "ports"); s["x-kubernetes-list-type"] != "map" || fmt.Sprint(s["x-kubernetes-list-map-keys"]) != "[name]" {
		t.Errorf("spec.ports: %v", s)
	}
	if s := prop(t, kind2, "spec", "size"); s[extIntOrString] != true || fmt.Sprint(s["anyOf"]) != "[map[type:integer] map[type:string]]" {
		t.Errorf("spec.size: %v", s)
	}
	tmpl := prop(t, kind2, "spec", "template")
	if tmpl[extEmbeddedResource] != true || tmpl[extPreserveUnknown] != true || prop(t, tmpl, "metadata")["$ref"] != refPrefix+objectMetaName ||
		prop(t, tmpl, "kind")["type"] != "string" || !contains(tmpl["required"], "apiVersion") || !contains(tmpl["required"], "kind") {
		t.Errorf("spec.template: %v", tmpl)
	}
	if _, ok := kind2[extSelectableFields]; ok {
		t.Error("v2 has selectable fields")
	}

	// kubectl's client reads the custom group versions too.
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	clientDoc, err := openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(gvk.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	if err := supportsQueryParam(clientDoc, gvk, "fieldValidation"); err != nil {
		t.Error(err)
	}

	// A changed definition changes its documents' hashes; stale links are sent to the new ones.
	changed := cronTab(t)
	spec := changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["timezone"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	putCustom(reg, changed)
	after := rootPaths(t, srv)
	old, now := paths["apis/stable.example.com/v1"].ServerRelativeURL, after["apis/stable.example.com/v1"].ServerRelativeURL
	if old == now {
		t.Fatalf("v1 hash unchanged after the definition changed: %s", now)
	}
	if after["apis/stable.example.com/v2"] != paths["apis/stable.example.com/v2"] {
		t.Error("v2 hash changed though its version did not")
	}
	resp, _ := get(t, srv.URL+old)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != now {
		t.Errorf("stale v1 link: %d Location %q, want %s", resp.StatusCode, resp.Header.Get("Location"), now)
	}
	_, raw = fetchSpec(t, srv, after["apis/stable.example.com/v1"])
	kind = raw["components"].(map[string]any)["schemas"].(map[string]any)["com.example.stable.v1.CronTab"].(map[string]any)
	if s := prop(t, kind, "spec", "timezone"); s["type"] != "string" {
		t.Errorf("spec.timezone: %v", s)
	}

	// A removed definition's documents are gone.
	reg.DeleteCustom(changed.Name)
	after = rootPaths(t, srv)
	for _, key := range []string{"apis/stable.example.com/v1", "apis/stable.example.com/v2"} {
		if _, ok := after[key]; ok {
			t.Errorf("root lists %s after the definition was deleted", key)
		}
		for _, u := range []string{srv.URL + "/openapi/v3/" + key, srv.URL + now} {
			if resp, body := get(t, u); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s after delete: %d %s", u, resp.StatusCode, body)
			}
		}
	}
	if after["apis/apps/v1"] != apps || len(after) != len(rootPaths(t, srv)) {
		t.Error("built-in entries changed")
	}
	if h.Size() != builtinSize {
		t.Errorf("Size %d after delete, want %d", h.Size(), builtinSize)
	}
}

// TestCustomResourceWithoutSchema also covers a definition registered before the handler is built.
func TestCustomResourceWithoutSchema(t *testing.T) {
	reg := newRegistry(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "gizmos.other.example.com"
	crd.Spec = apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "other.example.com", Scope: apiextensionsv1.ClusterScoped,
		Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true}},
	}
	putCustom(reg, crd)
	_, srv := startWith(t, reg)
	key := "apis/other.example.com/v1alpha1"
	doc, raw := fetchSpec(t, srv, rootPaths(t, srv)[key])
	checkRefs(t, key, raw)
	for p, want := range map[string]string{
		"/apis/other.example.com/v1alpha1/gizmos":        "get post delete",
		"/apis/other.example.com/v1alpha1/gizmos/{name}": "get put patch delete",
	} {
		if item, ok := doc.Paths.Paths[p]; !ok || methods(item) != want {
			t.Errorf("%s: present %v", p, ok)
		}
	}
	for p := range doc.Paths.Paths {
		if strings.Contains(p, "namespaces") || strings.HasSuffix(p, "/status") || strings.HasSuffix(p, "/scale") {
			t.Errorf("unexpected path %s", p)
		}
	}
	if err := supportsQueryParam(doc, schema.GroupVersionKind{Group: "other.example.com", Version: "v1alpha1", Kind: "Gizmo"}, "fieldValidation"); err != nil {
		t.Error(err)
	}
	comps := raw["components"].(map[string]any)["schemas"].(map[string]any)
	kind := comps["com.example.other.v1alpha1.Gizmo"].(map[string]any)
	if kind["type"] != "object" || kind[extPreserveUnknown] != true || kind[extGVK] == nil {
		t.Errorf("schemaless kind: %v", kind)
	}
	if _, ok := comps[scaleName]; ok {
		t.Error("Scale without a scale subresource")
	}
	if _, ok := comps["com.example.other.v1alpha1.GizmoList"]; !ok {
		t.Error("no list schema")
	}
}

// TestCustomResourceConcurrency serves the v3 and v2 documents while definitions come and go
// (for -race).
func TestCustomResourceConcurrency(t *testing.T) {
	reg := newRegistry(t)
	_, srv := startWith(t, reg)
	crd := cronTab(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, p := range []string{"/openapi/v3/apis/stable.example.com/v1", V2Path} {
					resp, err := http.Get(srv.URL + p)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
						t.Errorf("%s: status %d", p, resp.StatusCode)
					}
				}
			}
		}()
	}
	for range 20 {
		putCustom(reg, crd)
		reg.DeleteCustom(crd.Name)
	}
	close(stop)
	wg.Wait()
	putCustom(reg, crd)
	if _, ok := rootPaths(t, srv)["apis/stable.example.com/v1"]; !ok {
		t.Error("root does not list the definition put last")
	}
}
