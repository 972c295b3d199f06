package rbac

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// ruleCase is one request against the fixture with upstream's expected decision.
type ruleCase struct {
	rule  string // the upstream rule the case checks
	at    authorizer.Attributes
	allow bool
	// reason is the expected allow reason ("" for NoOpinion: RBAC explains no refusal).
	reason string
	// nameIndependent is whether the decision holds for every object name.
	nameIndependent bool
}

func ruleCases() []ruleCase {
	const (
		aliceReason   = `RBAC: allowed by ClusterRoleBinding "alice-pods" of ClusterRole "pod-reader" to User "alice"`
		healthReason  = `RBAC: allowed by ClusterRoleBinding "health" of ClusterRole "health" to Group "system:authenticated"`
		adminsReason  = `RBAC: allowed by ClusterRoleBinding "admins" of ClusterRole "everything" to Group "admins"`
		scalerReason  = `RBAC: allowed by ClusterRoleBinding "erin-scaler" of ClusterRole "scaler" to User "erin"`
		deployReason  = `RBAC: allowed by ClusterRoleBinding "erin-deploy" of ClusterRole "deploy-all" to User "erin"`
		readersReason = `RBAC: allowed by RoleBinding "readers/team-a" of Role "secret-named" to Group "readers"`
		bobCMReason   = `RBAC: allowed by RoleBinding "bob-cm/team-a" of Role "cm-editor" to User "bob"`
		hankReason    = `RBAC: allowed by ClusterRoleBinding "hank-secrets" of ClusterRole "named-lister" to User "hank"`
	)
	return []ruleCase{
		// Verbs.
		{rule: "verbs: a listed verb matches", at: res(alice, "get", "", "pods", "", "default", "p"), allow: true, reason: aliceReason, nameIndependent: true},
		{rule: "verbs: an unlisted verb does not match", at: res(alice, "delete", "", "pods", "", "default", "p"), nameIndependent: true},
		{rule: "verbs: * matches every verb", at: res(erin, "deletecollection", "apps", "deployments", "", "x", ""), allow: true, reason: deployReason, nameIndependent: true},
		{rule: "verbs: * matches special verbs (impersonate)", at: res(root, "impersonate", "", "users", "", "", "someone"), allow: true, reason: adminsReason, nameIndependent: true},
		// API groups.
		{rule: "apiGroups: a listed group matches", at: res(erin, "update", "apps", "deployments", "scale", "x", "d"), allow: true, reason: scalerReason, nameIndependent: true},
		{rule: "apiGroups: an unlisted group does not match", at: res(erin, "update", "batch", "jobs", "scale", "x", "j"), nameIndependent: true},
		{rule: "apiGroups: * matches every group", at: res(frank, "get", "example.com", "widgets", "", "x", "w"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "frank-widgets" of ClusterRole "any-group-widgets" to User "frank"`, nameIndependent: true},
		{rule: `apiGroups: "" is the core group only`, at: res(alice, "get", "apps", "pods", "", "default", "p"), nameIndependent: true},
		// Resources and subresources.
		{rule: "resources: a plain resource matches only the main resource", at: res(alice, "get", "", "pods", "log", "default", "p"), nameIndependent: true},
		{rule: "resources: resource/subresource matches that subresource", at: res(builder, "get", "", "pods", "log", "team-b", "p"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "builder-logs" of ClusterRole "log-reader" to ServiceAccount "builder/team-a"`, nameIndependent: true},
		{rule: "resources: resource/subresource does not match the main resource", at: res(builder, "get", "", "pods", "", "team-b", "p"), nameIndependent: true},
		{rule: "resources: */scale matches the scale subresource of any resource", at: res(erin, "get", "", "replicationcontrollers", "scale", "x", "rc"), allow: true, reason: scalerReason, nameIndependent: true},
		{rule: "resources: */scale does not match other subresources", at: res(erin, "get", "apps", "statefulsets", "status", "x", "s"), nameIndependent: true},
		{rule: "resources: */scale does not match the main resource", at: res(erin, "get", "apps", "statefulsets", "", "x", "s"), nameIndependent: true},
		{rule: "resources: deployments does not match deployments/scale", at: res(erin, "patch", "apps", "deployments", "scale", "x", "d"), nameIndependent: true},
		{rule: "resources: * matches every resource and subresource", at: res(root, "create", "", "pods", "exec", "x", "p"), allow: true, reason: adminsReason, nameIndependent: true},
		// Resource names.
		{rule: "resourceNames: get of a listed name matches", at: res(reader, "get", "", "secrets", "", "team-a", "s1"), allow: true, reason: readersReason},
		{rule: "resourceNames: get of another name does not match", at: res(reader, "get", "", "secrets", "", "team-a", "s3")},
		{rule: "resourceNames: get, list, watch and create of a listed name", at: res(hank, "get", "", "secrets", "", "ns", "s1"), allow: true, reason: hankReason},
		{rule: "resourceNames: list without a name never matches", at: res(hank, "list", "", "secrets", "", "ns", "")},
		{rule: "resourceNames: watch without a name never matches", at: res(hank, "watch", "", "secrets", "", "", "")},
		{rule: "resourceNames: create (no name) never matches", at: res(hank, "create", "", "secrets", "", "ns", "")},
		{rule: "resourceNames: list with a listed name (field selector) matches", at: res(hank, "list", "", "secrets", "", "ns", "s1"), allow: true, reason: hankReason},
		{rule: "resourceNames: a rule without names allows every name (reason from it)", at: res(bob, "get", "", "configmaps", "", "team-a", "app-config"), allow: true, reason: bobCMReason, nameIndependent: true},
		{rule: "resourceNames: a RoleBinding to a ClusterRole with names allows that name", at: res(bob, "delete", "", "configmaps", "", "team-a", "app-config"), allow: true,
			reason: `RBAC: allowed by RoleBinding "bob-named-cm/team-a" of ClusterRole "named-cm" to User "bob"`},
		{rule: "resourceNames: and no other name", at: res(bob, "delete", "", "configmaps", "", "team-a", "other")},
		{rule: "resourceNames: named get on nodes", at: res(gina, "get", "", "nodes", "", "", "n1"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "gina-nodes" of ClusterRole "nodes-named-and-free" to User "gina"`},
		{rule: "resourceNames: named get of another node", at: res(gina, "get", "", "nodes", "", "", "n2")},
		{rule: "resourceNames: unnamed list rule next to the named one", at: res(gina, "list", "", "nodes", "", "", ""), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "gina-nodes" of ClusterRole "nodes-named-and-free" to User "gina"`, nameIndependent: true},
		{rule: "resourceNames: a verb no rule lists is name-independent", at: res(gina, "watch", "", "nodes", "", "", "n1"), nameIndependent: true},
		{rule: `resourceNames: names compare literally ("" matches a request without a name)`, at: res(gina, "list", "", "leases", "", "x", ""), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "gina-leases" of ClusterRole "empty-name" to User "gina"`},
		// Non-resource URLs.
		{rule: "nonResourceURLs: an exact URL matches", at: url(alice, "get", "/healthz"), allow: true, reason: healthReason, nameIndependent: true},
		{rule: "nonResourceURLs: an exact URL does not match a longer path", at: url(alice, "get", "/healthz/etcd"), nameIndependent: true},
		{rule: "nonResourceURLs: a trailing * is a prefix match", at: url(alice, "get", "/logs/kube.log"), allow: true, reason: healthReason, nameIndependent: true},
		{rule: "nonResourceURLs: a trailing * matches the bare prefix", at: url(alice, "get", "/logs/"), allow: true, reason: healthReason, nameIndependent: true},
		{rule: "nonResourceURLs: the prefix is what precedes the *", at: url(alice, "get", "/logs"), nameIndependent: true},
		{rule: "nonResourceURLs: several trailing * are one prefix", at: url(alice, "post", "/metricsfoo/bar"), allow: true, reason: healthReason, nameIndependent: true},
		{rule: "nonResourceURLs: the verb must match too", at: url(alice, "post", "/healthz"), nameIndependent: true},
		{rule: "nonResourceURLs: * matches every path", at: url(frank, "get", "/anything/at/all"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "frank-urls" of ClusterRole "all-urls" to User "frank"`, nameIndependent: true},
		{rule: "nonResourceURLs: resource rules never match non-resource requests", at: url(erin, "get", "/apis"), nameIndependent: true},
		{rule: "nonResourceURLs: non-resource rules never match resource requests", at: res(frank, "get", "", "pods", "", "x", "p"), nameIndependent: true},
		{rule: "nonResourceURLs: a rule with both fields matches a URL", at: url(gina, "get", "/events"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "gina-mixed" of ClusterRole "mixed-rule" to User "gina"`, nameIndependent: true},
		{rule: "nonResourceURLs: a rule with both fields matches its resources", at: res(gina, "get", "", "events", "", "x", "e"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "gina-mixed" of ClusterRole "mixed-rule" to User "gina"`, nameIndependent: true},
		{rule: "wildcards: * in every field allows any non-resource URL", at: url(root, "delete", "/whatever"), allow: true, reason: adminsReason, nameIndependent: true},
		// Subjects.
		{rule: "subjects: a Group subject matches a member", at: res(root, "get", "", "secrets", "", "", "s"), allow: true, reason: adminsReason, nameIndependent: true},
		{rule: "subjects: ServiceAccount without namespace in a RoleBinding means the binding's namespace", at: res(deployer, "update", "apps", "deployments", "scale", "team-a", "d"), allow: true,
			reason: `RBAC: allowed by RoleBinding "deployer/team-a" of Role "scale-role" to ServiceAccount "deployer/team-a"`, nameIndependent: true},
		{rule: "subjects: that ServiceAccount subject does not name the same name in another namespace", at: res(deployerB, "update", "apps", "deployments", "scale", "team-a", "d"), nameIndependent: true},
		{rule: "subjects: ServiceAccount without namespace in a ClusterRoleBinding names nobody", at: res(nobodySA, "get", "", "pods", "log", "x", "p"), nameIndependent: true},
		{rule: "subjects: ServiceAccount of another namespace bound in a RoleBinding", at: res(robot, "get", "", "pods", "", "team-a", "p"), allow: true,
			reason: `RBAC: allowed by RoleBinding "other-sa/team-a" of ClusterRole "pod-reader" to ServiceAccount "robot/team-b"`, nameIndependent: true},
		{rule: "subjects: unknown subject kinds name nobody", at: res(alice, "get", "", "secrets", "", "", "s"), nameIndependent: true},
		{rule: `subjects: User "*" is not a wildcard`, at: res(carol, "get", "", "secrets", "", "x", "s"), nameIndependent: true},
		{rule: "subjects: a user named in User and Group subjects of one binding", at: res(dave, "get", "", "pods", "log", "team-b", "p"), allow: true,
			reason: `RBAC: allowed by RoleBinding "dave-logs/team-b" of ClusterRole "log-reader" to User "dave"`, nameIndependent: true},
		// Anonymous and unauthenticated.
		{rule: "anonymous: system:anonymous needs an explicit grant (User)", at: url(anonymous, "get", "/version"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "anonymous-version" of ClusterRole "version" to User "system:anonymous"`, nameIndependent: true},
		{rule: "anonymous: system:unauthenticated needs an explicit grant (Group)", at: url(anonymous, "get", "/livez"), allow: true,
			reason: `RBAC: allowed by ClusterRoleBinding "unauthenticated-livez" of ClusterRole "livez" to Group "system:unauthenticated"`, nameIndependent: true},
		{rule: "anonymous: system:authenticated grants do not cover anonymous", at: url(anonymous, "get", "/healthz"), nameIndependent: true},
		{rule: `anonymous: User "*" and Group "*" do not cover anonymous`, at: res(anonymous, "get", "", "pods", "", "x", "p"), nameIndependent: true},
		// Roles and bindings.
		{rule: "bindings: a ClusterRoleBinding to a Role grants nothing", at: res(carol, "get", "", "configmaps", "", "team-a", "c"), nameIndependent: true},
		{rule: "bindings: a ClusterRoleBinding to a missing ClusterRole grants nothing", at: res(mallory, "get", "", "pods", "", "x", "p"), nameIndependent: true},
		{rule: "bindings: a RoleBinding to a missing Role grants nothing", at: res(bob, "get", "", "secrets", "", "team-a", "s"), nameIndependent: true},
		{rule: "bindings: a RoleBinding uses the Role of its own namespace only", at: res(bob, "get", "", "configmaps", "", "team-b", "c"), nameIndependent: true},
		{rule: "bindings: a RoleBinding to a ClusterRole applies in its namespace", at: res(dave, "get", "", "pods", "", "team-a", "p"), allow: true,
			reason: `RBAC: allowed by RoleBinding "dave-pods/team-a" of ClusterRole "pod-reader" to User "dave"`, nameIndependent: true},
		{rule: "bindings: a RoleBinding to a ClusterRole does not apply in other namespaces", at: res(dave, "get", "", "pods", "", "team-b", "p"), nameIndependent: true},
		{rule: "bindings: a RoleBinding does not apply to cluster-wide requests", at: res(dave, "list", "", "pods", "", "", ""), nameIndependent: true},
		{rule: "bindings: RoleBindings do not apply to cluster requests (no namespace)", at: res(bob, "list", "", "configmaps", "", "", ""), nameIndependent: true},
		{rule: "bindings: ClusterRoleBindings apply to every namespace", at: res(alice, "list", "", "pods", "", "team-a", ""), allow: true, reason: aliceReason, nameIndependent: true},
		{rule: "bindings: ClusterRoleBindings apply to cluster requests", at: res(alice, "list", "", "pods", "", "", ""), allow: true, reason: aliceReason, nameIndependent: true},
	}
}

// TestRules runs every case through the Rego policy and through the reference reading of the
// objects, and checks both against upstream's expected decision.
func TestRules(t *testing.T) {
	s := fixture()
	a := newAuthorizer(t, s)
	for _, c := range ruleCases() {
		t.Run(c.rule, func(t *testing.T) {
			got, err := a.Authorize(context.Background(), c.at)
			if err != nil {
				t.Fatal(err)
			}
			ref := refAuthorize(s, c.at)
			if ref.allowed != c.allow {
				t.Errorf("reference: allowed=%v, want %v", ref.allowed, c.allow)
			}
			if want := decisionOf(c.allow); got.Decision != want {
				t.Errorf("rego: decision %v, want %v", got.Decision, want)
			}
			if got.Reason != c.reason {
				t.Errorf("rego: reason %q, want %q", got.Reason, c.reason)
			}
			if c.allow && !ref.reasons[c.reason] {
				t.Errorf("reference: %q is not among the allowing bindings %v", c.reason, ref.reasons)
			}
			if ref.nameIndependent != c.nameIndependent {
				t.Errorf("reference: nameIndependent=%v, want %v", ref.nameIndependent, c.nameIndependent)
			}
			if got.NameIndependent != c.nameIndependent {
				t.Errorf("rego: nameIndependent=%v, want %v", got.NameIndependent, c.nameIndependent)
			}
			if got.Uncacheable {
				t.Error("rego: a decision from RBAC data is cacheable")
			}
		})
	}
}

func decisionOf(allow bool) authorizer.Decision {
	if allow {
		return authorizer.Allow
	}
	return authorizer.NoOpinion
}

// TestRulesRandomized compares the policy with the reference on generated clusters and
// requests drawn from a small vocabulary, so wildcards, names, subresources and subjects collide
// often. NameIndependent is checked against the brute-force answer on every request.
func TestRulesRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 33))
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		s := randomSnapshot(rng)
		if err := a.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			at := randomRequest(rng)
			got, err := a.Authorize(context.Background(), at)
			if err != nil {
				t.Fatal(err)
			}
			ref := refAuthorize(s, at)
			if (got.Decision == authorizer.Allow) != ref.allowed || got.NameIndependent != ref.nameIndependent ||
				(ref.allowed && !ref.reasons[got.Reason]) || (!ref.allowed && got.Reason != "") {
				t.Fatalf("round %d request %d %+v user %+v:\nrego %+v\nreference %+v", round, i, at, *at.User, got, ref)
			}
		}
	}
}

var (
	vocabVerbs     = []string{"get", "list", "create", "update", "*"}
	vocabGroups    = []string{"", "apps", "*"}
	vocabResources = []string{"pods", "pods/log", "deployments", "deployments/scale", "*/scale", "*", "secrets"}
	vocabNames     = []string{"a", "b", ""}
	vocabURLs      = []string{"/healthz", "/api*", "/apis/*", "*", "/version", "/a**"}
	vocabPaths     = []string{"/healthz", "/healthz/x", "/api", "/apis", "/apis/apps", "/version", "/a", "/", ""}
	vocabUsers     = []string{"u1", "u2", "system:serviceaccount:n1:sa", "system:serviceaccount:n2:sa", "system:anonymous"}
	vocabUserGrps  = []string{"g1", "g2", "system:authenticated", "system:unauthenticated"}
	vocabNS        = []string{"n1", "n2"}
)

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }

func pickSome(rng *rand.Rand, from []string, max int) []string {
	n := rng.IntN(max + 1)
	var out []string
	for range n {
		if v := pick(rng, from); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func randomRules(rng *rand.Rand) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for range 1 + rng.IntN(3) {
		r := rbacv1.PolicyRule{Verbs: pickSome(rng, vocabVerbs, 2)}
		if rng.IntN(4) == 0 {
			r.NonResourceURLs = pickSome(rng, vocabURLs, 2)
		} else {
			r.APIGroups = pickSome(rng, vocabGroups, 2)
			r.Resources = pickSome(rng, vocabResources, 2)
			if rng.IntN(3) == 0 {
				r.ResourceNames = pickSome(rng, vocabNames, 2)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

func randomSubjects(rng *rand.Rand) []rbacv1.Subject {
	var out []rbacv1.Subject
	for range 1 + rng.IntN(2) {
		switch rng.IntN(4) {
		case 0:
			out = append(out, userSubject(pick(rng, vocabUsers)))
		case 1:
			out = append(out, groupSubject(pick(rng, vocabUserGrps)))
		case 2:
			out = append(out, saSubject(pick(rng, append([]string{""}, vocabNS...)), "sa"))
		default:
			out = append(out, userSubject(pick(rng, []string{"*", "u1"})))
		}
	}
	return out
}

func randomSnapshot(rng *rand.Rand) Snapshot {
	var s Snapshot
	for i := range 4 {
		s.ClusterRoles = append(s.ClusterRoles, clusterRole(fmt.Sprint("cr", i), randomRules(rng)...))
	}
	for _, ns := range vocabNS {
		for i := range 2 {
			s.Roles = append(s.Roles, role(ns, fmt.Sprint("r", i), randomRules(rng)...))
		}
	}
	refs := [][2]string{{"ClusterRole", "cr0"}, {"ClusterRole", "cr1"}, {"ClusterRole", "cr2"}, {"ClusterRole", "cr3"},
		{"ClusterRole", "missing"}, {"Role", "r0"}, {"Role", "r1"}, {"Role", "missing"}}
	for i := range 3 {
		ref := refs[rng.IntN(len(refs))]
		s.ClusterRoleBindings = append(s.ClusterRoleBindings, crb(fmt.Sprint("crb", i), ref[0], ref[1], randomSubjects(rng)...))
	}
	for i := range 5 {
		ref := refs[rng.IntN(len(refs))]
		s.RoleBindings = append(s.RoleBindings, rb(pick(rng, vocabNS), fmt.Sprint("rb", i), ref[0], ref[1], randomSubjects(rng)...))
	}
	return s
}

func randomRequest(rng *rand.Rand) authorizer.Attributes {
	u := &authorizer.User{Name: pick(rng, vocabUsers), Groups: pickSome(rng, vocabUserGrps, 2)}
	if rng.IntN(4) == 0 {
		return url(u, pick(rng, []string{"get", "post"}), pick(rng, vocabPaths))
	}
	resource, sub := pick(rng, []string{"pods", "deployments", "secrets", "nodes"}), ""
	if rng.IntN(2) == 0 {
		sub = pick(rng, []string{"log", "scale", "status"})
	}
	return res(u, pick(rng, []string{"get", "list", "create", "update", "delete"}), pick(rng, []string{"", "apps", "batch"}),
		resource, sub, pick(rng, []string{"", "n1", "n2"}), pick(rng, []string{"", "a", "b", "c"}))
}
