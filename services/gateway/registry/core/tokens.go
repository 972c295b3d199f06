package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
)

// Bounds of a TokenRequest's lifetime, as upstream validates them.
const (
	minTokenSeconds = 10 * 60
	maxTokenSeconds = math.MaxUint32
)

// TokenSigner signs service account tokens (the authentication service).
type TokenSigner interface {
	IssueServiceAccountToken(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (*authnv1.IssueServiceAccountTokenResponse, error)
}

// TokenIssuer is the rules of a service account's token subresource (a TokenRequest): names,
// lifetime, the account and the object the token is bound to, checked as upstream checks them
// before the authentication service signs.
type TokenIssuer struct {
	// Get reads the most recent version of a core object (the account, a pod, a secret, a node).
	Get    func(ctx context.Context, resource, namespace, name string) (runtime.Object, error)
	Signer TokenSigner
	Now    func() time.Time
	Log    *slog.Logger
}

// Issue checks a TokenRequest as upstream does (names, lifetime, the account and the bound
// object) and asks the authentication service to sign it.
func (t *TokenIssuer) Issue(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest, dry bool) (*authenticationv1.TokenRequest, []string, error) {
	gk := registry.TokenRequestGroupVersionKind.GroupKind()
	var errs field.ErrorList
	if req.Name != "" && req.Name != name {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified"))
	}
	if req.Namespace != "" && req.Namespace != namespace {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified"))
	}
	if req.Spec.ExpirationSeconds == nil {
		hour := int64(3600)
		req.Spec.ExpirationSeconds = &hour
	}
	switch exp := *req.Spec.ExpirationSeconds; {
	case exp < minTokenSeconds:
		errs = append(errs, field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
	case exp > maxTokenSeconds:
		errs = append(errs, field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if ref.Name == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "boundObjectRef", "name"), ""))
		}
		if ref.APIVersion != "v1" {
			errs = append(errs, field.Invalid(field.NewPath("spec", "boundObjectRef", "apiVersion"), ref.APIVersion, "must be v1"))
		}
		switch ref.Kind {
		case "Pod", "Secret", "Node":
		default:
			errs = append(errs, field.NotSupported(field.NewPath("spec", "boundObjectRef", "kind"), ref.Kind, []string{"Pod", "Secret", "Node"}))
		}
	}
	if len(errs) > 0 {
		return nil, nil, apierrors.NewInvalid(gk, name, errs)
	}
	saObj, err := t.Get(ctx, "serviceaccounts", namespace, name)
	if err != nil {
		return nil, nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	issue := &authnv1.IssueServiceAccountTokenRequest{
		Namespace: namespace, Name: name, Uid: string(sa.UID),
		Audiences: req.Spec.Audiences, ExpirationSeconds: *req.Spec.ExpirationSeconds,
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		bound, node, err := t.boundObject(ctx, namespace, name, ref)
		if err != nil {
			return nil, nil, err
		}
		issue.BoundObject, issue.Node = bound, node
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = name, namespace
	out.CreationTimestamp = metav1.NewTime(t.Now().Truncate(time.Second))
	out.Status = authenticationv1.TokenRequestStatus{}
	if dry {
		// Everything was checked; a dry run has no side effect and so no token.
		return out, nil, nil
	}
	resp, err := t.Signer.IssueServiceAccountToken(ctx, issue)
	if err != nil {
		var unavailable *auth.UnavailableError
		if errors.As(err, &unavailable) {
			return nil, nil, auth.DependencyError(ctx, t.Log, err)
		}
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	var warnings []string
	expires := time.Unix(resp.GetExpirationUnix(), 0)
	if granted := int64(expires.Sub(out.CreationTimestamp.Time).Round(time.Second).Seconds()); granted < *out.Spec.ExpirationSeconds-1 {
		warnings = append(warnings, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", *out.Spec.ExpirationSeconds, granted))
		out.Spec.ExpirationSeconds = &granted
	}
	out.Status = authenticationv1.TokenRequestStatus{Token: resp.GetToken(), ExpirationTimestamp: metav1.NewTime(expires)}
	return out, warnings, nil
}

// boundObject reads the object a token is to be bound to and checks it as upstream does: it must
// exist with the given uid, and a pod must run as the account. For a pod, its node is returned too.
func (t *TokenIssuer) boundObject(ctx context.Context, namespace, saName string, ref *authenticationv1.BoundObjectReference) (bound, node *authnv1.ObjectReference, err error) {
	var uid types.UID
	switch ref.Kind {
	case "Pod":
		obj, err := t.Get(ctx, "pods", namespace, ref.Name)
		if err != nil {
			return nil, nil, err
		}
		pod := obj.(*corev1.Pod)
		if pod.Spec.ServiceAccountName != saName {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with serviceaccount %q", saName, pod.Spec.ServiceAccountName))
		}
		uid = pod.UID
		if pod.Spec.NodeName != "" {
			if n, err := t.Get(ctx, "nodes", "", pod.Spec.NodeName); err == nil {
				node = &authnv1.ObjectReference{Kind: "Node", ApiVersion: "v1", Name: pod.Spec.NodeName, Uid: string(registry.Meta(n).GetUID())}
			} else if !apierrors.IsNotFound(err) {
				return nil, nil, err
			}
		}
	case "Secret":
		obj, err := t.Get(ctx, "secrets", namespace, ref.Name)
		if err != nil {
			return nil, nil, err
		}
		uid = registry.Meta(obj).GetUID()
	case "Node":
		obj, err := t.Get(ctx, "nodes", "", ref.Name)
		if err != nil {
			return nil, nil, err
		}
		uid = registry.Meta(obj).GetUID()
	}
	if ref.UID != "" && ref.UID != uid {
		return nil, nil, apierrors.NewConflict(schema.GroupResource{Resource: ref.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", ref.UID, uid))
	}
	return &authnv1.ObjectReference{Kind: ref.Kind, ApiVersion: "v1", Name: ref.Name, Uid: string(uid)}, node, nil
}
