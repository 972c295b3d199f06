package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/auth"
)

// Impersonation headers.
const (
	headerImpersonateUser  = "Impersonate-User"
	headerImpersonateGroup = "Impersonate-Group"
	headerImpersonateUID   = "Impersonate-Uid"
	headerImpersonateExtra = "Impersonate-Extra-"
)

// admitRequest runs the access-control seams in upstream's order: authenticate, impersonate,
// authorize. It returns the request with the effective user in its context.
func (a *API) admitRequest(r *http.Request, attrs auth.Attributes) (*http.Request, error) {
	u, err := a.authenticate(r)
	audit.Begin(r.Context(), audit.Attributes{User: u, Verb: attrs.Verb, ResourceRequest: attrs.ResourceRequest, APIGroup: attrs.APIGroup,
		APIVersion: attrs.APIVersion, Resource: attrs.Resource, Subresource: attrs.Subresource, Namespace: attrs.Namespace, Name: attrs.Name, Path: attrs.Path})
	if err != nil {
		return r, err
	}
	caller := u
	u, err = a.impersonate(r, u)
	if err != nil {
		return r, err
	}
	if u != caller {
		audit.SetImpersonatedUser(r.Context(), u)
	}
	attrs.User = u
	decision, reason, err := a.authz.Authorize(r.Context(), attrs)
	if err != nil {
		return r, a.dependencyError(r.Context(), err)
	}
	// As upstream, the audit record says what authorization decided and why.
	if decision != auth.DecisionAllow {
		audit.AddAnnotation(r.Context(), auditDecisionKey, "forbid")
		audit.AddAnnotation(r.Context(), auditReasonKey, reason)
		return r, forbidden(attrs, reason)
	}
	audit.AddAnnotation(r.Context(), auditDecisionKey, "allow")
	audit.AddAnnotation(r.Context(), auditReasonKey, reason)
	return r.WithContext(auth.WithUser(r.Context(), u)), nil
}

// The audit annotations of authorization's decision (upstream authorization.k8s.io/decision and
// /reason), and the prefix of mutating webhooks' patch annotations.
var (
	auditDecisionKey     = naming.Group("authorization.k8s.io") + "/decision"
	auditReasonKey       = naming.Group("authorization.k8s.io") + "/reason"
	auditPatchAnnotation = "patch.webhook.admission." + naming.GroupSuffix + "/"
)

// auditAdmissionAnnotations adds admission's annotations to the audit record; the patch
// annotations of mutating webhooks are kept at level Request and above only (spec 001).
func auditAdmissionAnnotations(ctx context.Context, annotations map[string]string) {
	for k, v := range annotations {
		if strings.HasPrefix(k, auditPatchAnnotation) {
			audit.AddAnnotationAtLevel(ctx, audit.LevelRequest, k, v)
		} else {
			audit.AddAnnotation(ctx, k, v)
		}
	}
}

// authenticate identifies the caller: 401 for refused credentials (upstream's message, the
// reason only in the log), 503 when the authentication service cannot decide.
func (a *API) authenticate(r *http.Request) (*auth.User, error) {
	u, err := a.authn.AuthenticateRequest(r)
	if err == nil {
		return u, nil
	}
	var unauthorized *auth.UnauthorizedError
	if errors.As(err, &unauthorized) {
		a.log.InfoContext(r.Context(), "authentication failed", "reason", unauthorized.Reason)
		return nil, apierrors.NewUnauthorized("Unauthorized")
	}
	return nil, a.dependencyError(r.Context(), err)
}

// dependencyError is the answer for a failed call to another service: 503 with Retry-After when
// it is unavailable (clients retry), the context's error when the request ended, 500 otherwise.
func (a *API) dependencyError(ctx context.Context, err error) error {
	var unavailable *auth.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		a.log.WarnContext(ctx, "dependency unavailable", "service", unavailable.Service, "err", unavailable.Err)
		se := apierrors.NewServiceUnavailable(unavailable.Service + " is unavailable, retry later")
		se.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		return se
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("the request did not complete in time", 1)
	}
	return apierrors.NewInternalError(err)
}

// impersonate applies the Impersonate-* headers as upstream does: the caller must be allowed the
// impersonate verb on each user (or service account), group, uid and extra value it asks for; the
// request then runs as that identity.
func (a *API) impersonate(r *http.Request, u *auth.User) (*auth.User, error) {
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
		attrs := auth.Attributes{User: u, Verb: "impersonate", ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: subresource, Namespace: namespace, Name: objName}
		d, reason, err := a.authz.Authorize(r.Context(), attrs)
		if err != nil {
			return a.dependencyError(r.Context(), err)
		}
		if d != auth.DecisionAllow {
			return forbidden(attrs, reason)
		}
		return nil
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

// forbidden is upstream's 403 wording for a denied request.
func forbidden(attrs auth.Attributes, reason string) error {
	var msg string
	if attrs.ResourceRequest {
		resource := attrs.Resource
		if attrs.Subresource != "" {
			resource += "/" + attrs.Subresource
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q", attrs.User.Name, attrs.Verb, resource, attrs.APIGroup)
		if attrs.Namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", attrs.Namespace)
		} else {
			msg += " at the cluster scope"
		}
	} else {
		msg = fmt.Sprintf("User %q cannot %s path %q", attrs.User.Name, attrs.Verb, attrs.Path)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}, attrs.Name, fmt.Errorf("%s", msg))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cut(s, sep string) (string, string, bool) { return strings.Cut(s, sep) }

func cutPrefix(s, prefix string) (string, bool) { return strings.CutPrefix(s, prefix) }
