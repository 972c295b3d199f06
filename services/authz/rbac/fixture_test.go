package rbac

import (
	"context"
	"log/slog"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/services/authz/authorizer"
)

// Builders for the RBAC objects of the tests.

func rule(verbs, groups, resources []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func namedRule(verbs, groups, resources, names []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func urlRule(verbs, urls []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func l(s ...string) []string { return s }

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: name}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: name}
}

func crb(name, roleKind, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
		Subjects:   subjects,
	}
}

func rb(ns, name, roleKind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
		Subjects:   subjects,
	}
}

// fixture is a cluster whose objects exercise every rule field and subject kind.
func fixture() Snapshot {
	return Snapshot{
		ClusterRoles: []*rbacv1.ClusterRole{
			clusterRole("pod-reader", rule(l("get", "list", "watch"), l(""), l("pods"))),
			clusterRole("scaler", rule(l("get", "update"), l("apps", ""), l("*/scale"))),
			clusterRole("log-reader", rule(l("get"), l(""), l("pods/log"))),
			clusterRole("everything", rule(l("*"), l("*"), l("*")), urlRule(l("*"), l("*"))),
			clusterRole("health",
				urlRule(l("get"), l("/healthz", "/readyz")),
				urlRule(l("get"), l("/logs/*")),
				urlRule(l("get", "post"), l("/metrics**"))),
			clusterRole("named-cm", namedRule(l("get", "update", "delete"), l(""), l("configmaps"), l("app-config"))),
			clusterRole("deploy-all", rule(l("*"), l("apps"), l("deployments"))),
			clusterRole("any-group-widgets", rule(l("get"), l("*"), l("widgets"))),
			clusterRole("all-urls", urlRule(l("get"), l("*"))),
			clusterRole("version", urlRule(l("get"), l("/version"))),
			clusterRole("livez", urlRule(l("get"), l("/livez"))),
			clusterRole("nodes-named-and-free",
				namedRule(l("get"), l(""), l("nodes"), l("n1")),
				rule(l("list"), l(""), l("nodes"))),
			clusterRole("mixed-rule", rbacv1.PolicyRule{Verbs: l("get"), APIGroups: l(""), Resources: l("events"), NonResourceURLs: l("/events")}),
			clusterRole("empty-name", namedRule(l("list"), l(""), l("leases"), l(""))),
			clusterRole("named-lister", namedRule(l("get", "list", "watch", "create"), l(""), l("secrets"), l("s1"))),
		},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			crb("admins", "ClusterRole", "everything", groupSubject("admins")),
			crb("alice-pods", "ClusterRole", "pod-reader", userSubject("alice")),
			crb("missing-role", "ClusterRole", "does-not-exist", userSubject("mallory")),
			crb("to-a-role", "Role", "cm-editor", userSubject("carol")),
			crb("builder-logs", "ClusterRole", "log-reader", saSubject("team-a", "builder")),
			crb("sa-without-namespace", "ClusterRole", "log-reader", saSubject("", "nobody")),
			crb("health", "ClusterRole", "health", groupSubject("system:authenticated")),
			crb("anonymous-version", "ClusterRole", "version", userSubject("system:anonymous")),
			crb("unauthenticated-livez", "ClusterRole", "livez", groupSubject("system:unauthenticated")),
			crb("wildcard-user", "ClusterRole", "everything", userSubject("*")),
			crb("wildcard-group", "ClusterRole", "everything", groupSubject("*")),
			crb("erin-scaler", "ClusterRole", "scaler", userSubject("erin")),
			crb("erin-deploy", "ClusterRole", "deploy-all", userSubject("erin")),
			crb("frank-widgets", "ClusterRole", "any-group-widgets", userSubject("frank")),
			crb("frank-urls", "ClusterRole", "all-urls", userSubject("frank")),
			crb("gina-nodes", "ClusterRole", "nodes-named-and-free", userSubject("gina")),
			crb("gina-mixed", "ClusterRole", "mixed-rule", userSubject("gina")),
			crb("gina-leases", "ClusterRole", "empty-name", userSubject("gina")),
			crb("hank-secrets", "ClusterRole", "named-lister", userSubject("hank")),
			crb("unknown-kind", "ClusterRole", "everything", rbacv1.Subject{Kind: "Robot", Name: "alice"}),
		},
		Roles: []*rbacv1.Role{
			role("team-a", "cm-editor", rule(l("get", "list", "create", "update"), l(""), l("configmaps"))),
			role("team-a", "secret-named", namedRule(l("get"), l(""), l("secrets"), l("s1", "s2"))),
			role("team-a", "scale-role", rule(l("update"), l("apps"), l("deployments/scale"))),
		},
		RoleBindings: []*rbacv1.RoleBinding{
			rb("team-a", "bob-cm", "Role", "cm-editor", userSubject("bob")),
			rb("team-a", "bob-named-cm", "ClusterRole", "named-cm", userSubject("bob")),
			rb("team-a", "deployer", "Role", "scale-role", saSubject("", "deployer")),
			rb("team-a", "bob-missing", "Role", "nope", userSubject("bob")),
			rb("team-a", "readers", "Role", "secret-named", groupSubject("readers")),
			rb("team-a", "dave-pods", "ClusterRole", "pod-reader", userSubject("dave")),
			rb("team-a", "other-sa", "ClusterRole", "pod-reader", saSubject("team-b", "robot")),
			rb("team-b", "bob-cross", "Role", "cm-editor", userSubject("bob")),
			rb("team-b", "dave-logs", "ClusterRole", "log-reader", userSubject("dave"), groupSubject("devs")),
		},
	}
}

// Users of the fixture.
var (
	alice     = &authorizer.User{Name: "alice", Groups: []string{"system:authenticated"}}
	bob       = &authorizer.User{Name: "bob", Groups: []string{"system:authenticated"}}
	carol     = &authorizer.User{Name: "carol", Groups: []string{"system:authenticated"}}
	dave      = &authorizer.User{Name: "dave", Groups: []string{"devs", "system:authenticated"}}
	erin      = &authorizer.User{Name: "erin"}
	frank     = &authorizer.User{Name: "frank"}
	gina      = &authorizer.User{Name: "gina"}
	hank      = &authorizer.User{Name: "hank"}
	mallory   = &authorizer.User{Name: "mallory", Groups: []string{"system:authenticated"}}
	root      = &authorizer.User{Name: "root", Groups: []string{"admins", "system:authenticated"}}
	reader    = &authorizer.User{Name: "rita", Groups: []string{"readers"}}
	builder   = &authorizer.User{Name: "system:serviceaccount:team-a:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}}
	deployer  = &authorizer.User{Name: "system:serviceaccount:team-a:deployer", Groups: []string{"system:serviceaccounts"}}
	deployerB = &authorizer.User{Name: "system:serviceaccount:team-b:deployer", Groups: []string{"system:serviceaccounts"}}
	robot     = &authorizer.User{Name: "system:serviceaccount:team-b:robot"}
	nobodySA  = &authorizer.User{Name: "system:serviceaccount::nobody"}
	anonymous = &authorizer.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
)

// res and url build request attributes.
func res(u *authorizer.User, verb, group, resource, subresource, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
		Resource: resource, Subresource: subresource, Namespace: ns, Name: name}
}

func url(u *authorizer.User, verb, path string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: verb, Path: path}
}

// quiet drops the Authorizer's update logs, which benchmarks would otherwise print by the
// thousand.
var quiet = slog.New(slog.DiscardHandler)

// newAuthorizer returns an Authorizer holding s.
func newAuthorizer(t testing.TB, s Snapshot) *Authorizer {
	t.Helper()
	a, err := New(WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return a
}
