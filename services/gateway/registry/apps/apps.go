// Package apps holds the rules of the apps group's scalable kinds: the scale subresource of
// deployments, replica sets and stateful sets (an autoscaling/v1 Scale over spec.replicas).
package apps

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Scalable is the strategy of deployments, replica sets and stateful sets.
type Scalable struct{ *builtin.Strategy }

// NewScalable returns the strategy of a scalable apps kind over its default one.
func NewScalable(b *builtin.Strategy) registry.Strategy { return &Scalable{Strategy: b} }

// Replicas reads spec.replicas (1 when unset), status.replicas and the label selector.
func (s *Scalable) Replicas(obj runtime.Object) (spec, status int32, selector string, err error) {
	var replicas *int32
	var ls *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		replicas, status, ls = o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
	case *appsv1.ReplicaSet:
		replicas, status, ls = o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
	case *appsv1.StatefulSet:
		replicas, status, ls = o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
	default:
		return s.Strategy.Replicas(obj)
	}
	spec = 1
	if replicas != nil {
		spec = *replicas
	}
	if ls != nil {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return 0, 0, "", err
		}
		selector = sel.String()
	}
	return spec, status, selector, nil
}

// SetReplicas sets spec.replicas.
func (s *Scalable) SetReplicas(obj runtime.Object, n int32) error {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	default:
		return s.Strategy.SetReplicas(obj, n)
	}
	return nil
}
