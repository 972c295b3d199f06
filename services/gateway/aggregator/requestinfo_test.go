package aggregator

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/auth"
)

// TestAttributesOf checks how a request for an aggregated group version is authorized: the
// attributes upstream's request info gives it.
func TestAttributesOf(t *testing.T) {
	gv := schema.GroupVersion{Group: "wardle.example.com", Version: "v1alpha1"}
	base := "/apis/wardle.example.com/v1alpha1"
	for _, c := range []struct {
		method, target string
		want           auth.Attributes
	}{
		{"GET", base, auth.Attributes{Verb: "get", Path: base}},
		{"GET", base + "/", auth.Attributes{Verb: "get", Path: base + "/"}},
		{"GET", base + "/flunders", auth.Attributes{ResourceRequest: true, Verb: "list", Resource: "flunders"}},
		{"GET", base + "/flunders?watch=true", auth.Attributes{ResourceRequest: true, Verb: "watch", Resource: "flunders"}},
		{"GET", base + "/watch/namespaces/ns/flunders", auth.Attributes{ResourceRequest: true, Verb: "watch", Namespace: "ns", Resource: "flunders"}},
		{"GET", base + "/namespaces/ns/flunders/a", auth.Attributes{ResourceRequest: true, Verb: "get", Namespace: "ns", Resource: "flunders", Name: "a"}},
		{"GET", base + "/namespaces/ns/flunders/a/status", auth.Attributes{ResourceRequest: true, Verb: "get", Namespace: "ns", Resource: "flunders", Name: "a", Subresource: "status"}},
		{"POST", base + "/namespaces/ns/flunders", auth.Attributes{ResourceRequest: true, Verb: "create", Namespace: "ns", Resource: "flunders"}},
		{"PUT", base + "/namespaces/ns/flunders/a", auth.Attributes{ResourceRequest: true, Verb: "update", Namespace: "ns", Resource: "flunders", Name: "a"}},
		{"PATCH", base + "/namespaces/ns/flunders/a", auth.Attributes{ResourceRequest: true, Verb: "patch", Namespace: "ns", Resource: "flunders", Name: "a"}},
		{"DELETE", base + "/namespaces/ns/flunders/a", auth.Attributes{ResourceRequest: true, Verb: "delete", Namespace: "ns", Resource: "flunders", Name: "a"}},
		{"DELETE", base + "/namespaces/ns/flunders", auth.Attributes{ResourceRequest: true, Verb: "deletecollection", Namespace: "ns", Resource: "flunders"}},
		{"GET", base + "/namespaces/ns", auth.Attributes{ResourceRequest: true, Verb: "get", Namespace: "ns", Resource: "namespaces", Name: "ns"}},
		{"GET", base + "/fischers/x", auth.Attributes{ResourceRequest: true, Verb: "get", Resource: "fischers", Name: "x"}},
	} {
		got := attributesOf(httptest.NewRequest(c.method, c.target, nil), gv)
		want := c.want
		if want.ResourceRequest {
			want.APIGroup, want.APIVersion = gv.Group, gv.Version
		}
		if got != want {
			t.Errorf("%s %s: got %+v, want %+v", c.method, c.target, got, want)
		}
	}
	if _, ok := groupVersionOf("/apis/g"); ok {
		t.Error("/apis/g has no version")
	}
	if gv, ok := groupVersionOf("/apis/g/v1/x"); !ok || gv.String() != "g/v1" {
		t.Errorf("/apis/g/v1/x: %v %v", gv, ok)
	}
	if !longRunning(httptest.NewRequest("GET", base+"/flunders?watch=1", nil), attributesOf(httptest.NewRequest("GET", base+"/flunders?watch=1", nil), gv)) {
		t.Error("a watch is long-running")
	}
	r := httptest.NewRequest("POST", base+"/namespaces/ns/pods/p/exec", nil)
	r.Header.Set("Upgrade", "SPDY/3.1")
	if !longRunning(r, attributesOf(r, gv)) || longRunning(httptest.NewRequest(http.MethodGet, base+"/flunders", nil), auth.Attributes{Verb: "list"}) {
		t.Error("upgrades are long-running, lists are not")
	}
}
