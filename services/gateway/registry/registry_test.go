package registry

import (
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

func mustNew(t *testing.T, rc string) *Registry {
	t.Helper()
	cfg, err := ParseRuntimeConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCatalog(t *testing.T) {
	r := mustNew(t, "")
	for _, res := range r.Resources() {
		t.Logf("%-45s %-32s ns=%-5v %v %v %v", res.GroupVersionResource.String(), res.Kind, res.Namespaced, res.ShortNames, res.Subresources, res.SelectableFields)
	}
	cases := []struct {
		gvr        schema.GroupVersionResource
		kind       string
		namespaced bool
		status     bool
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", true, true},
		{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false, true},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true, false},
		{schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, "Endpoints", true, false},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", true, true},
		{schema.GroupVersionResource{Group: "rbac.authorization.platform.io", Version: "v1", Resource: "clusterroles"}, "ClusterRole", false, false},
		{schema.GroupVersionResource{Group: "networking.platform.io", Version: "v1", Resource: "ingresses"}, "Ingress", true, true},
		{schema.GroupVersionResource{Group: "apiextensions.platform.io", Version: "v1", Resource: "customresourcedefinitions"}, "CustomResourceDefinition", false, true},
		{schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "PodDisruptionBudget", true, true},
	}
	for _, c := range cases {
		res, ok := r.Resource(c.gvr)
		if !ok {
			t.Errorf("%s not served", c.gvr)
			continue
		}
		if res.Kind != c.kind || res.Namespaced != c.namespaced || res.HasStatus != c.status || res.ListKind != c.kind+"List" {
			t.Errorf("%s: kind %s namespaced %v status %v listKind %s", c.gvr, res.Kind, res.Namespaced, res.HasStatus, res.ListKind)
		}
		gvk := res.GroupVersionKind()
		if !r.Scheme.Recognizes(gvk) || !r.Scheme.Recognizes(res.GroupVersion().WithKind(res.ListKind)) {
			t.Errorf("scheme does not know %s or its list", gvk)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "policy", Version: "v1", Resource: "evictions"},
	} {
		if _, ok := r.Resource(gvr); ok {
			t.Errorf("%s must not be served", gvr)
		}
	}
	if res, ok := r.ForObject(&rbacv1.Role{}); !ok || res.Group != "rbac.authorization.platform.io" {
		t.Errorf("ForObject(Role) = %v, %v", res, ok)
	}
	if g, ok := r.Groups(), true; !ok || g[0].Name != "" {
		t.Errorf("core group must come first, got %q", g[0].Name)
	}
}

// The authentication group serves what upstream 1.33 serves: TokenReview and SelfSubjectReview in
// v1, SelfSubjectReview alone in v1beta1 (upstream stopped serving v1beta1 TokenReview in 1.22;
// the spec's v1beta1 TokenReview is the token webhook's wire format, not a served resource).
func TestAuthenticationVersions(t *testing.T) {
	r := mustNew(t, "")
	auth := naming.Group("authentication.k8s.io")
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"v1", []string{"selfsubjectreviews", "tokenreviews"}},
		{"v1beta1", []string{"selfsubjectreviews"}},
	} {
		gv, ok := r.GroupVersion(schema.GroupVersion{Group: auth, Version: tc.version})
		if !ok {
			t.Errorf("%s/%s not served", auth, tc.version)
			continue
		}
		var got []string
		for _, res := range gv.Resources {
			got = append(got, res.Resource)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s/%s resources %v, want %v", auth, tc.version, got, tc.want)
		}
	}
	if res, ok := r.Resource(schema.GroupVersionResource{Group: auth, Version: "v1beta1", Resource: "tokenreviews"}); ok {
		t.Errorf("%s/v1beta1 tokenreviews served: %+v", auth, res)
	}
	if res, ok := r.ForObject(&authenticationv1beta1.TokenReview{}); ok {
		t.Errorf("a v1beta1 TokenReview object maps to a served resource: %s", res.GroupVersionResource)
	}
	if res, ok := r.ForObject(&authenticationv1.TokenReview{}); !ok || res.GroupVersionResource != (schema.GroupVersionResource{Group: auth, Version: "v1", Resource: "tokenreviews"}) {
		t.Errorf("ForObject(v1 TokenReview) = %v, %v; want %s/v1 tokenreviews", res, ok, auth)
	}
}

func TestFields(t *testing.T) {
	r := mustNew(t, "")
	pods, _ := r.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	p := &corev1.Pod{}
	p.Name, p.Namespace, p.Spec.NodeName, p.Status.Phase = "a", "ns", "node1", corev1.PodRunning
	f := pods.Fields(p)
	if f["metadata.name"] != "a" || f["metadata.namespace"] != "ns" || f["spec.nodeName"] != "node1" || f["status.phase"] != "Running" {
		t.Errorf("pod fields = %v", f)
	}
	if !pods.FieldSelectable("spec.nodeName") || pods.FieldSelectable("spec.containers") {
		t.Error("FieldSelectable wrong for pods")
	}
	ns, _ := r.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if ns.FieldSelectable("metadata.namespace") {
		t.Error("cluster-scoped types have no metadata.namespace field")
	}
}

func TestRuntimeConfig(t *testing.T) {
	r := mustNew(t, "batch/v1=false,apps/v1/daemonsets=false")
	if _, ok := r.Group("batch"); ok {
		t.Error("batch/v1=false must remove the group")
	}
	if _, ok := r.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}); ok {
		t.Error("apps/v1/daemonsets=false must remove daemonsets")
	}
	if _, ok := r.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}); !ok {
		t.Error("deployments must stay")
	}
	r = mustNew(t, "api/all=false,v1")
	if len(r.Groups()) != 1 || r.Groups()[0].Name != "" {
		t.Errorf("api/all=false,v1 must leave only the core group, got %d groups", len(r.Groups()))
	}
	for _, bad := range []string{"nosuch/v1", "apps/v1=maybe", "a/b/c/d"} {
		cfg, err := ParseRuntimeConfig(bad)
		if err == nil {
			_, err = New(cfg)
		}
		if err == nil {
			t.Errorf("--runtime-config=%s accepted", bad)
		}
	}
}
