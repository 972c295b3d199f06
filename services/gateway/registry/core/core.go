// Package core holds the rules of the core group's kinds that have rules of their own:
// namespaces (their lifecycle), pods (graceful deletion, upstream's update rules), services
// (their names), nodes and persistent volumes (status on create) and replication controllers
// (their scale).
package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// NamespaceFinalizer is the finalizer the namespace lifecycle controller removes once a
// terminating namespace is empty (upstream's spec.finalizers entry).
const NamespaceFinalizer corev1.FinalizerName = "kubernetes"

// ProtectedNamespaces exist from the start and cannot be deleted.
var ProtectedNamespaces = map[string]bool{metav1.NamespaceDefault: true, naming.SystemNamespace: true, naming.PublicNamespace: true}

// Namespace is the strategy of namespaces: a new namespace is Active and carries the finalizer
// the lifecycle controller removes; spec.finalizers change only through finalize; a delete makes
// it Terminating and it goes once nothing, spec.finalizers included, holds it.
type Namespace struct {
	*builtin.Strategy
	// protect refuses deletes of the protected namespaces: when no admission service runs the
	// NamespaceLifecycle plugin, which refuses them otherwise.
	protect bool
}

// NewNamespace returns the strategy of namespaces over their default one.
func NewNamespace(b *builtin.Strategy, protect bool) registry.Strategy {
	b.KeepStatusOnCreate = true
	return &Namespace{Strategy: b, protect: protect}
}

// ValidateName: a namespace's name is a DNS label.
func (s *Namespace) ValidateName(name string) []string { return validation.IsDNS1123Label(name) }

// PrepareForCreate: Active, with the lifecycle finalizer.
func (s *Namespace) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if !hasFinalizer(ns.Spec.Finalizers, NamespaceFinalizer) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, NamespaceFinalizer)
		}
	}
}

// PrepareForUpdate: finalize changes only spec.finalizers; the main resource and status never do.
func (s *Namespace) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	if subresource == "finalize" {
		out := cur.DeepCopyObject()
		copyFinalizers(out, obj)
		return out, nil
	}
	next, err := s.Strategy.PrepareForUpdate(subresource, obj, cur)
	if err != nil {
		return nil, err
	}
	if subresource == "" {
		copyFinalizers(next, cur)
	}
	return next, nil
}

// PrepareForDelete makes a namespace Terminating (with the lifecycle finalizer), which holds it
// until the namespace controller has emptied it; a second delete meanwhile is upstream's
// conflict.
func (s *Namespace) PrepareForDelete(next runtime.Object, now metav1.Time) (bool, error) {
	ns, ok := next.(*corev1.Namespace)
	if !ok {
		return false, nil
	}
	if s.protect && ProtectedNamespaces[ns.Name] {
		return false, apierrors.NewForbidden(s.Res.GroupResource(), ns.Name, fmt.Errorf("this namespace may not be deleted"))
	}
	if ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) > 0 {
		return false, apierrors.NewConflict(s.Res.GroupResource(), ns.Name,
			fmt.Errorf("The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system."))
	}
	if ns.DeletionTimestamp == nil {
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		if !hasFinalizer(ns.Spec.Finalizers, NamespaceFinalizer) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, NamespaceFinalizer)
		}
	}
	return true, nil
}

// Finalizing: a namespace's spec.finalizers hold it too (upstream's ShouldDeleteDuringUpdate).
func (s *Namespace) Finalizing(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return s.Strategy.Finalizing(obj) || (ok && len(ns.Spec.Finalizers) > 0)
}

// copyFinalizers sets dst's spec.finalizers to src's (both namespaces).
func copyFinalizers(dst, src runtime.Object) {
	d, ok1 := dst.(*corev1.Namespace)
	s, ok2 := src.(*corev1.Namespace)
	if ok1 && ok2 {
		d.Spec.Finalizers = append([]corev1.FinalizerName(nil), s.Spec.Finalizers...)
	}
}

func hasFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

// Service is the strategy of services, whose names are DNS-1035 labels (they become DNS names).
type Service struct{ *builtin.Strategy }

// NewService returns the strategy of services over their default one.
func NewService(b *builtin.Strategy) registry.Strategy { return &Service{Strategy: b} }

// ValidateName: a service's name is a DNS-1035 label.
func (s *Service) ValidateName(name string) []string { return validation.IsDNS1035Label(name) }

// PrepareForUpdate keeps the cluster IPs a write leaves out (a PUT of a manifest without them),
// as upstream's registry keeps allocated values, unless the Service is or becomes an
// ExternalName one (which has none); changing them is refused by validation.
func (s *Service) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	svc, ok1 := obj.(*corev1.Service)
	old, ok2 := cur.(*corev1.Service)
	if subresource == "" && ok1 && ok2 && svc.Spec.Type != corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(svc.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			svc.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
		}
		if len(svc.Spec.IPFamilies) == 0 && len(old.Spec.IPFamilies) > 0 {
			svc.Spec.IPFamilies = append([]corev1.IPFamily(nil), old.Spec.IPFamilies...)
		}
		if svc.Spec.IPFamilyPolicy == nil && old.Spec.IPFamilyPolicy != nil {
			p := *old.Spec.IPFamilyPolicy
			svc.Spec.IPFamilyPolicy = &p
		}
	}
	return s.Strategy.PrepareForUpdate(subresource, obj, cur)
}

// NewStatusOnCreate returns the strategy of a kind whose creator reports status in the same
// request (a node registers with its capacity, a persistent volume its phase), as upstream allows.
func NewStatusOnCreate(b *builtin.Strategy) registry.Strategy {
	b.KeepStatusOnCreate = true
	return b
}

// ReplicationController is the strategy of replication controllers: their scale subresource.
type ReplicationController struct{ *builtin.Strategy }

// NewReplicationController returns the strategy of replication controllers over their default one.
func NewReplicationController(b *builtin.Strategy) registry.Strategy {
	return &ReplicationController{Strategy: b}
}

// Replicas reads spec.replicas (1 when unset), status.replicas and the selector.
func (s *ReplicationController) Replicas(obj runtime.Object) (spec, status int32, selector string, err error) {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return s.Strategy.Replicas(obj)
	}
	spec = 1
	if rc.Spec.Replicas != nil {
		spec = *rc.Spec.Replicas
	}
	return spec, rc.Status.Replicas, labels.SelectorFromSet(rc.Spec.Selector).String(), nil
}

// SetReplicas sets spec.replicas.
func (s *ReplicationController) SetReplicas(obj runtime.Object, n int32) error {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return s.Strategy.SetReplicas(obj, n)
	}
	rc.Spec.Replicas = &n
	return nil
}
