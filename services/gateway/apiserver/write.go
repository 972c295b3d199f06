package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/storage"
	"platform.io/libs/warning"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
)

// writeOptions are the negotiation options for responses to writes.
var writeOptions = negotiateOptions{protobuf: true, yaml: true}

// parseDryRun reads dryRun: absent or empty means a real request, All means every stage but
// persistence, anything else is 400.
func parseDryRun(r *http.Request) (bool, error) {
	values := r.URL.Query()["dryRun"]
	dry := false
	for _, v := range values {
		switch v {
		case "":
		case metav1.DryRunAll:
			dry = true
		default:
			return false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q; the only supported value is %q", v, metav1.DryRunAll))
		}
	}
	return dry, nil
}

// warn records warnings of the request's decoding (unknown or duplicate fields) for the
// response. They go before admission's, which came later in the request (upstream records each
// when it happens); every Warning header is written with the response (writeBody, writeError).
func warn(r *http.Request, msgs []string) {
	if len(msgs) == 0 {
		return
	}
	if info := requestInfoFrom(r.Context()); info != nil {
		info.warnings = append(append([]string(nil), msgs...), info.warnings...)
	}
}

// writeWarnings sets one Warning header per message (RFC 7234 code 299, as upstream), within
// the spec's size limits.
func writeWarnings(w http.ResponseWriter, r *http.Request) {
	info := requestInfoFrom(r.Context())
	if info == nil {
		return
	}
	for _, m := range warning.Limit(info.warnings) {
		w.Header().Add("Warning", "299 - "+strconv.Quote(m))
	}
}

// writeRequest is what create and update read from a request before touching storage.
type writeRequest struct {
	out      output
	dryRun   bool
	obj      runtime.Object
	meta     metav1.Object
	warnings []string
	// manager owns the fields the write sets (managedFields); tracked means the caller (apply)
	// already recorded ownership.
	manager string
	tracked bool
	// bodyGV is the group version the body named.
	bodyGV schema.GroupVersion
}

// readWrite negotiates the response and decodes and checks the body of a create or update.
func (a *API) readWrite(r *http.Request, info *requestInfo) (*writeRequest, error) {
	out, err := negotiate(r, writeOptions.forResource(info.res))
	if err != nil {
		return nil, err
	}
	dry, err := parseDryRun(r)
	if err != nil {
		return nil, err
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		return nil, err
	}
	obj, warnings, bodyGV, err := a.codec.decodeBody(r, info.res, fv)
	if err != nil {
		return nil, err
	}
	// Upstream defaults at decoding, before validation.
	applyDefaults(info.res, obj)
	if err := checkRequired(info.res, obj); err != nil {
		return nil, err
	}
	m := mustMeta(obj)
	if info.res.Namespaced {
		switch ns := m.GetNamespace(); {
		case ns == "":
			m.SetNamespace(info.namespace)
		case info.namespace == "":
			return nil, apierrors.NewBadRequest("a namespaced object cannot be written outside a namespace; use the namespaces/<namespace>/ URL")
		case ns != info.namespace:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		m.SetNamespace("")
	}
	manager, err := fieldManagerName(r, false)
	if err != nil {
		return nil, err
	}
	return &writeRequest{out: out, dryRun: dry, obj: obj, meta: m, warnings: warnings, manager: manager, bodyGV: bodyGV}, nil
}

// create serves POST on a collection.
func (a *API) create(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.subresource != "" {
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), "create on a subresource"))
		return
	}
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if wr.meta.GetResourceVersion() != "" {
		a.writeError(w, r, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created"))
		return
	}
	obj, err := a.createObject(r.Context(), info.res, wr)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	warn(r, wr.warnings)
	a.writeObject(w, r, http.StatusCreated, info.res, obj, wr.out)
}

// createObject runs the create stages for an object already decoded and placed in its
// namespace, in the store's order (store.go): mutating admission, the system fields and the
// kind's create rules, field ownership, object metadata validation, the kind's own rules and
// RBAC's escalation check, validating admission, the namespace lifecycle, then storage. A name
// generated from generateName that is taken is generated again (up to three times).
func (a *API) createObject(ctx context.Context, res *registry.Resource, wr *writeRequest) (runtime.Object, error) {
	if a.crdTerminating(res) {
		return nil, newStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "create not allowed while custom resource definition is terminating")
	}
	// Mutating admission sees the object as the client sent it (or as apply made it), before the
	// server sets the system fields.
	admitted, err := a.admissionMutate(ctx, admissionAttempt{res: res, op: admissionCreate, obj: wr.obj})
	if err != nil {
		return nil, err
	}
	if admitted != wr.obj {
		wr.obj, wr.meta = admitted, mustMeta(admitted)
	}
	generated := wr.meta.GetName() == "" && wr.meta.GetGenerateName() != ""
	a.prepareCreate(ctx, res, wr.obj, wr.meta)
	if !wr.tracked {
		live := res.New()
		live.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
		tracked, err := a.trackUpdate(res, "", live, wr.obj, wr.manager)
		if err != nil {
			return nil, err
		}
		wr.obj, wr.meta, wr.tracked = tracked, mustMeta(tracked), true
	}
	if err := validateObjectMeta(res, wr.meta); err != nil {
		return nil, err
	}
	if err := a.admitWrite(ctx, res, wr.obj, nil); err != nil {
		return nil, err
	}
	// Validating admission sees the object about to be stored (the namespace lifecycle plugins
	// refuse creates in missing and terminating namespaces).
	if err := a.admissionValidate(ctx, admissionAttempt{res: res, op: admissionCreate, obj: wr.obj}); err != nil {
		return nil, err
	}
	if a.admission == nil {
		if err := a.checkNamespace(ctx, res, wr.meta.GetNamespace()); err != nil {
			return nil, err
		}
	}
	if wr.dryRun {
		return wr.obj, nil
	}
	for attempt := 0; ; attempt++ {
		stored, err := a.toStored(res, wr.obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		resp, err := a.store.Create(ctx, &storagev1.CreateRequest{Type: storageType(res), Object: stored})
		if storage.IsAlreadyExists(err) && generated && attempt < 3 {
			wr.meta.SetName(generateName(wr.meta.GetGenerateName()))
			continue
		}
		if err != nil {
			return nil, fromStorage(err, res.GroupResource(), wr.meta.GetName())
		}
		wr.meta.SetResourceVersion(strconv.FormatInt(resp.Object.ResourceVersion, 10))
		return wr.obj, nil
	}
}

// update serves PUT on an item or its status (or a namespace's finalize) subresource. PUT of an
// object that does not exist creates it, as the spec's verb table says.
func (a *API) update(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if wr.meta.GetName() != info.name {
		a.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", wr.meta.GetName(), info.name)))
		return
	}
	obj, created, err := a.updateObject(r.Context(), info, wr)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	warn(r, wr.warnings)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	a.writeObject(w, r, code, info.res, obj, wr.out)
}

// updateObject replaces an object through the store: the body is what the client asks for (a
// copy each attempt, since the stages change it); a resourceVersion or uid in it is a
// precondition. A missing object is created from it (not through a subresource).
func (a *API) updateObject(ctx context.Context, info *requestInfo, wr *writeRequest) (runtime.Object, bool, error) {
	return a.guaranteedUpdate(ctx, &writeOp{
		res: info.res, namespace: info.namespace, name: info.name, subresource: info.subresource,
		manager: wr.manager, dryRun: wr.dryRun, create: true,
		transform: func(context.Context, runtime.Object) (runtime.Object, error) { return wr.obj.DeepCopyObject(), nil },
	})
}

// commitUpdate stores next in place of cur (compare-and-swap on cur's resourceVersion). An
// unchanged object is not written; an object being deleted whose last finalizer is gone is
// removed.
func (a *API) commitUpdate(ctx context.Context, res *registry.Resource, next, cur runtime.Object, dryRun bool) (runtime.Object, error) {
	nextMeta, curMeta := mustMeta(next), mustMeta(cur)
	curRV, _ := strconv.ParseInt(curMeta.GetResourceVersion(), 10, 64)
	pre := &storagev1.Preconditions{ResourceVersion: curRV}
	if nextMeta.GetDeletionTimestamp() != nil && !res.Strategy().Finalizing(next) {
		nextMeta.SetResourceVersion(curMeta.GetResourceVersion())
		if dryRun {
			return next, nil
		}
		_, err := a.store.Delete(ctx, &storagev1.DeleteRequest{Type: storageType(res), Namespace: nextMeta.GetNamespace(), Name: nextMeta.GetName(), Preconditions: pre})
		if err != nil {
			return nil, fromStorage(err, res.GroupResource(), nextMeta.GetName())
		}
		a.changed(res, nextMeta.GetNamespace(), nextMeta.GetName())
		return next, nil
	}
	stored, err := a.toStored(res, next)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	curStored, err := a.toStored(res, cur)
	if err == nil && bytes.Equal(stored.Value, curStored.Value) {
		// Nothing changed: no write, no event, the same resourceVersion, as upstream.
		return cur, nil
	}
	if dryRun {
		nextMeta.SetResourceVersion(curMeta.GetResourceVersion())
		return next, nil
	}
	resp, err := a.store.Update(ctx, &storagev1.UpdateRequest{Type: storageType(res), Object: stored, Preconditions: pre})
	if err != nil {
		return nil, fromStorage(err, res.GroupResource(), nextMeta.GetName())
	}
	nextMeta.SetResourceVersion(strconv.FormatInt(resp.Object.ResourceVersion, 10))
	a.changed(res, nextMeta.GetNamespace(), nextMeta.GetName())
	return next, nil
}

// changed tells the API's caches of stored objects (the namespace lifecycle's) that this gateway
// changed or deleted one, so it sees its own writes at once.
func (a *API) changed(res *registry.Resource, namespace, name string) {
	for _, f := range a.onChange {
		f(res, namespace, name)
	}
}
