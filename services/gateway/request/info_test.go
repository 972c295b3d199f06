package request

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/auth"
)

// TestResolve checks what each request is authorized as: upstream's request info, for the
// gateway's own resources and for aggregated group versions alike.
func TestResolve(t *testing.T) {
	base := "/apis/wardle.example.com/v1alpha1"
	wardle := func(a auth.Attributes) auth.Attributes {
		a.ResourceRequest, a.APIGroup, a.APIVersion = true, "wardle.example.com", "v1alpha1"
		return a
	}
	core := func(a auth.Attributes) auth.Attributes {
		a.ResourceRequest, a.APIVersion = true, "v1"
		return a
	}
	for _, c := range []struct {
		method, target string
		want           auth.Attributes
	}{
		// Non-resource paths: the lower-cased method, HEAD as get.
		{"GET", "/healthz", auth.Attributes{Verb: "get"}},
		{"HEAD", "/livez", auth.Attributes{Verb: "get"}},
		{"POST", "/some/unknown/path", auth.Attributes{Verb: "post"}},
		{"GET", "/api", auth.Attributes{Verb: "get"}},
		{"GET", "/api/v1", auth.Attributes{Verb: "get"}},
		{"GET", "/apis/apps", auth.Attributes{Verb: "get"}},
		{"GET", base, auth.Attributes{Verb: "get"}},
		{"GET", base + "/", auth.Attributes{Verb: "get"}},
		{"PUT", "/apis", auth.Attributes{Verb: "put"}},
		// Resources of an aggregated group version.
		{"GET", base + "/flunders", wardle(auth.Attributes{Verb: "list", Resource: "flunders"})},
		{"GET", base + "/flunders?watch=true", wardle(auth.Attributes{Verb: "watch", Resource: "flunders"})},
		{"GET", base + "/flunders?watch=false", wardle(auth.Attributes{Verb: "list", Resource: "flunders"})},
		{"GET", base + "/watch/namespaces/ns/flunders", wardle(auth.Attributes{Verb: "watch", Namespace: "ns", Resource: "flunders"})},
		{"GET", base + "/namespaces/ns/flunders/a", wardle(auth.Attributes{Verb: "get", Namespace: "ns", Resource: "flunders", Name: "a"})},
		{"GET", base + "/namespaces/ns/flunders/a/status", wardle(auth.Attributes{Verb: "get", Namespace: "ns", Resource: "flunders", Name: "a", Subresource: "status"})},
		{"POST", base + "/namespaces/ns/flunders", wardle(auth.Attributes{Verb: "create", Namespace: "ns", Resource: "flunders"})},
		{"PUT", base + "/namespaces/ns/flunders/a", wardle(auth.Attributes{Verb: "update", Namespace: "ns", Resource: "flunders", Name: "a"})},
		{"PATCH", base + "/namespaces/ns/flunders/a", wardle(auth.Attributes{Verb: "patch", Namespace: "ns", Resource: "flunders", Name: "a"})},
		{"DELETE", base + "/namespaces/ns/flunders/a", wardle(auth.Attributes{Verb: "delete", Namespace: "ns", Resource: "flunders", Name: "a"})},
		{"DELETE", base + "/namespaces/ns/flunders", wardle(auth.Attributes{Verb: "deletecollection", Namespace: "ns", Resource: "flunders"})},
		{"GET", base + "/fischers/x", wardle(auth.Attributes{Verb: "get", Resource: "fischers", Name: "x"})},
		// Core resources; a namespace's own name is its namespace too (as upstream).
		{"GET", "/api/v1/namespaces/ns", core(auth.Attributes{Verb: "get", Namespace: "ns", Resource: "namespaces", Name: "ns"})},
		{"PUT", "/api/v1/namespaces/ns/finalize", core(auth.Attributes{Verb: "update", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "finalize"})},
		{"GET", "/api/v1/namespaces", core(auth.Attributes{Verb: "list", Resource: "namespaces"})},
		{"GET", "/api/v1/namespaces/ns/pods/p/log", core(auth.Attributes{Verb: "get", Namespace: "ns", Resource: "pods", Name: "p", Subresource: "log"})},
		{"POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", core(auth.Attributes{Verb: "create", Namespace: "ns", Resource: "serviceaccounts", Name: "sa", Subresource: "token"})},
		// Watching one object by its path is a watch (the gateway serves it as one).
		{"GET", "/api/v1/namespaces/ns/pods/p?watch=1", core(auth.Attributes{Verb: "watch", Namespace: "ns", Resource: "pods", Name: "p"})},
		// A list or watch of one object by name is authorized for that name.
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm", core(auth.Attributes{Verb: "list", Namespace: "ns", Resource: "configmaps", Name: "cm"})},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true&fieldSelector=metadata.name%3Dcm", core(auth.Attributes{Verb: "watch", Namespace: "ns", Resource: "configmaps", Name: "cm"})},
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%21%3Dcm", core(auth.Attributes{Verb: "list", Namespace: "ns", Resource: "configmaps"})},
		{"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3D..", core(auth.Attributes{Verb: "list", Namespace: "ns", Resource: "configmaps"})},
		// Unserved versions and unknown resources are resources too (authorized, then 404).
		{"GET", "/api/v2/nothing", auth.Attributes{ResourceRequest: true, APIVersion: "v2", Verb: "list", Resource: "nothing"}},
		{"OPTIONS", "/api/v1/pods", core(auth.Attributes{Verb: "options", Resource: "pods"})},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		got := (&Resolver{}).Resolve(r).Attributes(nil)
		want := c.want
		want.Path = r.URL.Path
		if got != want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.target, got, want)
		}
	}
}

// TestResolveServedGroup: a group version named by upstream's name of a group Platform renames is
// authorized under the served name, and the client's spelling is kept for the answer.
func TestResolveServedGroup(t *testing.T) {
	res := &Resolver{Served: func(gv schema.GroupVersion) schema.GroupVersion {
		if gv.Group == "rbac.authorization.k8s.io" {
			gv.Group = "rbac.authorization.platform.io"
		}
		return gv
	}}
	info := res.Resolve(httptest.NewRequest("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", nil))
	if info.APIGroup != "rbac.authorization.platform.io" || info.WireGroup != "rbac.authorization.k8s.io" || info.Name != "admin" {
		t.Errorf("aliased group: %+v", info)
	}
	info = res.Resolve(httptest.NewRequest("GET", "/apis/apps/v1/deployments", nil))
	if info.APIGroup != "apps" || info.WireGroup != "" {
		t.Errorf("served group: %+v", info)
	}
}

func TestLongRunning(t *testing.T) {
	watch := httptest.NewRequest("GET", "/apis/g/v1/flunders?watch=1", nil)
	upgrade := httptest.NewRequest("POST", "/apis/g/v1/namespaces/ns/pods/p/exec", nil)
	upgrade.Header.Set("Upgrade", "SPDY/3.1")
	list := httptest.NewRequest(http.MethodGet, "/apis/g/v1/flunders", nil)
	for r, want := range map[*http.Request]bool{watch: true, upgrade: true, list: false} {
		if got := (&Resolver{}).Resolve(r).LongRunning(r); got != want {
			t.Errorf("%s %s: long-running %v, want %v", r.Method, r.URL, got, want)
		}
	}
}
