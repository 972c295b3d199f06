package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// serveTokenRequest answers POST serviceaccounts/<name>/token: a bound token for the account,
// signed by the authentication service, never stored.
func (a *API) serveTokenRequest(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.verb != "create" {
		a.writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "serviceaccounts/token"}, info.verb))
		return
	}
	trInfo := *info
	trInfo.res = a.reg.TokenRequest()
	wr, err := a.readWrite(r, &trInfo)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	req := wr.obj.(*authenticationv1.TokenRequest)
	resp, warnings, err := a.issueToken(r.Context(), info.namespace, info.name, req, wr.dryRun)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// Answer in the group the body named (kubectl sends upstream's authentication.k8s.io).
	if sameGroup(wr.bodyGV, trInfo.res.GroupVersion()) && !wr.bodyGV.Empty() {
		resp.SetGroupVersionKind(wr.bodyGV.WithKind(trInfo.res.Kind))
	}
	warn(r, append(wr.warnings, warnings...))
	a.writeObject(w, r, http.StatusCreated, trInfo.res, resp, wr.out)
}

// issueToken checks a TokenRequest as upstream does (names, lifetime, the account and the bound
// object) and asks the authentication service to sign it.
func (a *API) issueToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest, dry bool) (*authenticationv1.TokenRequest, []string, error) {
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
	saObj, err := a.gen.Get(ctx, a.coreResource("serviceaccounts"), namespace, name)
	if err != nil {
		return nil, nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	issue := &authnv1.IssueServiceAccountTokenRequest{
		Namespace: namespace, Name: name, Uid: string(sa.UID),
		Audiences: req.Spec.Audiences, ExpirationSeconds: *req.Spec.ExpirationSeconds,
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		bound, node, err := a.boundObject(ctx, namespace, name, ref)
		if err != nil {
			return nil, nil, err
		}
		issue.BoundObject, issue.Node = bound, node
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = name, namespace
	out.CreationTimestamp = metav1.NewTime(a.now().Truncate(time.Second))
	out.Status = authenticationv1.TokenRequestStatus{}
	if dry {
		// Everything was checked; a dry run has no side effect and so no token.
		return out, nil, nil
	}
	resp, err := a.authn.IssueServiceAccountToken(ctx, issue)
	if err != nil {
		var unavailable *auth.UnavailableError
		if errors.As(err, &unavailable) {
			return nil, nil, a.dependencyError(ctx, err)
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
func (a *API) boundObject(ctx context.Context, namespace, saName string, ref *authenticationv1.BoundObjectReference) (bound, node *authnv1.ObjectReference, err error) {
	var uid types.UID
	switch ref.Kind {
	case "Pod":
		obj, err := a.gen.Get(ctx, a.coreResource("pods"), namespace, ref.Name)
		if err != nil {
			return nil, nil, err
		}
		pod := obj.(*corev1.Pod)
		if pod.Spec.ServiceAccountName != saName {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with serviceaccount %q", saName, pod.Spec.ServiceAccountName))
		}
		uid = pod.UID
		if pod.Spec.NodeName != "" {
			if n, err := a.gen.Get(ctx, a.coreResource("nodes"), "", pod.Spec.NodeName); err == nil {
				node = &authnv1.ObjectReference{Kind: "Node", ApiVersion: "v1", Name: pod.Spec.NodeName, Uid: string(mustMeta(n).GetUID())}
			} else if !apierrors.IsNotFound(err) {
				return nil, nil, err
			}
		}
	case "Secret":
		obj, err := a.gen.Get(ctx, a.coreResource("secrets"), namespace, ref.Name)
		if err != nil {
			return nil, nil, err
		}
		uid = mustMeta(obj).GetUID()
	case "Node":
		obj, err := a.gen.Get(ctx, a.coreResource("nodes"), "", ref.Name)
		if err != nil {
			return nil, nil, err
		}
		uid = mustMeta(obj).GetUID()
	}
	if ref.UID != "" && ref.UID != uid {
		return nil, nil, apierrors.NewConflict(schema.GroupResource{Resource: ref.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", ref.UID, uid))
	}
	return &authnv1.ObjectReference{Kind: ref.Kind, ApiVersion: "v1", Name: ref.Name, Uid: string(uid)}, node, nil
}

// coreResource is a resource of the core group.
func (a *API) coreResource(resource string) *registry.Resource {
	res, _ := a.reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: resource})
	return res
}
