package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
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
	return &namespaceCache{a: a, entries: map[string]namespaceEntry{}}
}

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
	obj, err := c.a.getCurrent(ctx, res, "", name)
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

// copyNamespaceFinalizers sets dst's spec.finalizers to src's (both namespaces).
func copyNamespaceFinalizers(dst, src runtime.Object) {
	d, ok1 := dst.(*corev1.Namespace)
	s, ok2 := src.(*corev1.Namespace)
	if ok1 && ok2 {
		d.Spec.Finalizers = append([]corev1.FinalizerName(nil), s.Spec.Finalizers...)
	}
}

// EnsureNamespaces creates the namespaces that exist from the start: default, platform-system
// and platform-public.
func (a *API) EnsureNamespaces(ctx context.Context) error {
	res := a.namespaces()
	for _, name := range []string{metav1.NamespaceDefault, naming.SystemNamespace, naming.PublicNamespace} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ns.Status.Phase = corev1.NamespaceActive
		ns.Spec.Finalizers = []corev1.FinalizerName{namespaceFinalizer}
		_, err := a.createObject(ctx, res, &writeRequest{obj: ns, meta: ns})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// RunNamespaceController removes terminating namespaces once everything in them is gone: it
// deletes every namespaced object in each terminating namespace (objects with finalizers wait for
// them), then drops the namespace's own finalizer and removes it. It runs until ctx ends.
func (a *API) RunNamespaceController(ctx context.Context) {
	res := a.namespaces()
	for ctx.Err() == nil {
		if err := a.namespaceControllerPass(ctx, res); err != nil && ctx.Err() == nil {
			a.log.WarnContext(ctx, "namespace controller", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// namespaceControllerPass finalizes the namespaces terminating now, then follows the watch until
// it ends, finalizing each namespace that starts terminating.
func (a *API) namespaceControllerPass(ctx context.Context, res *registry.Resource) error {
	stream, err := a.store.Watch(ctx, &storagev1.WatchRequest{Type: storageType(res), AllowBookmarks: true, BookmarkIntervalMs: 1000})
	if err != nil {
		return err
	}
	pending := map[string]bool{}
	events, errc := receive(ctx, stream)
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case evs := <-events:
			for _, ev := range evs {
				if ev.Object == nil || ev.Type == storagev1.EventType_DELETED {
					if ev.Object != nil {
						delete(pending, ev.Object.Name)
					}
					continue
				}
				obj, err := a.fromStored(res, ev.Object)
				if err != nil {
					continue
				}
				if obj.(*corev1.Namespace).DeletionTimestamp != nil {
					pending[ev.Object.Name] = true
				}
			}
		case <-retry.C:
		}
		for name := range pending {
			done, err := a.finalizeNamespace(ctx, name)
			if err != nil {
				a.log.InfoContext(ctx, "finalizing namespace", "namespace", name, "error", err)
			}
			if done {
				delete(pending, name)
			}
		}
	}
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

// finalizeNamespace deletes the content of a terminating namespace; once none is left it removes
// the namespace. done reports that nothing more is to be done for it.
func (a *API) finalizeNamespace(ctx context.Context, name string) (bool, error) {
	remaining := 0
	seen := map[schema.GroupResource]bool{}
	for _, res := range a.reg.Resources() {
		if !res.Namespaced || res.Virtual {
			continue
		}
		// The versions of a custom resource share one collection.
		if seen[res.GroupResource()] {
			continue
		}
		seen[res.GroupResource()] = true
		resp, err := a.store.List(ctx, &storagev1.ListRequest{Type: storageType(res), Namespace: name})
		if err != nil {
			return false, err
		}
		for _, o := range resp.Items {
			remaining++
			_, _, err := a.deleteObject(ctx, res, name, o.Name, &metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
	}
	if remaining > 0 {
		// Deleted or marked; the next pass confirms the namespace is empty.
		return false, nil
	}
	nsRes := a.namespaces()
	obj, err := a.getCurrent(ctx, nsRes, "", name)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	ns := obj.(*corev1.Namespace)
	if ns.DeletionTimestamp == nil {
		return true, nil
	}
	rv, _ := strconv.ParseInt(ns.ResourceVersion, 10, 64)
	if hasFinalizer(ns.Spec.Finalizers, namespaceFinalizer) || len(ns.Spec.Finalizers) > 0 || len(ns.Finalizers) > 0 {
		if !hasFinalizer(ns.Spec.Finalizers, namespaceFinalizer) {
			// Other actors' finalizers still hold it; the next pass looks again.
			return false, nil
		}
		next := ns.DeepCopy()
		next.Spec.Finalizers = removeFinalizer(next.Spec.Finalizers, namespaceFinalizer)
		if len(next.Spec.Finalizers) > 0 || len(next.Finalizers) > 0 {
			_, err := a.commitUpdate(ctx, nsRes, next, ns, false)
			return false, err
		}
	}
	_, err = a.store.Delete(ctx, &storagev1.DeleteRequest{Type: storageType(nsRes), Name: name, Preconditions: &storagev1.Preconditions{ResourceVersion: rv}})
	if err != nil {
		return false, fromStorage(err, nsRes.GroupResource(), name)
	}
	a.nsCache.forget(name)
	return true, nil
}

func removeFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) []corev1.FinalizerName {
	out := list[:0]
	for _, x := range list {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}
