// Package admissiontest has in-memory stand-ins for the admission service's own data access
// (listers, the compare-and-swap store, the authorizer), for plugins' unit tests. The service's
// real implementations (storage watches and writes, the authorization service) are exercised by
// the service's and the gateway's tests.
package admissiontest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/admission/admission"
)

// Lister is an in-memory admission.Lister.
type Lister[T metav1.Object] struct {
	mu    sync.RWMutex
	items map[string]T
}

func key(ns, name string) string { return ns + "/" + name }

// Add stores (or replaces) objects.
func (l *Lister[T]) Add(objs ...T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.items == nil {
		l.items = map[string]T{}
	}
	for _, o := range objs {
		l.items[key(o.GetNamespace(), o.GetName())] = o
	}
}

// Delete removes an object.
func (l *Lister[T]) Delete(ns, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.items, key(ns, name))
}

// Get returns an object.
func (l *Lister[T]) Get(ns, name string) (T, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	o, ok := l.items[key(ns, name)]
	return o, ok
}

// List returns the objects of a namespace ("" for all).
func (l *Lister[T]) List(ns string) []T {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []T
	for _, o := range l.items {
		if ns == "" || o.GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out
}

// Objects is an in-memory admission.Objects; fill its listers directly.
type Objects struct {
	NamespaceList         Lister[*corev1.Namespace]
	ServiceAccountList    Lister[*corev1.ServiceAccount]
	ServiceList           Lister[*corev1.Service]
	LimitRangeList        Lister[*corev1.LimitRange]
	ResourceQuotaList     Lister[*corev1.ResourceQuota]
	NodeList              Lister[*corev1.Node]
	PriorityClassList     Lister[*schedulingv1.PriorityClass]
	RuntimeClassList      Lister[*nodev1.RuntimeClass]
	StorageClassList      Lister[*storagev1.StorageClass]
	IngressClassList      Lister[*networkingv1.IngressClass]
	MutatingWebhookList   Lister[*admissionregistrationv1.MutatingWebhookConfiguration]
	ValidatingWebhookList Lister[*admissionregistrationv1.ValidatingWebhookConfiguration]
	PolicyList            Lister[*admissionregistrationv1.ValidatingAdmissionPolicy]
	PolicyBindingList     Lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]
}

var _ admission.Objects = (*Objects)(nil)

func (o *Objects) Namespaces() admission.Lister[*corev1.Namespace] { return &o.NamespaceList }
func (o *Objects) ServiceAccounts() admission.Lister[*corev1.ServiceAccount] {
	return &o.ServiceAccountList
}
func (o *Objects) Services() admission.Lister[*corev1.Service]       { return &o.ServiceList }
func (o *Objects) LimitRanges() admission.Lister[*corev1.LimitRange] { return &o.LimitRangeList }
func (o *Objects) ResourceQuotas() admission.Lister[*corev1.ResourceQuota] {
	return &o.ResourceQuotaList
}
func (o *Objects) Nodes() admission.Lister[*corev1.Node] { return &o.NodeList }
func (o *Objects) PriorityClasses() admission.Lister[*schedulingv1.PriorityClass] {
	return &o.PriorityClassList
}
func (o *Objects) RuntimeClasses() admission.Lister[*nodev1.RuntimeClass] { return &o.RuntimeClassList }
func (o *Objects) StorageClasses() admission.Lister[*storagev1.StorageClass] {
	return &o.StorageClassList
}
func (o *Objects) IngressClasses() admission.Lister[*networkingv1.IngressClass] {
	return &o.IngressClassList
}
func (o *Objects) MutatingWebhookConfigurations() admission.Lister[*admissionregistrationv1.MutatingWebhookConfiguration] {
	return &o.MutatingWebhookList
}
func (o *Objects) ValidatingWebhookConfigurations() admission.Lister[*admissionregistrationv1.ValidatingWebhookConfiguration] {
	return &o.ValidatingWebhookList
}

func (o *Objects) ValidatingAdmissionPolicies() admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicy] {
	return &o.PolicyList
}
func (o *Objects) ValidatingAdmissionPolicyBindings() admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding] {
	return &o.PolicyBindingList
}

// Resources is an in-memory admission.Resources: built-in kinds resolve as the service resolves
// them, others from Kinds; the objects of a resource are the ones Add put there.
type Resources struct {
	// Kinds are the custom kinds served (by kind, Platform's group names).
	Kinds map[schema.GroupVersionKind]admission.Mapping
	mu    sync.Mutex
	items map[schema.GroupVersionResource]*Copy
}

var _ admission.Resources = (*Resources)(nil)

// Mapping resolves a kind.
func (r *Resources) Mapping(gvk schema.GroupVersionKind) (admission.Mapping, error) {
	if m, ok := r.Kinds[gvk]; ok {
		return m, nil
	}
	return admission.BuiltinMapping(gvk)
}

// Watch returns the resource's objects (always synced).
func (r *Resources) Watch(m admission.Mapping) (admission.Copy, func()) {
	return r.copyOf(m.Resource), func() {}
}

func (r *Resources) copyOf(gvr schema.GroupVersionResource) *Copy {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.items == nil {
		r.items = map[schema.GroupVersionResource]*Copy{}
	}
	c := r.items[gvr]
	if c == nil {
		c = &Copy{}
		r.items[gvr] = c
	}
	return c
}

// Add stores objects of a resource (with their kind set).
func (r *Resources) Add(gvr schema.GroupVersionResource, objs ...runtime.Object) {
	c := r.copyOf(gvr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[string]runtime.Object{}
	}
	for _, o := range objs {
		m := admission.Accessor(o)
		c.items[key(m.GetNamespace(), m.GetName())] = o
	}
}

// Copy is an in-memory admission.Copy.
type Copy struct {
	mu    sync.RWMutex
	items map[string]runtime.Object
}

// Synced is true.
func (c *Copy) Synced() bool { return true }

// Get returns an object.
func (c *Copy) Get(ns, name string) (runtime.Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok := c.items[key(ns, name)]
	return o, ok
}

// List returns the objects of a namespace ("" for all).
func (c *Copy) List(ns string) []runtime.Object {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []runtime.Object
	for _, o := range c.items {
		if ns == "" || admission.Accessor(o).GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out
}

// Store is an in-memory admission.Store with compare-and-swap on resourceVersion, backed by the
// ResourceQuota, Namespace and ServiceAccount listers of Objects.
type Store struct {
	Objects *Objects
	mu      sync.Mutex
	rv      int64
}

var _ admission.Store = (*Store)(nil)

// GetResourceQuota reads a quota.
func (s *Store) GetResourceQuota(_ context.Context, ns, name string) (*corev1.ResourceQuota, error) {
	q, ok := s.Objects.ResourceQuotaList.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "resourcequotas"}, name)
	}
	return q.DeepCopy(), nil
}

// ListResourceQuotas lists a namespace's quotas.
func (s *Store) ListResourceQuotas(_ context.Context, ns string) ([]corev1.ResourceQuota, error) {
	var out []corev1.ResourceQuota
	for _, q := range s.Objects.ResourceQuotaList.List(ns) {
		out = append(out, *q.DeepCopy())
	}
	return out, nil
}

// UpdateResourceQuotaStatus stores q's status if its resourceVersion is the stored one.
func (s *Store) UpdateResourceQuotaStatus(_ context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.Objects.ResourceQuotaList.Get(q.Namespace, q.Name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "resourcequotas"}, q.Name)
	}
	if cur.ResourceVersion != q.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, q.Name, fmt.Errorf("the object has been modified"))
	}
	next := cur.DeepCopy()
	next.Status = *q.Status.DeepCopy()
	s.rv++
	next.ResourceVersion = "s" + strconv.FormatInt(s.rv, 10)
	s.Objects.ResourceQuotaList.Add(next)
	return next.DeepCopy(), nil
}

// GetNamespace reads a namespace.
func (s *Store) GetNamespace(_ context.Context, name string) (*corev1.Namespace, error) {
	n, ok := s.Objects.NamespaceList.Get("", name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return n.DeepCopy(), nil
}

// CreateNamespace creates an Active namespace.
func (s *Store) CreateNamespace(_ context.Context, name string) error {
	if _, ok := s.Objects.NamespaceList.Get("", name); ok {
		return nil
	}
	s.Objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	return nil
}

// GetServiceAccount reads a service account.
func (s *Store) GetServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	sa, ok := s.Objects.ServiceAccountList.Get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, name)
	}
	return sa.DeepCopy(), nil
}

// AuthorizerFunc is an admission.Authorizer from a function.
type AuthorizerFunc func(ctx context.Context, a admission.AuthorizationAttributes) (bool, string, error)

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
	return f(ctx, a)
}

// Deps returns dependencies over objects, with an authorizer that allows everything unless
// authz is given.
func Deps(objects *Objects, authz admission.Authorizer) admission.Deps {
	if authz == nil {
		authz = AuthorizerFunc(func(context.Context, admission.AuthorizationAttributes) (bool, string, error) { return true, "", nil })
	}
	return admission.Deps{
		Objects:    objects,
		Store:      &Store{Objects: objects},
		Authorizer: authz,
		Resources:  &Resources{},
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:        time.Now,
	}
}
