package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"platform.io/libs/naming"
)

// Spec 000 "API groups and enabling" 1 and the renamed groups: client-go's discovery client and
// the RESTMapper built from it (what dynamic clients, kubectl and Helm use to turn kinds and short
// names into resources) see the served groups, scopes and short names.
func TestDiscoveryRESTMapper(t *testing.T) {
	s := useShared(t)
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig(t, s, "e2e-discovery"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil || v.Major == "" || v.GitVersion == "" {
		t.Errorf("server version %+v: %v", v, err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		served[g.Name] = true
		if naming.Group(g.Name) != g.Name {
			t.Errorf("group %s is served under its upstream name in the %s naming profile", g.Name, naming.ProfileName())
		}
	}
	for _, g := range []string{"", "apps", "batch", "autoscaling", "policy", clusterRolesGVR.Group} {
		if !served[g] {
			t.Errorf("discovery lacks group %q", g)
		}
	}

	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dc, nil)
	for _, c := range []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
		{clusterRolesGVR.GroupVersion().WithKind("ClusterRole"), "clusterroles", false},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
	} {
		m, err := mapper.RESTMapping(c.gvk.GroupKind(), c.gvk.Version)
		if err != nil {
			t.Errorf("RESTMapping(%v): %v", c.gvk, err)
			continue
		}
		if m.Resource != c.gvk.GroupVersion().WithResource(c.resource) || (m.Scope.Name() == "namespace") != c.namespaced {
			t.Errorf("RESTMapping(%v) = %v scope %s", c.gvk, m.Resource, m.Scope.Name())
		}
	}
	for short, want := range map[string]schema.GroupVersionResource{
		"cm":     {Version: "v1", Resource: "configmaps"},
		"deploy": {Group: "apps", Version: "v1", Resource: "deployments"},
		"ns":     {Version: "v1", Resource: "namespaces"},
	} {
		got, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: short})
		if err != nil || got != want {
			t.Errorf("short name %s: %v %v, want %v", short, got, err, want)
		}
	}
}
