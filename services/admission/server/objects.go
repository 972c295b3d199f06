package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1api "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/plugins/pods"
)

// object is what a stored built-in kind is here: a metav1 object that decodes from Protobuf.
type object interface {
	storage.Unmarshaler
	storage.Marshaler
	GetNamespace() string
	GetName() string
	SetResourceVersion(string)
}

// lister is an admission.Lister over a storage informer.
type lister[T object] struct {
	inf *storage.Informer[T]
}

func (l lister[T]) Get(namespace, name string) (T, bool) {
	return l.inf.Get(storage.Key(namespace, name))
}

func (l lister[T]) List(namespace string) []T {
	all := l.inf.List()
	if namespace == "" {
		return all
	}
	out := all[:0:0]
	for _, o := range all {
		if o.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out
}

// newInformer builds the informer of one stored kind.
func newInformer[T any, PT interface {
	*T
	object
}](client *storage.Client, group, resource string, log *slog.Logger) *storage.Informer[PT] {
	return storage.NewInformer(client, &storagev1.ResourceType{Group: group, Resource: resource}, func(o *storagev1.Object) (PT, error) {
		obj := PT(new(T))
		if err := storage.DecodeStored(o.GetValue(), obj); err != nil {
			return nil, err
		}
		obj.SetResourceVersion(strconv.FormatInt(o.GetResourceVersion(), 10))
		return obj, nil
	}, log)
}

// objects is admission.Objects over storage informers.
type objects struct {
	namespaces      *storage.Informer[*corev1.Namespace]
	serviceAccounts *storage.Informer[*corev1.ServiceAccount]
	services        *storage.Informer[*corev1.Service]
	limitRanges     *storage.Informer[*corev1.LimitRange]
	quotas          *storage.Informer[*corev1.ResourceQuota]
	nodes           *storage.Informer[*corev1.Node]
	pods            *storage.Informer[*corev1.Pod]
	priorityClasses *storage.Informer[*schedulingv1.PriorityClass]
	runtimeClasses  *storage.Informer[*nodev1.RuntimeClass]
	storageClasses  *storage.Informer[*storagev1api.StorageClass]
	ingressClasses  *storage.Informer[*networkingv1.IngressClass]
	mutating        *storage.Informer[*admissionregistrationv1.MutatingWebhookConfiguration]
	validating      *storage.Informer[*admissionregistrationv1.ValidatingWebhookConfiguration]
	policies        *storage.Informer[*admissionregistrationv1.ValidatingAdmissionPolicy]
	bindings        *storage.Informer[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]
	crds            *storage.Informer[*apiextensionsv1.CustomResourceDefinition]
	resources       *resources
}

var (
	_ admission.Objects = (*objects)(nil)
	_ pods.PodLister    = (*objects)(nil)
)

func newObjects(client *storage.Client, log *slog.Logger) *objects {
	admissionGroup := naming.Group("admissionregistration.k8s.io")
	o := &objects{
		namespaces:      newInformer[corev1.Namespace](client, "", "namespaces", log),
		serviceAccounts: newInformer[corev1.ServiceAccount](client, "", "serviceaccounts", log),
		services:        newInformer[corev1.Service](client, "", "services", log),
		limitRanges:     newInformer[corev1.LimitRange](client, "", "limitranges", log),
		quotas:          newInformer[corev1.ResourceQuota](client, "", "resourcequotas", log),
		nodes:           newInformer[corev1.Node](client, "", "nodes", log),
		pods:            newInformer[corev1.Pod](client, "", "pods", log),
		priorityClasses: newInformer[schedulingv1.PriorityClass](client, naming.Group("scheduling.k8s.io"), "priorityclasses", log),
		runtimeClasses:  newInformer[nodev1.RuntimeClass](client, naming.Group("node.k8s.io"), "runtimeclasses", log),
		storageClasses:  newInformer[storagev1api.StorageClass](client, naming.Group("storage.k8s.io"), "storageclasses", log),
		ingressClasses:  newInformer[networkingv1.IngressClass](client, naming.Group("networking.k8s.io"), "ingressclasses", log),
		mutating:        newInformer[admissionregistrationv1.MutatingWebhookConfiguration](client, admissionGroup, "mutatingwebhookconfigurations", log),
		validating:      newInformer[admissionregistrationv1.ValidatingWebhookConfiguration](client, admissionGroup, "validatingwebhookconfigurations", log),
		policies:        newInformer[admissionregistrationv1.ValidatingAdmissionPolicy](client, admissionGroup, "validatingadmissionpolicies", log),
		bindings:        newInformer[admissionregistrationv1.ValidatingAdmissionPolicyBinding](client, admissionGroup, "validatingadmissionpolicybindings", log),
		crds:            newInformer[apiextensionsv1.CustomResourceDefinition](client, naming.Group("apiextensions.k8s.io"), "customresourcedefinitions", log),
	}
	o.resources = newResources(client, o.crds, log)
	return o
}

// run starts every informer; synced is closed once all have listed.
func (o *objects) run(ctx context.Context) (synced <-chan struct{}) {
	type informer interface {
		Run(context.Context)
		Synced() <-chan struct{}
	}
	all := []informer{o.namespaces, o.serviceAccounts, o.services, o.limitRanges, o.quotas, o.nodes, o.pods, o.priorityClasses,
		o.runtimeClasses, o.storageClasses, o.ingressClasses, o.mutating, o.validating, o.policies, o.bindings, o.crds}
	for _, i := range all {
		go i.Run(ctx)
	}
	go func() {
		<-ctx.Done()
		o.resources.cancel()
	}()
	done := make(chan struct{})
	go func() {
		for _, i := range all {
			select {
			case <-i.Synced():
			case <-ctx.Done():
				return
			}
		}
		close(done)
	}()
	return done
}

func (o *objects) Namespaces() admission.Lister[*corev1.Namespace] {
	return lister[*corev1.Namespace]{o.namespaces}
}
func (o *objects) ServiceAccounts() admission.Lister[*corev1.ServiceAccount] {
	return lister[*corev1.ServiceAccount]{o.serviceAccounts}
}
func (o *objects) Services() admission.Lister[*corev1.Service] {
	return lister[*corev1.Service]{o.services}
}
func (o *objects) LimitRanges() admission.Lister[*corev1.LimitRange] {
	return lister[*corev1.LimitRange]{o.limitRanges}
}
func (o *objects) ResourceQuotas() admission.Lister[*corev1.ResourceQuota] {
	return lister[*corev1.ResourceQuota]{o.quotas}
}
func (o *objects) Nodes() admission.Lister[*corev1.Node] { return lister[*corev1.Node]{o.nodes} }

// Pods lists pods (PodSecurity checks a namespace's pods when its enforce level is made stricter).
func (o *objects) Pods() admission.Lister[*corev1.Pod] { return lister[*corev1.Pod]{o.pods} }
func (o *objects) PriorityClasses() admission.Lister[*schedulingv1.PriorityClass] {
	return lister[*schedulingv1.PriorityClass]{o.priorityClasses}
}
func (o *objects) RuntimeClasses() admission.Lister[*nodev1.RuntimeClass] {
	return lister[*nodev1.RuntimeClass]{o.runtimeClasses}
}
func (o *objects) StorageClasses() admission.Lister[*storagev1api.StorageClass] {
	return lister[*storagev1api.StorageClass]{o.storageClasses}
}
func (o *objects) IngressClasses() admission.Lister[*networkingv1.IngressClass] {
	return lister[*networkingv1.IngressClass]{o.ingressClasses}
}
func (o *objects) MutatingWebhookConfigurations() admission.Lister[*admissionregistrationv1.MutatingWebhookConfiguration] {
	return lister[*admissionregistrationv1.MutatingWebhookConfiguration]{o.mutating}
}
func (o *objects) ValidatingWebhookConfigurations() admission.Lister[*admissionregistrationv1.ValidatingWebhookConfiguration] {
	return lister[*admissionregistrationv1.ValidatingWebhookConfiguration]{o.validating}
}

func (o *objects) ValidatingAdmissionPolicies() admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicy] {
	return lister[*admissionregistrationv1.ValidatingAdmissionPolicy]{o.policies}
}
func (o *objects) ValidatingAdmissionPolicyBindings() admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding] {
	return lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]{o.bindings}
}

// store is admission.Store over the storage API: consistent reads, compare-and-swap writes.
type store struct {
	client *storage.Client
	now    func() time.Time
}

var _ admission.Store = (*store)(nil)

// getStored reads one core object consistently into into.
func (s *store) getStored(ctx context.Context, resource, namespace, name string, into object) error {
	resp, err := s.client.Get(ctx, &storagev1.GetRequest{Type: &storagev1.ResourceType{Resource: resource}, Namespace: namespace, Name: name})
	if storage.IsNotFound(err) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
	}
	if err != nil {
		return err
	}
	if err := storage.DecodeStored(resp.GetObject().GetValue(), into); err != nil {
		return fmt.Errorf("decoding %s %s/%s: %w", resource, namespace, name, err)
	}
	into.SetResourceVersion(strconv.FormatInt(resp.GetObject().GetResourceVersion(), 10))
	return nil
}

// GetResourceQuota reads a quota as stored now.
func (s *store) GetResourceQuota(ctx context.Context, namespace, name string) (*corev1.ResourceQuota, error) {
	var q corev1.ResourceQuota
	if err := s.getStored(ctx, "resourcequotas", namespace, name, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// ListResourceQuotas reads a namespace's quotas as stored now.
func (s *store) ListResourceQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error) {
	resp, err := s.client.List(ctx, &storagev1.ListRequest{Type: &storagev1.ResourceType{Resource: "resourcequotas"}, Namespace: namespace})
	if err != nil {
		return nil, err
	}
	out := make([]corev1.ResourceQuota, len(resp.GetItems()))
	for i, item := range resp.GetItems() {
		if err := storage.DecodeStored(item.GetValue(), &out[i]); err != nil {
			return nil, fmt.Errorf("decoding resourcequotas %s/%s: %w", item.GetNamespace(), item.GetName(), err)
		}
		out[i].SetResourceVersion(strconv.FormatInt(item.GetResourceVersion(), 10))
	}
	return out, nil
}

// UpdateResourceQuotaStatus stores q (with its new status) if q's resourceVersion is the stored
// one.
func (s *store) UpdateResourceQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	rv, err := strconv.ParseInt(q.ResourceVersion, 10, 64)
	if err != nil {
		return nil, apierrors.NewBadRequest("resourceVersion " + strconv.Quote(q.ResourceVersion) + " is not a stored revision")
	}
	out := q.DeepCopy()
	out.ResourceVersion = ""
	value, err := storage.EncodeStored("v1", "ResourceQuota", out)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Update(ctx, &storagev1.UpdateRequest{
		Type: &storagev1.ResourceType{Resource: "resourcequotas"},
		Object: &storagev1.Object{Namespace: q.Namespace, Name: q.Name, Value: value, Uid: string(q.UID), Labels: q.Labels,
			Fields: map[string]string{"metadata.name": q.Name, "metadata.namespace": q.Namespace}},
		Preconditions: &storagev1.Preconditions{ResourceVersion: rv},
	})
	switch {
	case storage.IsConflict(err):
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, q.Name, err)
	case storage.IsNotFound(err):
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "resourcequotas"}, q.Name)
	case err != nil:
		return nil, err
	}
	out.ResourceVersion = strconv.FormatInt(resp.GetObject().GetResourceVersion(), 10)
	return out, nil
}

// GetNamespace reads a namespace as stored now.
func (s *store) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	if err := s.getStored(ctx, "namespaces", "", name, &ns); err != nil {
		return nil, err
	}
	return &ns, nil
}

// GetServiceAccount reads a service account as stored now.
func (s *store) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	var sa corev1.ServiceAccount
	if err := s.getStored(ctx, "serviceaccounts", namespace, name, &sa); err != nil {
		return nil, err
	}
	return &sa, nil
}

// CreateNamespace creates an Active namespace with what the gateway gives new namespaces (uid,
// creation time, the name label, the lifecycle finalizer).
func (s *store) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: uuidUID(), CreationTimestamp: metav1.NewTime(s.now().Truncate(time.Second)),
			Labels: map[string]string{corev1.LabelMetadataName: name},
		},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	value, err := storage.EncodeStored("v1", "Namespace", ns)
	if err != nil {
		return err
	}
	_, err = s.client.Create(ctx, &storagev1.CreateRequest{
		Type: &storagev1.ResourceType{Resource: "namespaces"},
		Object: &storagev1.Object{Name: name, Value: value, Uid: string(ns.UID), Labels: ns.Labels,
			Fields: map[string]string{"metadata.name": name, "status.phase": string(corev1.NamespaceActive)}},
	})
	if storage.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func uuidUID() types.UID { return types.UID(uuid.NewString()) }
