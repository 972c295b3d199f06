package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// AdmissionReview on the wire, in the spec's group (admission.platform.io: naming.Group of
// upstream's admission.k8s.io, so the kubernetes naming profile sends upstream's); answers are
// accepted in either group, since webhook libraries answer in the group they were built with. The
// kinds, resources and objects inside are as Platform serves them (its group names), which is
// what the objects' own apiVersion says.
var (
	// reviewGroup is the group requests are sent in.
	reviewGroup  = naming.Group(admissionv1.SchemeGroupVersion.Group)
	reviewGroups = map[string]bool{
		admissionv1.SchemeGroupVersion.Group:               true,
		naming.Group(admissionv1.SchemeGroupVersion.Group): true,
	}
	// supportedReviewVersions are the AdmissionReview versions the dispatcher speaks, in the
	// order validation names them.
	supportedReviewVersions = []string{admissionv1.SchemeGroupVersion.Version, admissionv1beta1.SchemeGroupVersion.Version}
)

// reviewVersion picks the first of a webhook's admissionReviewVersions the dispatcher speaks.
func reviewVersion(versions []string) (string, bool) {
	for _, v := range versions {
		for _, s := range supportedReviewVersions {
			if v == s {
				return v, true
			}
		}
	}
	return "", false
}

// reviewInput is what goes into an AdmissionReview request besides the attributes.
type reviewInput struct {
	uid       types.UID
	object    []byte
	oldObject []byte
}

// buildReview encodes the AdmissionReview request for a webhook in the given version.
func buildReview(version string, a *admission.Attributes, in reviewInput) ([]byte, error) {
	kind, resource, sub := metaGVK(a.Kind), metaGVR(a.Resource), a.Subresource
	reqKind, reqResource, reqSub := kind, resource, sub
	if !a.RequestResource.Empty() {
		reqResource, reqSub = metaGVR(a.RequestResource), a.RequestSubresource
	}
	if !a.RequestKind.Empty() {
		reqKind = metaGVK(a.RequestKind)
	}
	user := userInfo(a.User)
	dryRun := a.DryRun
	raw := func(b []byte) runtime.RawExtension {
		if len(b) == 0 {
			return runtime.RawExtension{}
		}
		return runtime.RawExtension{Raw: b}
	}
	switch version {
	case admissionv1.SchemeGroupVersion.Version:
		return json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: reviewGroup + "/" + admissionv1.SchemeGroupVersion.Version, Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: in.uid, Kind: kind, Resource: resource, SubResource: sub,
				RequestKind: &reqKind, RequestResource: &reqResource, RequestSubResource: reqSub,
				Name: a.Name, Namespace: a.Namespace, Operation: admissionv1.Operation(a.Operation), UserInfo: user,
				Object: raw(in.object), OldObject: raw(in.oldObject), DryRun: &dryRun, Options: raw(a.Options),
			},
		})
	case admissionv1beta1.SchemeGroupVersion.Version:
		return json.Marshal(&admissionv1beta1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: reviewGroup + "/" + admissionv1beta1.SchemeGroupVersion.Version, Kind: "AdmissionReview"},
			Request: &admissionv1beta1.AdmissionRequest{
				UID: in.uid, Kind: kind, Resource: resource, SubResource: sub,
				RequestKind: &reqKind, RequestResource: &reqResource, RequestSubResource: reqSub,
				Name: a.Name, Namespace: a.Namespace, Operation: admissionv1beta1.Operation(a.Operation), UserInfo: user,
				Object: raw(in.object), OldObject: raw(in.oldObject), DryRun: &dryRun, Options: raw(a.Options),
			},
		})
	}
	return nil, fmt.Errorf("webhook does not accept known AdmissionReview versions (v1, v1beta1)")
}

func metaGVK(k schema.GroupVersionKind) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func metaGVR(r schema.GroupVersionResource) metav1.GroupVersionResource {
	return metav1.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

func userInfo(u *admission.User) authenticationv1.UserInfo {
	out := authenticationv1.UserInfo{Extra: map[string]authenticationv1.ExtraValue{}}
	if u == nil {
		return out
	}
	out.Username, out.UID, out.Groups = u.Name, u.UID, u.Groups
	for k, v := range u.Extra {
		out.Extra[k] = authenticationv1.ExtraValue(v)
	}
	return out
}

// response is a verified webhook answer.
type response struct {
	allowed          bool
	result           *metav1.Status
	patch            []byte
	patchType        string
	warnings         []string
	auditAnnotations map[string]string
}

// verifyResponse parses and checks an answer in the version sent, by upstream's rules: in v1 the
// answer must be an AdmissionReview of that version (either group) with the request's uid, a
// patch needs its patchType and validating webhooks may not patch; v1beta1 answers are checked
// loosely, as upstream always has (no uid or kind check, the patch type taken as JSONPatch).
func verifyResponse(version string, body []byte, uid types.UID, mutating bool) (*response, error) {
	switch version {
	case admissionv1.SchemeGroupVersion.Version:
		var r admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, errDecode{err}
		}
		if r.Response == nil {
			return nil, errors.New("webhook response was absent")
		}
		if r.Response.UID != uid {
			return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.Response.UID)
		}
		want := admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")
		got := r.GroupVersionKind()
		if !reviewGroups[got.Group] || got.Version != want.Version || got.Kind != want.Kind {
			return nil, fmt.Errorf("expected webhook response of %v, got %v", want.String(), got.String())
		}
		out := &response{allowed: r.Response.Allowed, result: r.Response.Result, warnings: r.Response.Warnings, auditAnnotations: r.Response.AuditAnnotations}
		if mutating {
			if len(r.Response.Patch) > 0 && r.Response.PatchType == nil {
				return nil, errors.New("webhook returned response.patch but not response.patchType")
			}
			if len(r.Response.Patch) == 0 && r.Response.PatchType != nil {
				return nil, errors.New("webhook returned response.patchType but not response.patch")
			}
			out.patch = r.Response.Patch
			if r.Response.PatchType != nil {
				out.patchType = string(*r.Response.PatchType)
				if out.patchType == "" {
					return nil, fmt.Errorf("webhook returned invalid response.patchType of %q", out.patchType)
				}
			}
		} else {
			if len(r.Response.Patch) > 0 {
				return nil, errors.New("validating webhook may not return response.patch")
			}
			if r.Response.PatchType != nil {
				return nil, errors.New("validating webhook may not return response.patchType")
			}
		}
		return out, nil
	case admissionv1beta1.SchemeGroupVersion.Version:
		var r admissionv1beta1.AdmissionReview
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, errDecode{err}
		}
		if r.Response == nil {
			return nil, errors.New("webhook response was absent")
		}
		out := &response{allowed: r.Response.Allowed, result: r.Response.Result, warnings: r.Response.Warnings, auditAnnotations: r.Response.AuditAnnotations}
		if mutating && len(r.Response.Patch) > 0 {
			out.patch = r.Response.Patch
			out.patchType = string(admissionv1.PatchTypeJSONPatch)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected AdmissionReview version %q", version)
}

// errDecode is an answer that is not an AdmissionReview document at all.
type errDecode struct{ err error }

func (e errDecode) Error() string { return "decoding the AdmissionReview: " + e.err.Error() }

// denial is upstream's rejection for a webhook's allowed: false: the webhook's status, with a
// code of at least 400 (default 400) and its message prefixed with the webhook's name.
func denial(webhook string, result *metav1.Status) *apierrors.StatusError {
	deniedBy := fmt.Sprintf("admission webhook %q denied the request", webhook)
	var st metav1.Status
	if result != nil {
		st = *result.DeepCopy()
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	switch {
	case st.Message != "":
		st.Message = deniedBy + ": " + st.Message
	case st.Reason != "":
		st.Message = deniedBy + ": " + string(st.Reason)
	default:
		st.Message = deniedBy + " without explanation"
	}
	// Status bodies carry their kind; a webhook's result usually has none.
	st.TypeMeta = metav1.TypeMeta{}
	return &apierrors.StatusError{ErrStatus: st}
}
