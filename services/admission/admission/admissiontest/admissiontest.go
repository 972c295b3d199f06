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
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:        time.Now,
	}
}
