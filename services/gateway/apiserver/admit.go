package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	admissionv1 "platform.io/proto/admission/v1"
	"platform.io/services/gateway/admission"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// Admission in the write path, in upstream's places: the mutating phase sees the object as the
// client sent it (or as a patch or apply made it) with the stored one, before the server's update
// rules and validation; the validating phase sees the object about to be stored, after them.
// Writes the gateway makes itself (no user in the context: the default policy, initial
// namespaces, the definitions' status) are not admitted. The admission service is asked only when
// its interest set says some plugin or webhook may act on the write, or when a namespaced create
// targets a namespace that is missing or terminating (NamespaceLifecycle and friends decide).

// admitter is admission in the store's write path (generic.Admitter): the admission service,
// or, without one, the namespace lifecycle rule of creates enforced here.
type admitter struct{ a *API }

// Mutate runs the mutating phase.
func (m admitter) Mutate(ctx context.Context, at generic.Attempt) (runtime.Object, error) {
	return m.a.admissionMutate(ctx, at)
}

// Validate runs the validating phase; without an admission service, a create must land in a
// namespace that exists and is not terminating.
func (m admitter) Validate(ctx context.Context, at generic.Attempt) error {
	if m.a.admission == nil {
		if at.Op == generic.OpCreate {
			return m.a.checkNamespace(ctx, at.Res, mustMeta(at.Obj).GetNamespace())
		}
		return nil
	}
	return m.a.admissionValidate(ctx, at)
}

// Delete runs both phases for a delete.
func (m admitter) Delete(ctx context.Context, at generic.Attempt) error {
	return m.a.admitDelete(ctx, at)
}

// admissionFor builds the request of a write for the mutating phase (mutating) or the
// validating one, or nil when nobody is interested (or the write is the gateway's own).
func (a *API) admissionFor(ctx context.Context, at generic.Attempt, mutating bool) (*admissionv1.AdmissionRequest, error) {
	if a.admission == nil {
		return nil, nil
	}
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return nil, nil
	}
	info := requestInfoFrom(ctx)
	ns, name := "", ""
	if m := metaOf(at.Obj, at.Old); m != nil {
		ns, name = m.GetNamespace(), m.GetName()
	}
	if info != nil {
		if ns == "" {
			ns = info.namespace
		}
		if name == "" {
			name = info.name
		}
	}
	want := admission.Request{
		Operation: at.Op, Group: at.Res.Group, Resource: at.Res.Resource, Subresource: at.Sub,
		Namespaced: at.Res.Namespaced, Namespace: ns, UserGroups: u.Groups,
		OwnerReferences: ownerReferencesChanged(at.Obj, at.Old), Mutating: mutating,
	}
	interested := a.admission.Interested(want)
	if !interested && at.Op == generic.OpCreate && at.Res.Namespaced && ns != "" {
		// NamespaceLifecycle, NamespaceExists and NamespaceAutoProvision decide about creates in
		// a namespace that is missing or terminating.
		phase, err := a.nsCache.phase(ctx, ns)
		switch {
		case apierrors.IsNotFound(err), err == nil && phase == corev1.NamespaceTerminating:
			interested = true
		case err != nil:
			return nil, err
		}
	}
	if !interested {
		return nil, nil
	}
	gvk := at.Res.GroupVersionKind()
	if !at.Kind.Empty() {
		gvk = at.Kind
	}
	gvr := at.Res.GroupVersionResource
	req := &admissionv1.AdmissionRequest{
		Operation: at.Op, Namespace: ns, Name: name, SubResource: at.Sub, RequestSubResource: at.Sub,
		Kind:            &admissionv1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource:        &admissionv1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		RequestKind:     &admissionv1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		RequestResource: &admissionv1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
		User:            &admissionv1.User{Name: u.Name, Uid: u.UID, Groups: u.Groups},
		Uid:             auditIDFrom(ctx),
	}
	if info != nil {
		if !info.wire.Empty() {
			req.RequestKind.Group, req.RequestResource.Group = info.wire.Group, info.wire.Group
		}
		req.DryRun = info.dryRun
	}
	if len(u.Extra) > 0 {
		req.User.Extra = map[string]*admissionv1.Values{}
		for k, v := range u.Extra {
			req.User.Extra[k] = &admissionv1.Values{Values: v}
		}
	}
	for _, o := range []runtime.Object{at.Obj, at.Old} {
		if o != nil && !reflect.ValueOf(o).IsNil() && o.GetObjectKind().GroupVersionKind().Empty() {
			o.GetObjectKind().SetGroupVersionKind(gvk)
		}
	}
	var err error
	if req.Object, err = encodeForAdmission(at.Obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if req.OldObject, err = encodeForAdmission(at.Old); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if at.Options != nil {
		if req.Options, err = json.Marshal(at.Options); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	} else {
		req.Options = optionsFor(at.Op, req.DryRun)
	}
	return req, nil
}

// admissionMutate runs the mutating phase; it returns the object to continue with (the mutated
// one, decoded and defaulted, when a plugin or webhook changed it).
func (a *API) admissionMutate(ctx context.Context, at generic.Attempt) (runtime.Object, error) {
	req, err := a.admissionFor(ctx, at, true)
	if err != nil || req == nil {
		return at.Obj, err
	}
	resp, err := a.admission.Admit(ctx, req)
	if err := a.admissionOutcome(ctx, resp, err); err != nil {
		return nil, err
	}
	if len(resp.GetObject()) == 0 || at.Obj == nil {
		return at.Obj, nil
	}
	var obj runtime.Object
	if at.Decode != nil {
		obj, err = at.Decode(resp.GetObject())
	} else {
		obj, err = a.decodeAdmitted(at.Res, resp.GetObject())
	}
	if err != nil {
		return nil, err
	}
	// Admission may not move an object: the request's namespace and name stand.
	before, after := metaOf(at.Obj), metaOf(obj)
	if before != nil && after != nil {
		if after.GetNamespace() != before.GetNamespace() {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if before.GetName() != "" && after.GetName() != before.GetName() {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", after.GetName(), before.GetName()))
		}
	}
	return obj, nil
}

// admissionValidate runs the validating phase.
func (a *API) admissionValidate(ctx context.Context, at generic.Attempt) error {
	req, err := a.admissionFor(ctx, at, false)
	if err != nil || req == nil {
		return err
	}
	resp, err := a.admission.Validate(ctx, req)
	return a.admissionOutcome(ctx, resp, err)
}

// admitDelete runs both phases for a delete (one request built once, asked for whenever any
// rule matches).
func (a *API) admitDelete(ctx context.Context, at generic.Attempt) error {
	req, err := a.admissionFor(ctx, at, false)
	if err != nil || req == nil {
		return err
	}
	resp, err := a.admission.Admit(ctx, req)
	if err := a.admissionOutcome(ctx, resp, err); err != nil {
		return err
	}
	resp, err = a.admission.Validate(ctx, req)
	return a.admissionOutcome(ctx, resp, err)
}

// admissionOutcome records the answer's warnings and annotations and turns a rejection into the
// request's Status.
func (a *API) admissionOutcome(ctx context.Context, resp *admissionv1.AdmissionResponse, err error) error {
	if err != nil {
		var unavailable *admission.UnavailableError
		if errors.As(err, &unavailable) {
			return a.dependencyError(ctx, &auth.UnavailableError{Service: "admission", Err: unavailable.Err})
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return a.dependencyError(ctx, err)
		}
		return apierrors.NewInternalError(err)
	}
	if info := requestInfoFrom(ctx); info != nil {
		info.addAdmissionNotes(resp.GetWarnings(), resp.GetAuditAnnotations())
	}
	auditAdmissionAnnotations(ctx, resp.GetAuditAnnotations())
	if resp.GetAllowed() {
		return nil
	}
	rej := resp.GetRejection()
	st := metav1.Status{Status: metav1.StatusFailure, Code: rej.GetCode(), Reason: metav1.StatusReason(rej.GetReason()), Message: rej.GetMessage()}
	if st.Code == 0 {
		st.Code = http.StatusForbidden
	}
	if len(rej.GetCauses()) > 0 || rej.GetRetryAfterSeconds() > 0 {
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: rej.GetRetryAfterSeconds()}
		for _, c := range rej.GetCauses() {
			st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: metav1.CauseType(c.GetType()), Message: c.GetMessage(), Field: c.GetField()})
		}
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// decodeAdmitted reads the object a mutating plugin or webhook returned, as a request body is
// read: strictly typed (or pruned for custom kinds), defaulted.
func (a *API) decodeAdmitted(res *registry.Resource, data []byte) (runtime.Object, error) {
	st := res.Strategy()
	obj := st.New()
	if _, err := decodeJSON(data, obj, false); err != nil {
		return nil, apierrors.NewInternalError(errors.New("the object admission returned does not decode: " + err.Error()))
	}
	if _, err := st.Normalize(obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
	applyDefaults(res, obj)
	if err := checkRequired(res, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func encodeForAdmission(obj runtime.Object) ([]byte, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Marshal(u.Object)
	}
	return json.Marshal(obj)
}

// optionsFor is the operation's options object, as upstream sends it to admission.
func optionsFor(op string, dry bool) []byte {
	var dryRun []string
	if dry {
		dryRun = []string{metav1.DryRunAll}
	}
	var o any
	switch op {
	case generic.OpCreate:
		o = &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{Kind: "CreateOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dryRun}
	case generic.OpUpdate:
		o = &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{Kind: "UpdateOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dryRun}
	case generic.OpDelete:
		o = &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}, DryRun: dryRun}
	default:
		return nil
	}
	data, _ := json.Marshal(o)
	return data
}

func metaOf(objs ...runtime.Object) metav1.Object {
	for _, o := range objs {
		if o == nil || reflect.ValueOf(o).IsNil() {
			continue
		}
		if m, ok := o.(metav1.Object); ok {
			return m
		}
	}
	return nil
}

// ownerReferencesChanged tells whether a write sets or changes metadata.ownerReferences.
func ownerReferencesChanged(obj, old runtime.Object) bool {
	var n, o []metav1.OwnerReference
	if m := metaOf(obj); m != nil {
		n = m.GetOwnerReferences()
	}
	if m := metaOf(old); m != nil && old != nil {
		o = m.GetOwnerReferences()
	}
	if len(n) == 0 && len(o) == 0 {
		return false
	}
	return !reflect.DeepEqual(n, o)
}
