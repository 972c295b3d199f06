package apiserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/gatewaytest"
)

const rbacAPI = "/apis/rbac.authorization.platform.io/v1"

// startRBAC starts a gateway whose authorization service runs RBAC (and Node) as a real cluster
// does, with the default policy reconciled at start.
func startRBAC(t *testing.T) *gatewaytest.Env {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) {
		c.Modes = []string{authz.ModeNode, authz.ModeRBAC}
	}})
}

// waitWithin polls cond until it holds, failing if that takes longer than bound: the bound is the
// guarantee under test (an RBAC change is enforced within a second).
func waitWithin(t *testing.T, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("%s took longer than %v", what, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func role(name string, rules ...map[string]any) map[string]any {
	return map[string]any{"apiVersion": "rbac.authorization.platform.io/v1", "kind": "Role", "metadata": map[string]any{"name": name}, "rules": rules}
}

func rule(verbs, groups, resources []string, names ...string) map[string]any {
	r := map[string]any{"verbs": verbs, "apiGroups": groups, "resources": resources}
	if len(names) > 0 {
		r["resourceNames"] = names
	}
	return r
}

func binding(kind, name, roleKind, roleName string, subjects ...map[string]any) map[string]any {
	return map[string]any{"apiVersion": "rbac.authorization.platform.io/v1", "kind": kind, "metadata": map[string]any{"name": name},
		"roleRef": map[string]any{"apiGroup": "rbac.authorization.platform.io", "kind": roleKind, "name": roleName}, "subjects": subjects}
}

func user(name string) map[string]any {
	return map[string]any{"kind": "User", "apiGroup": "rbac.authorization.platform.io", "name": name}
}

func s(v ...string) []string { return v }

// Spec "Authorization" with RBAC: default deny with upstream's 403; every rule field as upstream
// (verbs, groups, resources and subresources, resourceNames, non-resource URLs); a binding takes
// effect within a second; a denied request never reaches storage.
func TestRBACThroughTheGateway(t *testing.T) {
	e := startRBAC(t)
	alice := e.Client("alice", "dev")
	const cms = "/api/v1/namespaces/default/configmaps"
	msg := call(t, alice, e, "GET", cms, nil).status(t, http.StatusForbidden, "Forbidden")
	if want := `configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "default"`; msg != want {
		t.Errorf("403 message:\n got %q\nwant %q", msg, want)
	}
	// A denied create stores nothing.
	call(t, alice, e, "POST", cms, configMap("denied", nil)).status(t, http.StatusForbidden, "Forbidden")
	do(t, e, "GET", cms+"/denied", nil).status(t, http.StatusNotFound, "NotFound")
	// The default policy: discovery and version for every authenticated user.
	must(t, call(t, alice, e, "GET", "/api", nil), http.StatusOK)
	must(t, call(t, alice, e, "GET", "/version", nil), http.StatusOK)

	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/roles", role("cm-reader",
		rule(s("get", "list", "watch"), s(""), s("configmaps")),
		rule(s("get"), s(""), s("secrets"), "visible"),
		rule(s("update"), s("apps"), s("deployments/scale")),
	)), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "alice-reads", "Role", "cm-reader", user("alice"))), http.StatusCreated)
	took := waitWithin(t, time.Second, "the binding to take effect", func() bool { return call(t, alice, e, "GET", cms, nil).code == http.StatusOK })
	t.Logf("binding enforced after %v", took)

	must(t, do(t, e, "POST", "/api/v1/namespaces/default/secrets", map[string]any{"metadata": map[string]any{"name": "visible"}}), http.StatusCreated)
	must(t, do(t, e, "POST", "/api/v1/namespaces/default/secrets", map[string]any{"metadata": map[string]any{"name": "hidden"}}), http.StatusCreated)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", cms, 200},
		{"GET", "/api/v1/namespaces/kube-other/configmaps", 403}, // another namespace
		{"GET", "/api/v1/configmaps", 403},                       // all namespaces needs a cluster binding
		{"POST", cms, 403},                                       // verb not granted
		{"GET", "/api/v1/namespaces/default/secrets/visible", 200},
		{"GET", "/api/v1/namespaces/default/secrets/hidden", 403},
		{"GET", "/api/v1/namespaces/default/secrets", 403}, // resourceNames never allow a list
		{"PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", 404},
		{"GET", "/apis/apps/v1/namespaces/default/deployments/d", 403}, // the subresource only
		{"GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", 403},
	} {
		var body any
		if c.method == "POST" {
			body = configMap("x", nil)
		}
		if c.method == "PUT" {
			body = map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": map[string]any{"name": "d", "namespace": "default"}, "spec": map[string]any{"replicas": 1}}
		}
		if r := call(t, alice, e, c.method, c.path, body); r.code != c.code {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, r.code, c.code, r.body)
		}
	}
	msg = call(t, alice, e, "GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", nil).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, `cannot get resource "deployments/scale" in API group "apps"`) {
		t.Errorf("subresource 403: %q", msg)
	}

	// A group subject, and a ClusterRole bound in one namespace.
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "deploy-viewer"},
		"rules": []any{rule(s("get", "list"), s("apps"), s("deployments"))}}), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "dev-view", "ClusterRole", "deploy-viewer",
		map[string]any{"kind": "Group", "apiGroup": "rbac.authorization.platform.io", "name": "dev"})), http.StatusCreated)
	waitWithin(t, time.Second, "the group binding to take effect", func() bool {
		return call(t, alice, e, "GET", "/apis/apps/v1/namespaces/default/deployments", nil).code == http.StatusOK
	})
	call(t, alice, e, "GET", "/apis/apps/v1/deployments", nil).status(t, http.StatusForbidden, "Forbidden")

	// Removing the binding removes the permission within a second.
	must(t, do(t, e, "DELETE", rbacAPI+"/namespaces/default/rolebindings/alice-reads", nil), http.StatusOK)
	waitWithin(t, time.Second, "the removal to take effect", func() bool { return call(t, alice, e, "GET", cms, nil).code == http.StatusForbidden })

	// Non-resource URLs: a cluster role with a prefix rule.
	call(t, alice, e, "GET", "/metrics", nil).status(t, http.StatusForbidden, "Forbidden")
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "metrics-reader"},
		"rules": []any{map[string]any{"verbs": s("get"), "nonResourceURLs": s("/metri*")}}}), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/clusterrolebindings", binding("ClusterRoleBinding", "alice-metrics", "ClusterRole", "metrics-reader", user("alice"))), http.StatusCreated)
	waitWithin(t, time.Second, "the metrics grant", func() bool { return call(t, alice, e, "GET", "/metrics", nil).code == http.StatusOK })
}

// Spec "Authorization": anonymous requests are system:anonymous in system:unauthenticated and
// need explicit grants (health and version are granted by the default policy); a bad token is
// 401, never anonymous.
func TestAnonymousWithRBAC(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{
		ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} },
		ConfigureAuthn: func(c *authnConfig) { c.AnonymousAuth = true },
	})
	anon := e.Anonymous()
	must(t, call(t, anon, e, "GET", "/version", nil), http.StatusOK)
	msg := call(t, anon, e, "GET", "/api/v1/namespaces/default/configmaps", nil).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, `User "system:anonymous" cannot list`) {
		t.Errorf("anonymous 403: %q", msg)
	}
	call(t, e.Bearer("not-a-token"), e, "GET", "/version", nil).status(t, http.StatusUnauthorized, "Unauthorized")
	// Discovery and the review APIs are for authenticated users only (system:discovery and
	// system:basic-user are bound to system:authenticated).
	call(t, anon, e, "GET", "/apis", nil).status(t, http.StatusForbidden, "Forbidden")
	call(t, anon, e, "POST", "/apis/authorization.platform.io/v1/selfsubjectaccessreviews",
		`{"spec":{"nonResourceAttributes":{"verb":"get","path":"/readyz"}}}`).status(t, http.StatusForbidden, "Forbidden")
	sar := must(t, do(t, e, "POST", "/apis/authorization.platform.io/v1/subjectaccessreviews",
		`{"spec":{"user":"system:anonymous","groups":["system:unauthenticated"],"nonResourceAttributes":{"verb":"get","path":"/readyz"}}}`), http.StatusCreated)
	if path(sar, "status.allowed") != true {
		t.Errorf("anonymous may read /readyz (system:public-info-viewer): %v", sar["status"])
	}
}

// Escalation prevention (upstream's rules and text): a role may grant only what its writer holds,
// unless the writer may escalate; a binding may reference only a role whose permissions the writer
// holds, unless the writer may bind it. Malformed roles and bindings are 422.
func TestRBACEscalation(t *testing.T) {
	e := startRBAC(t)
	bob := e.Client("bob")
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/roles", role("rbac-editor",
		rule(s("create", "update", "get"), s("rbac.authorization.platform.io"), s("roles", "rolebindings")),
		rule(s("get", "list"), s(""), s("configmaps")),
	)), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "bob-rbac", "Role", "rbac-editor", user("bob"))), http.StatusCreated)
	const roles = rbacAPI + "/namespaces/default/roles"
	waitWithin(t, time.Second, "bob's grant", func() bool { return call(t, bob, e, "GET", roles+"/rbac-editor", nil).code == http.StatusOK })

	// Within his own permissions: allowed.
	must(t, call(t, bob, e, "POST", roles, role("cm-get", rule(s("get"), s(""), s("configmaps")))), http.StatusCreated)
	// Beyond them: 403 with upstream's message, nothing stored.
	msg := call(t, bob, e, "POST", roles, role("secret-get", rule(s("get"), s(""), s("secrets")))).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, `user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) ||
		!strings.Contains(msg, `Resources:["secrets"]`) {
		t.Errorf("escalation message: %q", msg)
	}
	do(t, e, "GET", roles+"/secret-get", nil).status(t, http.StatusNotFound, "NotFound")
	// Binding a role he does not hold: refused; binding one he holds: allowed.
	const bindings = rbacAPI + "/namespaces/default/rolebindings"
	call(t, bob, e, "POST", bindings, binding("RoleBinding", "carol-admin", "ClusterRole", "cluster-admin", user("carol"))).status(t, http.StatusForbidden, "Forbidden")
	must(t, call(t, bob, e, "POST", bindings, binding("RoleBinding", "carol-cm", "Role", "cm-get", user("carol"))), http.StatusCreated)

	// With escalate and bind, both are allowed.
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "escalator"}, "rules": []any{
		rule(s("escalate"), s("rbac.authorization.platform.io"), s("roles")),
		rule(s("bind"), s("rbac.authorization.platform.io"), s("clusterroles"), "cluster-admin"),
	}}), http.StatusCreated)
	must(t, do(t, e, "POST", bindings, binding("RoleBinding", "bob-escalate", "ClusterRole", "escalator", user("bob"))), http.StatusCreated)
	waitWithin(t, time.Second, "escalate to take effect", func() bool {
		return call(t, bob, e, "POST", roles, role("secret-get", rule(s("get"), s(""), s("secrets")))).code == http.StatusCreated
	})
	must(t, call(t, bob, e, "POST", bindings, binding("RoleBinding", "carol-admin", "ClusterRole", "cluster-admin", user("carol"))), http.StatusCreated)

	// Malformed roles and bindings: 422 as upstream.
	for name, body := range map[string]map[string]any{
		"no verbs":       role("bad1", rule([]string{}, s(""), s("pods"))),
		"no resources":   role("bad2", rule(s("get"), s(""), []string{})),
		"no api groups":  role("bad3", map[string]any{"verbs": s("get"), "resources": s("pods")}),
		"urls in a role": role("bad4", map[string]any{"verbs": s("get"), "nonResourceURLs": s("/x")}),
		"role ref kind":  binding("RoleBinding", "bad5", "Pod", "x", user("a")),
		"role ref group": {"apiVersion": "rbac.authorization.platform.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "bad6"}, "roleRef": map[string]any{"apiGroup": "example.com", "kind": "Role", "name": "x"}},
		"subject kind":   binding("RoleBinding", "bad7", "Role", "cm-get", map[string]any{"kind": "Robot", "name": "r"}),
		"bad sa name":    binding("RoleBinding", "bad8", "Role", "cm-get", map[string]any{"kind": "ServiceAccount", "name": "Bad_Name", "namespace": "default"}),
	} {
		p := roles
		if body["kind"] == "RoleBinding" {
			p = bindings
		}
		if r := do(t, e, "POST", p, body); r.code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422: %s", name, r.code, r.body)
		}
	}
	// A required field left out is a 400, as the spec's error table says for every kind.
	do(t, e, "POST", bindings, binding("RoleBinding", "bad9", "Role", "cm-get", map[string]any{"kind": "User", "apiGroup": "rbac.authorization.platform.io"})).
		status(t, http.StatusBadRequest, "BadRequest")
	// roleRef cannot change.
	b := must(t, do(t, e, "GET", bindings+"/carol-cm", nil), http.StatusOK)
	b["roleRef"].(map[string]any)["name"] = "rbac-editor"
	msg = do(t, e, "PUT", bindings+"/carol-cm", b).status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "cannot change roleRef") {
		t.Errorf("roleRef change: %q", msg)
	}
}

// Spec "Impersonation": the caller needs impersonate on each user, group, uid and extra it asks
// for (upstream's 403 otherwise); the request then runs as that identity.
func TestImpersonationWithRBAC(t *testing.T) {
	e := startRBAC(t)
	ops := e.Client("ops")
	const ssr = "/apis/authentication.platform.io/v1/selfsubjectreviews"
	msg := call(t, ops, e, "POST", ssr, `{}`, "Impersonate-User", "jane").status(t, http.StatusForbidden, "Forbidden")
	if want := `users "jane" is forbidden: User "ops" cannot impersonate resource "users" in API group "" at the cluster scope`; msg != want {
		t.Errorf("impersonation 403:\n got %q\nwant %q", msg, want)
	}
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "impersonator"}, "rules": []any{
		rule(s("impersonate"), s(""), s("users"), "jane"),
		rule(s("impersonate"), s(""), s("groups"), "qa"),
		rule(s("impersonate"), s("authentication.platform.io"), s("userextras/scopes")),
	}}), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/clusterrolebindings", binding("ClusterRoleBinding", "ops-impersonates", "ClusterRole", "impersonator", user("ops"))), http.StatusCreated)
	var who map[string]any
	waitWithin(t, time.Second, "the impersonation grant", func() bool {
		r := call(t, ops, e, "POST", ssr, `{}`, "Impersonate-User", "jane", "Impersonate-Group", "qa", "Impersonate-Extra-Scopes", "read")
		if r.code == http.StatusCreated {
			who = r.obj(t)
		}
		return r.code == http.StatusCreated
	})
	if path(who, "status.userInfo.username") != "jane" || len(path(who, "status.userInfo.groups").([]any)) != 2 ||
		path(who, "status.userInfo.extra.scopes").([]any)[0] != "read" {
		t.Errorf("impersonated identity: %v", who["status"])
	}
	call(t, ops, e, "POST", ssr, `{}`, "Impersonate-User", "jane", "Impersonate-Group", "admins").status(t, http.StatusForbidden, "Forbidden")
	call(t, ops, e, "POST", ssr, `{}`, "Impersonate-User", "john").status(t, http.StatusForbidden, "Forbidden")
	call(t, ops, e, "POST", ssr, `{}`, "Impersonate-User", "jane", "Impersonate-Uid", "1").status(t, http.StatusForbidden, "Forbidden")
}

// The review APIs: SelfSubjectRulesReview lists RBAC's rules; LocalSubjectAccessReview is bound to
// its namespace; SubjectAccessReview needs a subject (422 as upstream).
func TestReviewAPIs(t *testing.T) {
	e := startRBAC(t)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/roles", role("pod-reader", rule(s("get", "list"), s(""), s("pods")))), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "dana-pods", "Role", "pod-reader", user("dana"))), http.StatusCreated)
	dana := e.Client("dana")
	const authz = "/apis/authorization.platform.io/v1"
	var rules []any
	waitWithin(t, time.Second, "the rules to show", func() bool {
		r := must(t, call(t, dana, e, "POST", authz+"/selfsubjectrulesreviews", `{"spec":{"namespace":"default"}}`), http.StatusCreated)
		rules, _ = path(r, "status.resourceRules").([]any)
		for _, x := range rules {
			if res, _ := path(x.(map[string]any), "resources").([]any); len(res) == 1 && res[0] == "pods" {
				return true
			}
		}
		return false
	})
	call(t, dana, e, "POST", authz+"/selfsubjectrulesreviews", `{"spec":{}}`).status(t, http.StatusBadRequest, "BadRequest")

	lsar := must(t, do(t, e, "POST", authz+"/namespaces/default/localsubjectaccessreviews",
		`{"spec":{"user":"dana","resourceAttributes":{"namespace":"default","verb":"list","resource":"pods"}}}`), http.StatusCreated)
	if path(lsar, "status.allowed") != true {
		t.Errorf("local review: %v", lsar["status"])
	}
	do(t, e, "POST", authz+"/namespaces/default/localsubjectaccessreviews",
		`{"spec":{"user":"dana","resourceAttributes":{"namespace":"other","verb":"list","resource":"pods"}}}`).status(t, http.StatusBadRequest, "BadRequest")
	do(t, e, "POST", authz+"/subjectaccessreviews", `{"spec":{"resourceAttributes":{"verb":"list","resource":"pods"}}}`).status(t, http.StatusUnprocessableEntity, "Invalid")
	sar := must(t, do(t, e, "POST", authz+"/subjectaccessreviews", `{"spec":{"user":"dana","resourceAttributes":{"namespace":"default","verb":"delete","resource":"pods"}}}`), http.StatusCreated)
	if path(sar, "status.allowed") == true {
		t.Errorf("delete should not be allowed: %v", sar["status"])
	}
	// The review kinds are authorized like any resource: dana may not create SubjectAccessReviews.
	call(t, dana, e, "POST", authz+"/subjectaccessreviews", `{"spec":{"user":"x","resourceAttributes":{"verb":"list","resource":"pods"}}}`).status(t, http.StatusForbidden, "Forbidden")
}

// A write that creates is authorized as a create too, as upstream's: a user granted patch and
// update but not create cannot create a ConfigMap with an apply (PATCH apply-patch+yaml) or with
// a PUT of a missing object, dry-run or not; with create granted both create; writes to an
// existing object need no create.
func TestCreateOnUpdateNeedsCreate(t *testing.T) {
	e := startRBAC(t)
	bob := e.Client("bob")
	const cms = "/api/v1/namespaces/default/configmaps"
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/roles", role("cm-writer",
		rule(s("get", "patch", "update"), s(""), s("configmaps")))), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "bob-writes", "Role", "cm-writer", user("bob"))), http.StatusCreated)
	apply := func(name string, query string) response {
		return call(t, bob, e, "PATCH", cms+"/"+name+"?fieldManager=bob"+query,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"},"data":{"a":"1"}}`, "Content-Type", "application/apply-patch+yaml")
	}
	put := func(name string, query string) response {
		return call(t, bob, e, "PUT", cms+"/"+name+"?x=1"+query, configMap(name, map[string]string{"a": "1"}))
	}
	waitWithin(t, 5*time.Second, "the binding taking effect", func() bool {
		return call(t, bob, e, "GET", cms+"/nothing", nil).code == http.StatusNotFound
	})
	for _, dry := range []string{"", "&dryRun=All"} {
		msg := apply("applied", dry).status(t, http.StatusForbidden, "Forbidden")
		if want := `User "bob" cannot create resource "configmaps" in API group "" in the namespace "default"`; !strings.Contains(msg, want) {
			t.Errorf("apply create%s: %q lacks %q", dry, msg, want)
		}
		put("put", dry).status(t, http.StatusForbidden, "Forbidden")
	}
	do(t, e, "GET", cms+"/applied", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "GET", cms+"/put", nil).status(t, http.StatusNotFound, "NotFound")

	// Existing objects: patch and update need nothing more.
	must(t, do(t, e, "POST", cms, configMap("existing", nil)), http.StatusCreated)
	must(t, apply("existing", ""), http.StatusOK)
	must(t, call(t, bob, e, "PUT", cms+"/existing", configMap("existing", map[string]string{"b": "2"})), http.StatusOK)

	// With create granted, both create.
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/roles", role("cm-creator", rule(s("create"), s(""), s("configmaps")))), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/namespaces/default/rolebindings", binding("RoleBinding", "bob-creates", "Role", "cm-creator", user("bob"))), http.StatusCreated)
	waitWithin(t, 5*time.Second, "the create grant taking effect", func() bool { return apply("applied", "&dryRun=All").code == http.StatusCreated })
	must(t, apply("applied", ""), http.StatusCreated)
	must(t, put("put", ""), http.StatusCreated)
}
