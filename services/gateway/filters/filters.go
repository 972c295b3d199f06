// Package filters holds the gateway's handler-chain filters that run before any route: request
// info, authentication, impersonation, authorization and the request timeout. They wrap every
// path the gateway serves (resources, discovery, OpenAPI, version, health, metrics, debug,
// aggregated APIs, and paths nothing serves), once, in upstream's order (server.Start assembles
// them; docs/architecture.md records the order). No handler calls access control itself, so no
// path can forget it, and "not found" is only ever said to someone allowed to ask.
package filters

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/request"
)

// ErrorWriter answers a request with err as a Status (the API's negotiated error writer).
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// WithRequestInfo resolves every request's Info once, for every later filter and handler.
func WithRequestInfo(next http.Handler, resolver *request.Resolver) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := resolver.Resolve(r)
		next.ServeHTTP(w, r.WithContext(request.WithInfo(r.Context(), info)))
	})
}

// infoOf is the request's Info (resolved here if no filter did: tests that build a partial
// chain).
func infoOf(r *http.Request) *request.Info {
	if info, ok := request.InfoFrom(r.Context()); ok {
		return info
	}
	return (*request.Resolver)(nil).Resolve(r)
}

// WithAuthentication identifies the caller of every request: a presented credential that fails is
// 401 on every path (upstream's body, the reason only in the log), a request without credentials
// is system:anonymous when anonymous requests are allowed (the authenticator decides), and a
// decision that cannot be made is 503. It begins the request's audit record with the caller (or
// none, when refused).
func WithAuthentication(next http.Handler, authn auth.Authenticator, fail ErrorWriter, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r)
		u, err := authn.AuthenticateRequest(r)
		audit.Begin(r.Context(), auditAttributes(info.Attributes(u)))
		if err != nil {
			var unauthorized *auth.UnauthorizedError
			if errors.As(err, &unauthorized) {
				log.InfoContext(r.Context(), "authentication failed", "reason", unauthorized.Reason)
				err = apierrors.NewUnauthorized("Unauthorized")
			} else {
				err = auth.DependencyError(r.Context(), log, err)
			}
			fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithUser(r.Context(), u)))
	})
}

func auditAttributes(a auth.Attributes) audit.Attributes {
	return audit.Attributes{User: a.User, Verb: a.Verb, ResourceRequest: a.ResourceRequest, APIGroup: a.APIGroup, APIVersion: a.APIVersion,
		Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name, Path: a.Path}
}

// Impersonation headers.
const (
	headerImpersonateUser  = "Impersonate-User"
	headerImpersonateGroup = "Impersonate-Group"
	headerImpersonateUID   = "Impersonate-Uid"
	headerImpersonateExtra = "Impersonate-Extra-"
)

// WithImpersonation applies the Impersonate-* headers as upstream does: the caller must be allowed
// the impersonate verb on each user (or service account), group, uid and extra value it asks
// for; the request then runs as that identity (recorded in the audit event).
func WithImpersonation(next http.Handler, authz auth.Authorizer, fail ErrorWriter, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := auth.UserFrom(r.Context())
		u, err := impersonate(r, caller, authz, log)
		if err != nil {
			fail(w, r, err)
			return
		}
		if u != caller {
			audit.SetImpersonatedUser(r.Context(), u)
			r = r.WithContext(auth.WithUser(r.Context(), u))
		}
		next.ServeHTTP(w, r)
	})
}

func impersonate(r *http.Request, u *auth.User, authz auth.Authorizer, log *slog.Logger) (*auth.User, error) {
	name := r.Header.Get(headerImpersonateUser)
	groups := r.Header.Values(headerImpersonateGroup)
	uid := r.Header.Get(headerImpersonateUID)
	extra := map[string][]string{}
	for k, v := range r.Header {
		if rest, ok := strings.CutPrefix(k, headerImpersonateExtra); ok {
			key := rest
			if unescaped, err := url.PathUnescape(rest); err == nil {
				key = unescaped
			}
			extra[strings.ToLower(key)] = v
		}
	}
	if name == "" {
		if len(groups) > 0 || uid != "" || len(extra) > 0 {
			return nil, apierrors.NewBadRequest("requested impersonation of groups, a uid or extra values without impersonating a user")
		}
		return u, nil
	}
	check := func(group, resource, subresource, namespace, objName string) error {
		_, err := auth.Authorize(r.Context(), log, authz, auth.Attributes{User: u, Verb: "impersonate", ResourceRequest: true,
			APIGroup: group, Resource: resource, Subresource: subresource, Namespace: namespace, Name: objName})
		return err
	}
	out := &auth.User{Name: name, UID: uid, Extra: extra}
	if ns, sa, ok := serviceAccountName(name); ok {
		if err := check("", "serviceaccounts", "", ns, sa); err != nil {
			return nil, err
		}
		if len(groups) == 0 {
			// A service account's groups are a fixed mapping: upstream adds them.
			groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
	} else if err := check("", "users", "", "", name); err != nil {
		return nil, err
	}
	authGroup := naming.Group("authentication.k8s.io")
	for _, g := range r.Header.Values(headerImpersonateGroup) {
		if err := check("", "groups", "", "", g); err != nil {
			return nil, err
		}
	}
	if uid != "" {
		if err := check(authGroup, "uids", "", "", uid); err != nil {
			return nil, err
		}
	}
	for k, vs := range extra {
		for _, v := range vs {
			if err := check(authGroup, "userextras", k, "", v); err != nil {
				return nil, err
			}
		}
	}
	out.Groups = append([]string(nil), groups...)
	if name == auth.Anonymous {
		if !contains(out.Groups, auth.GroupUnauthenticated) {
			out.Groups = append(out.Groups, auth.GroupUnauthenticated)
		}
	} else if !contains(out.Groups, auth.GroupAuthenticated) {
		out.Groups = append(out.Groups, auth.GroupAuthenticated)
	}
	if len(out.Extra) == 0 {
		out.Extra = nil
	}
	return out, nil
}

// serviceAccountName splits system:serviceaccount:<namespace>:<name>.
func serviceAccountName(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}

// The audit annotations of authorization's decision (upstream's authorization.k8s.io/decision
// and /reason).
var (
	auditDecisionKey = naming.Group("authorization.k8s.io") + "/decision"
	auditReasonKey   = naming.Group("authorization.k8s.io") + "/reason"
)

// WithAuthorization decides every request with its Info's attributes for the effective user: 403
// in upstream's words when not allowed. The audit record says what was decided and why.
func WithAuthorization(next http.Handler, authz auth.Authorizer, fail ErrorWriter, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := auth.UserFrom(r.Context())
		attrs := infoOf(r).Attributes(u)
		d, reason, err := authz.Authorize(r.Context(), attrs)
		if err != nil {
			fail(w, r, auth.DependencyError(r.Context(), log, err))
			return
		}
		if d != auth.DecisionAllow {
			audit.AddAnnotation(r.Context(), auditDecisionKey, "forbid")
			audit.AddAnnotation(r.Context(), auditReasonKey, reason)
			fail(w, r, auth.Forbidden(attrs, reason))
			return
		}
		audit.AddAnnotation(r.Context(), auditDecisionKey, "allow")
		audit.AddAnnotation(r.Context(), auditReasonKey, reason)
		next.ServeHTTP(w, r)
	})
}

// WithTimeout bounds every request but the long-running ones (watches, upgrades) by d, upstream's
// --request-timeout: handlers and the services they call see the deadline in the context.
func WithTimeout(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d <= 0 || infoOf(r).LongRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
