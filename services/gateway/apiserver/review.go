package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/services/gateway/auth"
)

// review serves the create-only review kinds: they are answered from the request's identity and
// the authorizer, and nothing is stored.
func (a *API) review(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	u, _ := auth.UserFrom(r.Context())
	switch obj := wr.obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		obj.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtra(u.Extra)}
	case *authorizationv1.SelfSubjectAccessReview:
		obj.Status = a.decide(r, u, obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes)
	case *authorizationv1.SubjectAccessReview:
		s := obj.Spec
		subject := &auth.User{Name: s.User, UID: s.UID, Groups: s.Groups, Extra: map[string][]string{}}
		for k, v := range s.Extra {
			subject.Extra[k] = v
		}
		if s.User == "" && len(s.Groups) == 0 {
			a.writeError(w, r, apierrors.NewBadRequest("spec.user or spec.groups is required"))
			return
		}
		obj.Status = a.decide(r, subject, s.ResourceAttributes, s.NonResourceAttributes)
	default:
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), "create"))
		return
	}
	// Nothing is stored: the answer carries no server-assigned identity.
	mustMeta(wr.obj).SetUID(types.UID(""))
	addWarnings(w, wr.warnings)
	a.writeObject(w, r, http.StatusCreated, info.res, wr.obj, wr.out)
}

// decide asks the authorizer about one access for a subject.
func (a *API) decide(r *http.Request, u *auth.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	attrs := auth.Attributes{User: u}
	switch {
	case ra != nil:
		attrs.ResourceRequest = true
		attrs.Verb, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Group, ra.Version
		attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name = ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	case nra != nil:
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	default:
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "exactly one of resourceAttributes and nonResourceAttributes must be set"}
	}
	d, reason, err := a.authz.Authorize(r.Context(), attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == auth.DecisionAllow, Denied: d == auth.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st
}

func toExtra(in map[string][]string) map[string]authenticationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authenticationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
