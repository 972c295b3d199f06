// Package auth holds the seams of the request path that access control plugs into: who is
// calling (Authenticator), acting as whom (impersonation), and whether they may (Authorizer).
// The gateway's handler chain calls them in that order before any handler runs.
package auth

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Well-known users and groups.
const (
	Anonymous            = "system:anonymous"
	GroupUnauthenticated = "system:unauthenticated"
	GroupAuthenticated   = "system:authenticated"
	GroupMasters         = "system:masters"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// UserInfo is u as the authentication API reports users (SelfSubjectReview, TokenReview, audit
// events); nil is the empty user.
func UserInfo(u *User) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return info
}

// Attributes describe a request for an authorization decision.
type Attributes struct {
	User            *User
	Verb            string
	ResourceRequest bool
	// For resource requests:
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
	// For non-resource requests:
	Path string
}

// Decision is an authorizer's answer.
type Decision int

// Decisions, as upstream: an authorizer may allow, deny, or have no opinion (the next one decides).
const (
	DecisionNoOpinion Decision = iota
	DecisionAllow
	DecisionDeny
)

// Authorizer decides whether a request may proceed.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

type userKey struct{}

// WithUser returns a context carrying the request's user.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the request's user, if the chain set one.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}
