package core

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of pod updates are upstream's (pkg/apis/core/validation, ValidatePodUpdate, 1.33),
// written here from its facts because k8s.io/kubernetes is not a dependency: a pod's spec is
// fixed once created but for the fields listed in updatablePodSpecFields, and the scheduling
// gates (which may only be removed) and, while the pod is gated, additions to its node selector
// and required node affinity.

// updatablePodSpecFields are the fields the refusal names, in upstream's words.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// ValidatePodUpdate checks the update of a pod's spec from old to pod, as upstream: every
// violation is a field error of the 422 the store answers.
func ValidatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")

	containerErrs, stop := validateContainerUpdates(pod.Spec.Containers, old.Spec.Containers, spec.Child("containers"))
	errs = append(errs, containerErrs...)
	if stop {
		return errs
	}
	containerErrs, stop = validateContainerUpdates(pod.Spec.InitContainers, old.Spec.InitContainers, spec.Child("initContainers"))
	errs = append(errs, containerErrs...)
	if stop {
		return errs
	}

	// activeDeadlineSeconds may be set where it was not, or lowered; never removed or raised.
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		if *d < 0 || *d > math.MaxInt32 {
			return append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if o := old.Spec.ActiveDeadlineSeconds; o != nil && *o < *d {
			return append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, spec.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedSchedulingGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, spec.Child("schedulingGates"))...)

	if equality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}

	// The spec with every field that may change set back to the old one must be the old spec.
	munged := *pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = nil
	if old.Spec.ActiveDeadlineSeconds != nil {
		d := *old.Spec.ActiveDeadlineSeconds
		munged.ActiveDeadlineSeconds = &d
	}
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	// A negative terminationGracePeriodSeconds may become 1.
	if o, n := old.Spec.TerminationGracePeriodSeconds, munged.TerminationGracePeriodSeconds; o != nil && *o < 0 && n != nil && *n == 1 {
		munged.TerminationGracePeriodSeconds = o
	}
	// A pod whose scheduling is gated may gain node selector entries and required node affinity
	// requirements (what a scheduler's helper adds before it lifts the gate).
	if len(old.Spec.SchedulingGates) > 0 {
		if !equality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
			errs = append(errs, validateNodeSelectorMutation(spec.Child("nodeSelector"), munged.NodeSelector, old.Spec.NodeSelector)...)
			munged.NodeSelector = old.Spec.NodeSelector
		}
		var oldNA, newNA *corev1.NodeAffinity
		if old.Spec.Affinity != nil {
			oldNA = old.Spec.Affinity.NodeAffinity
		}
		if munged.Affinity != nil {
			newNA = munged.Affinity.NodeAffinity
		}
		if !equality.Semantic.DeepEqual(oldNA, newNA) {
			errs = append(errs, validateNodeAffinityMutation(spec.Child("affinity", "nodeAffinity"), newNA, oldNA)...)
			switch {
			case munged.Affinity == nil && oldNA == nil:
			case munged.Affinity == nil:
				munged.Affinity = &corev1.Affinity{NodeAffinity: oldNA}
			case old.Spec.Affinity == nil && munged.Affinity.PodAffinity == nil && munged.Affinity.PodAntiAffinity == nil:
				munged.Affinity = nil
			default:
				munged.Affinity.NodeAffinity = oldNA
			}
		}
	}
	if !equality.Semantic.DeepEqual(munged, old.Spec) {
		diff := cmp.Diff(old.Spec, munged)
		errs = append(errs, field.Forbidden(spec, fmt.Sprintf("pod updates may not change fields other than %s\n%v", strings.Join(updatablePodSpecFields, ","), diff)))
	}
	return errs
}

// validateContainerUpdates: containers are neither added nor removed, and each keeps an image
// without surrounding whitespace. stop says the other rules cannot be checked.
func validateContainerUpdates(containers, old []corev1.Container, p *field.Path) (field.ErrorList, bool) {
	var errs field.ErrorList
	if len(containers) != len(old) {
		return append(errs, field.Forbidden(p, "pod updates may not add or remove containers")), true
	}
	for i, c := range containers {
		if c.Image == "" {
			errs = append(errs, field.Required(p.Index(i).Child("image"), ""))
		}
		if len(strings.TrimSpace(c.Image)) != len(c.Image) {
			errs = append(errs, field.Invalid(p.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return errs, false
}

// validateOnlyAddedTolerations: every old toleration is still there, changed at most in its
// tolerationSeconds; the new list must be valid.
func validateOnlyAddedTolerations(tolerations, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			c := o
			c.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(c, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(tolerations, p)
}

// validateTolerations is upstream's ValidateTolerations.
func validateTolerations(tolerations []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, ip.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(ip.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	return errs
}

// validateOnlyDeletedSchedulingGates: scheduling gates may be removed, never added.
func validateOnlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	was := map[string]bool{}
	for _, g := range old {
		was[g.Name] = true
	}
	for i, g := range gates {
		if !was[g.Name] {
			errs = append(errs, field.Forbidden(p.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

// validateNodeSelectorMutation: a gated pod's node selector keeps every entry it had.
func validateNodeSelectorMutation(p *field.Path, selector, old map[string]string) field.ErrorList {
	for k, v := range old {
		if nv, ok := selector[k]; !ok || nv != v {
			return field.ErrorList{field.Invalid(p, selector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)")}
		}
	}
	return nil
}

// validateNodeAffinityMutation: a gated pod's required node affinity keeps its terms, each
// keeping its requirements (new requirements may be added to a term); anything may be set
// where there were no required terms.
func validateNodeAffinityMutation(p *field.Path, na, old *corev1.NodeAffinity) field.ErrorList {
	if old == nil || old.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	oldTerms := old.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var terms []corev1.NodeSelectorTerm
	if na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	tp := p.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	if len(oldTerms) > 0 && len(oldTerms) != len(terms) {
		return field.ErrorList{field.Invalid(tp, terms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")}
	}
	var errs field.ErrorList
	for i := range oldTerms {
		if !onlyAddedRequirements(terms[i].MatchExpressions, oldTerms[i].MatchExpressions) ||
			!onlyAddedRequirements(terms[i].MatchFields, oldTerms[i].MatchFields) {
			errs = append(errs, field.Invalid(tp.Index(i), terms[i], "only additions are allowed (no mutations or deletions)"))
		}
	}
	return errs
}

// onlyAddedRequirements tells whether every old requirement is still in reqs.
func onlyAddedRequirements(reqs, old []corev1.NodeSelectorRequirement) bool {
	if len(reqs) < len(old) {
		return false
	}
	for _, o := range old {
		found := false
		for _, r := range reqs {
			if equality.Semantic.DeepEqual(o, r) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
