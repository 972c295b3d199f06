package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Forbidden is upstream's 403 for a request authorization denied: who may not do what, where,
// and the authorizer's reason.
func Forbidden(attrs Attributes, reason string) error {
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
	return apierrors.NewForbidden(schema.GroupResource{Group: attrs.APIGroup, Resource: attrs.Resource}, attrs.Name, errors.New(msg))
}

// DependencyError is the answer for a failed call to another service: 503 with Retry-After when
// it is unavailable (clients retry; log records which service), a timeout when the request ended,
// 500 otherwise.
func DependencyError(ctx context.Context, log *slog.Logger, err error) error {
	var unavailable *UnavailableError
	switch {
	case errors.As(err, &unavailable):
		log.WarnContext(ctx, "dependency unavailable", "service", unavailable.Service, "err", unavailable.Err)
		se := apierrors.NewServiceUnavailable(unavailable.Service + " is unavailable, retry later")
		se.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		return se
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("the request did not complete in time", 1)
	}
	return apierrors.NewInternalError(err)
}

// Authorize asks authz about attrs and turns anything but an allow into the request's error: 403
// in upstream's words, or the dependency's error (DependencyError). It also returns the
// authorizer's reason.
func Authorize(ctx context.Context, log *slog.Logger, authz Authorizer, attrs Attributes) (string, error) {
	d, reason, err := authz.Authorize(ctx, attrs)
	if err != nil {
		return "", DependencyError(ctx, log, err)
	}
	if d != DecisionAllow {
		return reason, Forbidden(attrs, reason)
	}
	return reason, nil
}
