package pods

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// limitRanger is LimitRanger: the LimitRanges of a namespace give a new pod's containers the
// default requests and limits they leave out (recorded in an annotation), and bound what
// containers, pods and persistent volume claims may ask for (min, max, and the largest limit to
// request ratio), with upstream's messages.
type limitRanger struct {
	ranges admission.Lister[*corev1.LimitRange]
}

func newLimitRanger(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &limitRanger{ranges: deps.Objects.LimitRanges()}, nil
}

func (*limitRanger) Name() string { return admission.LimitRanger }

// Interests: pod creates, in-place resizes of pods (pods/resize), claim creates and updates.
// Other pod updates cannot change containers' resources, so upstream skips them.
func (*limitRanger) Interests() []admission.Interest {
	return []admission.Interest{
		podInterest(admission.Create),
		{Operations: []admission.Operation{admission.Update}, APIGroups: []string{coreGroup}, Resources: []string{podsRes + "/" + resize}, Scope: "Namespaced"},
		{Operations: []admission.Operation{admission.Create, admission.Update}, APIGroups: []string{coreGroup}, Resources: []string{"persistentvolumeclaims"}, Scope: "Namespaced"},
	}
}

func (l *limitRanger) Admit(_ context.Context, a *admission.Attributes) error {
	return l.run(a, true)
}

func (l *limitRanger) Validate(_ context.Context, a *admission.Attributes) error {
	return l.run(a, false)
}

// supports is upstream's SupportsAttributes: pod creates, pod resizes, claim writes.
func supports(a *admission.Attributes) bool {
	switch {
	case a.Is(coreGroup, podsRes, resize):
		return a.Operation == admission.Update
	case a.Is(coreGroup, podsRes, ""):
		return a.Operation == admission.Create
	case a.Is(coreGroup, "persistentvolumeclaims", ""):
		return a.Operation == admission.Create || a.Operation == admission.Update
	}
	return false
}

func (l *limitRanger) run(a *admission.Attributes, mutate bool) error {
	if !supports(a) {
		return nil
	}
	// Objects on their way out are not held to limits.
	if old := admission.Accessor(a.OldObject); old != nil && old.GetDeletionTimestamp() != nil {
		return nil
	}
	items := l.ranges.List(a.Namespace)
	if len(items) == 0 {
		return nil
	}
	// Apply the ranges in a stable order (the lister's is not).
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, lr := range items {
		var err error
		switch obj := a.Object.(type) {
		case *corev1.Pod:
			if obj == nil {
				return apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
			}
			if mutate {
				mergePodDefaults(obj, containerDefaults(lr))
			} else {
				err = validatePodLimits(lr, obj)
			}
		case *corev1.PersistentVolumeClaim:
			if !mutate && obj != nil {
				err = validateClaimLimits(lr, obj)
			}
		default:
			return apierrors.NewBadRequest(fmt.Sprintf("LimitRanger got an object of kind %s it does not handle", a.Kind.Kind))
		}
		if err != nil {
			return forbidden(a, err)
		}
	}
	return nil
}

// containerDefaults collects the Container items' default requests and limits.
func containerDefaults(lr *corev1.LimitRange) corev1.ResourceRequirements {
	req := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			req.Requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			req.Limits[k] = v.DeepCopy()
		}
	}
	return req
}

// mergePodDefaults gives every container and init container the defaults it leaves out and
// records what was set in the pod's LimitRanger annotation.
func mergePodDefaults(pod *corev1.Pod, defaults corev1.ResourceRequirements) {
	var notes []string
	for i := range pod.Spec.Containers {
		notes = mergeContainerDefaults(&pod.Spec.Containers[i], defaults, "container", notes)
	}
	for i := range pod.Spec.InitContainers {
		notes = mergeContainerDefaults(&pod.Spec.InitContainers[i], defaults, "init container", notes)
	}
	if len(notes) == 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[naming.LimitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
}

func mergeContainerDefaults(c *corev1.Container, defaults corev1.ResourceRequirements, kind string, notes []string) []string {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	var setRequests, setLimits []string
	for k, v := range defaults.Limits {
		if _, ok := c.Resources.Limits[k]; !ok {
			c.Resources.Limits[k] = v.DeepCopy()
			setLimits = append(setLimits, string(k))
		}
	}
	for k, v := range defaults.Requests {
		if _, ok := c.Resources.Requests[k]; !ok {
			c.Resources.Requests[k] = v.DeepCopy()
			setRequests = append(setRequests, string(k))
		}
	}
	if len(setRequests) > 0 {
		sort.Strings(setRequests)
		notes = append(notes, strings.Join(setRequests, ", ")+fmt.Sprintf(" request for %s %s", kind, c.Name))
	}
	if len(setLimits) > 0 {
		sort.Strings(setLimits)
		notes = append(notes, strings.Join(setLimits, ", ")+fmt.Sprintf(" limit for %s %s", kind, c.Name))
	}
	return notes
}

// sortedNames returns a resource list's names in order, so messages come out the same every
// time (upstream's map order varies).
func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// checkItem applies one item's min, max and ratio to requests and limits.
func checkItem(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	var errs []error
	t := string(item.Type)
	for _, k := range sortedNames(item.Min) {
		if err := minConstraint(t, string(k), item.Min[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.Max) {
		if err := maxConstraint(t, string(k), item.Max[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.MaxLimitRequestRatio) {
		if err := ratioConstraint(t, string(k), item.MaxLimitRequestRatio[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// validatePodLimits checks the Container items against every container and init container, and
// the Pod items against the pod's total (sidecar-aware, as the scheduler counts it).
func validatePodLimits(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range list {
					errs = append(errs, checkItem(item, list[i].Resources.Requests, list[i].Resources.Limits)...)
				}
			}
		case corev1.LimitTypePod:
			errs = append(errs, checkItem(item, podTotal(pod, true), podTotal(pod, false))...)
		}
	}
	return aggregate(errs)
}

// validateClaimLimits checks the PersistentVolumeClaim items against a claim's requests (its
// limits are not user input for this purpose).
func validateClaimLimits(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		t := string(item.Type)
		for _, k := range sortedNames(item.Min) {
			if err := minConstraint(t, string(k), item.Min[k], pvc.Spec.Resources.Requests, corev1.ResourceList{}); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range sortedNames(item.Max) {
			if err := maxRequestConstraint(t, string(k), item.Max[k], pvc.Spec.Resources.Requests); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return aggregate(errs)
}

// podTotal is the pod's effective requests (or limits): the sum over containers and sidecars
// (restartable init containers), or the largest need of any init container while it runs next
// to the sidecars started before it, whichever is larger per resource.
func podTotal(pod *corev1.Pod, requests bool) corev1.ResourceList {
	pick := func(c *corev1.Container) corev1.ResourceList {
		if requests {
			return c.Resources.Requests
		}
		return c.Resources.Limits
	}
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(total, pick(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var need corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addResources(total, pick(c))
			addResources(sidecars, pick(c))
			need = sidecars
		} else {
			need = corev1.ResourceList{}
			addResources(need, pick(c))
			addResources(need, sidecars)
		}
		maxResources(initMax, need)
	}
	maxResources(total, initMax)
	return total
}

func addResources(into, add corev1.ResourceList) {
	for k, q := range add {
		if v, ok := into[k]; ok {
			v.Add(q)
			into[k] = v
		} else {
			into[k] = q.DeepCopy()
		}
	}
}

func maxResources(into, other corev1.ResourceList) {
	for k, q := range other {
		if v, ok := into[k]; !ok || q.Cmp(v) > 0 {
			into[k] = q.DeepCopy()
		}
	}
}

// atCommonPrecision returns request, limit and enforced at one precision: milli-units when none would
// overflow, else units.
func atCommonPrecision(req, lim, enforced resource.Quantity) (int64, int64, int64) {
	r, l, e := req.Value(), lim.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		return req.MilliValue(), lim.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := atCommonPrecision(req, lim, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String())
	case r < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	case hasLim && l < e:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	return nil
}

func maxRequestConstraint(limitType, name string, enforced resource.Quantity, requests corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	r, _, e := atCommonPrecision(req, resource.Quantity{}, enforced)
	switch {
	case !hasReq:
		return fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String())
	case r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	return nil
}

func maxConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, e := atCommonPrecision(req, lim, enforced)
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, limitType, enforced.String())
	case l > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	case hasReq && r > e:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[corev1.ResourceName(name)]
	lim, hasLim := limits[corev1.ResourceName(name)]
	r, l, _ := atCommonPrecision(req, lim, enforced)
	if !hasReq || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, limitType, enforced.String())
	}
	if !hasLim || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, limitType, enforced.String())
	}
	observed := float64(l) / float64(r)
	shown := observed
	maxRatio := float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed *= 1000
		maxRatio = float64(enforced.MilliValue())
	}
	if observed > maxRatio {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, limitType, enforced.String(), shown)
	}
	return nil
}
