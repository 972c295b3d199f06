// Package admission is the framework of the admission service: the attributes of a request under
// admission, what plugins implement (mutation, validation, interest), their registry in upstream's
// order with the spec's default set, and the chain that runs them.
package admission

import (
	"context"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operation is the operation of a request under admission.
type Operation string

// Operations, as AdmissionReview names them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// User is the identity a request runs as.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup tells whether the user is in group g.
func (u *User) InGroup(g string) bool {
	if u == nil {
		return false
	}
	for _, x := range u.Groups {
		if x == g {
			return true
		}
	}
	return false
}

// Attributes are one request's admission attributes. Kind and Resource use the group names
// Platform serves ("" for the core group, naming.Group(...) for renamed groups). Object and
// OldObject are typed (k8s.io/api Go types) for built-in kinds and *unstructured.Unstructured for
// custom ones; Object is nil for DELETE, OldObject for CREATE. Mutating plugins change Object in
// place.
type Attributes struct {
	Operation   Operation
	Kind        schema.GroupVersionKind
	Resource    schema.GroupVersionResource
	Subresource string
	// RequestKind, RequestResource and RequestSubresource are as the client addressed them.
	RequestKind        schema.GroupVersionKind
	RequestResource    schema.GroupVersionResource
	RequestSubresource string
	Namespace, Name    string
	Object, OldObject  runtime.Object
	// Options is the operation's options object (CreateOptions, UpdateOptions, DeleteOptions),
	// JSON as the client sent it (null for CONNECT).
	Options []byte
	User    *User
	DryRun  bool
	// UID identifies the request (AdmissionReview's request.uid).
	UID string
	// Reinvocation is true in the second round of the mutating phase, which runs because a
	// webhook changed the object after plugins or webhooks that may want to see the change had
	// run (reinvocationPolicy IfNeeded; built-in mutating plugins always run again).
	Reinvocation bool

	mu          sync.Mutex
	reinvoke    bool
	warnings    []string
	annotations map[string]string
}

// AddWarning records a warning for the client (a Warning header).
func (a *Attributes) AddWarning(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warnings = append(a.warnings, msg)
}

// AddAnnotation records an audit annotation (key: value); the first value of a key stays.
func (a *Attributes) AddAnnotation(key, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.annotations == nil {
		a.annotations = map[string]string{}
	}
	if _, ok := a.annotations[key]; !ok {
		a.annotations[key] = value
	}
}

// RequestReinvocation asks for a second round of the mutating phase (the webhook plugin does when
// a webhook changed the object after a webhook with reinvocationPolicy IfNeeded had run).
func (a *Attributes) RequestReinvocation() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reinvoke = true
}

// ReinvocationRequested tells whether a plugin asked for a second round.
func (a *Attributes) ReinvocationRequested() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reinvoke
}

// Warnings returns the recorded warnings.
func (a *Attributes) Warnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.warnings...)
}

// Annotations returns the recorded audit annotations.
func (a *Attributes) Annotations() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.annotations))
	for k, v := range a.annotations {
		out[k] = v
	}
	return out
}

// GroupResource is the request's resource (without version).
func (a *Attributes) GroupResource() schema.GroupResource { return a.Resource.GroupResource() }

// Is tells whether the request is for group/resource (Platform's group name; "" for core) and
// the given subresource ("" for the main resource).
func (a *Attributes) Is(group, resource, subresource string) bool {
	return a.Resource.Group == group && a.Resource.Resource == resource && a.Subresource == subresource
}

// Plugin is one admission plugin. A plugin implements Mutator, Validator or both.
type Plugin interface {
	Name() string
}

// Mutator is a plugin of the mutating phase: it may change a.Object, or reject with an error.
type Mutator interface {
	Plugin
	Admit(ctx context.Context, a *Attributes) error
}

// Validator is a plugin of the validating phase: it may only reject.
type Validator interface {
	Plugin
	Validate(ctx context.Context, a *Attributes) error
}

// Interest is a set of requests a plugin may act on, in a webhook rule's shape: operations
// ("*" for all), API groups (Platform's names; "*" for all), resources ("pods", "pods/status",
// "pods/*", "*/status", "*", "*/*"), scope ("Cluster", "Namespaced", "*" or "" for both), and
// optionally only requests from users of one of UserGroups. The gateway calls admission only for
// requests some interest matches. ValidateOnly is set by the chain on the interests of plugins
// that only validate: a write only such interests match skips the mutating phase.
type Interest struct {
	Operations   []Operation
	APIGroups    []string
	Resources    []string
	Scope        string
	UserGroups   []string
	ValidateOnly bool
}

// Interested is implemented by plugins: the requests they may act on. Plugins whose interest
// changes at run time (webhooks, quotas) implement DynamicInterest too.
type Interested interface {
	Interests() []Interest
}

// DynamicInterest is implemented by plugins whose interest depends on stored objects: Namespaces
// lists namespaces in which every write is of interest, OwnerReferences asks for every write that
// sets or changes owner references; Changed is signalled whenever either may have changed.
type DynamicInterest interface {
	Namespaces() []string
	OwnerReferences() bool
	Changed() <-chan struct{}
}

// Rejection errors: plugins return *apierrors.StatusError (apierrors.NewForbidden,
// NewBadRequest, NewInvalid, NewTooManyRequests, ...), which become the request's Status. Any
// other error is a 500 (InternalError), as upstream's admission chain turns unknown errors.

// Forbidden is upstream's admission rejection: 403 Forbidden naming the resource and the object.
func Forbidden(a *Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err // not wrapped twice, as upstream
	}
	name := a.Name
	if name == "" {
		// As upstream: the object's name, else its generateName (names are generated later),
		// else "Unknown".
		name = "Unknown"
		if m, ok := a.Object.(interface {
			GetName() string
			GetGenerateName() string
		}); ok && a.Object != nil && !reflect.ValueOf(a.Object).IsNil() {
			if n := m.GetName(); n != "" {
				name = n
			} else if g := m.GetGenerateName(); g != "" {
				name = g
			}
		}
	}
	return apierrors.NewForbidden(a.GroupResource(), name, err)
}
