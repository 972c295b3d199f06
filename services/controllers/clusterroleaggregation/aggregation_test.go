package clusterroleaggregation_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/services/controllers/clusterroleaggregation"
	"platform.io/services/controllers/internal/testenv"
)

const bound = 20 * time.Second

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{verb}}
}

func role(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggregate(name string, selectors ...map[string]string) *rbacv1.ClusterRole {
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, AggregationRule: &rbacv1.AggregationRule{}}
	for _, s := range selectors {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return r
}

func TestAggregatedRules(t *testing.T) {
	view := map[string]string{"aggregate-to-view": "true"}
	edit := map[string]string{"aggregate-to-edit": "true"}
	cases := []struct {
		name string
		role *rbacv1.ClusterRole
		all  []*rbacv1.ClusterRole
		want []rbacv1.PolicyRule
	}{
		{
			name: "upstream: rules of the matching roles in name order, each rule once",
			role: aggregate("agg", view),
			all: []*rbacv1.ClusterRole{
				role("b", view, rule("get", "pods"), rule("list", "pods")),
				role("a", view, rule("list", "pods"), rule("get", "services")),
				role("c", nil, rule("delete", "pods")),
			},
			want: []rbacv1.PolicyRule{rule("list", "pods"), rule("get", "services"), rule("get", "pods")},
		},
		{
			name: "upstream: selectors in order, a role matched twice counted once, the role itself excluded",
			role: func() *rbacv1.ClusterRole {
				r := aggregate("agg", edit, view)
				r.Labels = view
				r.Rules = []rbacv1.PolicyRule{rule("escalate", "everything")}
				return r
			}(),
			all: []*rbacv1.ClusterRole{
				role("v", view, rule("get", "pods")),
				role("e", map[string]string{"aggregate-to-edit": "true", "aggregate-to-view": "true"}, rule("update", "pods")),
			},
			want: []rbacv1.PolicyRule{rule("update", "pods"), rule("get", "pods")},
		},
		{
			name: "upstream: nothing matching gives no rules (not nil)",
			role: aggregate("agg", map[string]string{"nothing": "matches"}),
			all:  []*rbacv1.ClusterRole{role("a", view, rule("get", "pods"))},
			want: []rbacv1.PolicyRule{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all := append(tc.all, tc.role)
			got, err := clusterroleaggregation.AggregatedRules(tc.role, all)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rules = %v, want %v", got, tc.want)
			}
		})
	}
}

// Upstream rule: an aggregated ClusterRole follows the ClusterRoles its selectors match, through
// label and rule changes, new roles and deleted roles; the rules are owned by the aggregation
// controller's field manager.
func TestAggregationFollowsChanges(t *testing.T) {
	env := testenv.Start(t)
	f := env.Informers()
	c, err := clusterroleaggregation.New(env.Clients.RBAC, f.Rbac().V1().ClusterRoles(), clusterroleaggregation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 2) }, f)
	ctx := context.Background()
	roles := env.Admin.RBAC.ClusterRoles()
	sel := map[string]string{"example.com/aggregate-to-monitoring": "true"}
	if _, err := roles.Create(ctx, aggregate("monitoring", sel), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rulesAre := func(want ...rbacv1.PolicyRule) func() (bool, string) {
		return func() (bool, string) {
			r, err := roles.Get(ctx, "monitoring", metav1.GetOptions{})
			if err != nil {
				return false, testenv.Short(err)
			}
			if want == nil {
				want = []rbacv1.PolicyRule{}
			}
			return equality.Semantic.DeepEqual(r.Rules, want), fmt.Sprint(r.Rules)
		}
	}
	if _, err := roles.Create(ctx, role("metrics-reader", sel, rule("get", "pods"), rule("list", "pods")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "rules of a matching role aggregated", rulesAre(rule("get", "pods"), rule("list", "pods")))

	r, err := roles.Get(ctx, "monitoring", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managed := false
	for _, e := range r.ManagedFields {
		managed = managed || e.Manager == clusterroleaggregation.FieldManager
	}
	if !managed {
		t.Errorf("no managedFields entry of %s: %+v", clusterroleaggregation.FieldManager, r.ManagedFields)
	}

	if _, err := roles.Create(ctx, role("logs-reader", sel, rule("get", "pods"), rule("get", "pods/log")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "a second matching role added, shared rule once",
		rulesAre(rule("get", "pods"), rule("get", "pods/log"), rule("list", "pods")))

	// A label change takes a role out of the aggregation.
	logs, err := roles.Get(ctx, "logs-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs.Labels = map[string]string{"example.com/aggregate-to-monitoring": "false"}
	if _, err := roles.Update(ctx, logs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "a role whose label no longer matches dropped", rulesAre(rule("get", "pods"), rule("list", "pods")))

	// A rule change of a matching role is followed.
	mr, err := roles.Get(ctx, "metrics-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr.Rules = []rbacv1.PolicyRule{rule("watch", "pods")}
	if _, err := roles.Update(ctx, mr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "a matching role's new rules followed", rulesAre(rule("watch", "pods")))

	// Deleting the last matching role leaves no rules.
	if err := roles.Delete(ctx, "metrics-reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "no rules once nothing matches", rulesAre())
}
