package pods

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"platform.io/services/admission/admission"
)

// runtimeClass is RuntimeClass: a new pod naming a RuntimeClass gets the class's pod overhead
// (a pod that already sets a different overhead is rejected) and the class's scheduling
// constraints (its node selector merged into the pod's, a contradicting key rejected; its
// tolerations merged into the pod's), so pods land on nodes that have the runtime and are
// accounted for what it costs. A pod naming a class that does not exist is rejected; a pod
// setting an overhead without a class that defines one is rejected.
type runtimeClass struct {
	classes admission.Lister[*nodev1.RuntimeClass]
}

func newRuntimeClass(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &runtimeClass{classes: deps.Objects.RuntimeClasses()}, nil
}

func (*runtimeClass) Name() string { return admission.RuntimeClass }

// Interests: pod creates.
func (*runtimeClass) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create)}
}

func (r *runtimeClass) Admit(_ context.Context, a *admission.Attributes) error {
	if !isPod(a) || a.Operation != admission.Create {
		return nil
	}
	pod, rc, err := r.prepare(a)
	if err != nil || rc == nil {
		return err
	}
	if rc.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !equality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	}
	if rc.Scheduling != nil {
		selector := pod.Spec.NodeSelector
		if selector == nil {
			if rc.Scheduling.NodeSelector != nil {
				selector = make(map[string]string, len(rc.Scheduling.NodeSelector))
				for k, v := range rc.Scheduling.NodeSelector {
					selector[k] = v
				}
			}
		} else {
			for k, v := range rc.Scheduling.NodeSelector {
				if podValue, ok := selector[k]; ok && podValue != v {
					return forbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, podValue))
				}
				selector[k] = v
			}
		}
		pod.Spec.NodeSelector = selector
		pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, copyTolerations(rc.Scheduling.Tolerations))
	}
	return nil
}

func (r *runtimeClass) Validate(_ context.Context, a *admission.Attributes) error {
	if !isPod(a) || a.Operation != admission.Create {
		return nil
	}
	pod, rc, err := r.prepare(a)
	if err != nil {
		return err
	}
	if rc != nil && rc.Overhead != nil {
		if !equality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return forbidden(a, errors.New("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

// prepare returns the pod and the RuntimeClass it names (nil when it names none).
func (r *runtimeClass) prepare(a *admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	pod, err := podOf(a)
	if err != nil {
		return nil, nil, err
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	rc, ok := r.classes.Get("", *pod.Spec.RuntimeClassName)
	if !ok {
		return pod, nil, forbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", *pod.Spec.RuntimeClassName))
	}
	return pod, rc, nil
}
