// Package authentication holds the review kinds of authentication.<domain>: SelfSubjectReview
// (whoami: the request's own identity) and TokenReview (a bearer token judged by the
// authentication service). They are created only, answered and never stored (registry.Reviewer).
package authentication

import (
	"context"
	"errors"
	"log/slog"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// TokenReviewer judges bearer tokens (the authentication service).
type TokenReviewer interface {
	ReviewToken(ctx context.Context, token string, audiences []string) (*auth.User, []string, error)
}

// SelfSubjectReview is the strategy of SelfSubjectReviews, in every version served.
type SelfSubjectReview struct{ *builtin.Strategy }

// NewSelfSubjectReview returns the strategy of SelfSubjectReviews over their default one.
func NewSelfSubjectReview(b *builtin.Strategy) registry.Strategy {
	return &SelfSubjectReview{Strategy: b}
}

// Review answers with the request's user (after impersonation).
func (s *SelfSubjectReview) Review(ctx context.Context, obj runtime.Object, _ string) error {
	u, _ := auth.UserFrom(ctx)
	info := auth.UserInfo(u)
	switch o := obj.(type) {
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = info
	case *authenticationv1beta1.SelfSubjectReview:
		o.Status.UserInfo = info
	case *authenticationv1alpha1.SelfSubjectReview:
		o.Status.UserInfo = info
	}
	return nil
}

// TokenReview is the strategy of TokenReviews.
type TokenReview struct {
	*builtin.Strategy
	tokens TokenReviewer
	log    *slog.Logger
}

// NewTokenReview returns the strategy of TokenReviews over their default one.
func NewTokenReview(b *builtin.Strategy, tokens TokenReviewer, log *slog.Logger) registry.Strategy {
	return &TokenReview{Strategy: b, tokens: tokens, log: log}
}

// Review asks the authentication service about the token: a refused token is an answer
// (authenticated false, with the reason), a service that cannot decide is the request's 503.
func (s *TokenReview) Review(ctx context.Context, obj runtime.Object, _ string) error {
	tr, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return apierrors.NewMethodNotSupported(s.Res.GroupResource(), "create")
	}
	if tr.Spec.Token == "" {
		return apierrors.NewBadRequest("token is required for TokenReview in " + s.Res.Group)
	}
	u, auds, err := s.tokens.ReviewToken(ctx, tr.Spec.Token, tr.Spec.Audiences)
	var refused *auth.UnauthorizedError
	if err != nil && !errors.As(err, &refused) {
		return auth.DependencyError(ctx, s.log, err)
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	if refused != nil {
		tr.Status.Error = refused.Reason
		return nil
	}
	tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: auds, User: auth.UserInfo(u)}
	return nil
}
