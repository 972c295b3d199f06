package rbac

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// TestUpdate checks that an Update replaces the snapshot (removals included), takes effect
// before it returns, counts generations, and keeps nothing of the caller's objects.
func TestUpdate(t *testing.T) {
	ctx := context.Background()
	a, err := New(WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	getPods := res(alice, "get", "", "pods", "", "default", "p")
	if got, _ := a.Authorize(ctx, getPods); got.Decision != authorizer.NoOpinion || a.Generation() != 0 {
		t.Fatalf("a new Authorizer allows nothing at generation 0: %+v, generation %d", got, a.Generation())
	}

	s := Snapshot{
		ClusterRoles:        []*rbacv1.ClusterRole{clusterRole("pod-reader", rule(l("get"), l(""), l("pods")))},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb("alice-pods", "ClusterRole", "pod-reader", userSubject("alice"))},
	}
	if err := a.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Authorize(ctx, getPods); got.Decision != authorizer.Allow || a.Generation() != 1 {
		t.Fatalf("after the first Update: %+v, generation %d", got, a.Generation())
	}

	// The snapshot's objects stay the caller's: changing them changes nothing until the next
	// Update.
	s.ClusterRoles[0].Rules[0].Verbs[0] = "delete"
	s.ClusterRoleBindings[0].Subjects[0].Name = "mallory"
	if got, _ := a.Authorize(ctx, getPods); got.Decision != authorizer.Allow {
		t.Fatalf("a change to the caller's objects leaked into the policy data: %+v", got)
	}
	if r, _, _, _ := a.RulesFor(ctx, alice, ""); len(r) != 1 || r[0].Verbs[0] != "get" {
		t.Fatalf("a change to the caller's objects leaked into RulesFor: %v", r)
	}

	// Removing the binding removes the permission.
	if err := a.Update(ctx, Snapshot{ClusterRoles: s.ClusterRoles}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Authorize(ctx, getPods); got.Decision != authorizer.NoOpinion || a.Generation() != 2 {
		t.Fatalf("after removing the binding: %+v, generation %d", got, a.Generation())
	}
	if r, n, _, _ := a.RulesFor(ctx, alice, ""); len(r)+len(n) != 0 {
		t.Fatalf("RulesFor still lists %v %v", r, n)
	}

	// Nil entries in a snapshot are skipped, not fatal.
	if err := a.Update(ctx, Snapshot{ClusterRoles: []*rbacv1.ClusterRole{nil}, RoleBindings: []*rbacv1.RoleBinding{nil},
		Roles: []*rbacv1.Role{nil}, ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{nil}}); err != nil {
		t.Fatal(err)
	}
}

// TestAuthorizeErrors: no user, or a context already done, is an error with an uncacheable
// NoOpinion.
func TestAuthorizeErrors(t *testing.T) {
	a := newAuthorizer(t, fixture())
	if got, err := a.Authorize(context.Background(), authorizer.Attributes{Verb: "get", Path: "/healthz"}); err == nil || got.Decision != authorizer.NoOpinion || !got.Uncacheable {
		t.Errorf("no user: %+v, %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := a.Authorize(ctx, url(alice, "get", "/healthz")); !errors.Is(err, context.Canceled) || got.Decision != authorizer.NoOpinion || !got.Uncacheable {
		t.Errorf("cancelled context: %+v, %v", got, err)
	}
	// A live, cancellable context decides normally.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if got, err := a.Authorize(ctx, url(alice, "get", "/healthz")); err != nil || got.Decision != authorizer.Allow {
		t.Errorf("cancellable context: %+v, %v", got, err)
	}
	if _, _, _, err := a.RulesFor(context.Background(), nil, ""); err == nil {
		t.Error("RulesFor without a user must fail")
	}
	if _, err := a.Covers(context.Background(), nil, "", nil); err == nil {
		t.Error("Covers without a user must fail")
	}
	if _, err := InputJSON(authorizer.Attributes{}); err == nil {
		t.Error("InputJSON without a user must fail")
	}
}

// TestConcurrentUpdate runs Authorize, RulesFor and Covers (under -race) while Update swaps
// between two snapshots: every answer belongs wholly to one of them, generations never go back,
// and once the last Update returns every reader sees it.
func TestConcurrentUpdate(t *testing.T) {
	ctx := context.Background()
	const (
		reasonA = `RBAC: allowed by ClusterRoleBinding "a" of ClusterRole "pods" to User "alice"`
		reasonB = `RBAC: allowed by RoleBinding "b/default" of ClusterRole "pods" to Group "system:authenticated"`
	)
	pods := clusterRole("pods", rule(l("get", "list"), l(""), l("pods")))
	snapA := Snapshot{ClusterRoles: []*rbacv1.ClusterRole{pods},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crb("a", "ClusterRole", "pods", userSubject("alice"))}}
	snapB := Snapshot{ClusterRoles: []*rbacv1.ClusterRole{pods},
		RoleBindings: []*rbacv1.RoleBinding{rb("default", "b", "ClusterRole", "pods", groupSubject("system:authenticated"))}}
	a := newAuthorizer(t, snapA)
	getPods := res(alice, "get", "", "pods", "", "default", "p")
	listAll := res(alice, "list", "", "pods", "", "", "")

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lastGen uint64
			for !stop.Load() {
				gen := a.Generation()
				if gen < lastGen {
					fail("generation went back from %d to %d", lastGen, gen)
				}
				lastGen = gen
				got, err := a.Authorize(ctx, getPods)
				if err != nil || got.Decision != authorizer.Allow || (got.Reason != reasonA && got.Reason != reasonB) {
					fail("get pods in default: %+v, %v", got, err)
				}
				// Cluster-wide list: allowed by A, not by B (a RoleBinding); both are whole answers.
				got, err = a.Authorize(ctx, listAll)
				if err != nil || (got.Decision == authorizer.Allow) != (got.Reason == reasonA) {
					fail("list pods: %+v, %v", got, err)
				}
				r, _, _, err := a.RulesFor(ctx, alice, "default")
				if err != nil || len(r) != 1 {
					fail("RulesFor: %v, %v", r, err)
				}
				missing, err := a.Covers(ctx, alice, "default", []authorizer.Rule{ar(l("get"), l(""), l("pods"))})
				if err != nil || len(missing) != 0 {
					fail("Covers: %v, %v", missing, err)
				}
			}
		}()
	}
	for i := range 200 {
		s := snapA
		if i%2 == 0 {
			s = snapB
		}
		if err := a.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Update(ctx, snapB); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if a.Generation() != 202 {
		t.Errorf("generation %d after 202 Updates", a.Generation())
	}
	if got, _ := a.Authorize(ctx, listAll); got.Decision != authorizer.NoOpinion {
		t.Errorf("the last snapshot (B) is not in effect: %+v", got)
	}
	if got, _ := a.Authorize(ctx, getPods); got.Reason != reasonB {
		t.Errorf("the last snapshot (B) is not in effect: %+v", got)
	}
}

// TestReasonOrder: when several bindings give a subject the same permission, the reason names
// the first by name, cluster bindings before the namespace's, whatever order the snapshot lists
// them in, so every replica explains a decision alike.
func TestReasonOrder(t *testing.T) {
	pods := clusterRole("pods", rule(l("get"), l(""), l("pods")))
	crbs := []*rbacv1.ClusterRoleBinding{
		crb("c-second", "ClusterRole", "pods", userSubject("alice")),
		crb("b-first", "ClusterRole", "pods", userSubject("alice")),
	}
	rbs := []*rbacv1.RoleBinding{
		rb("default", "b", "ClusterRole", "pods", userSubject("alice")),
		rb("default", "a", "ClusterRole", "pods", userSubject("alice")),
	}
	for _, s := range []Snapshot{
		{ClusterRoles: []*rbacv1.ClusterRole{pods}, ClusterRoleBindings: crbs, RoleBindings: rbs},
		{ClusterRoles: []*rbacv1.ClusterRole{pods}, ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{crbs[1], crbs[0]}, RoleBindings: []*rbacv1.RoleBinding{rbs[1], rbs[0]}},
	} {
		a := newAuthorizer(t, s)
		got, _ := a.Authorize(context.Background(), res(alice, "get", "", "pods", "", "default", "p"))
		if want := `RBAC: allowed by ClusterRoleBinding "b-first" of ClusterRole "pods" to User "alice"`; got.Reason != want {
			t.Errorf("reason %q, want %q", got.Reason, want)
		}
		a = newAuthorizer(t, Snapshot{ClusterRoles: s.ClusterRoles, RoleBindings: s.RoleBindings})
		got, _ = a.Authorize(context.Background(), res(alice, "get", "", "pods", "", "default", "p"))
		if want := `RBAC: allowed by RoleBinding "a/default" of ClusterRole "pods" to User "alice"`; got.Reason != want {
			t.Errorf("reason %q, want %q", got.Reason, want)
		}
	}
}
