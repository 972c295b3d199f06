package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// priority is Priority: a new pod's priorityClassName resolves to its integer priority and
// preemption policy (the global default class, else 0 and PreemptLowerPriority, when it names
// none); a pod naming an unknown class, or setting a priority or policy other than its class
// gives, is rejected; an update keeps the priority the pod was admitted with. On
// PriorityClasses it keeps the global default unique.
type priority struct {
	classes admission.Lister[*schedulingv1.PriorityClass]
}

var schedulingGroup = naming.Group("scheduling.k8s.io")

// The system classes every cluster has (upstream creates them at start; their values are
// fixed by the API).
const (
	systemClusterCritical      = "system-cluster-critical"
	systemNodeCritical         = "system-node-critical"
	systemCriticalPriority     = int32(2000000000)
	systemNodeCriticalPriority = systemCriticalPriority + 1000
)

// builtinPriorityClass resolves the two system classes when the lister does not have them (the
// platform may not have created them yet, and no other object may use those names), with the
// values and policy upstream gives them.
func builtinPriorityClass(name string) (*schedulingv1.PriorityClass, bool) {
	policy := corev1.PreemptLowerPriority
	switch name {
	case systemClusterCritical:
		pc := &schedulingv1.PriorityClass{Value: systemCriticalPriority, PreemptionPolicy: &policy}
		pc.Name = name
		return pc, true
	case systemNodeCritical:
		pc := &schedulingv1.PriorityClass{Value: systemNodeCriticalPriority, PreemptionPolicy: &policy}
		pc.Name = name
		return pc, true
	}
	return nil, false
}

func newPriority(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &priority{classes: deps.Objects.PriorityClasses()}, nil
}

func (*priority) Name() string { return admission.Priority }

// Interests: pod creates and updates, PriorityClass creates and updates.
func (*priority) Interests() []admission.Interest {
	return []admission.Interest{
		podInterest(admission.Create, admission.Update),
		{Operations: []admission.Operation{admission.Create, admission.Update}, APIGroups: []string{schedulingGroup}, Resources: []string{"priorityclasses"}, Scope: "Cluster"},
	}
}

func (p *priority) Admit(_ context.Context, a *admission.Attributes) error {
	if !isPod(a) || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if a.Operation == admission.Update {
		old, ok := a.OldObject.(*corev1.Pod)
		if !ok || old == nil {
			return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
		}
		// The priority was set at create and API validation keeps it; an update that leaves it
		// out (a replace from a manifest) keeps the stored one.
		if pod.Spec.Priority == nil && old.Spec.Priority != nil {
			v := *old.Spec.Priority
			pod.Spec.Priority = &v
		}
		if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
			v := *old.Spec.PreemptionPolicy
			pod.Spec.PreemptionPolicy = &v
		}
		return nil
	}
	var (
		value  int32
		policy *corev1.PreemptionPolicy
	)
	if pod.Spec.PriorityClassName == "" {
		if pc := p.defaultClass(); pc != nil {
			pod.Spec.PriorityClassName = pc.Name
			value, policy = pc.Value, pc.PreemptionPolicy
		} else {
			lower := corev1.PreemptLowerPriority
			value, policy = 0, &lower
		}
	} else {
		pc, ok := p.classes.Get("", pod.Spec.PriorityClassName)
		if !ok {
			pc, ok = builtinPriorityClass(pod.Spec.PriorityClassName)
		}
		if !ok {
			return forbidden(a, fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		}
		value, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return forbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	pod.Spec.Priority = &value
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return forbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		v := *policy
		pod.Spec.PreemptionPolicy = &v
	}
	return nil
}

func (p *priority) Validate(_ context.Context, a *admission.Attributes) error {
	if !a.Is(schedulingGroup, "priorityclasses", "") || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok || pc == nil {
		return apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !pc.GlobalDefault {
		return nil
	}
	if def := p.defaultClass(); def != nil && (a.Operation == admission.Create || def.Name != pc.Name) {
		return forbidden(a, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// defaultClass is the global default PriorityClass; should a race have made several, the one
// with the lowest value, as upstream picks.
func (p *priority) defaultClass() *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range p.classes.List("") {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def
}
