package core

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Pod is the strategy of pods: graceful deletion and upstream's rules of pod updates.
type Pod struct{ *builtin.Strategy }

var _ registry.GracefulDeleter = (*Pod)(nil)

// NewPod returns the strategy of pods over their default one.
func NewPod(b *builtin.Strategy) registry.Strategy { return &Pod{Strategy: b} }

// CheckGracefulDelete is upstream's pod rule: the period is the request's, else the pod's
// terminationGracePeriodSeconds, else 0; a pod no node runs (not scheduled: no spec.nodeName)
// or that has finished (Succeeded, Failed) is deleted at once, since nothing would end its
// grace period; a negative period is 1 second. Every pod delete is graceful in upstream's
// sense: the period may be 0.
func (s *Pod) CheckGracefulDelete(obj runtime.Object, opts *metav1.DeleteOptions) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok || opts == nil {
		return false
	}
	period := int64(0)
	switch {
	case opts.GracePeriodSeconds != nil:
		period = *opts.GracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	opts.GracePeriodSeconds = &period
	return true
}

// Validate runs upstream's update rules of pods (pod_update.go) on updates.
func (s *Pod) Validate(obj, old runtime.Object) field.ErrorList {
	errs := s.Strategy.Validate(obj, old)
	pod, ok1 := obj.(*corev1.Pod)
	prev, ok2 := old.(*corev1.Pod)
	if !ok1 || !ok2 {
		return errs
	}
	return append(errs, ValidatePodUpdate(pod, prev)...)
}
