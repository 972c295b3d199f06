package bootstrappolicy

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

func meta(name string, annotations, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels}
}

var (
	getPods    = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	listPods   = rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	readPods   = rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	getSecrets = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
	autoTrue   = map[string]string{naming.AutoupdateAnnotation: "true"}
	autoFalse  = map[string]string{naming.AutoupdateAnnotation: "false"}
	bootLabel  = map[string]string{naming.BootstrappingLabel: BootstrappingValue}
)

// Upstream's reconciliation (pkg/registry/rbac/reconciliation, union mode), case by case.
func TestReconcileClusterRole(t *testing.T) {
	aggAdmin := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{AggregateToAdminLabel: "true"}}}}
	aggExtra := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"example.com/mine": "true"}}}}
	cases := []struct {
		name        string
		existing    *rbacv1.ClusterRole
		want        rbacv1.ClusterRole
		changed     bool
		wantRules   []rbacv1.PolicyRule
		wantAgg     *rbacv1.AggregationRule
		wantLabels  map[string]string
		wantAnnots  map[string]string
		samePointer bool
	}{
		{
			name:       "missing object is created as the default",
			existing:   nil,
			want:       rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods}},
			changed:    true,
			wantRules:  []rbacv1.PolicyRule{getPods},
			wantLabels: bootLabel, wantAnnots: autoTrue,
		},
		{
			name:        "equal object: nothing to write",
			existing:    &rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods}},
			want:        rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods}},
			changed:     false,
			samePointer: true,
		},
		{
			name:       "missing permission added, administrator's extra kept",
			existing:   &rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods, getSecrets}},
			want:       rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{readPods}},
			changed:    true,
			wantRules:  []rbacv1.PolicyRule{getPods, getSecrets, listPods},
			wantLabels: bootLabel, wantAnnots: autoTrue,
		},
		{
			name:        "permission covered by a wider rule: nothing added",
			existing:    &rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"*"}}}},
			want:        rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{readPods, getSecrets}},
			changed:     false,
			samePointer: true,
		},
		{
			name:        "autoupdate false: the administrator's, left alone",
			existing:    &rbacv1.ClusterRole{ObjectMeta: meta("r", autoFalse, nil)},
			want:        rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods}},
			changed:     false,
			samePointer: true,
		},
		{
			name:       "no annotation: reconciled and annotated (upstream protects only \"false\")",
			existing:   &rbacv1.ClusterRole{ObjectMeta: meta("r", nil, nil), Rules: []rbacv1.PolicyRule{getPods}},
			want:       rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, bootLabel), Rules: []rbacv1.PolicyRule{getPods}},
			changed:    true,
			wantRules:  []rbacv1.PolicyRule{getPods},
			wantLabels: bootLabel, wantAnnots: autoTrue,
		},
		{
			name:       "labels and annotations: missing added, existing values win",
			existing:   &rbacv1.ClusterRole{ObjectMeta: meta("r", map[string]string{naming.AutoupdateAnnotation: "true", "note": "mine"}, map[string]string{naming.BootstrappingLabel: "custom"}), Rules: []rbacv1.PolicyRule{getPods}},
			want:       rbacv1.ClusterRole{ObjectMeta: meta("r", autoTrue, map[string]string{naming.BootstrappingLabel: BootstrappingValue, AggregateToEditLabel: "true"}), Rules: []rbacv1.PolicyRule{getPods}},
			changed:    true,
			wantRules:  []rbacv1.PolicyRule{getPods},
			wantLabels: map[string]string{naming.BootstrappingLabel: "custom", AggregateToEditLabel: "true"},
			wantAnnots: map[string]string{naming.AutoupdateAnnotation: "true", "note": "mine"},
		},
		{
			name:        "aggregated role: filled rules are the controller's, not reconciled away or merged",
			existing:    &rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel), AggregationRule: aggAdmin.DeepCopy(), Rules: []rbacv1.PolicyRule{getPods, getSecrets}},
			want:        rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel), AggregationRule: aggAdmin.DeepCopy()},
			changed:     false,
			samePointer: true,
		},
		{
			name:       "aggregated role: missing selector added, own selector kept, rules untouched",
			existing:   &rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel), AggregationRule: aggExtra.DeepCopy(), Rules: []rbacv1.PolicyRule{getSecrets}},
			want:       rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel), AggregationRule: aggAdmin.DeepCopy(), Rules: []rbacv1.PolicyRule{getPods}},
			changed:    true,
			wantRules:  []rbacv1.PolicyRule{getSecrets},
			wantAgg:    &rbacv1.AggregationRule{ClusterRoleSelectors: append(aggExtra.DeepCopy().ClusterRoleSelectors, aggAdmin.ClusterRoleSelectors...)},
			wantLabels: bootLabel, wantAnnots: autoTrue,
		},
		{
			name:       "aggregation removed by someone: put back, no rules merged",
			existing:   &rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel)},
			want:       rbacv1.ClusterRole{ObjectMeta: meta("admin", autoTrue, bootLabel), AggregationRule: aggAdmin.DeepCopy()},
			changed:    true,
			wantAgg:    aggAdmin,
			wantLabels: bootLabel, wantAnnots: autoTrue,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before *rbacv1.ClusterRole
			if c.existing != nil {
				before = c.existing.DeepCopy()
			}
			got, changed := ReconcileClusterRole(c.existing, &c.want)
			if changed != c.changed {
				t.Fatalf("changed = %v, want %v", changed, c.changed)
			}
			if c.existing != nil && !reflect.DeepEqual(c.existing, before) {
				t.Fatalf("existing was modified")
			}
			if c.samePointer {
				if got != c.existing {
					t.Fatalf("unchanged result is not existing")
				}
				return
			}
			if !reflect.DeepEqual(got.Rules, c.wantRules) {
				t.Errorf("rules = %+v, want %+v", got.Rules, c.wantRules)
			}
			if !reflect.DeepEqual(got.AggregationRule, c.wantAgg) {
				t.Errorf("aggregationRule = %+v, want %+v", got.AggregationRule, c.wantAgg)
			}
			if !reflect.DeepEqual(got.Labels, c.wantLabels) || !reflect.DeepEqual(got.Annotations, c.wantAnnots) {
				t.Errorf("labels %v annotations %v, want %v %v", got.Labels, got.Annotations, c.wantLabels, c.wantAnnots)
			}
		})
	}
}

func TestReconcileRole(t *testing.T) {
	want := rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Annotations: autoTrue, Labels: bootLabel}, Rules: []rbacv1.PolicyRule{readPods}}
	existing := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Annotations: autoTrue, Labels: bootLabel}, Rules: []rbacv1.PolicyRule{getPods}}
	got, changed := ReconcileRole(existing, &want)
	if !changed || !reflect.DeepEqual(got.Rules, []rbacv1.PolicyRule{getPods, listPods}) {
		t.Errorf("missing list not added: %v %+v", changed, got.Rules)
	}
	if _, changed := ReconcileRole(got, &want); changed {
		t.Errorf("reconciling twice changes again")
	}
	protectedRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Annotations: autoFalse}}
	if got, changed := ReconcileRole(protectedRole, &want); changed || got != protectedRole {
		t.Errorf("protected Role reconciled")
	}
	if got, changed := ReconcileRole(nil, &want); !changed || !reflect.DeepEqual(got, &want) || got == &want {
		t.Errorf("missing Role not created as a copy of the default")
	}
}

func TestReconcileBindings(t *testing.T) {
	ref := rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: "view"}
	alice := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacGroup, Name: "alice"}
	devs := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacGroup, Name: "devs"}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "ns", Name: "robot"}
	want := rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoTrue, bootLabel), RoleRef: ref, Subjects: []rbacv1.Subject{alice, devs}}

	cases := []struct {
		name         string
		existing     *rbacv1.ClusterRoleBinding
		changed      bool
		wantSubjects []rbacv1.Subject
		wantRef      rbacv1.RoleRef
	}{
		{"missing subject added, administrator's subject kept",
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoTrue, bootLabel), RoleRef: ref, Subjects: []rbacv1.Subject{sa, alice}},
			true, []rbacv1.Subject{sa, alice, devs}, ref},
		{"all subjects there: nothing to write",
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoTrue, bootLabel), RoleRef: ref, Subjects: []rbacv1.Subject{devs, alice}},
			false, []rbacv1.Subject{devs, alice}, ref},
		{"a different roleRef is replaced (the caller recreates)",
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoTrue, bootLabel), RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{alice, devs}},
			true, []rbacv1.Subject{alice, devs}, ref},
		{"protected binding left alone",
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoFalse, nil), RoleRef: ref},
			false, nil, ref},
		{"no subjects at all (system:node): defaults added",
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("b", autoTrue, bootLabel), RoleRef: ref},
			true, []rbacv1.Subject{alice, devs}, ref},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.existing.DeepCopy()
			got, changed := ReconcileClusterRoleBinding(c.existing, &want)
			if changed != c.changed {
				t.Fatalf("changed = %v, want %v", changed, c.changed)
			}
			if !reflect.DeepEqual(c.existing, before) {
				t.Fatalf("existing was modified")
			}
			if !reflect.DeepEqual(got.Subjects, c.wantSubjects) || got.RoleRef != c.wantRef {
				t.Errorf("subjects %v roleRef %v, want %v %v", got.Subjects, got.RoleRef, c.wantSubjects, c.wantRef)
			}
		})
	}

	rb := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Annotations: autoTrue, Labels: bootLabel}, RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{sa}}
	existing := rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, RoleRef: rb.RoleRef, Subjects: []rbacv1.Subject{alice}}
	got, changed := ReconcileRoleBinding(&existing, &rb)
	if !changed || !reflect.DeepEqual(got.Subjects, []rbacv1.Subject{alice, sa}) || got.Annotations[naming.AutoupdateAnnotation] != "true" {
		t.Errorf("RoleBinding not reconciled: %+v", got)
	}
	if _, changed := ReconcileRoleBinding(got, &rb); changed {
		t.Errorf("reconciling twice changes again")
	}
}

// Reconciling every default against itself writes nothing: a restart does not rewrite the policy.
func TestDefaultsAreReconciliationFixedPoints(t *testing.T) {
	for _, r := range ClusterRoles() {
		if _, changed := ReconcileClusterRole(r.DeepCopy(), &r); changed {
			t.Errorf("ClusterRole %s", r.Name)
		}
	}
	for _, b := range ClusterRoleBindings() {
		if _, changed := ReconcileClusterRoleBinding(b.DeepCopy(), &b); changed {
			t.Errorf("ClusterRoleBinding %s", b.Name)
		}
	}
	for _, rs := range NamespaceRoles() {
		for _, r := range rs {
			if _, changed := ReconcileRole(r.DeepCopy(), &r); changed {
				t.Errorf("Role %s", r.Name)
			}
		}
	}
	for _, bs := range NamespaceRoleBindings() {
		for _, b := range bs {
			if _, changed := ReconcileRoleBinding(b.DeepCopy(), &b); changed {
				t.Errorf("RoleBinding %s", b.Name)
			}
		}
	}
}

// Upstream's Covers: the rule forms that grant a permission.
func TestUncovered(t *testing.T) {
	cases := []struct {
		name    string
		have    []rbacv1.PolicyRule
		want    rbacv1.PolicyRule
		covered bool
	}{
		{"exact", []rbacv1.PolicyRule{getPods}, getPods, true},
		{"verb * covers every verb", []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods"}}}, readPods, true},
		{"group * covers every group", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"deployments"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}}, true},
		{"resource * covers subresources", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, true},
		{"*/scale covers every scale subresource", []rbacv1.PolicyRule{{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}}}, rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}}, true},
		{"pods does not cover pods/log", []rbacv1.PolicyRule{getPods}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}}, false},
		{"other group", []rbacv1.PolicyRule{getPods}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"pods"}}, false},
		{"named rule does not cover all names", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a"}}}, getPods, false},
		{"unnamed rule covers names", []rbacv1.PolicyRule{getPods}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a", "b"}}, true},
		{"named covers subset of names", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"a", "b"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"b"}}, true},
		{"URL prefix with *", []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/*"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/etcd"}}, true},
		{"URL * covers all", []rbacv1.PolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, true},
		{"exact URL only", []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz/etcd"}}, false},
		{"resource rules never cover URLs", []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, false},
	}
	for _, c := range cases {
		missing := Uncovered(c.have, []rbacv1.PolicyRule{c.want})
		if (len(missing) == 0) != c.covered {
			t.Errorf("%s: missing %+v, want covered=%v", c.name, missing, c.covered)
		}
	}
}
