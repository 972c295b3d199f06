package registry

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/printers"
)

// Strategy is everything about a served resource that differs between kinds, so the verb
// handlers (create, update, patch, apply, delete, get, list, watch) are the same code for every
// kind and never ask which kind they serve. The registry keeps one per served resource and
// version (Resource.Strategy), chosen when the resource is registered: built-in kinds get the
// built-in strategy (k8s.io/api Go types), custom resources the custom one (unstructured objects
// ruled by their definition's schema). The implementations live in
// registry/builtin (the default of k8s.io/api's kinds), registry/custom (custom resources) and a
// package per kind with rules of its own (registry/<group>), whose strategies embed the default;
// the registry only chooses (StrategyFactory).
//
// Versions: a resource's strategy reads and writes the objects of the version it serves and owns
// the conversion to and from the stored form (EncodeStored, DecodeStored). A second served version
// of a kind is a strategy that converts to the stored version's objects in those two methods and
// delegates everything else to the stored version's rules.
//
// Upstream's REST strategies (k8s.io/apiserver's registry/rest) are the model of the seam.
type Strategy interface {
	// New returns an empty object of the kind (custom objects with apiVersion and kind set).
	New() runtime.Object
	// NewList returns the kind's <Kind>List holding items, with the list metadata lm.
	NewList(items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error)

	// Protobuf tells whether the kind has a Protobuf encoding: without one a body in it is 415 and
	// a response asked only in it 406.
	Protobuf() bool
	// StrategicMerge tells whether strategic merge patches apply to the kind (they need Go struct
	// tags).
	StrategicMerge() bool
	// Normalize makes a freshly decoded object (a body, a patch result, an apply body, what
	// admission returned) what the kind allows, and returns the unknown fields it dropped as
	// strict-decoding messages, for fieldValidation to ignore, warn about or refuse.
	Normalize(obj runtime.Object) ([]string, error)
	// Typed turns the field manager's result (possibly unstructured) into the kind's object form.
	Typed(obj runtime.Object) (runtime.Object, error)

	// EncodeStored serializes an object (without resourceVersion) into its stored form, in the
	// stored version; the object keeps its served apiVersion and kind.
	EncodeStored(obj runtime.Object) ([]byte, error)
	// DecodeStored reads a stored value into a new object of the served version.
	DecodeStored(value []byte) (runtime.Object, error)

	// Default applies the kind's defaults.
	Default(obj runtime.Object)
	// CheckRequired reports missing required fields as one 400 (nil when the kind checks them in
	// its validation).
	CheckRequired(obj runtime.Object) error
	// Validate checks the kind's own rules (old is nil on create); the caller answers 422.
	Validate(obj, old runtime.Object) field.ErrorList
	// ValidateName checks a name (or a generateName with its suffix) against the kind's name
	// rule, returning one message per violation.
	ValidateName(name string) []string

	// PrepareForCreate sets what the kind decides on a new object once the generic system fields
	// are set: generation, status the client may not set, defaults that depend on the name, and
	// per-kind fields (ctx carries the requesting user).
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate builds the object to store from the written one and the current one:
	// what a write through subresource ("", "status", ...) may change, system fields kept, and
	// generation moved when the spec changes.
	PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error)
	// PrepareForDelete lets the kind hold an object a delete would remove: next is a copy of the
	// stored object and now the deletion time. true means the kind marked next (a namespace
	// becomes Terminating, a definition waits for its objects' cleanup) and next is stored in
	// place of the object; false leaves the spec's generic rules (finalizers) to decide; an error
	// refuses the delete.
	PrepareForDelete(next runtime.Object, now metav1.Time) (bool, error)
	// Finalizing tells whether anything still holds an object being deleted: its
	// metadata.finalizers, and what the kind adds (a namespace's spec.finalizers). The write that
	// leaves nothing holding it removes it.
	Finalizing(obj runtime.Object) bool
	// CheckWrite runs the kind's checks that need the caller or other objects, after its
	// validation (RBAC's escalation prevention: a role grants only what its writer holds). old is
	// nil on create. Writes the gateway makes itself carry no user.
	CheckWrite(ctx context.Context, obj, old runtime.Object) error
	// FieldManager returns the field manager of the kind through subresource (built on first
	// use, with the kind's type converter and the fields that subresource may not own).
	FieldManager(subresource string) (*managedfields.FieldManager, error)

	// Replicas reads the scale subresource's view of an object: desired and current replicas
	// and the label selector.
	Replicas(obj runtime.Object) (spec, status int32, selector string, err error)
	// SetReplicas sets the desired replicas of an object through its scale subresource.
	SetReplicas(obj runtime.Object, n int32) error

	// Fields returns the selectable fields of an object, which storage indexes for field
	// selectors.
	Fields(obj runtime.Object) map[string]string
	// Printer returns the Table printer of the kind (sample is an object of it).
	Printer(sample runtime.Object) (*printers.Printer, error)

	// Definition is the CustomResourceDefinition the kind is served from (nil for built-in
	// kinds): its watches end and its creates stop when the definition changes or terminates.
	Definition() *apiextensionsv1.CustomResourceDefinition
}

// StrategyFactory builds the strategies the registry hands out: Builtin for the kinds of
// k8s.io/api, Custom for the resources of a definition.
type StrategyFactory struct {
	Builtin func(*Resource) Strategy
	Custom  func(*Resource) Strategy
}

// Strategy returns the resource's strategy (nil until the API server installed its
// StrategyFactory with UseStrategies).
func (r *Resource) Strategy() Strategy { return r.strategy }

// UseStrategies installs the strategies: every built-in resource gets its strategy now, custom
// resources when they are registered (PutCustom, DefinitionResources). It must be called before
// the registry serves requests.
func (r *Registry) UseStrategies(f StrategyFactory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.factory.Store(&f)
	for _, res := range r.byGVR {
		res.strategy = f.Builtin(res)
	}
	for _, res := range r.unserved {
		res.strategy = f.Builtin(res)
	}
	for _, list := range r.custom {
		for _, res := range list {
			res.strategy = f.Custom(res)
		}
	}
}

// chooseStrategy gives res its strategy: the custom one for resources of a definition, the
// built-in one otherwise.
func (r *Registry) chooseStrategy(res *Resource) {
	f := r.factory.Load()
	if f == nil || res.strategy != nil {
		return
	}
	if res.Custom != nil {
		res.strategy = f.Custom(res)
		return
	}
	res.strategy = f.Builtin(res)
}

// DefinitionResources is CustomResources with strategies: the resources a definition would
// serve, usable by the API server without being served (the definition's cleanup).
func (r *Registry) DefinitionResources(crd *apiextensionsv1.CustomResourceDefinition) []*Resource {
	out := CustomResources(crd)
	for _, res := range out {
		r.chooseStrategy(res)
	}
	return out
}

// Reviewer is implemented by the strategies of virtual kinds (Resource.Virtual: access and token
// reviews): a create is answered, not stored. Review completes obj (the decoded body, in the
// request's namespace for a namespaced kind) from the request's identity and the services behind
// the gateway; an error is the request's.
type Reviewer interface {
	Review(ctx context.Context, obj runtime.Object, namespace string) error
}

// Computer is implemented by the strategies of computed kinds (Resource.Computed): their objects
// are computed on every read and never stored. Compute returns the objects keep selects (by name
// and labels), in the kind's order.
type Computer interface {
	Compute(ctx context.Context, keep func(name string, labels map[string]string) bool) ([]runtime.Object, error)
}

// GracefulDeleter is implemented by the strategies of kinds deleted gracefully (pods: a node
// stops the containers within the grace period, then deletes the object). CheckGracefulDelete
// sets opts.GracePeriodSeconds to the period the delete of obj gets (the request's, else the
// kind's default; 0 when nothing would finish a graceful deletion) and tells whether the kind
// deletes obj gracefully at all, as upstream's RESTGracefulDeleteStrategy.
type GracefulDeleter interface {
	CheckGracefulDelete(obj runtime.Object, opts *metav1.DeleteOptions) bool
}
