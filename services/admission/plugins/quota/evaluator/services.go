package evaluator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

var serviceCountName = ObjectCountName(schema.GroupResource{Resource: "services"})

var serviceResources = []corev1.ResourceName{
	serviceCountName,
	corev1.ResourceServices,
	corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers,
}

// serviceEvaluator measures services: their number, load balancers and node ports.
type serviceEvaluator struct{}

func (serviceEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "services"}
}

// Handles creates and updates: an update may change the type, and so the cost.
func (serviceEvaluator) Handles(op string) bool { return op == Create || op == Update }

func (serviceEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	return intersect(names, serviceResources)
}

func (serviceEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}

func (serviceEvaluator) UncoveredScopes(_, _ []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	return nil
}

func (e serviceEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return matches(e, q, obj, noScope)
}

func (serviceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage: one service; a NodePort service uses a node port per port, a LoadBalancer one a load
// balancer and (unless it opts out of node port allocation) a node port per port.
func (serviceEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || svc == nil {
		return nil, fmt.Errorf("expect *v1.Service, got %T", obj)
	}
	ports := int64(len(svc.Spec.Ports))
	out := corev1.ResourceList{
		serviceCountName:                     *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServices:              *resource.NewQuantity(1, resource.DecimalSI),
		corev1.ResourceServicesLoadBalancers: resource.Quantity{Format: resource.DecimalSI},
		corev1.ResourceServicesNodePorts:     resource.Quantity{Format: resource.DecimalSI},
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		if svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts {
			out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
		}
		out[corev1.ResourceServicesLoadBalancers] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	return out, nil
}

var pvcCountName = ObjectCountName(schema.GroupResource{Resource: "persistentvolumeclaims"})

// StorageClassSuffix joins a storage class's name and a claim resource in the per-class quota
// names: <class>.storageclass.storage.<GroupSuffix>/requests.storage (upstream
// <class>.storageclass.storage.k8s.io/...).
var StorageClassSuffix = ".storageclass." + naming.Group("storage.k8s.io") + "/"

// ByStorageClass is the quota name of a claim resource within one storage class.
func ByStorageClass(class string, r corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(class + StorageClassSuffix + string(r))
}

// ClaimClass is a claim's storage class: the beta annotation when present, else
// spec.storageClassName ("" for none).
func ClaimClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[naming.BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// pvcEvaluator measures persistent volume claims: their number and requested storage, overall
// and per storage class.
type pvcEvaluator struct{}

func (pvcEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "persistentvolumeclaims"}
}

// Handles creates and updates: an update may expand the claim.
func (pvcEvaluator) Handles(op string) bool { return op == Create || op == Update }

func (pvcEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		switch {
		case n == pvcCountName, n == corev1.ResourcePersistentVolumeClaims, n == corev1.ResourceRequestsStorage:
			out = append(out, n)
		case strings.HasSuffix(string(n), StorageClassSuffix+string(corev1.ResourcePersistentVolumeClaims)),
			strings.HasSuffix(string(n), StorageClassSuffix+string(corev1.ResourceRequestsStorage)):
			out = append(out, n)
		}
	}
	return out
}

func (pvcEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}

func (pvcEvaluator) UncoveredScopes(_, _ []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	return nil
}

func (e pvcEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return matches(e, q, obj, noScope)
}

func (pvcEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Usage: one claim and its storage request (rounded up to whole bytes; the allocated size when
// an expansion that failed left more allocated than requested), charged to its class too.
func (pvcEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || pvc == nil {
		return nil, fmt.Errorf("expect *v1.PersistentVolumeClaim, got %T", obj)
	}
	out := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims: *resource.NewQuantity(1, resource.DecimalSI),
		pvcCountName:                          *resource.NewQuantity(1, resource.DecimalSI),
	}
	class := ClaimClass(pvc)
	if class != "" {
		out[ByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	if storage := claimStorage(pvc); storage != nil {
		out[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			out[ByStorageClass(class, corev1.ResourceRequestsStorage)] = storage.DeepCopy()
		}
	}
	return out, nil
}

func claimStorage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	roundUp := func(q resource.Quantity) *resource.Quantity {
		r := q.DeepCopy()
		r.RoundUp(0)
		return &r
	}
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	out := roundUp(req)
	if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && alloc.Cmp(*out) > 0 {
		out = roundUp(alloc)
	}
	return out
}
