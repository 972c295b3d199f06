package serviceaccount

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"platform.io/services/authn/authenticator"
)

// memObjects is an in-memory authenticator.Objects: a fake of our own storage read (the service
// wires the storage-backed one and tests it end to end). Objects are copied in and out, as a store
// would.
type memObjects struct {
	mu       sync.Mutex
	accounts map[string]*corev1.ServiceAccount
	secrets  map[string]*corev1.Secret
	pods     map[string]*corev1.Pod
	nodes    map[string]*corev1.Node
	// fail, when set, is returned by every read.
	fail error
}

func newMemObjects() *memObjects {
	return &memObjects{
		accounts: map[string]*corev1.ServiceAccount{},
		secrets:  map[string]*corev1.Secret{},
		pods:     map[string]*corev1.Pod{},
		nodes:    map[string]*corev1.Node{},
	}
}

func key(ns, name string) string { return ns + "/" + name }

func (m *memObjects) put(obj any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		m.accounts[key(o.Namespace, o.Name)] = o.DeepCopy()
	case *corev1.Secret:
		m.secrets[key(o.Namespace, o.Name)] = o.DeepCopy()
	case *corev1.Pod:
		m.pods[key(o.Namespace, o.Name)] = o.DeepCopy()
	case *corev1.Node:
		m.nodes[o.Name] = o.DeepCopy()
	default:
		panic(fmt.Sprintf("unexpected %T", obj))
	}
}

func (m *memObjects) remove(kind, ns, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch kind {
	case "ServiceAccount":
		delete(m.accounts, key(ns, name))
	case "Secret":
		delete(m.secrets, key(ns, name))
	case "Pod":
		delete(m.pods, key(ns, name))
	case "Node":
		delete(m.nodes, name)
	}
}

func (m *memObjects) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func get[T interface{ DeepCopy() T }](m *memObjects, from map[string]T, k, resource string) (T, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero T
	if m.fail != nil {
		return zero, m.fail
	}
	o, ok := from[k]
	if !ok {
		return zero, fmt.Errorf("%s %q: %w", resource, k, authenticator.ErrNotFound)
	}
	return o.DeepCopy(), nil
}

func (m *memObjects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	return get(m, m.accounts, key(ns, name), "serviceaccounts")
}

func (m *memObjects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return get(m, m.secrets, key(ns, name), "secrets")
}

func (m *memObjects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	return get(m, m.pods, key(ns, name), "pods")
}

func (m *memObjects) Node(_ context.Context, name string) (*corev1.Node, error) {
	return get(m, m.nodes, name, "nodes")
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
