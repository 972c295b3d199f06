package evaluator

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.io/libs/naming"
)

var podCountName = ObjectCountName(schema.GroupResource{Resource: "pods"})

// podResources are the quota names a pod counts in (besides the prefixed ones below).
var podResources = []corev1.ResourceName{
	podCountName,
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
	corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// podResourcePrefixes are prefixes of quota names a pod counts in (huge pages).
var podResourcePrefixes = []string{corev1.ResourceHugePagesPrefix, corev1.ResourceRequestsHugePagesPrefix}

// constrained are the resources that every container must declare when a quota tracks them: a
// backward-compatibility rule upstream keeps (it predates QoS classes).
var constrained = []corev1.ResourceName{
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
}

// podEvaluator measures pods.
type podEvaluator struct {
	now func() time.Time
}

func (e *podEvaluator) GroupResource() schema.GroupResource {
	return schema.GroupResource{Resource: "pods"}
}

// Handles: a pod's cost is fixed at creation (its resources cannot change through an update of
// the main resource).
func (e *podEvaluator) Handles(op string) bool { return op == Create }

func (e *podEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	out := intersect(names, podResources)
	for _, n := range names {
		if hasPrefix(n, podResourcePrefixes) || isExtendedForQuota(n) {
			out = append(out, n)
		}
	}
	return out
}

func hasPrefix(n corev1.ResourceName, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(string(n), p) {
			return true
		}
	}
	return false
}

// isNative tells whether a resource name is one of the platform's own: unprefixed, or in the
// platform's domain.
func isNative(n corev1.ResourceName) bool {
	return !strings.Contains(string(n), "/") || strings.Contains(string(n), naming.ResourceDefaultNamespacePrefix)
}

// isExtended tells whether a container resource name is an extended resource
// (vendor.example/gpu): prefixed, outside the platform's domain, and a valid quota name once
// "requests." is put in front.
func isExtended(n corev1.ResourceName) bool {
	if isNative(n) || strings.HasPrefix(string(n), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(n))) == 0
}

// isExtendedForQuota tells whether a quota name limits an extended resource: only requests can
// be limited, as extended resources cannot be overcommitted.
func isExtendedForQuota(n corev1.ResourceName) bool {
	return !isNative(n) && strings.HasPrefix(string(n), corev1.DefaultResourceRequestsPrefix)
}

func (e *podEvaluator) MatchingScopes(obj runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range scopes {
		ok, err := podMatchesScope(s, obj)
		if err != nil {
			return nil, fmt.Errorf("error on matching scope %v: %v", s, err)
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (e *podEvaluator) UncoveredScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, l := range limited {
		covered := false
		for _, m := range matched {
			if m.ScopeName == l.ScopeName {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, l)
		}
	}
	return out
}

func (e *podEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return matches(e, q, obj, podMatchesScope)
}

func toPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, fmt.Errorf("expect *v1.Pod, got %T", obj)
	}
	return pod, nil
}

// Constraints: when a quota tracks cpu or memory (requests or limits), every container and init
// container must state them.
func (e *podEvaluator) Constraints(required []corev1.ResourceName, obj runtime.Object) error {
	pod, err := toPod(obj)
	if err != nil {
		return err
	}
	need := intersect(required, constrained)
	if len(need) == 0 {
		return nil
	}
	missing := map[corev1.ResourceName][]string{}
	check := func(c *corev1.Container) {
		has := computeUsage(c.Resources.Requests, c.Resources.Limits)
		for _, n := range need {
			if _, ok := has[n]; !ok {
				missing[n] = appendUnique(missing[n], c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, string(n))
	}
	sort.Strings(names)
	msgs := make([]string, 0, len(names))
	for _, n := range names {
		cs := missing[corev1.ResourceName(n)]
		sort.Strings(cs)
		msgs = append(msgs, fmt.Sprintf("%s for: %s", n, strings.Join(cs, ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// Usage: every pod counts in count/pods; a pod that has not finished also counts in pods and its
// compute resources (requests and limits of the whole pod, with init containers, sidecars and
// overhead as the scheduler sums them).
func (e *podEvaluator) Usage(obj runtime.Object) (corev1.ResourceList, error) {
	pod, err := toPod(obj)
	if err != nil {
		return nil, err
	}
	out := corev1.ResourceList{podCountName: *resource.NewQuantity(1, resource.DecimalSI)}
	if !e.counts(pod) {
		return out, nil
	}
	return Add(out, computeUsage(podRequests(pod), podLimits(pod))), nil
}

// counts tells whether a pod's compute resources count: not once it has finished, nor once it
// is stuck terminating past its grace period (a lost node must not block its replacements).
func (e *podEvaluator) counts(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if e.now().After(end) {
			return false
		}
	}
	return true
}

// computeUsage maps requests and limits to quota names.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	if q, ok := requests[corev1.ResourceCPU]; ok {
		out[corev1.ResourceCPU] = q.DeepCopy()
		out[corev1.ResourceRequestsCPU] = q.DeepCopy()
	}
	if q, ok := limits[corev1.ResourceCPU]; ok {
		out[corev1.ResourceLimitsCPU] = q.DeepCopy()
	}
	if q, ok := requests[corev1.ResourceMemory]; ok {
		out[corev1.ResourceMemory] = q.DeepCopy()
		out[corev1.ResourceRequestsMemory] = q.DeepCopy()
	}
	if q, ok := limits[corev1.ResourceMemory]; ok {
		out[corev1.ResourceLimitsMemory] = q.DeepCopy()
	}
	if q, ok := requests[corev1.ResourceEphemeralStorage]; ok {
		out[corev1.ResourceEphemeralStorage] = q.DeepCopy()
		out[corev1.ResourceRequestsEphemeralStorage] = q.DeepCopy()
	}
	if q, ok := limits[corev1.ResourceEphemeralStorage]; ok {
		out[corev1.ResourceLimitsEphemeralStorage] = q.DeepCopy()
	}
	for n, q := range requests {
		if strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix) {
			out[n] = q.DeepCopy()
			out[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+string(n))] = q.DeepCopy()
		}
		if isExtended(n) {
			out[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+string(n))] = q.DeepCopy()
		}
	}
	return out
}

// podRequests is what a pod requests: the containers' sum, or more while an init container runs
// (next to the sidecars started before it), plus the pod overhead. A container being resized in
// place counts the larger of its desired and its actual resources.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	out := aggregate(pod, func(r *corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
	if pod.Spec.Overhead != nil {
		addInto(out, pod.Spec.Overhead)
	}
	return out
}

// podLimits is the same for limits; the overhead adds only to the limits that are set.
func podLimits(pod *corev1.Pod) corev1.ResourceList {
	out := aggregate(pod, func(r *corev1.ResourceRequirements) corev1.ResourceList { return r.Limits })
	for n, q := range pod.Spec.Overhead {
		if cur, ok := out[n]; ok {
			cur.Add(q)
			out[n] = cur
		}
	}
	return out
}

func aggregate(pod *corev1.Pod, of func(*corev1.ResourceRequirements) corev1.ResourceList) corev1.ResourceList {
	infeasible := resizeInfeasible(pod)
	effective := func(spec corev1.ResourceList, status *corev1.ContainerStatus) corev1.ResourceList {
		if status == nil || status.Resources == nil {
			return spec
		}
		if infeasible {
			return of(status.Resources)
		}
		return maxOf(spec, of(status.Resources))
	}
	statuses := func(list []corev1.ContainerStatus) map[string]*corev1.ContainerStatus {
		m := make(map[string]*corev1.ContainerStatus, len(list))
		for i := range list {
			m[list[i].Name] = &list[i]
		}
		return m
	}
	running := statuses(pod.Status.ContainerStatuses)
	out := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		addInto(out, effective(of(&c.Resources), running[c.Name]))
	}
	initStatuses := statuses(pod.Status.InitContainerStatuses)
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := of(&c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar runs next to everything started after it, to the pod's end.
			r = effective(r, initStatuses[c.Name])
			addInto(out, r)
			addInto(sidecars, r)
			maxInto(initMax, sidecars)
			continue
		}
		during := corev1.ResourceList{}
		addInto(during, r)
		addInto(during, sidecars)
		maxInto(initMax, during)
	}
	maxInto(out, initMax)
	return out
}

// resizeInfeasible tells whether the kubelet declared a pending in-place resize infeasible: the
// pod then keeps what it has.
func resizeInfeasible(pod *corev1.Pod) bool {
	if pod.Status.Resize == corev1.PodResizeStatusInfeasible {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible {
			return true
		}
	}
	return false
}

// podMatchesScope tells whether a pod is in a quota scope.
func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pod, err := toPod(obj)
	if err != nil {
		return false, err
	}
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return isTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !isTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		sel, err := scopeSelector(s)
		if err != nil {
			return false, fmt.Errorf("failed to parse and convert selector: %v", err)
		}
		var set labels.Set
		if pod.Spec.PriorityClassName != "" {
			set = labels.Set{string(corev1.ResourceQuotaScopePriorityClass): pod.Spec.PriorityClassName}
		}
		return sel.Matches(set), nil
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// isTerminating: a pod with an active deadline ends on its own (a job-like pod).
func isTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// isBestEffort: the pod's QoS class (from its status when set) is BestEffort, which it is when
// no container requests or limits any cpu or memory.
func isBestEffort(pod *corev1.Pod) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSBestEffort
	}
	positive := func(list corev1.ResourceList) bool {
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := list[n]; ok && q.Sign() > 0 {
				return true
			}
		}
		return false
	}
	if pod.Spec.Resources != nil && (positive(pod.Spec.Resources.Requests) || positive(pod.Spec.Resources.Limits)) {
		return false
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if positive(cs[i].Resources.Requests) || positive(cs[i].Resources.Limits) {
				return false
			}
		}
	}
	return true
}

// usesCrossNamespaceAffinity: some pod (anti-)affinity term reaches other namespaces.
func usesCrossNamespaceAffinity(pod *corev1.Pod) bool {
	aff := pod.Spec.Affinity
	if aff == nil {
		return false
	}
	cross := func(t *corev1.PodAffinityTerm) bool { return len(t.Namespaces) > 0 || t.NamespaceSelector != nil }
	if a := aff.PodAffinity; a != nil {
		for i := range a.RequiredDuringSchedulingIgnoredDuringExecution {
			if cross(&a.RequiredDuringSchedulingIgnoredDuringExecution[i]) {
				return true
			}
		}
		for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			if cross(&a.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm) {
				return true
			}
		}
	}
	if a := aff.PodAntiAffinity; a != nil {
		for i := range a.RequiredDuringSchedulingIgnoredDuringExecution {
			if cross(&a.RequiredDuringSchedulingIgnoredDuringExecution[i]) {
				return true
			}
		}
		for i := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			if cross(&a.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm) {
				return true
			}
		}
	}
	return false
}
