// Package namespaces has the namespace admission plugins, as upstream's: NamespaceLifecycle (no
// new content in a namespace that is missing or being terminated; default, the system namespace
// and the public namespace cannot be deleted), NamespaceExists (no request in a missing
// namespace) and NamespaceAutoProvision (a create in a missing namespace creates it).
//
// Whether a namespace exists is read from the lister first and, before answering "missing",
// from storage (a consistent read), so that a namespace created a moment ago is never refused.
//
// Interest: the gateway asks about every namespaced create whose namespace it sees missing or
// terminating, so the plugins' static interest is only the deletion of namespaces
// (NamespaceLifecycle); NamespaceLifecycle's dynamic interest adds the namespaces the lister
// sees terminating, so that creates there are asked about even while the gateway's own view
// lags.
package namespaces

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Register registers NamespaceLifecycle, NamespaceExists and NamespaceAutoProvision.
func Register(r *admission.Registry) {
	r.Register(admission.NamespaceLifecycle, NewLifecycle)
	r.Register(admission.NamespaceExists, NewExists)
	r.Register(admission.NamespaceAutoProvision, NewAutoProvision)
}

// forceLiveLookupTTL is how long after a namespace's deletion was admitted its phase is read from
// storage rather than from the lister (which may not show the deletion yet), as upstream.
const forceLiveLookupTTL = 30 * time.Second

// immortal are the namespaces that may not be deleted.
var immortal = map[string]bool{
	metav1.NamespaceDefault: true,
	naming.SystemNamespace:  true,
	naming.PublicNamespace:  true,
}

// isNamespace tells whether the request is about a Namespace object itself.
func isNamespace(a *admission.Attributes) bool {
	return (a.Kind.Group == "" && a.Kind.Kind == "Namespace") || a.Is("", "namespaces", a.Subresource)
}

// terminating tells whether a namespace refuses new content.
func terminating(ns *corev1.Namespace) bool {
	return ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil
}

// lookup finds a namespace: in the lister, else (or when live) in storage. It returns the
// NotFound error of storage for a missing one.
func lookup(ctx context.Context, deps *admission.Deps, name string, live bool) (*corev1.Namespace, error) {
	if !live {
		if ns, ok := deps.Objects.Namespaces().Get("", name); ok {
			return ns, nil
		}
	}
	ns, err := deps.Store.GetNamespace(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	case err != nil:
		return nil, apierrors.NewInternalError(err)
	}
	return ns, nil
}

// Lifecycle is the NamespaceLifecycle plugin.
type Lifecycle struct {
	deps admission.Deps

	mu      sync.Mutex
	deleted map[string]time.Time // namespaces whose deletion was admitted, until when to read them live
	changes changes
}

var (
	_ admission.Mutator         = (*Lifecycle)(nil)
	_ admission.Interested      = (*Lifecycle)(nil)
	_ admission.DynamicInterest = (*Lifecycle)(nil)
)

// NewLifecycle builds NamespaceLifecycle (it has no configuration).
func NewLifecycle(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Lifecycle{deps: deps, deleted: map[string]time.Time{}}, nil
}

// Name is the plugin's name.
func (l *Lifecycle) Name() string { return admission.NamespaceLifecycle }

// Interests: deletions of namespaces (creates in missing or terminating namespaces are asked by
// the gateway; see Namespaces for the terminating ones it may not know about yet).
func (l *Lifecycle) Interests() []admission.Interest {
	return []admission.Interest{{Operations: []admission.Operation{admission.Delete}, APIGroups: []string{""}, Resources: []string{"namespaces"}, Scope: "Cluster"}}
}

// Namespaces are the namespaces the lister sees terminating: every write there is asked about.
func (l *Lifecycle) Namespaces() []string {
	var out []string
	for _, ns := range l.deps.Objects.Namespaces().List("") {
		if terminating(ns) {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out
}

// OwnerReferences is false.
func (l *Lifecycle) OwnerReferences() bool { return false }

// Changed is signalled shortly after a namespace's deletion is admitted (once it has had time to
// reach the lister).
func (l *Lifecycle) Changed() <-chan struct{} { return l.changes.channel() }

// Admit applies the lifecycle rules (it changes nothing; upstream runs it in the mutating phase,
// so that no mutating webhook is called for a request it refuses).
func (l *Lifecycle) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Operation == admission.Delete && isNamespace(a) && a.Subresource == "" {
		if immortal[a.Name] {
			return apierrors.NewForbidden(a.GroupResource(), a.Name, fmt.Errorf("this namespace may not be deleted"))
		}
		// Creates into it must now be refused even while the lister still shows it active.
		l.mu.Lock()
		l.deleted[a.Name] = l.deps.Now().Add(forceLiveLookupTTL)
		l.mu.Unlock()
		l.changes.soon()
		return nil
	}
	if isNamespace(a) || a.Namespace == "" {
		return nil
	}
	// Deletes of content, reads (never admitted) and access reviews (whose answer would tell
	// whether a namespace exists) pass.
	if a.Operation == admission.Delete || a.Is(naming.Group("authorization.k8s.io"), "localsubjectaccessreviews", "") {
		return nil
	}
	ns, err := lookup(ctx, &l.deps, a.Namespace, l.forceLive(a.Namespace))
	if err != nil {
		return err
	}
	if a.Operation != admission.Create || !terminating(ns) {
		return nil
	}
	e := admission.Forbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	if se, ok := e.(*apierrors.StatusError); ok && se.ErrStatus.Details != nil {
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    corev1.NamespaceTerminatingCause,
			Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace),
			Field:   "metadata.namespace",
		})
	}
	return e
}

// forceLive tells whether the namespace's deletion was admitted recently (read it from storage,
// not the lister).
func (l *Lifecycle) forceLive(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	until, ok := l.deleted[name]
	if !ok {
		return false
	}
	now := l.deps.Now()
	if now.After(until) {
		delete(l.deleted, name)
		return false
	}
	// Expired entries of other namespaces go now and then, so the map stays small.
	if len(l.deleted) > 1000 {
		for n, u := range l.deleted {
			if now.After(u) {
				delete(l.deleted, n)
			}
		}
	}
	return true
}

// Exists is the NamespaceExists plugin.
type Exists struct {
	deps admission.Deps
}

var (
	_ admission.Validator  = (*Exists)(nil)
	_ admission.Interested = (*Exists)(nil)
)

// NewExists builds NamespaceExists (it has no configuration).
func NewExists(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &Exists{deps: deps}, nil
}

// Name is the plugin's name.
func (e *Exists) Name() string { return admission.NamespaceExists }

// Interests: none of its own. Creates in a missing namespace are asked by the gateway; updates
// and deletes there find no object before admission.
func (e *Exists) Interests() []admission.Interest { return nil }

// Validate refuses a namespaced request whose namespace does not exist (404).
func (e *Exists) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Namespace == "" || isNamespace(a) {
		return nil
	}
	_, err := lookup(ctx, &e.deps, a.Namespace, false)
	return err
}

// AutoProvision is the NamespaceAutoProvision plugin.
type AutoProvision struct {
	deps admission.Deps
}

var (
	_ admission.Mutator    = (*AutoProvision)(nil)
	_ admission.Interested = (*AutoProvision)(nil)
)

// NewAutoProvision builds NamespaceAutoProvision (it has no configuration).
func NewAutoProvision(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &AutoProvision{deps: deps}, nil
}

// Name is the plugin's name.
func (p *AutoProvision) Name() string { return admission.NamespaceAutoProvision }

// Interests: none of its own; creates in a missing namespace are asked by the gateway.
func (p *AutoProvision) Interests() []admission.Interest { return nil }

// Admit creates the namespace of a create whose namespace is missing (not for a dry run, which
// must have no side effects).
func (p *AutoProvision) Admit(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.DryRun || a.Namespace == "" || isNamespace(a) {
		return nil
	}
	if _, ok := p.deps.Objects.Namespaces().Get("", a.Namespace); ok {
		return nil
	}
	// Creating an existing namespace is no error, so no consistent read is needed first.
	if err := p.deps.Store.CreateNamespace(ctx, a.Namespace); err != nil && !apierrors.IsAlreadyExists(err) {
		return admission.Forbidden(a, err)
	}
	return nil
}

// changes is a broadcast: channel returns the current channel, signal closes it (waking every
// waiter) and starts a new one.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) channel() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
	}
	c.ch = make(chan struct{})
}

// settle are the delays after an admitted write at which its effect is looked for: the write is
// stored a few milliseconds after admission and reaches the listers a few after that.
var settle = []time.Duration{20 * time.Millisecond, 200 * time.Millisecond, time.Second}

// soon signals after each of settle.
func (c *changes) soon() {
	for _, d := range settle {
		time.AfterFunc(d, c.signal)
	}
}
