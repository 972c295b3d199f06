package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/core"
	"platform.io/services/gateway/registry/generic"
)

// namespaceCacheTTL is how long a namespace lookup is reused by the create path's lifecycle
// check. A create may thus land in a namespace up to this long after it started terminating; the
// namespace controller re-lists until the namespace is empty, so such objects are removed too.
const namespaceCacheTTL = time.Second

// namespaceCache remembers recent namespace lookups of the create path.
type namespaceCache struct {
	a       *API
	mu      sync.Mutex
	entries map[string]namespaceEntry
}

type namespaceEntry struct {
	phase corev1.NamespacePhase
	at    time.Time
}

func newNamespaceCache(a *API) *namespaceCache {
	c := &namespaceCache{a: a, entries: map[string]namespaceEntry{}}
	// A namespace this gateway marks terminating is seen so at once by its own creates.
	a.gen.OnChange(func(res *registry.Resource, _, name string) {
		if res.GroupResource() == namespacesGroupResource {
			c.forget(name)
		}
	})
	return c
}

// namespacesGroupResource is what the cache reads: core namespaces.
var namespacesGroupResource = schema.GroupResource{Resource: "namespaces"}

func (c *namespaceCache) forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}

// phase returns the namespace's phase, or a NotFound error.
func (c *namespaceCache) phase(ctx context.Context, name string) (corev1.NamespacePhase, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < namespaceCacheTTL {
		return e.phase, nil
	}
	res := c.a.namespaces()
	obj, err := c.a.gen.Get(ctx, res, "", name)
	if err != nil {
		return "", err
	}
	ns := obj.(*corev1.Namespace)
	phase := ns.Status.Phase
	if ns.DeletionTimestamp != nil {
		phase = corev1.NamespaceTerminating
	}
	c.mu.Lock()
	if len(c.entries) > 10000 {
		c.entries = map[string]namespaceEntry{}
	}
	c.entries[name] = namespaceEntry{phase: phase, at: now}
	c.mu.Unlock()
	return phase, nil
}

func (a *API) namespaces() *registry.Resource {
	res, _ := a.reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	return res
}

// checkNamespace is the namespace lifecycle rule of creates: the namespace must exist (404) and
// must not be terminating (403).
func (a *API) checkNamespace(ctx context.Context, res *registry.Resource, namespace string) error {
	if !res.Namespaced {
		return nil
	}
	phase, err := a.nsCache.phase(ctx, namespace)
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, namespace)
	}
	if err != nil {
		return err
	}
	if phase == corev1.NamespaceTerminating {
		e := apierrors.NewForbidden(res.GroupResource(), "", fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
		e.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace " + namespace + " is being terminated", Field: "metadata.namespace"}}
		return e
	}
	return nil
}

// EnsureNamespaces creates the namespaces that exist from the start: default, platform-system,
// platform-public and the node lease namespace.
func (a *API) EnsureNamespaces(ctx context.Context) error {
	res := a.namespaces()
	for _, name := range []string{metav1.NamespaceDefault, naming.SystemNamespace, naming.PublicNamespace, naming.NodeLeaseNamespace} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ns.Status.Phase = corev1.NamespaceActive
		ns.Spec.Finalizers = []corev1.FinalizerName{core.NamespaceFinalizer}
		_, err := a.gen.Create(ctx, res, &generic.Create{Obj: ns})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// receive turns a storage watch into channels for a controller's select loop: batches of
// events, and the error that ended the watch. It stops when ctx ends.
func receive(ctx context.Context, stream interface {
	Recv() ([]*storagev1.Event, error)
}) (<-chan []*storagev1.Event, <-chan error) {
	events := make(chan []*storagev1.Event)
	errc := make(chan error, 1)
	go func() {
		for {
			evs, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case events <- evs:
			case <-ctx.Done():
				return
			}
		}
	}()
	return events, errc
}

// systemPriorityClasses are the priority classes that exist from the start, as upstream's
// (values and descriptions are upstream's).
var systemPriorityClasses = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000,
		Description: "Used for system critical pods that must not be moved from their current node."},
	{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000,
		Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
}

// EnsurePriorityClasses creates the system priority classes when they are missing (upstream's
// post-start hook scheduling/bootstrap-system-priority-classes); existing ones are left alone.
func (a *API) EnsurePriorityClasses(ctx context.Context) error {
	res, ok := a.reg.Resource(schema.GroupVersionResource{Group: naming.Group("scheduling.k8s.io"), Version: "v1", Resource: "priorityclasses"})
	if !ok {
		return nil // the group is turned off (--runtime-config)
	}
	for i := range systemPriorityClasses {
		pc := systemPriorityClasses[i].DeepCopy()
		pc.SetGroupVersionKind(res.GroupVersionKind())
		applyDefaults(res, pc)
		_, err := a.gen.Create(ctx, res, &generic.Create{Obj: pc, Manager: "scheduling-bootstrap"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating priority class %s: %w", pc.Name, err)
		}
	}
	return nil
}
