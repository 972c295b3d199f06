package openapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"

	"platform.io/services/gateway/registry"
)

func newRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	cfg, err := registry.ParseRuntimeConfig("")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// start serves the handler of the default registry behind a mux router, as the gateway does.
func start(t *testing.T) (*Handler, *httptest.Server) {
	t.Helper()
	return startWith(t, newRegistry(t))
}

// startWith serves the handler of reg behind a mux router.
func startWith(t *testing.T, reg *registry.Registry) (*Handler, *httptest.Server) {
	t.Helper()
	begin := time.Now()
	h, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d documents, %d bytes in all, in %v", len(h.builtin), h.Size(), time.Since(begin))
	r := mux.NewRouter()
	r.UseEncodedPath()
	h.Install(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return h, srv
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

func TestDiscoveryRoot(t *testing.T) {
	_, srv := start(t)
	resp, data := get(t, srv.URL+"/openapi/v3")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v3: %d %s", resp.StatusCode, data)
	}
	var root discoveryRoot
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"api/v1", "apis/apps/v1", "apis/rbac.authorization.platform.io/v1"} {
		e, ok := root.Paths[key]
		if !ok {
			t.Errorf("root does not list %s: %s", key, data)
			continue
		}
		if !strings.HasPrefix(e.ServerRelativeURL, "/openapi/v3/"+key+"?hash=") {
			t.Errorf("%s: serverRelativeURL %q", key, e.ServerRelativeURL)
		}
		resp, body := get(t, srv.URL+e.ServerRelativeURL)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s", e.ServerRelativeURL, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil || doc["openapi"] != "3.0.0" {
			t.Errorf("GET %s: not an OpenAPI 3.0.0 document (%v)", e.ServerRelativeURL, err)
		}
	}
	if _, ok := root.Paths["apis/rbac.authorization.k8s.io/v1"]; ok {
		t.Error("root lists the upstream group name")
	}
}

// hasGVK reports whether an operation's extensions name gvk (as kubectl compares them).
func hasGVK(ext map[string]any, gvk schema.GroupVersionKind) bool {
	m, ok := ext[extGVK].(map[string]any)
	if !ok {
		return false
	}
	return m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind
}

// supportsQueryParam is the check of kubectl's OpenAPI v3 query parameter verifier
// (cli-runtime's supportsQueryParamV3): the first PATCH operation of the kind must list the
// parameter among its own query parameters.
func supportsQueryParam(doc *spec3.OpenAPI, gvk schema.GroupVersionKind, param string) error {
	if doc == nil || doc.Paths == nil {
		return fmt.Errorf("invalid document")
	}
	for _, path := range doc.Paths.Paths {
		if path == nil || path.Patch == nil || !hasGVK(path.Patch.Extensions, gvk) {
			continue
		}
		for _, p := range path.Patch.Parameters {
			if p.Name == param && p.In == "query" {
				return nil
			}
		}
		return fmt.Errorf("%s does not support %s", gvk, param)
	}
	return fmt.Errorf("no PATCH operation for %s", gvk)
}

func TestQueryParamVerifier(t *testing.T) {
	_, srv := start(t)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d group versions: %v", len(gvs), gvs)
	cases := []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "Namespace"},
		{Group: "rbac.authorization.platform.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "apiextensions.platform.io", Version: "v1", Kind: "CustomResourceDefinition"},
	}
	for _, gvk := range cases {
		doc, err := root.GVSpec(gvk.GroupVersion())
		if err != nil {
			t.Fatalf("%s: %v", gvk.GroupVersion(), err)
		}
		for _, param := range []string{"fieldValidation", "dryRun", "fieldManager"} {
			if err := supportsQueryParam(doc, gvk, param); err != nil {
				t.Error(err)
			}
		}
	}
	// Every PATCH operation carries the parameter, whichever kubectl meets first.
	doc, err := root.GVSpec(schema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	patches := 0
	for p, item := range doc.Paths.Paths {
		if item.Patch == nil {
			continue
		}
		patches++
		want := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: item.Patch.Extensions[extGVK].(map[string]any)["kind"].(string)}
		if strings.HasSuffix(p, "/scale") {
			want = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		}
		if !hasGVK(item.Patch.Extensions, want) {
			t.Errorf("PATCH %s: extension %v", p, item.Patch.Extensions[extGVK])
		}
		if item.Patch.Extensions[extAction] != "patch" {
			t.Errorf("PATCH %s: action %v", p, item.Patch.Extensions[extAction])
		}
		found := false
		for _, param := range item.Patch.Parameters {
			found = found || (param.Name == "fieldValidation" && param.In == "query")
		}
		if !found {
			t.Errorf("PATCH %s has no fieldValidation parameter", p)
		}
		if item.Patch.RequestBody == nil || item.Patch.RequestBody.Content["application/merge-patch+json"] == nil {
			t.Errorf("PATCH %s: request body %+v", p, item.Patch.RequestBody)
		}
	}
	if patches != 12 { // five kinds, four of them with a status, three with a scale
		t.Errorf("apps/v1 has %d PATCH operations, want 12", patches)
	}
	// Deployments: the collection, the item, the status and the all-namespaces list.
	for p, methods := range map[string]string{
		"/apis/apps/v1/namespaces/{namespace}/deployments":               "get post delete",
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}":        "get put patch delete",
		"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status": "get put patch",
		"/apis/apps/v1/deployments":                                      "get",
	} {
		item, ok := doc.Paths.Paths[p]
		if !ok {
			t.Errorf("no path %s", p)
			continue
		}
		ops := map[string]*spec3.Operation{"get": item.Get, "post": item.Post, "put": item.Put, "patch": item.Patch, "delete": item.Delete}
		want := map[string]bool{}
		for _, m := range strings.Fields(methods) {
			want[m] = true
		}
		for m, op := range ops {
			if (op != nil) != want[m] {
				t.Errorf("%s %s: present %v, want %v", m, p, op != nil, want[m])
			}
		}
	}
	list := doc.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments"].Get
	if list.OperationId != "listAppsV1NamespacedDeployment" || list.Extensions[extAction] != "list" {
		t.Errorf("list: %s %v", list.OperationId, list.Extensions[extAction])
	}
	names := map[string]bool{}
	for _, p := range list.Parameters {
		names[p.Name] = true
	}
	for _, n := range []string{"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch", "allowWatchBookmarks", "timeoutSeconds", "sendInitialEvents"} {
		if !names[n] {
			t.Errorf("list has no %s parameter", n)
		}
	}
	if ref := list.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); ref != "#/components/schemas/io.k8s.api.apps.v1.DeploymentList" {
		t.Errorf("list response: %s", ref)
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.apps.v1.DeploymentList"]; !ok {
		t.Error("no DeploymentList schema")
	}
}

// schemas fetches one group version's document as a map (what kubectl explain reads).
func schemas(t *testing.T, srv *httptest.Server, key string) (map[string]any, map[string]any) {
	t.Helper()
	resp, data := get(t, srv.URL+"/openapi/v3/"+key)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", key, resp.StatusCode)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, doc["components"].(map[string]any)["schemas"].(map[string]any)
}

func prop(t *testing.T, s map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		props, _ := s["properties"].(map[string]any)
		next, ok := props[p].(map[string]any)
		if !ok {
			t.Fatalf("no property %s in %v", p, s)
		}
		s = next
	}
	return s
}

func contains(list any, v string) bool {
	l, _ := list.([]any)
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func TestSchemas(t *testing.T) {
	_, srv := start(t)
	_, core := schemas(t, srv, "api/v1")
	pod := core["io.k8s.api.core.v1.Pod"].(map[string]any)
	if ref := prop(t, pod, "spec")["$ref"]; ref != refPrefix+"io.k8s.api.core.v1.PodSpec" {
		t.Errorf("Pod.spec: %v", ref)
	}
	spec := core["io.k8s.api.core.v1.PodSpec"].(map[string]any)
	containers := prop(t, spec, "containers")
	if containers["type"] != "array" || containers["items"].(map[string]any)["$ref"] != refPrefix+"io.k8s.api.core.v1.Container" {
		t.Errorf("PodSpec.containers: %v", containers)
	}
	if containers[extPatchStrategy] != "merge" || containers[extPatchMergeKey] != "name" {
		t.Errorf("PodSpec.containers patch extensions: %v", containers)
	}
	if !contains(spec["required"], "containers") {
		t.Errorf("PodSpec.required: %v", spec["required"])
	}
	container := core["io.k8s.api.core.v1.Container"].(map[string]any)
	if !contains(container["required"], "name") || contains(container["required"], "image") {
		t.Errorf("Container.required: %v", container["required"])
	}
	if s := prop(t, container, "ports"); s["items"].(map[string]any)["$ref"] != refPrefix+"io.k8s.api.core.v1.ContainerPort" {
		t.Errorf("Container.ports: %v", s)
	}
	meta := core["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].(map[string]any)
	if s := prop(t, meta, "creationTimestamp"); s["type"] != "string" || s["format"] != "date-time" {
		t.Errorf("ObjectMeta.creationTimestamp: %v", s)
	}
	if s := prop(t, meta, "labels"); s["type"] != "object" || s["additionalProperties"].(map[string]any)["type"] != "string" {
		t.Errorf("ObjectMeta.labels: %v", s)
	}
	if meta["required"] != nil {
		t.Errorf("ObjectMeta.required: %v", meta["required"])
	}
	if s := prop(t, pod, "kind"); s["type"] != "string" {
		t.Errorf("Pod.kind: %v", s)
	}
	if pod["required"] != nil {
		t.Errorf("Pod.required: %v (metadata, status and the inline TypeMeta are optional)", pod["required"])
	}
	if s := prop(t, core["io.k8s.api.core.v1.ContainerPort"].(map[string]any), "containerPort"); s["type"] != "integer" || s["format"] != "int32" {
		t.Errorf("ContainerPort.containerPort: %v", s)
	}
	if s := prop(t, core["io.k8s.api.core.v1.HTTPGetAction"].(map[string]any), "port"); s["$ref"] != refPrefix+"io.k8s.apimachinery.pkg.util.intstr.IntOrString" {
		t.Errorf("HTTPGetAction.port: %v", s)
	}
	if s := core["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].(map[string]any); s[extIntOrString] != true {
		t.Errorf("IntOrString: %v", s)
	}
	if s := prop(t, core["io.k8s.api.core.v1.Secret"].(map[string]any), "data"); s["additionalProperties"].(map[string]any)["format"] != "byte" {
		t.Errorf("Secret.data: %v", s)
	}
	if s := prop(t, core["io.k8s.api.core.v1.ResourceRequirements"].(map[string]any), "limits"); s["additionalProperties"].(map[string]any)["type"] != "string" {
		t.Errorf("ResourceRequirements.limits (Quantity): %v", s)
	}
	gvk := pod[extGVK].([]any)
	if len(gvk) != 1 || fmt.Sprint(gvk[0]) != fmt.Sprint(map[string]any{"group": "", "version": "v1", "kind": "Pod"}) {
		t.Errorf("Pod GVK: %v", gvk)
	}

	_, rbac := schemas(t, srv, "apis/rbac.authorization.platform.io/v1")
	cr := rbac["io.k8s.api.rbac.v1.ClusterRole"].(map[string]any)
	want := fmt.Sprint([]any{map[string]any{"group": "rbac.authorization.platform.io", "version": "v1", "kind": "ClusterRole"}})
	if got := fmt.Sprint(cr[extGVK]); got != want {
		t.Errorf("ClusterRole GVK: %s, want %s", got, want)
	}
	if _, ok := rbac["io.k8s.api.core.v1.PodSpec"]; ok {
		t.Error("the rbac document carries schemas it does not reach")
	}
	for name, s := range rbac {
		gvks, _ := s.(map[string]any)[extGVK].([]any)
		for _, g := range gvks {
			if group := g.(map[string]any)["group"].(string); strings.HasSuffix(group, ".k8s.io") && group != "meta.k8s.io" {
				t.Errorf("%s names upstream group %s", name, group)
			}
		}
	}

	// Every $ref resolves within its own document.
	for _, key := range []string{"api/v1", "apis/apps/v1", "apis/apiextensions.platform.io/v1", "apis/rbac.authorization.platform.io/v1"} {
		doc, _ := schemas(t, srv, key)
		checkRefs(t, key, doc)
	}
}

func TestCaching(t *testing.T) {
	h, srv := start(t)
	key := "apis/apps/v1"
	hash := h.builtin[key].hash
	resp, _ := get(t, srv.URL+"/openapi/v3/"+key+"?hash="+hash)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("with hash: %d Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	etag := resp.Header.Get("ETag")
	if etag != `"`+hash+`"` {
		t.Errorf("ETag %q, want %q", etag, hash)
	}
	resp, _ = get(t, srv.URL+"/openapi/v3/"+key)
	if resp.StatusCode != http.StatusOK || strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || resp.Header.Get("ETag") != etag {
		t.Errorf("without hash: %d Cache-Control %q ETag %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("ETag"))
	}
	resp, _ = get(t, srv.URL+"/openapi/v3/"+key, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	resp, _ = get(t, srv.URL+"/openapi/v3/"+key+"?hash=STALE")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/openapi/v3/"+key+"?hash="+hash {
		t.Errorf("stale hash: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/openapi/v3/apis/nope/v1", "/openapi/v3/apis/apps/v2", "/openapi/v3/apis/rbac.authorization.k8s.io/v1", "/openapi/v3/api"} {
		resp, body := get(t, srv.URL+p)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"kind":"Status"`) {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, _ = get(t, srv.URL+"/openapi/v3/"+key, "Accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("protobuf only: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/openapi/v3", nil)
	head, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head.Body.Close()
	if head.StatusCode != http.StatusOK || head.Header.Get("ETag") == "" {
		t.Errorf("HEAD /openapi/v3: %d ETag %q", head.StatusCode, head.Header.Get("ETag"))
	}
	// The documents are the same bytes on every build.
	h2, err := New(newRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	for k, d := range h.builtin {
		if h2.builtin[k].hash != d.hash {
			t.Errorf("%s: hash differs between builds", k)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	reg := newRegistry(b)
	for b.Loop() {
		if _, err := New(reg); err != nil {
			b.Fatal(err)
		}
	}
}
