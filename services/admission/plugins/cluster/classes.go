package cluster

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// newestFirst orders default classes as upstream 1.33 does: newest creation first, then by name.
func newestFirst(metas []metav1.Object) {
	sort.Slice(metas, func(i, j int) bool {
		ti, tj := metas[i].GetCreationTimestamp().UnixNano(), metas[j].GetCreationTimestamp().UnixNano()
		if ti == tj {
			return metas[i].GetName() < metas[j].GetName()
		}
		return ti > tj
	})
}

// DefaultStorageClass gives claims created without a storage class the default class.
type DefaultStorageClass struct {
	classes admission.Lister[*storagev1.StorageClass]
}

var (
	_ admission.Mutator    = (*DefaultStorageClass)(nil)
	_ admission.Interested = (*DefaultStorageClass)(nil)
)

// NewDefaultStorageClass builds DefaultStorageClass.
func NewDefaultStorageClass(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.DefaultStorageClass, config)
	return &DefaultStorageClass{classes: deps.Objects.StorageClasses()}, nil
}

// Name is the plugin's name.
func (p *DefaultStorageClass) Name() string { return admission.DefaultStorageClass }

// Interests: creates of persistent volume claims.
func (p *DefaultStorageClass) Interests() []admission.Interest {
	return []admission.Interest{{Operations: ops(admission.Create), APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Scope: "Namespaced"}}
}

// Admit sets spec.storageClassName of a claim that names no class (neither the field, even
// empty, nor the beta annotation) to the default class, when there is one.
func (p *DefaultStorageClass) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || !a.Is("", "persistentvolumeclaims", "") {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || pvc == nil {
		return nil
	}
	if _, ok := pvc.Annotations[naming.BetaStorageClassAnnotation]; ok || pvc.Spec.StorageClassName != nil {
		return nil
	}
	def := DefaultStorageClassOf(p.classes)
	if def == nil {
		return nil
	}
	name := def.Name
	pvc.Spec.StorageClassName = &name
	return nil
}

// DefaultStorageClassOf returns the default storage class (marked by the annotation or its beta
// spelling with "true"); the newest when several are marked, as upstream 1.33; nil when none.
func DefaultStorageClassOf(lister admission.Lister[*storagev1.StorageClass]) *storagev1.StorageClass {
	var defaults []metav1.Object
	byName := map[string]*storagev1.StorageClass{}
	for _, c := range lister.List("") {
		if c.Annotations[naming.IsDefaultStorageClassAnnotation] == "true" || c.Annotations[naming.BetaIsDefaultStorageClassAnnotation] == "true" {
			defaults = append(defaults, c)
			byName[c.Name] = c
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	newestFirst(defaults)
	return byName[defaults[0].GetName()]
}

// DefaultIngressClass gives Ingresses created without a class the default IngressClass.
//
// Several defaults: upstream 1.33 picks the newest, but the spec says "more than one default
// rejects all Ingress creations"; Platform follows the spec with upstream's earlier answer (403
// "N default IngressClasses were found, only 1 allowed") for every Ingress that would have been
// defaulted. An Ingress that names its class needs no default and is admitted.
type DefaultIngressClass struct {
	classes admission.Lister[*networkingv1.IngressClass]
}

var (
	_ admission.Mutator    = (*DefaultIngressClass)(nil)
	_ admission.Interested = (*DefaultIngressClass)(nil)
)

// NewDefaultIngressClass builds DefaultIngressClass.
func NewDefaultIngressClass(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.DefaultIngressClass, config)
	return &DefaultIngressClass{classes: deps.Objects.IngressClasses()}, nil
}

// Name is the plugin's name.
func (p *DefaultIngressClass) Name() string { return admission.DefaultIngressClass }

var ingressGroup = naming.Group("networking.k8s.io")

// Interests: creates of Ingresses.
func (p *DefaultIngressClass) Interests() []admission.Interest {
	return []admission.Interest{{Operations: ops(admission.Create), APIGroups: []string{ingressGroup}, Resources: []string{"ingresses"}, Scope: "Namespaced"}}
}

// Admit sets spec.ingressClassName of an Ingress that names no class (neither the field nor the
// deprecated annotation) to the default class.
func (p *DefaultIngressClass) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || !a.Is(ingressGroup, "ingresses", "") {
		return nil
	}
	ing, ok := a.Object.(*networkingv1.Ingress)
	if !ok || ing == nil {
		return nil
	}
	if ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[naming.IngressClassAnnotation]; ok {
		return nil
	}
	var defaults []*networkingv1.IngressClass
	for _, c := range p.classes.List("") {
		if c.Annotations[naming.IsDefaultIngressClassAnnotation] == "true" {
			defaults = append(defaults, c)
		}
	}
	switch len(defaults) {
	case 0:
		return nil
	case 1:
		name := defaults[0].Name
		ing.Spec.IngressClassName = &name
		return nil
	default:
		return admission.Forbidden(a, apierrors.NewInternalError(fmt.Errorf("%d default IngressClasses were found, only 1 allowed", len(defaults))))
	}
}

// StorageObjectInUseProtection puts the protection finalizers on new claims and volumes, so that
// one in use by a pod (a claim) or bound to a claim (a volume) is not removed under it.
type StorageObjectInUseProtection struct{}

var (
	_ admission.Mutator    = (*StorageObjectInUseProtection)(nil)
	_ admission.Interested = (*StorageObjectInUseProtection)(nil)
)

// NewStorageObjectInUseProtection builds StorageObjectInUseProtection.
func NewStorageObjectInUseProtection(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.StorageObjectInUseProtection, config)
	return &StorageObjectInUseProtection{}, nil
}

// Name is the plugin's name.
func (p *StorageObjectInUseProtection) Name() string { return admission.StorageObjectInUseProtection }

// Interests: creates of claims and volumes.
func (p *StorageObjectInUseProtection) Interests() []admission.Interest {
	return []admission.Interest{{Operations: ops(admission.Create), APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "persistentvolumes"}}}
}

// Admit adds the finalizer when it is missing.
func (p *StorageObjectInUseProtection) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "" || a.Resource.Group != "" {
		return nil
	}
	var m metav1.Object
	var finalizer string
	switch a.Resource.Resource {
	case "persistentvolumeclaims":
		if pvc, ok := a.Object.(*corev1.PersistentVolumeClaim); ok && pvc != nil {
			m, finalizer = pvc, naming.PVCProtectionFinalizer
		}
	case "persistentvolumes":
		if pv, ok := a.Object.(*corev1.PersistentVolume); ok && pv != nil {
			m, finalizer = pv, naming.PVProtectionFinalizer
		}
	}
	if m == nil {
		return nil
	}
	for _, f := range m.GetFinalizers() {
		if f == finalizer {
			return nil
		}
	}
	m.SetFinalizers(append(m.GetFinalizers(), finalizer))
	return nil
}

// TaintNodesByCondition gives new nodes the not-ready NoSchedule taint, so that nothing is
// scheduled to a node before its controller has seen it ready (and removed the taint).
type TaintNodesByCondition struct{}

var (
	_ admission.Mutator    = (*TaintNodesByCondition)(nil)
	_ admission.Interested = (*TaintNodesByCondition)(nil)
)

// NewTaintNodesByCondition builds TaintNodesByCondition.
func NewTaintNodesByCondition(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.TaintNodesByCondition, config)
	return &TaintNodesByCondition{}, nil
}

// Name is the plugin's name.
func (p *TaintNodesByCondition) Name() string { return admission.TaintNodesByCondition }

// Interests: creates of nodes.
func (p *TaintNodesByCondition) Interests() []admission.Interest {
	return []admission.Interest{{Operations: ops(admission.Create), APIGroups: []string{""}, Resources: []string{"nodes"}, Scope: "Cluster"}}
}

// Admit adds the taint unless one with its key and effect is there.
func (p *TaintNodesByCondition) Admit(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || !a.Is("", "nodes", "") {
		return nil
	}
	node, ok := a.Object.(*corev1.Node)
	if !ok || node == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	notReady := corev1.Taint{Key: naming.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].MatchTaint(&notReady) {
			return nil
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, notReady)
	return nil
}

// PersistentVolumeClaimResize allows growing a claim only when it is bound and its storage
// class allows volume expansion.
type PersistentVolumeClaimResize struct {
	classes admission.Lister[*storagev1.StorageClass]
}

var (
	_ admission.Validator  = (*PersistentVolumeClaimResize)(nil)
	_ admission.Interested = (*PersistentVolumeClaimResize)(nil)
)

// NewPersistentVolumeClaimResize builds PersistentVolumeClaimResize.
func NewPersistentVolumeClaimResize(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.PersistentVolumeClaimResize, config)
	return &PersistentVolumeClaimResize{classes: deps.Objects.StorageClasses()}, nil
}

// Name is the plugin's name.
func (p *PersistentVolumeClaimResize) Name() string { return admission.PersistentVolumeClaimResize }

// Interests: updates of claims.
func (p *PersistentVolumeClaimResize) Interests() []admission.Interest {
	return []admission.Interest{{Operations: ops(admission.Update), APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Scope: "Namespaced"}}
}

// Validate refuses a larger storage request unless the claim was bound and its class (the same
// before and after) allows expansion.
func (p *PersistentVolumeClaimResize) Validate(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Update || !a.Is("", "persistentvolumeclaims", "") {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || pvc == nil {
		return nil
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok || old == nil {
		return nil
	}
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil
	}
	if old.Status.Phase != corev1.ClaimBound {
		return admission.Forbidden(a, fmt.Errorf("Only bound persistent volume claims can be expanded"))
	}
	if !p.allowResize(pvc, old) {
		return admission.Forbidden(a, fmt.Errorf("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	}
	return nil
}

func (p *PersistentVolumeClaimResize) allowResize(pvc, old *corev1.PersistentVolumeClaim) bool {
	class, oldClass := claimClass(pvc), claimClass(old)
	if class == "" || oldClass == "" || class != oldClass {
		return false
	}
	sc, ok := p.classes.Get("", class)
	if !ok || sc.AllowVolumeExpansion == nil {
		return false
	}
	return *sc.AllowVolumeExpansion
}

// claimClass is a claim's storage class: the beta annotation when present, else the field.
func claimClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[naming.BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}
