package node

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/services/authz/authorizer"
)

// rulesAllow reports whether any rule grants the request, with RBAC's matching rules: "*"
// wildcards, "*/sub" for a subresource of any resource, resourceNames, and URL prefixes ending
// in "*".
func rulesAllow(rules []rbacv1.PolicyRule, at *authorizer.Attributes) bool {
	for i := range rules {
		if ruleAllows(&rules[i], at) {
			return true
		}
	}
	return false
}

func ruleAllows(r *rbacv1.PolicyRule, at *authorizer.Attributes) bool {
	if !matches(r.Verbs, rbacv1.VerbAll, at.Verb) {
		return false
	}
	if !at.ResourceRequest {
		return urlMatches(r.NonResourceURLs, at.Path)
	}
	if !matches(r.APIGroups, rbacv1.APIGroupAll, at.APIGroup) {
		return false
	}
	if !resourceMatches(r.Resources, at.Resource, at.Subresource) {
		return false
	}
	return len(r.ResourceNames) == 0 || matches(r.ResourceNames, "", at.Name)
}

// matches: the list holds the value or, when all is not empty, the wildcard.
func matches(list []string, all, v string) bool {
	for _, l := range list {
		if l == v || (all != "" && l == all) {
			return true
		}
	}
	return false
}

func resourceMatches(resources []string, resource, subresource string) bool {
	combined := resource
	if subresource != "" {
		combined = resource + "/" + subresource
	}
	for _, r := range resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		if subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

func urlMatches(urls []string, path string) bool {
	for _, u := range urls {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
