// Package authorizer is what every authorization mode of the authorization service implements:
// the request attributes of the spec in, a decision out. The modes (RBAC, Node, Webhook,
// AlwaysAllow, AlwaysDeny) are consulted in the order of --authorization-mode; the first allow or
// deny wins.
package authorizer

import "context"

// User is the identity a request is decided for.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Attributes are the request attributes of the spec's authorization section.
type Attributes struct {
	User *User
	// Verb is the API verb for resource requests, the lower-case HTTP method otherwise.
	Verb            string
	ResourceRequest bool
	// For resource requests ("" APIGroup is the core group):
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
	// For non-resource requests:
	Path string
}

// Decision is an authorizer's answer.
type Decision int

// Decisions, as upstream: allow, deny, or no opinion (the next authorizer decides).
const (
	NoOpinion Decision = iota
	Allow
	Deny
)

// String names the decision.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "no-opinion"
}

// Result is a decision with what a caller needs to explain and reuse it.
type Result struct {
	Decision Decision
	// Reason explains the decision (the binding that allowed it, a webhook's reason).
	Reason string
	// NameIndependent is true when the same decision holds for every object name with otherwise
	// equal attributes.
	NameIndependent bool
	// Uncacheable is set when the decision must not be reused by callers (it came from a
	// source with its own expiry, or an evaluation failed).
	Uncacheable bool
}

// Authorizer is one authorization mode.
type Authorizer interface {
	// Authorize decides a request. An error means the mode could not decide; the chain records it
	// and asks the next mode.
	Authorize(ctx context.Context, a Attributes) (Result, error)
}

// Rule is one permission, in RBAC's shape: resource rules set Verbs, APIGroups, Resources and
// optionally ResourceNames; non-resource rules set Verbs and NonResourceURLs.
type Rule struct {
	Verbs           []string
	APIGroups       []string
	Resources       []string
	ResourceNames   []string
	NonResourceURLs []string
}

// RuleLister is implemented by modes that can list what a user may do in a namespace
// (SelfSubjectRulesReview). Incomplete is true when the mode cannot list everything it would allow.
type RuleLister interface {
	RulesFor(ctx context.Context, u *User, namespace string) (resource, nonResource []Rule, incomplete bool, err error)
}
