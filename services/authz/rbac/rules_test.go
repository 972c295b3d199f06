package rbac

import (
	"context"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"platform.io/services/authz/authorizer"
)

func ar(verbs, groups, resources []string) authorizer.Rule {
	return authorizer.Rule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func arNamed(verbs, groups, resources, names []string) authorizer.Rule {
	return authorizer.Rule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func arURL(verbs, urls []string) authorizer.Rule {
	return authorizer.Rule{Verbs: verbs, NonResourceURLs: urls}
}

// TestRulesFor checks the lists SelfSubjectRulesReview shows: the rules of every applicable
// binding (cluster bindings, then the namespace's), each binding once, resource and non-resource
// rules apart, complete.
func TestRulesFor(t *testing.T) {
	a := newAuthorizer(t, fixture())
	health := []authorizer.Rule{arURL(l("get"), l("/healthz", "/readyz")), arURL(l("get"), l("/logs/*")), arURL(l("get", "post"), l("/metrics**"))}
	cases := []struct {
		rule        string
		user        *authorizer.User
		namespace   string
		resource    []authorizer.Rule
		nonResource []authorizer.Rule
	}{
		{rule: "RoleBindings of the namespace (to a Role and to a ClusterRole) after ClusterRoleBindings; missing roles list nothing",
			user: bob, namespace: "team-a",
			resource:    []authorizer.Rule{ar(l("get", "list", "create", "update"), l(""), l("configmaps")), arNamed(l("get", "update", "delete"), l(""), l("configmaps"), l("app-config"))},
			nonResource: health},
		{rule: `namespace "": ClusterRoleBindings only`, user: bob, namespace: "", nonResource: health},
		{rule: "a Role of another namespace lists nothing", user: bob, namespace: "team-b", nonResource: health},
		{rule: "a binding naming the user twice (User and Group) is listed once", user: dave, namespace: "team-b",
			resource: []authorizer.Rule{ar(l("get"), l(""), l("pods/log"))}, nonResource: health},
		{rule: "a rule with resources and URLs is listed in both lists", user: gina, namespace: "",
			resource: []authorizer.Rule{
				arNamed(l("list"), l(""), l("leases"), l("")),
				ar(l("get"), l(""), l("events")),
				arNamed(l("get"), l(""), l("nodes"), l("n1")),
				ar(l("list"), l(""), l("nodes")),
			},
			nonResource: []authorizer.Rule{arURL(l("get"), l("/events"))}},
		{rule: "service account subjects", user: deployer, namespace: "team-a", resource: []authorizer.Rule{ar(l("update"), l("apps"), l("deployments/scale"))}},
		{rule: "no bindings: empty lists", user: &authorizer.User{Name: "nobody"}, namespace: "team-a"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			resource, nonResource, incomplete, err := a.RulesFor(context.Background(), c.user, c.namespace)
			if err != nil {
				t.Fatal(err)
			}
			if incomplete {
				t.Error("RBAC lists every rule it allows: incomplete must be false")
			}
			if !reflect.DeepEqual(resource, c.resource) {
				t.Errorf("resource rules\n got %v\nwant %v", resource, c.resource)
			}
			if !reflect.DeepEqual(nonResource, c.nonResource) {
				t.Errorf("non-resource rules\n got %v\nwant %v", nonResource, c.nonResource)
			}
		})
	}

	// The lists are the caller's: changing them does not change the next answer.
	resource, _, _, _ := a.RulesFor(context.Background(), bob, "team-a")
	resource[0].Verbs[0] = "changed"
	again, _, _, _ := a.RulesFor(context.Background(), bob, "team-a")
	if again[0].Verbs[0] != "get" {
		t.Error("RulesFor returned the index's own slices")
	}
}

// TestCovers checks upstream's escalation check: which atoms of the rules a user wants to grant
// no single rule the user holds in that namespace covers.
func TestCovers(t *testing.T) {
	a := newAuthorizer(t, fixture())
	cases := []struct {
		rule      string
		user      *authorizer.User
		namespace string
		grant     []authorizer.Rule
		missing   []authorizer.Rule
	}{
		{rule: "a user may grant the rules it holds", user: bob, namespace: "team-a",
			grant: []authorizer.Rule{ar(l("get", "list"), l(""), l("configmaps")), arNamed(l("delete"), l(""), l("configmaps"), l("app-config"))}},
		{rule: "rules it does not hold are missing, split into atoms", user: bob, namespace: "team-a",
			grant:   []authorizer.Rule{ar(l("get", "delete"), l(""), l("configmaps", "secrets"))},
			missing: []authorizer.Rule{ar(l("delete"), l(""), l("configmaps")), ar(l("get"), l(""), l("secrets")), ar(l("delete"), l(""), l("secrets"))}},
		{rule: `namespace "" counts ClusterRoleBindings only`, user: bob, namespace: "",
			grant: []authorizer.Rule{ar(l("get"), l(""), l("configmaps"))}, missing: []authorizer.Rule{ar(l("get"), l(""), l("configmaps"))}},
		{rule: "* in every field covers everything, URLs included", user: root, namespace: "",
			grant: []authorizer.Rule{ar(l("*"), l("*"), l("*")), arNamed(l("get"), l("apps"), l("deployments/scale"), l("x")), arURL(l("*"), l("*"))}},
		{rule: "*/scale covers the scale subresource of any resource, not other verbs", user: erin, namespace: "x",
			grant:   []authorizer.Rule{ar(l("get", "list"), l("apps"), l("deployments/scale", "statefulsets/scale"))},
			missing: []authorizer.Rule{ar(l("list"), l("apps"), l("deployments/scale")), ar(l("list"), l("apps"), l("statefulsets/scale"))}},
		{rule: "verb * is covered only by verb *", user: erin, namespace: "x",
			grant:   []authorizer.Rule{ar(l("*"), l("apps"), l("deployments", "statefulsets"))},
			missing: []authorizer.Rule{ar(l("*"), l("apps"), l("statefulsets"))}},
		{rule: "a held rule with names covers those names only", user: reader, namespace: "team-a",
			grant:   []authorizer.Rule{arNamed(l("get"), l(""), l("secrets"), l("s1", "s3")), ar(l("get"), l(""), l("secrets"))},
			missing: []authorizer.Rule{arNamed(l("get"), l(""), l("secrets"), l("s3")), ar(l("get"), l(""), l("secrets"))}},
		{rule: "URLs: exact and prefix owners; * is covered only by a * owner", user: alice, namespace: "",
			grant:   []authorizer.Rule{arURL(l("get"), l("/logs/a", "/healthz", "/healthz/x", "*")), arURL(l("post"), l("/metrics/x"))},
			missing: []authorizer.Rule{arURL(l("get"), l("/healthz/x")), arURL(l("get"), l("*"))}},
		{rule: "resource rules do not cover URLs", user: erin, namespace: "",
			grant: []authorizer.Rule{arURL(l("get"), l("/healthz"))}, missing: []authorizer.Rule{arURL(l("get"), l("/healthz"))}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			missing, err := a.Covers(context.Background(), c.user, c.namespace, c.grant)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(missing, c.missing) {
				t.Errorf("missing\n got %v\nwant %v", missing, c.missing)
			}
		})
	}
}

// TestEscalationMessage checks upstream's 403 text: the user and its groups, then the missing
// rules compacted (verbs of one group, resource and name merged) in upstream's rule format, one
// per line, sorted.
func TestEscalationMessage(t *testing.T) {
	u := &authorizer.User{Name: "alice", Groups: []string{"g1", "g2"}}
	missing := []authorizer.Rule{
		ar(l("get"), l("apps"), l("deployments")),
		arURL(l("get"), l("/healthz")),
		ar(l("list"), l("apps"), l("deployments")),
		arNamed(l("get"), l(""), l("pods"), l("x")),
		arNamed(l("update"), l(""), l("pods"), l("x")),
		arNamed(l("get"), l(""), l("pods"), l("y")),
		ar(l("get"), l("apps"), l("deployments")),
	}
	want := `user "alice" (groups=["g1" "g2"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], ResourceNames:["x"], Verbs:["get" "update"]}
{APIGroups:[""], Resources:["pods"], ResourceNames:["y"], Verbs:["get"]}
{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list" "get"]}
{NonResourceURLs:["/healthz"], Verbs:["get"]}`
	if got := EscalationMessage(u, missing); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got, want := EscalationMessage(&authorizer.User{Name: "bob"}, []authorizer.Rule{ar(l("get"), l("apps"), l("deployments"))}),
		`user "bob" (groups=[]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// End to end: what Covers reports for a user renders as upstream's message.
	a := newAuthorizer(t, fixture())
	missing, err := a.Covers(context.Background(), bob, "team-a", []authorizer.Rule{ar(l("get", "list", "watch"), l("", "apps"), l("configmaps", "deployments"))})
	if err != nil {
		t.Fatal(err)
	}
	want = `user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["configmaps"], Verbs:["watch"]}
{APIGroups:[""], Resources:["deployments"], Verbs:["get" "list" "watch"]}
{APIGroups:["apps"], Resources:["configmaps"], Verbs:["get" "list" "watch"]}
{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list" "watch"]}`
	if got := EscalationMessage(bob, missing); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Roles written with upstream's group names ("rbac.authorization.k8s.io", as manifests made for
// upstream and kubectl's typed commands carry them) grant on the groups Platform serves, and the
// escalation check reads them the same way.
func TestUpstreamGroupNames(t *testing.T) {
	a := newAuthorizer(t, Snapshot{
		ClusterRoles:        []*rbacv1.ClusterRole{clusterRole("rbac-reader", rule(l("get"), l("rbac.authorization.k8s.io", "rbac.authorization.platform.io"), l("roles")))},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb("b", "ClusterRole", "rbac-reader", userSubject("ann"))},
	})
	ann := &authorizer.User{Name: "ann"}
	res, err := a.Authorize(context.Background(), authorizer.Attributes{User: ann, Verb: "get", ResourceRequest: true, APIGroup: "rbac.authorization.platform.io", Resource: "roles", Namespace: "x", Name: "r"})
	if err != nil || res.Decision != authorizer.Allow {
		t.Fatalf("upstream group name in a rule: %v, %v", res, err)
	}
	missing, err := a.Covers(context.Background(), ann, "x", []authorizer.Rule{{Verbs: l("get"), APIGroups: l("rbac.authorization.k8s.io"), Resources: l("roles")}})
	if err != nil || len(missing) != 0 {
		t.Fatalf("escalation check with the upstream name: missing %v, %v", missing, err)
	}
	res2, _, _, _ := a.RulesFor(context.Background(), ann, "x")
	if len(res2) != 1 || len(res2[0].APIGroups) != 1 || res2[0].APIGroups[0] != "rbac.authorization.platform.io" {
		t.Errorf("rules listed: %+v", res2)
	}
}
