package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
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
	if err != nil {
		return r, err
	}
	u, err = a.impersonate(r, u)
	if err != nil {
		return r, err
	}
	attrs.User = u
	decision, reason, err := a.authz.Authorize(r.Context(), attrs)
	if err != nil {
		return r, apierrors.NewInternalError(fmt.Errorf("authorization: %w", err))
	}
	if decision != auth.DecisionAllow {
		return r, forbidden(attrs, reason)
	}
	return r.WithContext(auth.WithUser(r.Context(), u)), nil
}

// authenticate asks each authenticator in turn; a request nobody recognizes is 401.
func (a *API) authenticate(r *http.Request) (*auth.User, error) {
	for _, authn := range a.authn {
		u, ok, err := authn.AuthenticateRequest(r)
		if err != nil {
			a.log.InfoContext(r.Context(), "authentication failed", "error", err)
			return nil, apierrors.NewUnauthorized("Unauthorized")
		}
		if ok {
			if !contains(u.Groups, auth.GroupAuthenticated) {
				u.Groups = append(u.Groups, auth.GroupAuthenticated)
			}
			return u, nil
		}
	}
	return nil, apierrors.NewUnauthorized("Unauthorized")
}

// impersonate applies the Impersonate-* headers: the caller must be allowed the impersonate verb
// on each user, group, uid and extra value it asks for.
func (a *API) impersonate(r *http.Request, u *auth.User) (*auth.User, error) {
	name := r.Header.Get(headerImpersonateUser)
	groups := r.Header.Values(headerImpersonateGroup)
	uid := r.Header.Get(headerImpersonateUID)
	extra := map[string][]string{}
	for k, v := range r.Header {
		if rest, ok := strings.CutPrefix(k, headerImpersonateExtra); ok {
			extra[strings.ToLower(rest)] = v
		}
	}
	if name == "" {
		if len(groups) > 0 || uid != "" || len(extra) > 0 {
			return nil, apierrors.NewBadRequest("requested impersonation of groups, a uid or extra values without impersonating a user")
		}
		return u, nil
	}
	check := func(resource, subresource, name string) error {
		attrs := auth.Attributes{User: u, Verb: "impersonate", ResourceRequest: true, Resource: resource, Subresource: subresource, Name: name}
		if resource == "serviceaccounts" {
			ns, sa, _ := cut(strings.TrimPrefix(name, "system:serviceaccount:"), ":")
			attrs.Namespace, attrs.Name = ns, sa
		}
		if resource == "userextras" || resource == "uids" {
			attrs.APIGroup = naming.Group("authentication.k8s.io")
		}
		d, reason, err := a.authz.Authorize(r.Context(), attrs)
		if err != nil || d != auth.DecisionAllow {
			msg := fmt.Sprintf("%s %q is forbidden: User %q cannot impersonate resource %q in API group %q", resource, name, u.Name, resource, attrs.APIGroup)
			if reason != "" {
				msg += ": " + reason
			}
			return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, fmt.Errorf("%s", msg))
		}
		return nil
	}
	userResource := "users"
	if strings.HasPrefix(name, "system:serviceaccount:") {
		userResource = "serviceaccounts"
	}
	if err := check(userResource, "", name); err != nil {
		return nil, err
	}
	for _, g := range groups {
		if err := check("groups", "", g); err != nil {
			return nil, err
		}
	}
	if uid != "" {
		if err := check("uids", "", uid); err != nil {
			return nil, err
		}
	}
	for k, vs := range extra {
		for _, v := range vs {
			if err := check("userextras", k, v); err != nil {
				return nil, err
			}
		}
	}
	out := &auth.User{Name: name, UID: uid, Groups: append([]string(nil), groups...), Extra: extra}
	if name != auth.Anonymous && !contains(out.Groups, auth.GroupAuthenticated) {
		out.Groups = append(out.Groups, auth.GroupAuthenticated)
	}
	return out, nil
}

// forbidden is upstream's 403 wording for a denied request.
func forbidden(attrs auth.Attributes, reason string) error {
	var msg string
	if attrs.ResourceRequest {
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q", attrs.User.Name, attrs.Verb, attrs.Resource, attrs.APIGroup)
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
