package pods

import (
	"context"
	"fmt"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// antiAffinity is LimitPodHardAntiAffinityTopology: a pod's required (hard) anti-affinity terms
// may only use the hostname topology key, so one tenant cannot keep a whole zone or region free
// of another's pods.
type antiAffinity struct{}

func newAntiAffinity(admission.Deps, []byte) (admission.Plugin, error) { return antiAffinity{}, nil }

func (antiAffinity) Name() string { return admission.LimitPodHardAntiAffinityTopology }

// Interests: pod creates and updates.
func (antiAffinity) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create, admission.Update)}
}

func (antiAffinity) Validate(_ context.Context, a *admission.Attributes) error {
	if !isPodWrite(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil {
		return nil
	}
	for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != naming.LabelHostname {
			return forbiddenPod(a, pod, fmt.Errorf("affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey %v but only key %v is allowed", term.TopologyKey, naming.LabelHostname))
		}
	}
	return nil
}
