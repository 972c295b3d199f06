package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
)

// The generic store: every write of an existing object (update, every patch type, apply, scale,
// status and the other subresources, and the gateway's own writes) runs one compare-and-swap
// loop, guaranteedUpdate, with the stages in one fixed order:
//
//  1. read the current object (a consistent read);
//  2. transform: the verb makes the object it asks for from the current one (the body of a PUT,
//     the patch applied, the field manager's apply, the scale set on the parent);
//  3. preconditions: a resourceVersion or uid the result names must be the current one's (409);
//  4. mutating admission;
//  5. prepare: the kind's update rules (system fields, status or spec kept, generation);
//  6. field ownership (managedFields) for the manager;
//  7. object metadata validation;
//  8. the kind's own rules and RBAC's escalation check (admitWrite);
//  9. validating admission;
//  10. commit: compare-and-swap on the current resourceVersion; when another write got there
//     first the loop starts again from 1 against the newest version.
//
// Verbs differ only in their transform and in the options of writeOp, each with its reason.
// Upstream's generic registry (GuaranteedUpdate with an UpdatedObjectInfo) is the model.

// maxUpdateAttempts bounds the compare-and-swap retries of a write.
const maxUpdateAttempts = 16

// writeOp is one write through the store.
type writeOp struct {
	res       *registry.Resource
	namespace string
	name      string
	// subresource is the subresource written ("" for the object itself): admission is told, and
	// the kind's update rules and field ownership follow it (status writes change status only).
	subresource string
	// transform makes the object the request asks for from cur, which it must not change (the
	// result is a new object). On a conflict it runs again against the newest version, so it
	// must not keep state between calls. cur is nil when the object does not exist and create is
	// set.
	transform func(ctx context.Context, cur runtime.Object) (runtime.Object, error)
	// manager owns the fields the write sets (managedFields).
	manager string
	// owned says the transform recorded field ownership itself: apply's field manager merged the
	// applier's intent and its ownership, which an update's tracking would overwrite.
	owned bool
	// create makes a missing object from transform(nil) through the create stages: PUT of a
	// missing object (the spec's verb table) and apply create. It is authorized as a create.
	create bool
	dryRun bool
	// view is set for subresources whose object is not the stored kind (scale).
	view *subresourceView
}

// subresourceView is a subresource whose object is a view of the stored one (scale: an
// autoscaling/v1 Scale over the parent's spec.replicas). The transform then makes the view the
// request asks for from the current view; admission sees views, as upstream's; the admitted view
// is set on a copy of the parent, which the store's remaining stages handle as a write of the
// object itself (the parent's update rules and field ownership, since the write changes its spec).
type subresourceView struct {
	kind schema.GroupVersionKind
	// of is the view of a stored object.
	of func(obj runtime.Object) (runtime.Object, error)
	// set returns a copy of cur with the view v applied.
	set func(cur, v runtime.Object) (runtime.Object, error)
	// decode reads a view mutating admission returned.
	decode func([]byte) (runtime.Object, error)
}

// guaranteedUpdate runs op through the store's stages (see above) and returns the stored object (the
// current one when nothing changed) and whether it was created.
func (a *API) guaranteedUpdate(ctx context.Context, op *writeOp) (runtime.Object, bool, error) {
	res := op.res
	for attempt := 0; attempt < maxUpdateAttempts; attempt++ {
		cur, err := a.getCurrent(ctx, res, op.namespace, op.name)
		if apierrors.IsNotFound(err) && op.create && op.subresource == "" {
			obj, err := a.createFromUpdate(ctx, op)
			if apierrors.IsAlreadyExists(err) {
				continue // created meanwhile: update it
			}
			return obj, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		next, err := a.updateStages(ctx, op, cur)
		if err != nil {
			return nil, false, err
		}
		stored, err := a.commitUpdate(ctx, res, next, cur, op.dryRun)
		if apierrors.IsConflict(err) {
			continue
		}
		return stored, false, err
	}
	return nil, false, errTooManyWriters(res.GroupResource(), op.name)
}

// createFromUpdate creates the object a write of a missing object asks for.
func (a *API) createFromUpdate(ctx context.Context, op *writeOp) (runtime.Object, error) {
	obj, err := op.transform(ctx, nil)
	if err != nil {
		return nil, err
	}
	m := mustMeta(obj)
	if m.GetResourceVersion() != "" {
		// A precondition on an object that does not exist.
		return nil, apierrors.NewNotFound(op.res.GroupResource(), op.name)
	}
	// An update that creates is authorized as a create too (upstream's create-on-update).
	if err := a.authorizeCreate(ctx, op.res, op.namespace, op.name); err != nil {
		return nil, err
	}
	m.SetUID("")
	return a.createObject(ctx, op.res, &writeRequest{dryRun: op.dryRun, obj: obj, meta: m, manager: op.manager, tracked: op.owned})
}

// updateStages runs stages 2 to 9 against cur and returns the object to commit.
func (a *API) updateStages(ctx context.Context, op *writeOp, cur runtime.Object) (runtime.Object, error) {
	res := op.res
	mutate := admissionAttempt{res: res, op: admissionUpdate, sub: op.subresource, old: cur}
	validate := mutate
	var obj runtime.Object
	if v := op.view; v != nil {
		curView, err := v.of(cur)
		if err != nil {
			return nil, err
		}
		want, err := op.transform(ctx, curView)
		if err != nil {
			return nil, err
		}
		if err := checkPreconditions(res.GroupResource(), op.name, want, curView); err != nil {
			return nil, err
		}
		mutate.kind, mutate.decode, mutate.obj, mutate.old = v.kind, v.decode, want, curView
		if want, err = a.admissionMutate(ctx, mutate); err != nil {
			return nil, err
		}
		if obj, err = v.set(cur, want); err != nil {
			return nil, err
		}
	} else {
		var err error
		if obj, err = op.transform(ctx, cur); err != nil {
			return nil, err
		}
		if err := checkPreconditions(res.GroupResource(), op.name, obj, cur); err != nil {
			return nil, err
		}
		mutate.obj = obj
		if obj, err = a.admissionMutate(ctx, mutate); err != nil {
			return nil, err
		}
	}
	// The kind's update rules and field ownership follow the subresource written; a view's write
	// changes the parent's spec, ruled as a write of the object itself.
	sub := op.subresource
	if op.view != nil {
		sub = ""
	}
	next, err := prepareUpdate(res, sub, obj, cur)
	if err != nil {
		return nil, err
	}
	if op.owned {
		mustMeta(next).SetManagedFields(mustMeta(obj).GetManagedFields())
	} else if next, err = a.trackUpdate(res, sub, cur, next, op.manager); err != nil {
		return nil, err
	}
	if err := validateObjectMeta(res, mustMeta(next)); err != nil {
		return nil, err
	}
	if err := a.admitWrite(ctx, res, next, cur); err != nil {
		return nil, err
	}
	validate.obj = next
	if v := op.view; v != nil {
		nextView, err := v.of(next)
		if err != nil {
			return nil, err
		}
		validate.obj, validate.old, validate.kind = nextView, mutate.old, v.kind
	}
	if err := a.admissionValidate(ctx, validate); err != nil {
		return nil, err
	}
	return next, nil
}

// checkPreconditions: a resourceVersion or uid that the object a write asks for names is a
// precondition on the current object (409 when stale); none means the newest version.
func checkPreconditions(gr schema.GroupResource, name string, obj, cur runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	c, err := meta.Accessor(cur)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != c.GetResourceVersion() {
		return errConflict(gr, name)
	}
	if uid := m.GetUID(); uid != "" && uid != c.GetUID() {
		return errUIDPrecondition(gr, name, uid, c.GetUID())
	}
	return nil
}

// The 409s of writes, in upstream's words (clients match on the reason, people read the rest):
// errConflict for a stale resourceVersion (the body's, or a compare-and-swap lost to another
// write), errTooManyWriters for a write that lost its compare-and-swap maxUpdateAttempts times,
// errUIDPrecondition and errRVPrecondition for a uid or resourceVersion precondition that does
// not hold (a DeleteOptions' preconditions name both, a body its uid).
func errConflict(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New(conflictMessage))
}

func errTooManyWriters(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New("too many concurrent writers; "+conflictMessage))
}

func errUIDPrecondition(gr schema.GroupResource, name string, want, got types.UID) error {
	return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", want, got))
}

func errRVPrecondition(gr schema.GroupResource, name, want, got string) error {
	return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", want, got))
}

// storageType is the storage identity of a resource: one per group and resource, whatever the version.
func storageType(res *registry.Resource) *storagev1.ResourceType {
	if s := res.StoredAs; s != nil {
		return &storagev1.ResourceType{Group: s.Group, Resource: s.Resource}
	}
	return &storagev1.ResourceType{Group: res.Group, Resource: res.Resource}
}

// toStored turns an object into the storage service's form: its encoding without a
// resourceVersion (storage assigns it), plus the labels and fields storage indexes for selectors.
func (a *API) toStored(res *registry.Resource, obj runtime.Object) (*storagev1.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	st := res.Strategy()
	value, err := st.EncodeStored(obj)
	acc.SetResourceVersion(rv)
	if err != nil {
		return nil, err
	}
	return &storagev1.Object{
		Namespace: acc.GetNamespace(),
		Name:      acc.GetName(),
		Value:     value,
		Uid:       string(acc.GetUID()),
		Labels:    acc.GetLabels(),
		Fields:    st.Fields(obj),
	}, nil
}

// fromStored decodes a stored object and sets its resourceVersion.
func (a *API) fromStored(res *registry.Resource, o *storagev1.Object) (runtime.Object, error) {
	obj, err := a.codec.decodeStored(o.Value, res)
	if err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	acc.SetResourceVersion(strconv.FormatInt(o.ResourceVersion, 10))
	return obj, nil
}

// getCurrent reads the most recent version of an object (a consistent read).
func (a *API) getCurrent(ctx context.Context, res *registry.Resource, namespace, name string) (runtime.Object, error) {
	resp, err := a.store.Get(ctx, &storagev1.GetRequest{Type: storageType(res), Namespace: namespace, Name: name})
	if err != nil {
		return nil, fromStorage(err, res.GroupResource(), name)
	}
	return a.fromStored(res, resp.Object)
}
