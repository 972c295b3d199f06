package rbac

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// This file is a second, deliberately naive reading of the RBAC objects, written from upstream's
// documentation of RBAC with plain loops over every binding: no index, no compilation. The tests
// run every case through it and through the Rego policy, so the compiler is checked against an
// implementation that shares none of its code.

// refDecision is what the reference evaluator concludes for one request.
type refDecision struct {
	allowed bool
	// reasons is every binding that allows the request, in upstream's words; any of them is a
	// correct reason (upstream reports whichever binding its lister yields first). When a rule
	// without resourceNames allows the request, only such rules' bindings are listed: the reason
	// must then hold for every object name.
	reasons map[string]bool
	// nameIndependent is found by brute force: the decision for every name that any rule of the
	// snapshot mentions, for "" and for a name no rule mentions.
	nameIndependent bool
}

// refAuthorize decides a request by reading the snapshot directly.
func refAuthorize(s Snapshot, at authorizer.Attributes) refDecision {
	allowed, freeReasons, namedReasons := refAllows(s, at)
	d := refDecision{allowed: allowed, reasons: freeReasons}
	if len(freeReasons) == 0 {
		d.reasons = namedReasons
	}
	d.nameIndependent = true
	for _, name := range refNames(s) {
		other := at
		other.Name = name
		if a, _, _ := refAllows(s, other); a != allowed {
			d.nameIndependent = false
		}
	}
	return d
}

// refNames is every object name a decision can depend on, plus two it cannot.
func refNames(s Snapshot) []string {
	names := []string{"", "a-name-no-rule-mentions"}
	add := func(rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			names = append(names, r.ResourceNames...)
		}
	}
	for _, r := range s.Roles {
		add(r.Rules)
	}
	for _, r := range s.ClusterRoles {
		add(r.Rules)
	}
	return names
}

// refAllows visits every applicable binding: all ClusterRoleBindings, then the RoleBindings of
// the request's namespace; for each binding whose subjects include the user and whose role
// exists, every rule of the role.
func refAllows(s Snapshot, at authorizer.Attributes) (allowed bool, free, named map[string]bool) {
	free, named = map[string]bool{}, map[string]bool{}
	visit := func(source string, rules []rbacv1.PolicyRule) {
		for i := range rules {
			if refRuleAllows(at, &rules[i]) {
				allowed = true
				if len(rules[i].ResourceNames) == 0 {
					free["RBAC: allowed by "+source] = true
				} else {
					named["RBAC: allowed by "+source] = true
				}
			}
		}
	}
	for _, b := range s.ClusterRoleBindings {
		for _, subj := range b.Subjects {
			if !refAppliesTo(at.User, subj, "") {
				continue
			}
			if rules, ok := refRoleRules(s, b.RoleRef, ""); ok {
				visit(fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, refDescribe(subj, "")), rules)
			}
		}
	}
	if at.Namespace != "" {
		for _, b := range s.RoleBindings {
			if b.Namespace != at.Namespace {
				continue
			}
			for _, subj := range b.Subjects {
				if !refAppliesTo(at.User, subj, b.Namespace) {
					continue
				}
				if rules, ok := refRoleRules(s, b.RoleRef, b.Namespace); ok {
					visit(fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, refDescribe(subj, b.Namespace)), rules)
				}
			}
		}
	}
	return allowed, free, named
}

func refDescribe(subj rbacv1.Subject, bindingNamespace string) string {
	if subj.Kind == "ServiceAccount" {
		ns := subj.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", subj.Kind, subj.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", subj.Kind, subj.Name)
}

// refRoleRules finds a binding's role: a Role in the binding's namespace, or a ClusterRole.
func refRoleRules(s Snapshot, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool) {
	switch ref.Kind {
	case "Role":
		for _, r := range s.Roles {
			if r.Namespace == namespace && r.Name == ref.Name {
				return r.Rules, true
			}
		}
	case "ClusterRole":
		for _, r := range s.ClusterRoles {
			if r.Name == ref.Name {
				return r.Rules, true
			}
		}
	}
	return nil, false
}

// refAppliesTo: a User subject names the user, a Group one of its groups, a ServiceAccount
// subject the user system:serviceaccount:<namespace>:<name> (the binding's namespace when the
// subject has none). There are no wildcards.
func refAppliesTo(u *authorizer.User, subj rbacv1.Subject, bindingNamespace string) bool {
	switch subj.Kind {
	case "User":
		return u.Name == subj.Name
	case "Group":
		for _, g := range u.Groups {
			if g == subj.Name {
				return true
			}
		}
		return false
	case "ServiceAccount":
		ns := subj.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return ns != "" && u.Name == "system:serviceaccount:"+ns+":"+subj.Name
	}
	return false
}

// refRuleAllows is one rule against one request, field by field.
func refRuleAllows(at authorizer.Attributes, r *rbacv1.PolicyRule) bool {
	if !refVerbMatches(r.Verbs, at.Verb) {
		return false
	}
	if !at.ResourceRequest {
		for _, u := range r.NonResourceURLs {
			if u == "*" || u == at.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(at.Path, strings.TrimRight(u, "*"))) {
				return true
			}
		}
		return false
	}
	groupOK := false
	for _, g := range r.APIGroups {
		if g == "*" || g == at.APIGroup {
			groupOK = true
		}
	}
	if !groupOK {
		return false
	}
	requested := at.Resource
	if at.Subresource != "" {
		requested = at.Resource + "/" + at.Subresource
	}
	resourceOK := false
	for _, res := range r.Resources {
		if res == "*" || res == requested || (at.Subresource != "" && res == "*/"+at.Subresource) {
			resourceOK = true
		}
	}
	if !resourceOK {
		return false
	}
	if len(r.ResourceNames) == 0 {
		return true
	}
	for _, n := range r.ResourceNames {
		if n == at.Name {
			return true
		}
	}
	return false
}

func refVerbMatches(verbs []string, verb string) bool {
	for _, v := range verbs {
		if v == "*" || v == verb {
			return true
		}
	}
	return false
}
