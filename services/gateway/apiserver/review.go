package apiserver

import (
	"errors"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/gateway/auth"
)

// review serves the create-only review kinds: they are answered from the request's identity and
// the authentication and authorization services, and nothing is stored.
func (a *API) review(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	u, _ := auth.UserFrom(r.Context())
	if err := a.answerReview(r, info, u, wr); err != nil {
		a.writeError(w, r, err)
		return
	}
	// Nothing is stored: the answer carries no server-assigned identity.
	mustMeta(wr.obj).SetUID(types.UID(""))
	warn(r, wr.warnings)
	a.writeObject(w, r, http.StatusCreated, info.res, wr.obj, wr.out)
}

func (a *API) answerReview(r *http.Request, info *requestInfo, u *auth.User, wr *writeRequest) error {
	ctx := r.Context()
	switch obj := wr.obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		obj.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtra(u.Extra)}
	case *authenticationv1beta1.SelfSubjectReview:
		obj.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtra(u.Extra)}
	case *authenticationv1alpha1.SelfSubjectReview:
		obj.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: toExtra(u.Extra)}
	case *authenticationv1.TokenReview:
		return a.reviewToken(ctx, obj)
	case *authorizationv1.SelfSubjectAccessReview:
		if err := validateAccessReview(info, &obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes, nil); err != nil {
			return err
		}
		st, err := a.decide(r, u, obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes)
		obj.Status = st
		return err
	case *authorizationv1.SubjectAccessReview:
		if err := validateAccessReview(info, &obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes, &obj.Spec); err != nil {
			return err
		}
		st, err := a.decide(r, subjectOf(obj.Spec), obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes)
		obj.Status = st
		return err
	case *authorizationv1.LocalSubjectAccessReview:
		if err := validateAccessReview(info, &obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes, &obj.Spec); err != nil {
			return err
		}
		st, err := a.decide(r, subjectOf(obj.Spec), obj.Spec.ResourceAttributes, obj.Spec.NonResourceAttributes)
		obj.Status = st
		return err
	case *authorizationv1.SelfSubjectRulesReview:
		if obj.Spec.Namespace == "" {
			return apierrors.NewBadRequest("no namespace on request")
		}
		resp, err := a.authz.RulesFor(ctx, u, obj.Spec.Namespace)
		if err != nil {
			return a.dependencyError(ctx, err)
		}
		obj.Status = rulesReviewStatus(resp)
	default:
		return apierrors.NewMethodNotSupported(info.res.GroupResource(), "create")
	}
	return nil
}

// validateAccessReview applies upstream's validation of the access review kinds: exactly one of
// the attribute kinds; a subject for SubjectAccessReviews; for the namespaced kind, resource
// attributes in the request's namespace.
func validateAccessReview(info *requestInfo, ra **authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, spec *authorizationv1.SubjectAccessReviewSpec) error {
	gk := info.res.GroupVersionKind().GroupKind()
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if (*ra == nil) == (nra == nil) {
		errs = append(errs, field.Invalid(specPath.Child("resourceAttributes"), *ra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if spec != nil && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(specPath.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	if info.res.Kind == "LocalSubjectAccessReview" {
		if nra != nil {
			errs = append(errs, field.Invalid(specPath.Child("nonResourceAttributes"), nra, "disallowed on this kind of request"))
		}
		if *ra != nil && (*ra).Namespace != info.namespace {
			return apierrors.NewBadRequest("spec.resourceAttributes.namespace must match namespace: " + info.namespace)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gk, "", errs)
	}
	return nil
}

func subjectOf(s authorizationv1.SubjectAccessReviewSpec) *auth.User {
	subject := &auth.User{Name: s.User, UID: s.UID, Groups: s.Groups}
	if len(s.Extra) > 0 {
		subject.Extra = map[string][]string{}
		for k, v := range s.Extra {
			subject.Extra[k] = v
		}
	}
	return subject
}

// decide asks the authorizer about one access for a subject. A decision that could not be made
// because the authorization service is down is a 503, not an answer.
func (a *API) decide(r *http.Request, u *auth.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	attrs := auth.Attributes{User: u}
	switch {
	case ra != nil:
		attrs.ResourceRequest = true
		attrs.Verb, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Group, ra.Version
		attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name = ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	case nra != nil:
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	d, reason, err := a.authz.Authorize(r.Context(), attrs)
	var unavailable *auth.UnavailableError
	if errors.As(err, &unavailable) {
		return authorizationv1.SubjectAccessReviewStatus{}, a.dependencyError(r.Context(), err)
	}
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == auth.DecisionAllow, Denied: d == auth.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st, nil
}

// rulesReviewStatus turns the authorization service's rule list into a SelfSubjectRulesReview
// status.
func rulesReviewStatus(resp *authzv1.ReviewRulesResponse) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{},
		NonResourceRules: []authorizationv1.NonResourceRule{},
		Incomplete:       resp.GetIncomplete(),
		EvaluationError:  resp.GetEvaluationError(),
	}
	for _, r := range resp.GetResourceRules() {
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.GetVerbs(), APIGroups: r.GetApiGroups(), Resources: r.GetResources(), ResourceNames: r.GetResourceNames()})
	}
	for _, r := range resp.GetNonResourceRules() {
		st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.GetVerbs(), NonResourceURLs: r.GetNonResourceUrls()})
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
