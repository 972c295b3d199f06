// Package generic is the gateway's generic store (upstream's generic registry): every write runs
// through it, with its stages in one fixed order, whatever the kind; the kind's rules come from
// its strategy (res.Strategy()), and the store names no kind. The HTTP verb handlers
// (apiserver) and the gateway's own writers call it alike.
package generic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
)

// Storage is what the store needs of the storage service.
type Storage interface {
	Create(ctx context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error)
	Get(ctx context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error)
	Update(ctx context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error)
	Delete(ctx context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error)
}

// The operations admission distinguishes.
const (
	OpCreate = "CREATE"
	OpUpdate = "UPDATE"
	OpDelete = "DELETE"
)

// Attempt is what one write tells admission.
type Attempt struct {
	Res      *registry.Resource
	Op       string
	Sub      string
	Obj, Old runtime.Object
	// Kind is the objects' kind when it is not the resource's (autoscaling/v1 Scale for scale);
	// Decode reads such an object back from mutating admission.
	Kind   schema.GroupVersionKind
	Decode func([]byte) (runtime.Object, error)
	// Options is the operation's options (DeleteOptions for deletes); nil: the default ones.
	Options runtime.Object
}

// Admitter is admission in the write path: Mutate returns the object to continue with (the
// mutated one when a plugin or webhook changed it); Validate sees the object about to be
// stored; Delete runs both phases for a delete. Writes without a user in ctx (the gateway's own)
// are not admitted.
type Admitter interface {
	Mutate(ctx context.Context, at Attempt) (runtime.Object, error)
	Validate(ctx context.Context, at Attempt) error
	Delete(ctx context.Context, at Attempt) error
}

// Create is a create through the store (Store.Create).
type Create struct {
	// Obj is the object, decoded and placed in its namespace; the store changes it.
	Obj runtime.Object
	// Manager owns the fields the create sets; Owned says Obj's ownership is recorded already
	// (apply's field manager made it).
	Manager string
	Owned   bool
	// DryRun runs every stage but persistence.
	DryRun bool
}

// Config is what the store needs.
type Config struct {
	Storage Storage
	// Authorizer authorizes a write that creates as a create.
	Authorizer auth.Authorizer
	Admitter   Admitter
	Log        *slog.Logger
	// Now is the clock (tests may fix it).
	Now func() time.Time
	// CreateGuard refuses creates of a resource that takes none now (a custom resource whose
	// definition is terminating); nil allows every create.
	CreateGuard func(res *registry.Resource) error
}

// Store runs writes through their stages.
type Store struct {
	storage     Storage
	authz       auth.Authorizer
	admit       Admitter
	log         *slog.Logger
	now         func() time.Time
	createGuard func(res *registry.Resource) error
	// onChange are told of every object the store changes or deletes (OnChange).
	onChange []func(res *registry.Resource, namespace, name string)
}

// New returns the store of cfg.
func New(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{storage: cfg.Storage, authz: cfg.Authorizer, admit: cfg.Admitter, log: cfg.Log, now: cfg.Now, createGuard: cfg.CreateGuard}
}

// OnChange registers f, told of every object the store changes or deletes (a cache of stored
// objects sees its own gateway's writes at once). It is not safe to call once writes run.
func (s *Store) OnChange(f func(res *registry.Resource, namespace, name string)) {
	s.onChange = append(s.onChange, f)
}

// deleteOptions are a delete's options with their kind, as admission sees them.
func deleteOptions(opts *metav1.DeleteOptions) runtime.Object {
	o := opts.DeepCopy()
	o.TypeMeta = metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}
	return o
}

// The generic store: every write of an existing object (update, every patch type, apply, scale,
// status and the other subresources, and the gateway's own writes) runs one compare-and-swap
// loop, Update, with the stages in one fixed order:
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

// MaxAttempts bounds the compare-and-swap retries of a write.
const MaxAttempts = 16

// Update is one write of an existing object through the store (Store.Update).
type Update struct {
	Res       *registry.Resource
	Namespace string
	Name      string
	// subresource is the subresource written ("" for the object itself): admission is told, and
	// the kind's update rules and field ownership follow it (status writes change status only).
	Subresource string
	// Transform makes the object the request asks for from cur, which it must not change (the
	// result is a new object). On a conflict it runs again against the newest version, so it
	// must not keep state between calls. cur is nil when the object does not exist and create is
	// set.
	Transform func(ctx context.Context, cur runtime.Object) (runtime.Object, error)
	// Manager owns the fields the write sets (managedFields).
	Manager string
	// Owned says the transform recorded field ownership itself: apply's field manager merged the
	// applier's intent and its ownership, which an update's tracking would overwrite.
	Owned bool
	// Create makes a missing object from transform(nil) through the create stages: PUT of a
	// missing object (the spec's verb table) and apply create. It is authorized as a create.
	Create bool
	// DryRun runs every stage but the commit.
	DryRun bool
	// View is set for subresources whose object is not the stored kind (scale).
	View *View
}

// View is a subresource whose object is a view of the stored one (scale: an
// autoscaling/v1 Scale over the parent's spec.replicas). The transform then makes the view the
// request asks for from the current view; admission sees views, as upstream's; the admitted view
// is set on a copy of the parent, which the store's remaining stages handle as a write of the
// object itself (the parent's update rules and field ownership, since the write changes its spec).
type View struct {
	Kind schema.GroupVersionKind
	// Of is the view of a stored object.
	Of func(obj runtime.Object) (runtime.Object, error)
	// Set returns a copy of cur with the view v applied.
	Set func(cur, v runtime.Object) (runtime.Object, error)
	// Decode reads a view mutating admission returned.
	Decode func([]byte) (runtime.Object, error)
}

// Update runs op through the store's stages (see above) and returns the stored object (the
// current one when nothing changed) and whether it was created.
func (s *Store) Update(ctx context.Context, op *Update) (runtime.Object, bool, error) {
	res := op.Res
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		cur, err := s.Get(ctx, res, op.Namespace, op.Name)
		if apierrors.IsNotFound(err) && op.Create && op.Subresource == "" {
			obj, err := s.createFromUpdate(ctx, op)
			if apierrors.IsAlreadyExists(err) {
				continue // created meanwhile: update it
			}
			return obj, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		next, err := s.updateStages(ctx, op, cur)
		if err != nil {
			return nil, false, err
		}
		stored, err := s.commitUpdate(ctx, res, next, cur, op.DryRun)
		if apierrors.IsConflict(err) {
			continue
		}
		return stored, false, err
	}
	return nil, false, errTooManyWriters(res.GroupResource(), op.Name)
}

// createFromUpdate creates the object a write of a missing object asks for.
func (s *Store) createFromUpdate(ctx context.Context, op *Update) (runtime.Object, error) {
	obj, err := op.Transform(ctx, nil)
	if err != nil {
		return nil, err
	}
	m := registry.Meta(obj)
	if m.GetResourceVersion() != "" {
		// A precondition on an object that does not exist.
		return nil, apierrors.NewNotFound(op.Res.GroupResource(), op.Name)
	}
	// An update that creates is authorized as a create too (upstream's create-on-update).
	if err := s.authorizeCreate(ctx, op.Res, op.Namespace, op.Name); err != nil {
		return nil, err
	}
	m.SetUID("")
	return s.Create(ctx, op.Res, &Create{Obj: obj, Manager: op.Manager, Owned: op.Owned, DryRun: op.DryRun})
}

// updateStages runs stages 2 to 9 against cur and returns the object to commit.
func (s *Store) updateStages(ctx context.Context, op *Update, cur runtime.Object) (runtime.Object, error) {
	res := op.Res
	mutate := Attempt{Res: res, Op: OpUpdate, Sub: op.Subresource, Old: cur}
	validate := mutate
	var obj runtime.Object
	if v := op.View; v != nil {
		curView, err := v.Of(cur)
		if err != nil {
			return nil, err
		}
		want, err := op.Transform(ctx, curView)
		if err != nil {
			return nil, err
		}
		if err := checkPreconditions(res.GroupResource(), op.Name, want, curView); err != nil {
			return nil, err
		}
		mutate.Kind, mutate.Decode, mutate.Obj, mutate.Old = v.Kind, v.Decode, want, curView
		if want, err = s.admit.Mutate(ctx, mutate); err != nil {
			return nil, err
		}
		if obj, err = v.Set(cur, want); err != nil {
			return nil, err
		}
	} else {
		var err error
		if obj, err = op.Transform(ctx, cur); err != nil {
			return nil, err
		}
		if err := checkPreconditions(res.GroupResource(), op.Name, obj, cur); err != nil {
			return nil, err
		}
		mutate.Obj = obj
		if obj, err = s.admit.Mutate(ctx, mutate); err != nil {
			return nil, err
		}
	}
	// The kind's update rules and field ownership follow the subresource written; a view's write
	// changes the parent's spec, ruled as a write of the object itself.
	sub := op.Subresource
	if op.View != nil {
		sub = ""
	}
	next, err := prepareUpdate(res, sub, obj, cur)
	if err != nil {
		return nil, err
	}
	if op.Owned {
		registry.Meta(next).SetManagedFields(registry.Meta(obj).GetManagedFields())
	} else if next, err = s.trackUpdate(res, sub, cur, next, op.Manager); err != nil {
		return nil, err
	}
	if err := validateObjectMeta(res, registry.Meta(next)); err != nil {
		return nil, err
	}
	if err := s.admitWrite(ctx, res, next, cur); err != nil {
		return nil, err
	}
	validate.Obj = next
	if v := op.View; v != nil {
		nextView, err := v.Of(next)
		if err != nil {
			return nil, err
		}
		validate.Obj, validate.Old, validate.Kind = nextView, mutate.Old, v.Kind
	}
	if err := s.admit.Validate(ctx, validate); err != nil {
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
// write), errTooManyWriters for a write that lost its compare-and-swap MaxAttempts times,
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

// StorageType is the storage identity of a resource: one per group and resource, whatever the version.
func StorageType(res *registry.Resource) *storagev1.ResourceType {
	if s := res.StoredAs; s != nil {
		return &storagev1.ResourceType{Group: s.Group, Resource: s.Resource}
	}
	return &storagev1.ResourceType{Group: res.Group, Resource: res.Resource}
}

// Encode turns an object into the storage service's form: its encoding without a
// resourceVersion (storage assigns it), plus the labels and fields storage indexes for selectors.
func (s *Store) Encode(res *registry.Resource, obj runtime.Object) (*storagev1.Object, error) {
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

// Decode decodes a stored object and sets its resourceVersion.
func (s *Store) Decode(res *registry.Resource, o *storagev1.Object) (runtime.Object, error) {
	obj, err := res.Strategy().DecodeStored(o.Value)
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

// Get reads the most recent version of an object (a consistent read).
func (s *Store) Get(ctx context.Context, res *registry.Resource, namespace, name string) (runtime.Object, error) {
	resp, err := s.storage.Get(ctx, &storagev1.GetRequest{Type: StorageType(res), Namespace: namespace, Name: name})
	if err != nil {
		return nil, FromStorage(err, res.GroupResource(), name)
	}
	return s.Decode(res, resp.Object)
}

// Create runs the create stages for an object already decoded and placed in its
// namespace, in the store's order (store.go): mutating admission, the system fields and the
// kind's create rules, field ownership, object metadata validation, the kind's own rules and
// RBAC's escalation check, validating admission (the Admitter's: the namespace lifecycle too),
// then storage. A name
// generated from generateName that is taken is generated again (up to three times).
func (s *Store) Create(ctx context.Context, res *registry.Resource, c *Create) (runtime.Object, error) {
	m := registry.Meta(c.Obj)
	if s.createGuard != nil {
		if err := s.createGuard(res); err != nil {
			return nil, err
		}
	}
	// Mutating admission sees the object as the client sent it (or as apply made it), before the
	// server sets the system fields.
	admitted, err := s.admit.Mutate(ctx, Attempt{Res: res, Op: OpCreate, Obj: c.Obj})
	if err != nil {
		return nil, err
	}
	if admitted != c.Obj {
		c.Obj, m = admitted, registry.Meta(admitted)
	}
	generated := m.GetName() == "" && m.GetGenerateName() != ""
	s.prepareCreate(ctx, res, c.Obj, m)
	if !c.Owned {
		live := res.New()
		live.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
		tracked, err := s.trackUpdate(res, "", live, c.Obj, c.Manager)
		if err != nil {
			return nil, err
		}
		c.Obj, m, c.Owned = tracked, registry.Meta(tracked), true
	}
	if err := validateObjectMeta(res, m); err != nil {
		return nil, err
	}
	if err := s.admitWrite(ctx, res, c.Obj, nil); err != nil {
		return nil, err
	}
	// Validating admission sees the object about to be stored (the namespace lifecycle plugins
	// refuse creates in missing and terminating namespaces).
	if err := s.admit.Validate(ctx, Attempt{Res: res, Op: OpCreate, Obj: c.Obj}); err != nil {
		return nil, err
	}
	if c.DryRun {
		return c.Obj, nil
	}
	for attempt := 0; ; attempt++ {
		stored, err := s.Encode(res, c.Obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		resp, err := s.storage.Create(ctx, &storagev1.CreateRequest{Type: StorageType(res), Object: stored})
		if storage.IsAlreadyExists(err) && generated && attempt < 3 {
			m.SetName(generateName(m.GetGenerateName()))
			continue
		}
		if err != nil {
			return nil, FromStorage(err, res.GroupResource(), m.GetName())
		}
		m.SetResourceVersion(strconv.FormatInt(resp.Object.ResourceVersion, 10))
		return c.Obj, nil
	}
}

// commitUpdate stores next in place of cur (compare-and-swap on cur's resourceVersion). An
// unchanged object is not written; an object being deleted with no grace period left whose last
// finalizer is gone is removed (upstream's ShouldDeleteDuringUpdate: one still in its grace
// period waits for the delete that ends it).
func (s *Store) commitUpdate(ctx context.Context, res *registry.Resource, next, cur runtime.Object, dryRun bool) (runtime.Object, error) {
	nextMeta, curMeta := registry.Meta(next), registry.Meta(cur)
	curRV, _ := strconv.ParseInt(curMeta.GetResourceVersion(), 10, 64)
	pre := &storagev1.Preconditions{ResourceVersion: curRV}
	if nextMeta.GetDeletionTimestamp() != nil && noGracePeriodLeft(nextMeta) && !res.Strategy().Finalizing(next) {
		nextMeta.SetResourceVersion(curMeta.GetResourceVersion())
		if dryRun {
			return next, nil
		}
		_, err := s.storage.Delete(ctx, &storagev1.DeleteRequest{Type: StorageType(res), Namespace: nextMeta.GetNamespace(), Name: nextMeta.GetName(), Preconditions: pre})
		if err != nil {
			return nil, FromStorage(err, res.GroupResource(), nextMeta.GetName())
		}
		s.changed(res, nextMeta.GetNamespace(), nextMeta.GetName())
		return next, nil
	}
	stored, err := s.Encode(res, next)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	curStored, err := s.Encode(res, cur)
	if err == nil && bytes.Equal(stored.Value, curStored.Value) {
		// Nothing changed: no write, no event, the same resourceVersion, as upstream.
		return cur, nil
	}
	if dryRun {
		nextMeta.SetResourceVersion(curMeta.GetResourceVersion())
		return next, nil
	}
	resp, err := s.storage.Update(ctx, &storagev1.UpdateRequest{Type: StorageType(res), Object: stored, Preconditions: pre})
	if err != nil {
		return nil, FromStorage(err, res.GroupResource(), nextMeta.GetName())
	}
	nextMeta.SetResourceVersion(strconv.FormatInt(resp.Object.ResourceVersion, 10))
	s.changed(res, nextMeta.GetNamespace(), nextMeta.GetName())
	return next, nil
}

// changed tells OnChange's functions of an object the store changed or deleted.
func (s *Store) changed(res *registry.Resource, namespace, name string) {
	for _, f := range s.onChange {
		f(res, namespace, name)
	}
}

// Delete deletes one object per the spec's deletion table: an object with finalizers is
// only marked (deletionTimestamp), one without is removed. A namespace becomes Terminating and
// the namespace controller removes it once it is empty. deleted reports whether it is gone.
func (s *Store) Delete(ctx context.Context, res *registry.Resource, namespace, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	dry := len(opts.DryRun) > 0
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		cur, err := s.Get(ctx, res, namespace, name)
		if err != nil {
			return nil, false, err
		}
		m := registry.Meta(cur)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != m.GetUID() {
				return nil, false, errUIDPrecondition(res.GroupResource(), name, *p.UID, m.GetUID())
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
				return nil, false, errRVPrecondition(res.GroupResource(), name, *p.ResourceVersion, m.GetResourceVersion())
			}
		}
		if attempt == 0 {
			// Admission sees the object being deleted (as the old object): as upstream, both
			// phases run (a mutating plugin or webhook may reject a delete; it has nothing to
			// change).
			if err := s.admit.Delete(ctx, Attempt{Res: res, Op: OpDelete, Old: cur, Options: deleteOptions(opts)}); err != nil {
				return nil, false, err
			}
		}
		next := cur.DeepCopyObject()
		nm := registry.Meta(next)
		now := s.now().Truncate(time.Second)
		// Graceful deletion first (as upstream's BeforeDelete): a kind deleted gracefully (pods)
		// gets its deletionTimestamp and period; a delete while a longer or equal period runs
		// changes nothing, finalizers included.
		gopts := opts.DeepCopy()
		graceful, pending := beforeDelete(res, next, gopts, now)
		if pending {
			return cur, false, nil
		}
		// The garbage collector's finalizers next (as upstream): orphan or foregroundDeletion,
		// from the options, the object's finalizers and the kind's default, make the object wait
		// for the collector to orphan or delete its dependents.
		gcChanged := setGCFinalizers(res, nm, opts)
		// The kind may hold the object itself (a namespace becomes Terminating, a definition
		// waits for its objects' cleanup) or refuse.
		held, err := res.Strategy().PrepareForDelete(next, metav1.NewTime(now))
		if err != nil {
			return nil, false, err
		}
		switch {
		case held:
		case graceful && *gopts.GracePeriodSeconds > 0:
			// Stored with its deletionTimestamp: whatever runs the object (a pod's node) deletes
			// it once the period is over, with a period of 0.
		case res.Strategy().Finalizing(next):
			if graceful {
				break // marked now, with a period of 0: the finalizers remove it
			}
			if m.GetDeletionTimestamp() != nil {
				if !gcChanged {
					return cur, false, nil
				}
				break
			}
			at := metav1.NewTime(now)
			zero := int64(0)
			nm.SetDeletionTimestamp(&at)
			nm.SetDeletionGracePeriodSeconds(&zero)
		default:
			if dry {
				return cur, true, nil
			}
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			_, err := s.storage.Delete(ctx, &storagev1.DeleteRequest{
				Type: StorageType(res), Namespace: namespace, Name: name,
				Preconditions: &storagev1.Preconditions{ResourceVersion: rv},
			})
			if apierrors.IsConflict(FromStorage(err, res.GroupResource(), name)) {
				continue
			}
			if err != nil {
				return nil, false, FromStorage(err, res.GroupResource(), name)
			}
			s.changed(res, namespace, name)
			return cur, true, nil
		}
		obj, err := s.commitUpdate(ctx, res, next, cur, dry)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return obj, false, nil
	}
	return nil, false, errTooManyWriters(res.GroupResource(), name)
}

// maxAnnotationsBytes is upstream's limit on the total size of an object's annotations.
const maxAnnotationsBytes = 256 * 1024

// generateNameSuffixLength is the length of the random suffix added to generateName, and
// maxGeneratedNameBase the longest prefix kept (upstream's: a generated name fits a 63-character
// DNS label whatever the prefix).
const (
	generateNameSuffixLength = 5
	maxGeneratedNameBase     = 63 - generateNameSuffixLength
)

// generateName makes a name from a generateName prefix, as upstream's name generator: the
// prefix (cut to maxGeneratedNameBase) and a random suffix.
func generateName(base string) string {
	if len(base) > maxGeneratedNameBase {
		base = base[:maxGeneratedNameBase]
	}
	return base + utilrand.String(generateNameSuffixLength)
}

// prepareCreate sets the system fields of a new object (uid, creationTimestamp, generation) and
// clears those a client may not set (deletion fields, status of kinds whose status is a
// subresource), so none can be forged. ctx carries the requesting user, which some kinds record
// (a CertificateSigningRequest's requestor).
func (s *Store) prepareCreate(ctx context.Context, res *registry.Resource, obj runtime.Object, m metav1.Object) {
	m.SetUID(types.UID(uuid.NewString()))
	m.SetCreationTimestamp(metav1.NewTime(s.now().Truncate(time.Second)))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	m.SetGeneration(0)
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(generateName(m.GetGenerateName()))
	}
	// Generation, status and the kind's own fields are the kind's (its strategy).
	res.Strategy().PrepareForCreate(ctx, obj)
}

// validateObjectMeta checks the metadata rules of the spec: name (or generateName) valid for the
// kind, labels, annotations and finalizers well-formed. Violations are 422 Invalid, listing each.
func validateObjectMeta(res *registry.Resource, m metav1.Object) error {
	var errs field.ErrorList
	st := res.Strategy()
	p := field.NewPath("metadata")
	switch {
	case m.GetName() == "" && m.GetGenerateName() == "":
		errs = append(errs, field.Required(p.Child("name"), "name or generateName is required"))
	case m.GetName() != "":
		for _, msg := range st.ValidateName(m.GetName()) {
			errs = append(errs, field.Invalid(p.Child("name"), m.GetName(), msg))
		}
	}
	if g := m.GetGenerateName(); g != "" {
		// The prefix as generateName keeps it, plus the random suffix, must itself be a valid name.
		for _, msg := range st.ValidateName(g[:min(len(g), maxGeneratedNameBase)] + strings.Repeat("a", generateNameSuffixLength)) {
			errs = append(errs, field.Invalid(p.Child("generateName"), g, msg))
		}
	}
	for k, v := range m.GetLabels() {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Child("labels"), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("labels"), v, msg))
		}
	}
	total := 0
	for k, v := range m.GetAnnotations() {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(p.Child("annotations"), k, msg))
		}
		total += len(k) + len(v)
	}
	if total > maxAnnotationsBytes {
		errs = append(errs, field.TooLong(p.Child("annotations"), "", maxAnnotationsBytes))
	}
	for i, f := range m.GetFinalizers() {
		if msgs := validation.IsQualifiedName(f); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("finalizers").Index(i), f, strings.Join(msgs, "; ")))
		}
	}
	if slices.Contains(m.GetFinalizers(), metav1.FinalizerOrphanDependents) && slices.Contains(m.GetFinalizers(), metav1.FinalizerDeleteDependents) {
		errs = append(errs, field.Invalid(p.Child("finalizers"), m.GetFinalizers(),
			fmt.Sprintf("finalizer %s and %s cannot be both set", metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)))
	}
	// Owner references as upstream validates them: apiVersion, kind, name and uid set, at most
	// one controller (the garbage collector relies on both).
	errs = append(errs, apivalidation.ValidateOwnerReferences(m.GetOwnerReferences(), p.Child("ownerReferences"))...)
	if len(errs) == 0 {
		return nil
	}
	name := m.GetName()
	if name == "" {
		name = m.GetGenerateName()
	}
	return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), name, errs)
}

// admitWrite runs a kind's own rules on a write, after decoding, defaulting and its metadata's
// rules: its validation (422 Invalid, listing every violation), then its checks that need the
// caller or other objects (RBAC's escalation prevention). old is nil on create.
func (s *Store) admitWrite(ctx context.Context, res *registry.Resource, obj, old runtime.Object) error {
	st := res.Strategy()
	if errs := st.Validate(obj, old); len(errs) > 0 {
		return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), registry.Meta(obj).GetName(), errs)
	}
	return st.CheckWrite(ctx, obj, old)
}

// prepareUpdate builds the object to store from the client's object and the current one (the
// kind's update rules).
func prepareUpdate(res *registry.Resource, subresource string, newObj, cur runtime.Object) (runtime.Object, error) {
	return res.Strategy().PrepareForUpdate(subresource, newObj, cur)
}

// trackUpdate records a non-apply write in obj's managedFields: the manager takes every field the
// write changed (updates never conflict). live is the stored object (an empty object on create).
// managedFields set to [{}] clears every entry first; an empty list leaves them as they are.
func (s *Store) trackUpdate(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	fm, err := res.Strategy().FieldManager(subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m := registry.Meta(obj)
	if mf := m.GetManagedFields(); mf != nil && len(mf) == 0 {
		m.SetManagedFields(nil)
	}
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// authorizeCreate checks that the caller may also create the object a write is about to create
// (an update or apply of an object that does not exist), as upstream authorizes create-on-update:
// a grant of patch or update alone does not create. Writes the gateway makes itself (no user)
// are not checked.
func (s *Store) authorizeCreate(ctx context.Context, res *registry.Resource, namespace, name string) error {
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return nil
	}
	_, err := auth.Authorize(ctx, s.log, s.authz, auth.Attributes{User: u, Verb: "create", ResourceRequest: true,
		APIGroup: res.Group, APIVersion: res.Version, Resource: res.Resource, Namespace: namespace, Name: name})
	return err
}

// conflictMessage is upstream's wording for a failed compare-and-swap; clients match on the reason.
const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// FromStorage turns a storage error into the API error a client of upstream would see.
func FromStorage(err error, gr schema.GroupResource, name string) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("the request did not complete in time", 0)
	}
	var se *storage.Error
	if !errors.As(storage.FromError(err), &se) {
		return apierrors.NewInternalError(err)
	}
	switch se.Reason {
	case storagev1.ErrorReason_NOT_FOUND:
		return apierrors.NewNotFound(gr, name)
	case storagev1.ErrorReason_ALREADY_EXISTS:
		return apierrors.NewAlreadyExists(gr, name)
	case storagev1.ErrorReason_CONFLICT:
		return errConflict(gr, name)
	case storagev1.ErrorReason_EXPIRED:
		e := apierrors.NewResourceExpired(se.Message)
		// A compacted continue token: upstream's inconsistent continue token, in the Status.
		e.ErrStatus.ListMeta.Continue = se.Continue
		return e
	case storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION:
		retry := int(se.RetryAfterSeconds)
		if retry <= 0 {
			retry = 1
		}
		e := apierrors.NewTimeoutError(se.Message, retry)
		e.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return e
	case storagev1.ErrorReason_INVALID:
		return apierrors.NewBadRequest(se.Message)
	case storagev1.ErrorReason_UNAVAILABLE:
		e := apierrors.NewServiceUnavailable("storage is unavailable: " + se.Message)
		e.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		return e
	default:
		return apierrors.NewInternalError(se)
	}
}
