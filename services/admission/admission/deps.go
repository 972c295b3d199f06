package admission

import (
	"context"
	"log/slog"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Lister reads objects of one kind from the admission service's copy (kept in step with storage
// by watches; it may lag a write by milliseconds). Cluster-scoped kinds use namespace "".
type Lister[T any] interface {
	Get(namespace, name string) (T, bool)
	// List returns the objects of a namespace ("" lists every namespace).
	List(namespace string) []T
}

// Objects are the stored objects plugins read.
type Objects interface {
	Namespaces() Lister[*corev1.Namespace]
	ServiceAccounts() Lister[*corev1.ServiceAccount]
	Services() Lister[*corev1.Service]
	LimitRanges() Lister[*corev1.LimitRange]
	ResourceQuotas() Lister[*corev1.ResourceQuota]
	Nodes() Lister[*corev1.Node]
	PriorityClasses() Lister[*schedulingv1.PriorityClass]
	RuntimeClasses() Lister[*nodev1.RuntimeClass]
	StorageClasses() Lister[*storagev1.StorageClass]
	IngressClasses() Lister[*networkingv1.IngressClass]
	MutatingWebhookConfigurations() Lister[*admissionregistrationv1.MutatingWebhookConfiguration]
	ValidatingWebhookConfigurations() Lister[*admissionregistrationv1.ValidatingWebhookConfiguration]
	ValidatingAdmissionPolicies() Lister[*admissionregistrationv1.ValidatingAdmissionPolicy]
	ValidatingAdmissionPolicyBindings() Lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]
}

// Resources resolves kinds to the resources serving them and reads objects of any kind (the
// params of admission policies) from copies kept by watches.
type Resources interface {
	// Mapping resolves a kind (Platform's group names): a built-in kind, or a kind of a stored
	// CustomResourceDefinition. A kind that is not served is an error.
	Mapping(gvk schema.GroupVersionKind) (Mapping, error)
	// Watch returns a copy of the objects of m's resource, kept current by a watch from now on,
	// and a release that ends the watch once every user of it has released it.
	Watch(m Mapping) (Copy, func())
}

// Copy is the objects of one resource (typed or *unstructured.Unstructured; the service's are
// unstructured, the form policies read params in), each with its kind and resourceVersion set.
type Copy interface {
	// Synced tells whether the first list has been read.
	Synced() bool
	Get(namespace, name string) (runtime.Object, bool)
	// List returns the objects of a namespace ("" lists every namespace).
	List(namespace string) []runtime.Object
}

// Store is what the admission service writes itself, through the storage API, with
// compare-and-swap: the usage in a ResourceQuota's status, and namespaces NamespaceAutoProvision
// creates. Reads here are consistent (never older than an acknowledged write).
type Store interface {
	// GetResourceQuota reads a quota as stored now.
	GetResourceQuota(ctx context.Context, namespace, name string) (*corev1.ResourceQuota, error)
	// ListResourceQuotas reads a namespace's quotas as stored now.
	ListResourceQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, error)
	// UpdateResourceQuotaStatus stores q's status if q's resourceVersion is still the stored one;
	// otherwise it fails with an error for which IsConflict is true.
	UpdateResourceQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error)
	// GetNamespace reads a namespace as stored now (an error for which IsNotFound is true when it
	// does not exist).
	GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// CreateNamespace creates an Active namespace with the metadata the gateway gives new ones;
	// one that exists already is not an error.
	CreateNamespace(ctx context.Context, name string) error
	// GetServiceAccount reads a service account as stored now.
	GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
}

// AuthorizationAttributes are what a plugin asks the authorization service about.
type AuthorizationAttributes struct {
	User            *User
	Verb            string
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
}

// Authorizer asks the authorization service (for OwnerReferencesPermissionEnforcement and the
// certificate plugins).
type Authorizer interface {
	Authorize(ctx context.Context, a AuthorizationAttributes) (allowed bool, reason string, err error)
}

// Deps are what a plugin may use; every field is set.
type Deps struct {
	Objects    Objects
	Store      Store
	Authorizer Authorizer
	Resources  Resources
	Log        *slog.Logger
	Now        func() time.Time
}

// Factory builds a plugin from its dependencies and its configuration (the plugin's entry of the
// admission configuration file, JSON; nil when there is none).
type Factory func(deps Deps, config []byte) (Plugin, error)
