package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// The glue between the service's request and upstream's library: upstream's admission.Attributes
// over admission.Attributes, the ObjectInterfaces of a server that serves each resource in one
// version, the authorizer, the namespace lister and live read, the warning recorder and the
// params' listers. Group names stay Platform's: the policies' rules are read with naming.Group
// (see platformRules), so they match requests as the webhooks' rules do.

// validationFailurePrefix is upstream's audit annotation prefix of failed validations
// (validation.policy.admission.k8s.io/validation_failure), which the attributes spell with
// Platform's group suffix, as the webhook dispatcher's annotations are.
const upstreamValidationPrefix = "validation.policy.admission.k8s.io/"

var validationPrefix = "validation.policy.admission." + naming.GroupSuffix + "/"

// attributes is upstream's view of one request. The objects are given in unstructured form,
// converted once on first use: upstream's evaluation converts typed objects to that form for
// every set of expressions it evaluates (validations, messages, audit annotations), and takes an
// unstructured object as it is.
type attributes struct {
	a    *admission.Attributes
	opts runtime.Object
	user user.Info

	once        sync.Once
	object, old runtime.Object
}

var _ k8sadmission.Attributes = (*attributes)(nil)

func newAttributes(a *admission.Attributes) *attributes {
	w := &attributes{a: a}
	if a.User != nil {
		w.user = &user.DefaultInfo{Name: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: a.User.Extra}
	} else {
		w.user = &user.DefaultInfo{}
	}
	w.opts = decodeOptions(a.Operation, a.Options)
	return w
}

// decodeOptions reads the operation's options object as upstream's attributes carry it.
func decodeOptions(op admission.Operation, data []byte) runtime.Object {
	var opts runtime.Object
	var kind string
	switch op {
	case admission.Create:
		opts, kind = &metav1.CreateOptions{}, "CreateOptions"
	case admission.Update:
		opts, kind = &metav1.UpdateOptions{}, "UpdateOptions"
	case admission.Delete:
		opts, kind = &metav1.DeleteOptions{}, "DeleteOptions"
	default:
		return nil
	}
	if len(data) > 0 && string(data) != "null" {
		_ = json.Unmarshal(data, opts)
	}
	opts.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
	return opts
}

func (w *attributes) GetName() string                          { return w.a.Name }
func (w *attributes) GetNamespace() string                     { return w.a.Namespace }
func (w *attributes) GetResource() schema.GroupVersionResource { return w.a.Resource }
func (w *attributes) GetSubresource() string                   { return w.a.Subresource }
func (w *attributes) GetOperation() k8sadmission.Operation {
	return k8sadmission.Operation(w.a.Operation)
}
func (w *attributes) GetOperationOptions() runtime.Object                      { return w.opts }
func (w *attributes) IsDryRun() bool                                           { return w.a.DryRun }
func (w *attributes) GetObject() runtime.Object                                { return w.a.Object }
func (w *attributes) GetOldObject() runtime.Object                             { return w.a.OldObject }
func (w *attributes) GetKind() schema.GroupVersionKind                         { return w.a.Kind }
func (w *attributes) GetUserInfo() user.Info                                   { return w.user }
func (w *attributes) GetReinvocationContext() k8sadmission.ReinvocationContext { return nil }

// convert turns the request's objects into unstructured ones (with their kind). An object that
// does not convert is passed as it is (upstream's evaluation then reports the same error).
func (w *attributes) convert() {
	w.once.Do(func() {
		w.object, w.old = unstructuredOf(w.a.Object, w.a.Kind), unstructuredOf(w.a.OldObject, w.a.Kind)
	})
}

func unstructuredOf(obj runtime.Object, kind schema.GroupVersionKind) runtime.Object {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return nil
	}
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return obj
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return obj
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(kind)
	return u
}

// AddAnnotation records an audit annotation, upstream's validation failures under Platform's
// group suffix.
func (w *attributes) AddAnnotation(key, value string) error {
	if strings.HasPrefix(key, upstreamValidationPrefix) {
		key = validationPrefix + strings.TrimPrefix(key, upstreamValidationPrefix)
	}
	w.a.AddAnnotation(key, value)
	return nil
}

// AddAnnotationWithLevel records the annotation (the audit log applies its own levels).
func (w *attributes) AddAnnotationWithLevel(key, value string, _ auditinternal.Level) error {
	return w.AddAnnotation(key, value)
}

// objectInterfaces are those of a server that serves each resource in one version: objects
// already have the kind a policy matched, so nothing is converted.
type objectInterfaces struct{}

var _ k8sadmission.ObjectInterfaces = objectInterfaces{}

func (objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return creater{} }
func (objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return nil }
func (objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return nil }
func (objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{} }
func (objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return equivalents{}
}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if obj, ok := admission.NewObject(gvk); ok {
		return obj, nil
	}
	return nil, fmt.Errorf("no Go type for %s", gvk)
}

type convertor struct{}

func (convertor) Convert(in, _ any, _ any) error {
	return fmt.Errorf("cannot convert %T: each resource is served in one version", in)
}
func (convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	return nil, fmt.Errorf("cannot convert %s: each resource is served in one version", in.GetObjectKind().GroupVersionKind())
}
func (convertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// equivalents: no resource has an equivalent in another group or version here.
type equivalents struct{}

func (equivalents) EquivalentResourcesFor(r schema.GroupVersionResource, _ string) []schema.GroupVersionResource {
	return []schema.GroupVersionResource{r}
}
func (equivalents) KindFor(schema.GroupVersionResource, string) schema.GroupVersionKind {
	return schema.GroupVersionKind{}
}

// authz answers the CEL authorizer's checks through the authorization service. Groups written
// with upstream's names are asked under Platform's.
type authz struct{ a admission.Authorizer }

func (z authz) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var u *admission.User
	if info := attrs.GetUser(); info != nil {
		u = &admission.User{Name: info.GetName(), UID: info.GetUID(), Groups: info.GetGroups(), Extra: info.GetExtra()}
	}
	group := attrs.GetAPIGroup()
	if group != "*" {
		group = naming.Group(group)
	}
	allowed, reason, err := z.a.Authorize(ctx, admission.AuthorizationAttributes{User: u, Verb: attrs.GetVerb(), ResourceRequest: attrs.IsResourceRequest(),
		APIGroup: group, APIVersion: attrs.GetAPIVersion(), Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(),
		Namespace: attrs.GetNamespace(), Name: attrs.GetName(), Path: attrs.GetPath()})
	switch {
	case err != nil:
		return authorizer.DecisionNoOpinion, reason, err
	case allowed:
		return authorizer.DecisionAllow, reason, nil
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// namespaceLister is the namespaces' lister as client-go's.
type namespaceLister struct {
	l admission.Lister[*corev1.Namespace]
}

var _ corelisters.NamespaceLister = namespaceLister{}

func (n namespaceLister) List(selector labels.Selector) ([]*corev1.Namespace, error) {
	var out []*corev1.Namespace
	for _, ns := range n.l.List("") {
		if selector.Matches(labels.Set(ns.Labels)) {
			out = append(out, ns)
		}
	}
	return out, nil
}

func (n namespaceLister) Get(name string) (*corev1.Namespace, error) {
	if ns, ok := n.l.Get("", name); ok && ns != nil {
		return ns, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

// namespaceClient is the one call upstream's namespace matcher makes of a clientset: a live
// read of a namespace the lister does not have yet, answered from storage. Every other method
// of the clientset is left unimplemented (nil): upstream's matcher does not call them.
type namespaceClient struct {
	kubernetes.Interface
	store admission.Store
}

func (c namespaceClient) CoreV1() corev1client.CoreV1Interface { return coreClient{store: c.store} }

type coreClient struct {
	corev1client.CoreV1Interface
	store admission.Store
}

func (c coreClient) Namespaces() corev1client.NamespaceInterface { return namespaces{store: c.store} }

type namespaces struct {
	corev1client.NamespaceInterface
	store admission.Store
}

func (n namespaces) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	return n.store.GetNamespace(ctx, name)
}

// warnings sends upstream's warnings (action Warn) to the request's Warning headers.
type warnings struct{ a *admission.Attributes }

func (w warnings) AddWarning(_, text string) { w.a.AddWarning(text) }

// params is a param kind's copy as upstream's informer: its lister, and HasSynced of its
// informer (the only informer method upstream's param collection calls).
type params struct {
	c     admission.Copy
	group schema.GroupResource
}

func (p params) Informer() cache.SharedIndexInformer { return synced{c: p.c} }
func (p params) Lister() cache.GenericLister         { return paramLister{p: p} }

type synced struct {
	cache.SharedIndexInformer
	c admission.Copy
}

func (s synced) HasSynced() bool { return s.c.Synced() }

type paramLister struct {
	p         params
	namespace string
}

func (l paramLister) List(selector labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range l.p.c.List(l.namespace) {
		if m := admission.Accessor(o); m != nil && selector.Matches(labels.Set(m.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (l paramLister) Get(name string) (runtime.Object, error) {
	if o, ok := l.p.c.Get(l.namespace, name); ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(l.p.group, name)
}

func (l paramLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return paramLister{p: l.p, namespace: namespace}
}
