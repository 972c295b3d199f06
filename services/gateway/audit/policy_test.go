package audit

import (
	"slices"
	"strings"
	"testing"

	"platform.io/libs/naming"
	"platform.io/services/gateway/auth"
)

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
omitManagedFields: true
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/status", "*/scale"]
  omitManagedFields: false
- level: Request
  userGroups: ["ops"]
  resources:
  - group: "apps"
    resources: ["deployments"]
    resourceNames: ["web"]
- level: Metadata
  namespaces: ["kube-system", ""]
  omitStages: [ResponseStarted]
- level: Request
  resources:
  - group: ""
    resources: ["configmaps/*"]
- level: Metadata
  nonResourceURLs: ["/metrics"]
`

func res(user *auth.User, verb, group, resource, sub, ns, name string) Attributes {
	return Attributes{User: user, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

// Upstream's matching: the first rule whose every set field matches decides; resources and
// namespaces only match resource requests, non-resource URLs only the others; subresource
// patterns; resourceNames; omitStages is the union of the policy's and the rule's;
// omitManagedFields of a rule overrides the policy's.
func TestEvaluate(t *testing.T) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	alice := &auth.User{Name: "alice", Groups: []string{"dev"}}
	ops := &auth.User{Name: "bob", Groups: []string{"ops", "system:authenticated"}}
	proxy := &auth.User{Name: "system:kube-proxy"}
	for _, c := range []struct {
		name  string
		attrs Attributes
		want  Level
	}{
		{"user and verb", res(proxy, "watch", "", "pods", "", "a", ""), LevelNone},
		{"user, other verb", res(proxy, "get", "", "pods", "", "a", "p"), LevelNone}, // falls through to nothing
		{"non-resource prefix", Attributes{Verb: "get", Path: "/healthz/ping"}, LevelNone},
		{"non-resource exact", Attributes{User: alice, Verb: "get", Path: "/metrics"}, LevelMetadata},
		{"non-resource exact only", Attributes{User: alice, Verb: "get", Path: "/version/x"}, LevelNone},
		{"subresource", res(alice, "update", "", "pods", "status", "a", "p"), LevelRequestResponse},
		{"main resource is not its subresource", res(alice, "update", "", "pods", "", "a", "p"), LevelNone},
		{"*/scale", res(alice, "patch", "", "replicationcontrollers", "scale", "a", "r"), LevelRequestResponse},
		{"*/scale of another group", res(alice, "patch", "apps", "deployments", "scale", "a", "r"), LevelNone},
		{"group and resource name", res(ops, "update", "apps", "deployments", "", "a", "web"), LevelRequest},
		{"other name", res(ops, "update", "apps", "deployments", "", "a", "api"), LevelNone},
		{"not in the group", res(alice, "update", "apps", "deployments", "", "a", "web"), LevelNone},
		{"namespace", res(alice, "get", "", "secrets", "", "kube-system", "s"), LevelMetadata},
		{"cluster scope is the empty namespace", res(alice, "get", "", "nodes", "", "", "n"), LevelMetadata},
		{"resource/*", res(alice, "get", "", "configmaps", "x", "a", "c"), LevelRequest},
		{"resource/* is not the resource", res(alice, "get", "", "configmaps", "", "a", "c"), LevelNone},
		{"namespaces do not match non-resource requests", Attributes{User: alice, Verb: "get", Path: "/openapi/v2"}, LevelNone},
	} {
		if got := p.Evaluate(c.attrs).Level; got != c.want {
			t.Errorf("%s: level %s, want %s", c.name, got, c.want)
		}
	}
	sub := p.Evaluate(res(alice, "update", "", "pods", "status", "a", "p"))
	if sub.OmitManagedFields || !slices.Equal(sub.OmitStages, []Stage{StageRequestReceived}) {
		t.Errorf("rule override: %+v", sub)
	}
	ns := p.Evaluate(res(alice, "get", "", "secrets", "", "kube-system", "s"))
	if !ns.OmitManagedFields || !slices.Equal(ns.OmitStages, []Stage{StageRequestReceived, StageResponseStarted}) {
		t.Errorf("policy defaults and union: %+v", ns)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, c := range []struct{ policy, want string }{
		{"apiVersion: v1\nkind: Policy\nrules: []", "must be kind Policy of apiVersion"},
		{"apiVersion: audit.k8s.io/v1\nkind: Pod\nrules: []", "must be kind Policy"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything", `rules[0].level: "Everything"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Done]\nrules: []", `omitStages[0]: "Done" is not a stage`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/a]\n  namespaces: [x]", "cannot be combined"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a*b']", "may only end in *"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  resources: [{resources: ['*'], resourceNames: [a]}]", "resourceNames cannot be combined"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  usres: [a]", "unknown field"},
	} {
		_, err := ParsePolicy([]byte(c.policy))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.policy, err, c.want)
		}
	}
	if _, err := ParsePolicy([]byte("apiVersion: " + naming.Group("audit.k8s.io") + "/v1\nkind: Policy\nrules: [{level: Metadata}]")); err != nil {
		t.Errorf("the profile's group: %v", err)
	}
}
