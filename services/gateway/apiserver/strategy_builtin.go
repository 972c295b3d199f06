package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"

	webhookvalidation "platform.io/libs/admissionregistration/validation"
	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/defaults"
	"platform.io/services/gateway/printers"
	"platform.io/services/gateway/registry"
)

// builtinStrategy is the strategy of the kinds of k8s.io/api, served under Platform's group
// names: typed Go objects, decoded strictly, stored as their Protobuf envelope, defaulted by
// upstream's defaulters, required fields read from the types, status and spec found by
// reflection. Rules of single kinds (CustomResourceDefinition, CertificateSigningRequest,
// Namespace, Event, webhook configurations, RBAC names) are hooks of this strategy.
type builtinStrategy struct {
	res    *registry.Resource
	shared *builtinShared
	fms    fieldManagerSet
}

func (s *builtinStrategy) New() runtime.Object { return s.res.New() }

func (s *builtinStrategy) NewList(items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	listGVK := s.res.GroupVersion().WithKind(s.res.ListKind)
	list, err := s.shared.scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	return list, nil
}

func (s *builtinStrategy) Protobuf() bool { return true }

func (s *builtinStrategy) StrategicMerge() bool { return true }

// Normalize has nothing to do: the strict decoder already reported unknown fields.
func (s *builtinStrategy) Normalize(runtime.Object) ([]string, error) { return nil, nil }

func (s *builtinStrategy) Typed(obj runtime.Object) (runtime.Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := s.res.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, apierrors.NewBadRequest("the applied object does not fit its kind: " + err.Error())
	}
	return out, nil
}

func (s *builtinStrategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	return s.shared.codec.encodeStored(obj, s.res.GroupVersionKind())
}

func (s *builtinStrategy) DecodeStored(value []byte) (runtime.Object, error) {
	obj := s.res.New()
	if err := s.shared.codec.decodeProtobuf(value, obj); err != nil {
		return nil, fmt.Errorf("decoding a stored %s: %w", s.res.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(s.res.GroupVersionKind())
	return obj, nil
}

func (s *builtinStrategy) Default(obj runtime.Object) { defaults.Apply(obj) }

// CheckRequired walks the Go type's required fields (required.go). CustomResourceDefinitions
// are left to their own validation, which reports missing fields with every other cause in one
// 422, as their v1 rules require.
func (s *builtinStrategy) CheckRequired(obj runtime.Object) error {
	if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		return nil
	}
	return checkRequiredFields(s.res, obj)
}

// Validate applies the rules the spec states for particular kinds.
func (s *builtinStrategy) Validate(obj, old runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *eventsv1.Event:
		return validateEvent(o, old == nil)
	case *apiextensionsv1.CustomResourceDefinition:
		prev, _ := old.(*apiextensionsv1.CustomResourceDefinition)
		return crd.Validate(o, prev)
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
		return webhookvalidation.ValidateMutatingWebhookConfiguration(o, prev)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		return webhookvalidation.ValidateValidatingWebhookConfiguration(o, prev)
	case *certificatesv1.CertificateSigningRequest:
		if prev, ok := old.(*certificatesv1.CertificateSigningRequest); ok {
			return validateCSRUpdate(o, prev)
		}
		return validateCSRCreate(o)
	case *unstructured.Unstructured:
		return nil
	default:
		return validateRBAC(obj, old)
	}
}

// ValidateName applies the name rule of the kind, as upstream applies them.
func (s *builtinStrategy) ValidateName(name string) []string {
	res := s.res
	switch {
	case res.Group == "" && res.Kind == "Namespace":
		return validation.IsDNS1123Label(name)
	case res.Group == "" && res.Kind == "Service":
		return validation.IsDNS1035Label(name)
	case strings.HasPrefix(res.Group, "rbac.authorization.") || strings.HasPrefix(res.Group, "flowcontrol.apiserver."):
		return isPathSegmentName(name)
	default:
		return validation.IsDNS1123Subdomain(name)
	}
}

// keepsStatusOnCreate names kinds whose creator reports status in the same request (a node
// registers with its capacity), as upstream allows.
var keepsStatusOnCreate = map[string]bool{"Node": true, "PersistentVolume": true, "Namespace": true}

// PrepareForCreate counts generations of kinds with a spec, clears the status of kinds whose
// status is a subresource (except those whose creator reports it), applies the defaults that
// depend on the name, and runs the create hooks of single kinds.
func (s *builtinStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	res := s.res
	if hasSpec(obj) {
		mustMeta(obj).SetGeneration(1)
	}
	if res.HasStatus && !keepsStatusOnCreate[res.Kind] {
		setStatus(obj, reflect.Zero(statusType(obj)))
	}
	// Defaults that depend on the name (a namespace's name label) once generateName is resolved.
	defaults.Apply(obj)
	if c, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		prepareCRD(c, true)
	}
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		prepareCSRCreate(ctx, csr)
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		// A new namespace is Active and carries the finalizer the lifecycle controller removes.
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if !hasFinalizer(ns.Spec.Finalizers, namespaceFinalizer) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, namespaceFinalizer)
		}
	}
}

// PrepareForUpdate: the main resource cannot change status, the status subresource can change
// nothing but status, a namespace's finalize changes only its spec.finalizers, and generation
// counts spec changes.
func (s *builtinStrategy) PrepareForUpdate(subresource string, newObj, cur runtime.Object) (runtime.Object, error) {
	res := s.res
	curMeta := mustMeta(cur)
	if csr, ok := newObj.(*certificatesv1.CertificateSigningRequest); ok {
		if out, handled := prepareCSRUpdate(subresource, csr, cur.(*certificatesv1.CertificateSigningRequest), time.Now()); handled {
			return out, nil
		}
	}
	switch subresource {
	case "status":
		out := cur.DeepCopyObject()
		setStatus(out, statusValue(newObj))
		if c, ok := out.(*apiextensionsv1.CustomResourceDefinition); ok {
			// A definition's status writes carry its finalizers too (upstream's status strategy
			// keeps them from the new object): the cleanup controller drops its finalizer there.
			c.Finalizers = mustMeta(newObj).GetFinalizers()
		}
		return out, nil
	case "finalize":
		out := cur.DeepCopyObject()
		copyNamespaceFinalizers(out, newObj)
		return out, nil
	}
	m := mustMeta(newObj)
	copySystemFields(m, curMeta)
	if res.HasStatus {
		setStatus(newObj, statusValue(cur))
	}
	if res.Kind == "Namespace" && res.Group == "" {
		copyNamespaceFinalizers(newObj, cur)
	}
	if c, ok := newObj.(*apiextensionsv1.CustomResourceDefinition); ok {
		prepareCRD(c, false)
	}
	if hasSpec(newObj) && !equality.Semantic.DeepEqual(specValue(newObj).Interface(), specValue(cur).Interface()) {
		m.SetGeneration(curMeta.GetGeneration() + 1)
	}
	if err := checkNewFinalizers(res, m, curMeta); err != nil {
		return nil, err
	}
	return newObj, nil
}

// PrepareForDelete holds the kinds a controller removes: a namespace becomes Terminating (with
// the finalizer the namespace controller removes once it is empty) and a definition being
// deleted waits for the cleanup of its objects.
func (s *builtinStrategy) PrepareForDelete(next runtime.Object, now metav1.Time) (bool, error) {
	switch o := next.(type) {
	case *corev1.Namespace:
		if o.DeletionTimestamp != nil && len(o.Spec.Finalizers) > 0 {
			return false, apierrors.NewConflict(s.res.GroupResource(), o.Name,
				fmt.Errorf("The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system."))
		}
		if o.DeletionTimestamp == nil {
			o.DeletionTimestamp = &now
			o.Status.Phase = corev1.NamespaceTerminating
			if !hasFinalizer(o.Spec.Finalizers, namespaceFinalizer) {
				o.Spec.Finalizers = append(o.Spec.Finalizers, namespaceFinalizer)
			}
		}
		return true, nil
	case *apiextensionsv1.CustomResourceDefinition:
		if o.DeletionTimestamp != nil {
			return false, nil
		}
		// A definition is held by the cleanup finalizer until its objects are gone.
		if !hasString(o.Finalizers, crdCleanupFinalizer) {
			o.Finalizers = append(o.Finalizers, crdCleanupFinalizer)
		}
		zero := int64(0)
		o.DeletionTimestamp = &now
		o.DeletionGracePeriodSeconds = &zero
		setCRDCondition(o, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionPending",
			"CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon", now)
		return true, nil
	}
	return false, nil
}

// builtinDefaulter applies upstream's defaults, so that a field an applier stops setting is
// reset to its default when it has one.
type builtinDefaulter struct{}

func (builtinDefaulter) Default(obj runtime.Object) { defaults.Apply(obj) }

// FieldManager tracks ownership on the kind's real schema: client-go's applyconfigurations type
// converter, which finds a kind's schema by its Go type, so Platform's renamed groups resolve to
// the same schemas as upstream's.
func (s *builtinStrategy) FieldManager(subresource string) (*managedfields.FieldManager, error) {
	return s.fms.get(subresource, func() (*managedfields.FieldManager, error) {
		res := s.res
		converter := s.shared.typeConverter()
		probe := res.New()
		probe.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
		if _, err := converter.ObjectToTyped(probe); err != nil {
			// Kinds outside k8s.io/api (CustomResourceDefinition) have no schema in client-go's
			// models: their ownership is tracked on the schema deduced from the object, as upstream
			// does for objects without one (structs are granular, lists atomic).
			converter = managedfields.NewDeducedTypeConverter()
		}
		var reset []fieldpath.Path
		switch {
		case subresource == "" && res.HasStatus:
			reset = append(reset, fieldpath.MakePathOrDie("status"))
		case subresource == "status":
			if hasSpec(res.New()) {
				reset = append(reset, fieldpath.MakePathOrDie("spec"))
			}
		}
		return managedfields.NewDefaultFieldManager(converter, runtime.UnsafeObjectConvertor(s.shared.scheme), builtinDefaulter{}, s.shared.scheme,
			res.GroupVersionKind(), res.GroupVersion(), subresource, resetFields(res, reset))
	})
}

// Replicas reads spec.replicas, status.replicas and the selector of the scalable kinds
// (deployments, replicasets, statefulsets, replicationcontrollers).
func (s *builtinStrategy) Replicas(obj runtime.Object) (spec, status int32, selector string, err error) {
	one := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	asString := func(ls *metav1.LabelSelector) (string, error) {
		if ls == nil {
			return "", nil
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return "", err
		}
		return s.String(), nil
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		selector, err = asString(o.Spec.Selector)
		return one(o.Spec.Replicas), o.Status.Replicas, selector, err
	case *appsv1.ReplicaSet:
		selector, err = asString(o.Spec.Selector)
		return one(o.Spec.Replicas), o.Status.Replicas, selector, err
	case *appsv1.StatefulSet:
		selector, err = asString(o.Spec.Selector)
		return one(o.Spec.Replicas), o.Status.Replicas, selector, err
	case *corev1.ReplicationController:
		return one(o.Spec.Replicas), o.Status.Replicas, labels.SelectorFromSet(o.Spec.Selector).String(), nil
	}
	return 0, 0, "", fmt.Errorf("%T has no scale subresource", obj)
}

func (s *builtinStrategy) SetReplicas(obj runtime.Object, n int32) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	case *corev1.ReplicationController:
		o.Spec.Replicas = &n
	}
	return nil
}

func (s *builtinStrategy) Fields(obj runtime.Object) map[string]string { return s.res.Fields(obj) }

// Printer returns the kind's columns (kubectl's for common kinds, Name and Created At for others).
func (s *builtinStrategy) Printer(sample runtime.Object) (*printers.Printer, error) {
	return printers.For(sample), nil
}

func (s *builtinStrategy) Definition() *apiextensionsv1.CustomResourceDefinition { return nil }
