package admission

import (
	"testing"

	admissionv1 "platform.io/proto/admission/v1"
)

func TestResourceMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, resource, sub string
		want                   bool
	}{
		{"*", "pods", "", true},
		{"*", "pods", "status", false},
		{"*/*", "pods", "", true},
		{"*/*", "pods", "status", true},
		{"pods", "pods", "", true},
		{"pods", "pods", "status", false},
		{"pods", "services", "", false},
		{"pods/*", "pods", "status", true},
		{"pods/*", "pods", "", false},
		{"*/status", "pods", "status", true},
		{"*/status", "pods", "", false},
		{"*/status", "pods", "scale", false},
		{"pods/status", "pods", "status", true},
		{"pods/status", "pods", "ephemeralcontainers", false},
		{"deployments/scale", "deployments", "scale", true},
	} {
		if got := resourceMatches(c.pattern, c.resource, c.sub); got != c.want {
			t.Errorf("resourceMatches(%q, %q, %q) = %v, want %v", c.pattern, c.resource, c.sub, got, c.want)
		}
	}
}

func TestMatches(t *testing.T) {
	set := &admissionv1.InterestSet{
		Rules: []*admissionv1.InterestRule{
			{Operations: []string{"CREATE"}, ApiGroups: []string{""}, Resources: []string{"pods"}, Scope: "Namespaced"},
			{Operations: []string{"*"}, ApiGroups: []string{"apps"}, Resources: []string{"deployments/scale"}},
			{Operations: []string{"UPDATE"}, ApiGroups: []string{"*"}, Resources: []string{"*"}, UserGroups: []string{"system:nodes"}},
			{Operations: []string{"CREATE"}, ApiGroups: []string{""}, Resources: []string{"namespaces"}, Scope: "Cluster"},
			{Operations: []string{"CREATE"}, ApiGroups: []string{""}, Resources: []string{"configmaps"}, ValidateOnly: true},
		},
		Namespaces:      []string{"quota"},
		OwnerReferences: true,
	}
	ns := map[string]bool{"quota": true}
	for _, c := range []struct {
		name string
		req  Request
		want bool
	}{
		{"pod create", Request{Operation: "CREATE", Resource: "pods", Namespaced: true, Namespace: "a"}, true},
		{"pod update", Request{Operation: "UPDATE", Resource: "pods", Namespaced: true, Namespace: "a"}, false},
		{"pod status create", Request{Operation: "CREATE", Resource: "pods", Subresource: "status", Namespaced: true, Namespace: "a"}, false},
		{"scale in apps", Request{Operation: "UPDATE", Group: "apps", Resource: "deployments", Subresource: "scale", Namespaced: true, Namespace: "a"}, true},
		{"deployment itself", Request{Operation: "UPDATE", Group: "apps", Resource: "deployments", Namespaced: true, Namespace: "a"}, false},
		{"node user updates", Request{Operation: "UPDATE", Group: "x", Resource: "things", UserGroups: []string{"system:authenticated", "system:nodes"}}, true},
		{"other user updates", Request{Operation: "UPDATE", Group: "x", Resource: "things", UserGroups: []string{"system:authenticated"}}, false},
		{"cluster scope rule, namespaced resource", Request{Operation: "CREATE", Resource: "namespaces", Namespaced: true, Namespace: "a"}, false},
		{"cluster scope rule", Request{Operation: "CREATE", Resource: "namespaces"}, true},
		{"watched namespace", Request{Operation: "DELETE", Resource: "configmaps", Namespaced: true, Namespace: "quota"}, true},
		{"owner references", Request{Operation: "UPDATE", Resource: "configmaps", Namespaced: true, Namespace: "a", OwnerReferences: true}, true},
		{"owner references, mutating", Request{Operation: "UPDATE", Resource: "configmaps", Namespaced: true, Namespace: "a", OwnerReferences: true, Mutating: true}, true},
		{"validate-only rule, validating", Request{Operation: "CREATE", Resource: "configmaps", Namespaced: true, Namespace: "a"}, true},
		{"validate-only rule, mutating", Request{Operation: "CREATE", Resource: "configmaps", Namespaced: true, Namespace: "a", Mutating: true}, false},
		{"watched namespace, mutating", Request{Operation: "CREATE", Resource: "configmaps", Namespaced: true, Namespace: "quota", Mutating: true}, true},
		{"pod create, mutating", Request{Operation: "CREATE", Resource: "pods", Namespaced: true, Namespace: "a", Mutating: true}, true},
	} {
		if got := matches(set, ns, c.req); got != c.want {
			t.Errorf("%s: matches = %v, want %v", c.name, got, c.want)
		}
	}
}
