package bootstrappolicy

import (
	"reflect"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

// Reconciliation, as upstream's bootstrap reconciliation and `kubectl auth reconcile` (without
// --remove-extra-permissions) do it: an existing default object gets what the default has and it
// lacks (rules, aggregation selectors, subjects, labels, annotations); nothing it has is removed,
// so an administrator's additions survive. An object annotated naming.AutoupdateAnnotation
// "false" is the administrator's and is left alone. A missing annotation does not protect: the
// reconciled object gets the default's "true", as upstream.

// protected reports whether the administrator opted the object out of reconciliation.
func protected(m *metav1.ObjectMeta) bool {
	return m.Annotations[naming.AutoupdateAnnotation] == "false"
}

// addMissing copies the entries of want that have is missing; values already there win, as
// upstream's merge does.
func addMissing(have map[string]string, want map[string]string) (map[string]string, bool) {
	changed := false
	for k, v := range want {
		if _, ok := have[k]; ok {
			continue
		}
		if have == nil {
			have = map[string]string{}
		}
		have[k] = v
		changed = true
	}
	return have, changed
}

// mergeMeta adds want's missing labels and annotations to out.
func mergeMeta(out *metav1.ObjectMeta, want *metav1.ObjectMeta) bool {
	var lc, ac bool
	out.Labels, lc = addMissing(out.Labels, want.Labels)
	out.Annotations, ac = addMissing(out.Annotations, want.Annotations)
	return lc || ac
}

// reconcileRules returns the rules of have plus, broken down into single permissions, those of
// want that have does not cover.
func reconcileRules(have, want []rbacv1.PolicyRule) ([]rbacv1.PolicyRule, bool) {
	missing := Uncovered(have, want)
	if len(missing) == 0 {
		return have, false
	}
	return append(have, missing...), true
}

// reconcileAggregation adds want's label selectors that have lacks.
func reconcileAggregation(have, want *rbacv1.AggregationRule) (*rbacv1.AggregationRule, bool) {
	if want == nil {
		return have, false
	}
	if have == nil {
		have = &rbacv1.AggregationRule{}
	}
	changed := false
	for _, sel := range want.ClusterRoleSelectors {
		found := false
		for _, h := range have.ClusterRoleSelectors {
			if reflect.DeepEqual(h, sel) {
				found = true
				break
			}
		}
		if !found {
			have.ClusterRoleSelectors = append(have.ClusterRoleSelectors, *sel.DeepCopy())
			changed = true
		}
	}
	return have, changed
}

// ReconcileClusterRole returns what to store for the ClusterRole existing given the default want,
// and whether that differs from existing (false: nothing to write). A nil existing is created as
// want. Missing rules are added unless the role is aggregated (its rules are the aggregation
// controller's); missing aggregation selectors, labels and annotations are added.
func ReconcileClusterRole(existing, want *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if existing == nil {
		return want.DeepCopy(), true
	}
	if protected(&existing.ObjectMeta) {
		return existing, false
	}
	out := existing.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	var c bool
	out.AggregationRule, c = reconcileAggregation(out.AggregationRule, want.AggregationRule)
	changed = changed || c
	if out.AggregationRule == nil {
		out.Rules, c = reconcileRules(out.Rules, want.Rules)
		changed = changed || c
	}
	if !changed {
		return existing, false
	}
	return out, true
}

// ReconcileRole returns what to store for the Role existing given the default want, and whether
// that differs from existing. A nil existing is created as want.
func ReconcileRole(existing, want *rbacv1.Role) (*rbacv1.Role, bool) {
	if existing == nil {
		return want.DeepCopy(), true
	}
	if protected(&existing.ObjectMeta) {
		return existing, false
	}
	out := existing.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	var c bool
	out.Rules, c = reconcileRules(out.Rules, want.Rules)
	if !changed && !c {
		return existing, false
	}
	return out, true
}

// reconcileSubjects adds want's subjects that have lacks.
func reconcileSubjects(have, want []rbacv1.Subject) ([]rbacv1.Subject, bool) {
	changed := false
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			have = append(have, w)
			changed = true
		}
	}
	return have, changed
}

// ReconcileClusterRoleBinding returns what to store for the ClusterRoleBinding existing given the
// default want, and whether that differs from existing. A nil existing is created as want.
// Missing subjects, labels and annotations are added. A different roleRef is replaced by want's;
// roleRef is immutable, so when RoleRef differs from existing's the caller must delete and
// recreate the binding (upstream's reconciliation does the same).
func ReconcileClusterRoleBinding(existing, want *rbacv1.ClusterRoleBinding) (*rbacv1.ClusterRoleBinding, bool) {
	if existing == nil {
		return want.DeepCopy(), true
	}
	if protected(&existing.ObjectMeta) {
		return existing, false
	}
	out := existing.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	if out.RoleRef != want.RoleRef {
		out.RoleRef = want.RoleRef
		changed = true
	}
	var c bool
	out.Subjects, c = reconcileSubjects(out.Subjects, want.Subjects)
	if !changed && !c {
		return existing, false
	}
	return out, true
}

// ReconcileRoleBinding is ReconcileClusterRoleBinding for RoleBindings (same rules, including
// the recreate on a roleRef change).
func ReconcileRoleBinding(existing, want *rbacv1.RoleBinding) (*rbacv1.RoleBinding, bool) {
	if existing == nil {
		return want.DeepCopy(), true
	}
	if protected(&existing.ObjectMeta) {
		return existing, false
	}
	out := existing.DeepCopy()
	changed := mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	if out.RoleRef != want.RoleRef {
		out.RoleRef = want.RoleRef
		changed = true
	}
	var c bool
	out.Subjects, c = reconcileSubjects(out.Subjects, want.Subjects)
	if !changed && !c {
		return existing, false
	}
	return out, true
}

// Uncovered returns the permissions of want, each as a single-verb, single-resource (or
// single-URL) rule, that no rule of have grants: upstream's Covers check, used by reconciliation
// to find missing rules.
func Uncovered(have, want []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var missing []rbacv1.PolicyRule
	for _, w := range want {
		for _, atom := range breakdown(w) {
			covered := false
			for _, h := range have {
				if ruleCovers(h, atom) {
					covered = true
					break
				}
			}
			if !covered {
				missing = append(missing, atom)
			}
		}
	}
	return missing
}

// breakdown splits a rule into its single permissions.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{g}, Resources: []string{res}})
					continue
				}
				for _, n := range r.ResourceNames {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, APIGroups: []string{g}, Resources: []string{res}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{v}, NonResourceURLs: []string{u}})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func containsAll(list, subset []string) bool {
	for _, s := range subset {
		if !contains(list, s) {
			return false
		}
	}
	return true
}

// ruleCovers reports whether owner grants everything sub (a single permission) grants.
func ruleCovers(owner, sub rbacv1.PolicyRule) bool {
	if !contains(owner.Verbs, rbacv1.VerbAll) && !containsAll(owner.Verbs, sub.Verbs) {
		return false
	}
	if !contains(owner.APIGroups, rbacv1.APIGroupAll) && !containsAll(owner.APIGroups, sub.APIGroups) {
		return false
	}
	if !resourcesCover(owner.Resources, sub.Resources) {
		return false
	}
	// A rule without names grants every name; a rule with names only those.
	if len(owner.ResourceNames) > 0 && (len(sub.ResourceNames) == 0 || !containsAll(owner.ResourceNames, sub.ResourceNames)) {
		return false
	}
	for _, u := range sub.NonResourceURLs {
		covered := false
		for _, o := range owner.NonResourceURLs {
			if o == u || (strings.HasSuffix(o, "*") && strings.HasPrefix(u, strings.TrimRight(o, "*"))) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// resourcesCover: "*" covers everything, "*/status" covers every resource's status subresource.
func resourcesCover(owner, sub []string) bool {
	if contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, r := range sub {
		if contains(owner, r) {
			continue
		}
		_, subresource, ok := strings.Cut(r, "/")
		if !ok || !contains(owner, "*/"+subresource) {
			return false
		}
	}
	return true
}
