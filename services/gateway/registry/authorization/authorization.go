// Package authorization holds the review kinds of authorization.<domain>: access reviews
// (SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview) and
// SelfSubjectRulesReview, answered by the authorization service. They are created only,
// answered and never stored (registry.Reviewer).
package authorization

import (
	"context"
	"errors"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Authorizer answers the reviews (the authorization service).
type Authorizer interface {
	auth.Authorizer
	RulesFor(ctx context.Context, u *auth.User, namespace string) (*authzv1.ReviewRulesResponse, error)
}

// Review is the strategy of the review kinds of authorization.<domain>.
type Review struct {
	*builtin.Strategy
	authz Authorizer
	log   *slog.Logger
}

// New returns the strategy of a review kind over its default one.
func New(b *builtin.Strategy, authz Authorizer, log *slog.Logger) registry.Strategy {
	return &Review{Strategy: b, authz: authz, log: log}
}

// Review answers the review: for the request's user (self reviews) or the subject it names;
// for a LocalSubjectAccessReview in the request's namespace.
func (s *Review) Review(ctx context.Context, obj runtime.Object, namespace string) error {
	u, _ := auth.UserFrom(ctx)
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		if err := s.validate(&o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, nil, namespace); err != nil {
			return err
		}
		st, err := s.decide(ctx, u, o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
		o.Status = st
		return err
	case *authorizationv1.SubjectAccessReview:
		if err := s.validate(&o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, &o.Spec, namespace); err != nil {
			return err
		}
		st, err := s.decide(ctx, subjectOf(o.Spec), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
		o.Status = st
		return err
	case *authorizationv1.LocalSubjectAccessReview:
		if err := s.validate(&o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes, &o.Spec, namespace); err != nil {
			return err
		}
		st, err := s.decide(ctx, subjectOf(o.Spec), o.Spec.ResourceAttributes, o.Spec.NonResourceAttributes)
		o.Status = st
		return err
	case *authorizationv1.SelfSubjectRulesReview:
		if o.Spec.Namespace == "" {
			return apierrors.NewBadRequest("no namespace on request")
		}
		resp, err := s.authz.RulesFor(ctx, u, o.Spec.Namespace)
		if err != nil {
			return auth.DependencyError(ctx, s.log, err)
		}
		o.Status = rulesReviewStatus(resp)
		return nil
	}
	return apierrors.NewMethodNotSupported(s.Res.GroupResource(), "create")
}

// validate applies upstream's validation of the access review kinds: exactly one of the
// attribute kinds; a subject for SubjectAccessReviews; for the namespaced kind, resource
// attributes in the request's namespace.
func (s *Review) validate(ra **authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, spec *authorizationv1.SubjectAccessReviewSpec, namespace string) error {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	if (*ra == nil) == (nra == nil) {
		errs = append(errs, field.Invalid(specPath.Child("resourceAttributes"), *ra, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if spec != nil && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(specPath.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	if s.Res.Namespaced {
		// LocalSubjectAccessReview: non-resource attributes have no namespace to be local to.
		if nra != nil {
			errs = append(errs, field.Invalid(specPath.Child("nonResourceAttributes"), nra, "disallowed on this kind of request"))
		}
		if *ra != nil && (*ra).Namespace != namespace {
			return apierrors.NewBadRequest("spec.resourceAttributes.namespace must match namespace: " + namespace)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(s.Res.GroupVersionKind().GroupKind(), "", errs)
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
func (s *Review) decide(ctx context.Context, u *auth.User, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	attrs := auth.Attributes{User: u}
	switch {
	case ra != nil:
		attrs.ResourceRequest = true
		attrs.Verb, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Group, ra.Version
		attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name = ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	case nra != nil:
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	d, reason, err := s.authz.Authorize(ctx, attrs)
	var unavailable *auth.UnavailableError
	if errors.As(err, &unavailable) {
		return authorizationv1.SubjectAccessReviewStatus{}, auth.DependencyError(ctx, s.log, err)
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
