package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// RulesFor lists what the user may do in namespace, as SelfSubjectRulesReview shows it: the
// rules of every ClusterRoleBinding naming the user or one of its groups, then (for a non-empty
// namespace) of every RoleBinding in that namespace naming them. A rule with resources is a
// resource rule, one with nonResourceURLs a non-resource rule (upstream lists a rule with both in
// both). RBAC lists everything it would allow, so incomplete is false.
func (a *Authorizer) RulesFor(_ context.Context, u *authorizer.User, namespace string) (resource, nonResource []authorizer.Rule, incomplete bool, err error) {
	if u == nil {
		return nil, nil, false, errNoUser
	}
	for _, r := range a.current.Load().rulesFor(u, namespace) {
		if len(r.Resources) > 0 {
			resource = append(resource, authorizer.Rule{
				Verbs:         slices.Clone(r.Verbs),
				APIGroups:     slices.Clone(r.APIGroups),
				Resources:     slices.Clone(r.Resources),
				ResourceNames: slices.Clone(r.ResourceNames),
			})
		}
		if len(r.NonResourceURLs) > 0 {
			nonResource = append(nonResource, authorizer.Rule{
				Verbs:           slices.Clone(r.Verbs),
				NonResourceURLs: slices.Clone(r.NonResourceURLs),
			})
		}
	}
	return resource, nonResource, false, nil
}

// rulesFor is every rule the user holds in namespace ("" is cluster bindings only), each
// binding once, in the canonical binding order. The rules are the index's: read only.
func (c *compiled) rulesFor(u *authorizer.User, namespace string) []rbacv1.PolicyRule {
	scopes := []string{clusterScope}
	if namespace != "" && namespace != clusterScope {
		scopes = append(scopes, namespace)
	}
	keys := make([]string, 0, 1+len(u.Groups))
	keys = append(keys, userKey(u.Name))
	for _, g := range u.Groups {
		keys = append(keys, groupKey(g))
	}
	var grants []*grant
	for _, k := range keys {
		for _, s := range scopes {
			grants = append(grants, c.subjects[k][s]...)
		}
	}
	slices.SortFunc(grants, func(a, b *grant) int { return a.order - b.order })
	grants = slices.CompactFunc(grants, func(a, b *grant) bool { return a.order == b.order })
	var rules []rbacv1.PolicyRule
	for _, g := range grants {
		rules = append(rules, g.rules...)
	}
	return rules
}

// Covers is upstream's escalation check (ConfirmNoEscalation): it splits rules into atoms, one
// verb on one group and resource (and one name when the rule lists names) or one verb on one
// non-resource URL, and returns those no single rule the user holds in namespace covers ("" is
// cluster bindings only, as for a ClusterRole). An empty result means the user may grant rules.
func (a *Authorizer) Covers(_ context.Context, u *authorizer.User, namespace string, rules []authorizer.Rule) (missing []authorizer.Rule, err error) {
	if u == nil {
		return nil, errNoUser
	}
	owned := a.current.Load().rulesFor(u, namespace)
	for _, r := range rules {
		r.APIGroups = CanonicalGroups(r.APIGroups)
		for _, atom := range breakdown(r) {
			if !slices.ContainsFunc(owned, func(o rbacv1.PolicyRule) bool { return ruleCovers(&o, &atom) }) {
				missing = append(missing, atom)
			}
		}
	}
	return missing, nil
}

// breakdown splits a rule into atoms as upstream's BreakdownRule does: group x resource x verb
// (x name), then URL x verb.
func breakdown(r authorizer.Rule) []authorizer.Rule {
	var atoms []authorizer.Rule
	for _, group := range r.APIGroups {
		for _, resource := range r.Resources {
			for _, verb := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					atoms = append(atoms, authorizer.Rule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}})
					continue
				}
				for _, name := range r.ResourceNames {
					atoms = append(atoms, authorizer.Rule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{verb}, ResourceNames: []string{name}})
				}
			}
		}
	}
	for _, url := range r.NonResourceURLs {
		for _, verb := range r.Verbs {
			atoms = append(atoms, authorizer.Rule{NonResourceURLs: []string{url}, Verbs: []string{verb}})
		}
	}
	return atoms
}

// ruleCovers reports whether one held rule covers an atom, as upstream's ruleCovers: "*" covers
// every verb, group and resource; "*/x" covers the subresource x of every resource; a held rule
// with resourceNames covers only atoms naming one of them; a held URL ending in "*" covers every
// URL it prefixes.
func ruleCovers(owner *rbacv1.PolicyRule, atom *authorizer.Rule) bool {
	if !slices.Contains(owner.Verbs, rbacv1.VerbAll) && !containsAll(owner.Verbs, atom.Verbs) {
		return false
	}
	if !slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) && !containsAll(owner.APIGroups, atom.APIGroups) {
		return false
	}
	if !resourcesCover(owner.Resources, atom.Resources) {
		return false
	}
	for _, url := range atom.NonResourceURLs {
		if !slices.ContainsFunc(owner.NonResourceURLs, func(o string) bool { return urlCovers(o, url) }) {
			return false
		}
	}
	if len(owner.ResourceNames) == 0 {
		return true
	}
	return len(atom.ResourceNames) > 0 && containsAll(owner.ResourceNames, atom.ResourceNames)
}

func resourcesCover(owner, wanted []string) bool {
	if slices.Contains(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, r := range wanted {
		if slices.Contains(owner, r) {
			continue
		}
		_, sub, ok := strings.Cut(r, "/")
		if !ok || !slices.Contains(owner, "*/"+sub) {
			return false
		}
	}
	return true
}

func urlCovers(owner, url string) bool {
	return owner == url || strings.HasSuffix(owner, "*") && strings.HasPrefix(url, strings.TrimRight(owner, "*"))
}

func containsAll(set, wanted []string) bool {
	for _, w := range wanted {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// EscalationMessage is upstream's text for a refused grant of permissions the user does not
// hold (the message of the 403 Forbidden), with the missing rules compacted (atoms on the same
// group, resource and name merged into one rule with all their verbs), one per line, sorted.
func EscalationMessage(u *authorizer.User, missing []authorizer.Rule) string {
	var name string
	var groups []string
	if u != nil {
		name, groups = u.Name, u.Groups
	}
	lines := map[string]bool{}
	for _, r := range compact(missing) {
		lines[compactString(r)] = true
	}
	sorted := make([]string, 0, len(lines))
	for l := range lines {
		sorted = append(sorted, l)
	}
	slices.Sort(sorted)
	return fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		name, groups, strings.Join(sorted, "\n"))
}

// compact merges rules on one group and one resource (and at most one name) without URLs into
// one rule per group, resource and name holding every verb, as upstream's CompactRules.
func compact(rules []authorizer.Rule) []authorizer.Rule {
	type simple struct {
		group, resource string
		hasName         bool
		name            string
	}
	var out []authorizer.Rule
	merged := map[simple]int{}
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := simple{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			k.hasName, k.name = true, r.ResourceNames[0]
		}
		if i, ok := merged[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		merged[k] = len(out)
		out = append(out, authorizer.Rule{
			APIGroups:     slices.Clone(r.APIGroups),
			Resources:     slices.Clone(r.Resources),
			ResourceNames: slices.Clone(r.ResourceNames),
			Verbs:         slices.Clone(r.Verbs),
		})
	}
	return out
}

// compactString is upstream's rendering of a rule in escalation messages, e.g.
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func compactString(r authorizer.Rule) string {
	var parts []string
	add := func(field string, values []string) {
		if len(values) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", field, values))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
