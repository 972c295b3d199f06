package rbac_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/rbac"
)

// authorizer is an in-memory authorization service: allowed holds "user verb resource name"
// decisions, held the verbs each user holds on configmaps (CheckEscalation's answer).
type authorizer struct {
	allowed map[string]bool
	held    map[string][]string
}

func (a *authorizer) Authorize(_ context.Context, attrs auth.Attributes) (auth.Decision, string, error) {
	if a.allowed[attrs.User.Name+" "+attrs.Verb+" "+attrs.Resource+" "+attrs.Name] {
		return auth.DecisionAllow, "granted", nil
	}
	return auth.DecisionNoOpinion, "", nil
}

func (a *authorizer) CheckEscalation(_ context.Context, u *auth.User, _ string, rules []*authzv1.PolicyRule) (*authzv1.CheckEscalationResponse, error) {
	for _, r := range rules {
		for _, v := range r.GetVerbs() {
			if !slices.Contains(a.held[u.Name], v) {
				return &authzv1.CheckEscalationResponse{Message: u.Name + " does not hold " + v}, nil
			}
		}
	}
	return &authzv1.CheckEscalationResponse{Covered: true}, nil
}

func strategy(t *testing.T, resource string, authz rbac.Authorizer, roles map[string]*rbacv1.Role) registry.Strategy {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Resource(schema.GroupVersionResource{Group: rbac.Group, Version: "v1", Resource: resource})
	if !ok {
		t.Fatalf("%s are not served", resource)
	}
	get := func(_ context.Context, gvr schema.GroupVersionResource, _, name string) (runtime.Object, error) {
		if r, ok := roles[name]; ok && gvr.Resource == "roles" {
			return r, nil
		}
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return rbac.New(builtin.New(res, builtin.NewShared(reg.Scheme)), rbac.Deps{Authorizer: authz, Get: get, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func asUser(name string, groups ...string) context.Context {
	return auth.WithUser(context.Background(), &auth.User{Name: name, Groups: groups})
}

// Escalation prevention, in process: a role grants only what its writer holds, unless the writer
// may escalate; a binding references only a role whose rules its writer holds, unless the writer
// may bind it; system:masters and the gateway's own writes are exempt, and so is a write that
// changes only what the garbage collector manages.
func TestEscalationPrevention(t *testing.T) {
	authz := &authorizer{
		allowed: map[string]bool{"escalator escalate roles writer": true, "binder bind roles writer": true},
		held:    map[string][]string{"reader": {"get"}},
	}
	writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: "ns"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}
	roles := strategy(t, "roles", authz, nil)
	for user, want := range map[string]bool{"reader": false, "escalator": true, "admin": true} {
		ctx := asUser(user)
		if user == "admin" {
			ctx = asUser(user, auth.GroupMasters)
		}
		err := roles.CheckWrite(ctx, writer, nil)
		if (err == nil) != want || (err != nil && !apierrors.IsForbidden(err)) {
			t.Errorf("%s writing the role: %v, want allowed %v", user, err, want)
		}
	}
	if err := roles.CheckWrite(context.Background(), writer, nil); err != nil {
		t.Errorf("the gateway's own write: %v", err)
	}
	gcOnly := writer.DeepCopy()
	gcOnly.Finalizers = []string{"example.com/hold"}
	if err := roles.CheckWrite(asUser("reader"), gcOnly, writer); err != nil {
		t.Errorf("a finalizer-only change: %v", err)
	}

	bindings := strategy(t, "rolebindings", authz, map[string]*rbacv1.Role{"writer": writer})
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbac.Group, Kind: "Role", Name: "writer"}}
	if err := bindings.CheckWrite(asUser("reader"), binding, nil); !apierrors.IsForbidden(err) {
		t.Errorf("binding a role one does not hold: %v, want 403", err)
	}
	if err := bindings.CheckWrite(asUser("binder"), binding, nil); err != nil {
		t.Errorf("binding with the bind verb: %v", err)
	}
	authz.held["reader"] = append(authz.held["reader"], "update")
	if err := bindings.CheckWrite(asUser("reader"), binding, nil); err != nil {
		t.Errorf("binding a role one holds: %v", err)
	}
	missing := binding.DeepCopy()
	missing.RoleRef.Name = "nosuch"
	if err := bindings.CheckWrite(asUser("reader"), missing, nil); !apierrors.IsForbidden(err) {
		t.Errorf("binding a missing role: %v, want 403", err)
	}
	if errs := bindings.ValidateName("a:b"); len(errs) != 0 {
		t.Errorf("binding names need only be a path segment: %v", errs)
	}
}
