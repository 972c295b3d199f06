package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// podTolerationRestriction is PodTolerationRestriction: a new pod gets its namespace's default
// tolerations (annotation, else the configuration's default) merged into its own, every pod
// that is not BestEffort tolerates memory pressure on NoSchedule, and a pod's tolerations must
// all be covered by its namespace's whitelist (annotation, else the configuration's). Together
// they let administrators keep namespaces off tainted nodes or confine them to some.
type podTolerationRestriction struct {
	deps admission.Deps
	// defaults and allowed are the configuration's default and whitelist.
	defaults, allowed []corev1.Toleration
}

// PodTolerationRestrictionConfig is the plugin's configuration: kind Configuration in
// podtolerationrestriction.admission.<suffix>/v1alpha1 (upstream's group
// podtolerationrestriction.admission.k8s.io is read as the same).
type PodTolerationRestrictionConfig struct {
	// APIVersion and Kind, when given, must name the configuration kind.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Default are the tolerations of pods in namespaces without the default annotation.
	Default []corev1.Toleration `json:"default,omitempty"`
	// Whitelist bounds the tolerations of pods in namespaces without the whitelist annotation
	// (empty: anything).
	Whitelist []corev1.Toleration `json:"whitelist,omitempty"`
}

var podTolerationRestrictionGroupVersion = naming.Group("podtolerationrestriction.admission.k8s.io") + "/v1alpha1"

func newPodTolerationRestriction(deps admission.Deps, config []byte) (admission.Plugin, error) {
	p := &podTolerationRestriction{deps: deps}
	if len(config) == 0 {
		return p, nil
	}
	var c PodTolerationRestrictionConfig
	if err := decodeConfig(admission.PodTolerationRestriction, config, &c); err != nil {
		return nil, err
	}
	if err := checkKind(admission.PodTolerationRestriction, c.APIVersion, c.Kind, "Configuration", podTolerationRestrictionGroupVersion); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	errs = append(errs, validateTolerations(c.Default, field.NewPath("default"))...)
	errs = append(errs, validateTolerations(c.Whitelist, field.NewPath("whitelist"))...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", admission.PodTolerationRestriction, errs.ToAggregate())
	}
	p.defaults, p.allowed = c.Default, c.Whitelist
	return p, nil
}

func (*podTolerationRestriction) Name() string { return admission.PodTolerationRestriction }

// Interests: pod creates (defaults and whitelist) and updates (whitelist, memory pressure).
func (*podTolerationRestriction) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create, admission.Update)}
}

func (p *podTolerationRestriction) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := p.applies(a)
	if !ok {
		return nil
	}
	var extra []corev1.Toleration
	if a.Operation == admission.Create {
		ns, err := getNamespace(ctx, p.deps, a.Namespace)
		if err != nil {
			return err
		}
		ts, err := namespaceTolerations(ns, naming.NamespaceDefaultTolerationsAnnotation)
		if err != nil {
			return err
		}
		if ts == nil {
			ts = copyTolerations(p.defaults)
		}
		extra = ts
	}
	if podQOS(pod) != corev1.PodQOSBestEffort {
		extra = append(extra, corev1.Toleration{Key: naming.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	if len(extra) > 0 {
		pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, extra)
	}
	return p.validate(ctx, a, pod)
}

func (p *podTolerationRestriction) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, ok := p.applies(a)
	if !ok {
		return nil
	}
	return p.validate(ctx, a, pod)
}

func (p *podTolerationRestriction) validate(ctx context.Context, a *admission.Attributes, pod *corev1.Pod) error {
	if len(pod.Spec.Tolerations) == 0 {
		return nil
	}
	ns, err := getNamespace(ctx, p.deps, a.Namespace)
	if err != nil {
		return err
	}
	whitelist, err := namespaceTolerations(ns, naming.NamespaceTolerationsWhitelistAnnotation)
	if err != nil {
		return err
	}
	scope := "namespace"
	if whitelist == nil {
		whitelist, scope = p.allowed, "cluster"
	}
	if len(whitelist) > 0 && !verifyAgainstWhitelist(pod.Spec.Tolerations, whitelist) {
		// Upstream rejects with a plain error, which its API server answers as a 500.
		return unknownError(fmt.Sprintf("pod tolerations (possibly merged with namespace default tolerations) conflict with its %s whitelist", scope))
	}
	return nil
}

// applies returns the pod of a request for the pods resource itself.
func (*podTolerationRestriction) applies(a *admission.Attributes) (*corev1.Pod, bool) {
	if !isPod(a) {
		return nil, false
	}
	pod, ok := a.Object.(*corev1.Pod)
	return pod, ok && pod != nil
}

// namespaceTolerations reads a JSON list of tolerations from a namespace annotation: nil when
// the annotation is absent (fall back to the configuration), empty when it is empty.
func namespaceTolerations(ns *corev1.Namespace, key string) ([]corev1.Toleration, error) {
	v, ok := ns.Annotations[key]
	if !ok {
		return nil, nil
	}
	if v == "" {
		return []corev1.Toleration{}, nil
	}
	var ts []corev1.Toleration
	if err := json.Unmarshal([]byte(v), &ts); err != nil {
		return nil, unknownError(err.Error())
	}
	if ts == nil {
		ts = []corev1.Toleration{}
	}
	return ts, nil
}

// podQOS is the pod's quality of service class as upstream computes it for this plugin: its
// status' class when set, else BestEffort when no container (init containers included) requests
// or limits a positive amount of cpu or memory, else not BestEffort (Burstable or Guaranteed;
// the difference does not matter here).
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name, q := range rl {
					if (name == corev1.ResourceCPU || name == corev1.ResourceMemory) && q.Sign() > 0 {
						return corev1.PodQOSBurstable
					}
				}
			}
		}
	}
	return corev1.PodQOSBestEffort
}

// validateTolerations checks configured tolerations as upstream's API validation checks a
// pod's.
func validateTolerations(ts []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		p := path.Index(i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
			}
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
	}
	return errs
}

// checkKind accepts a configuration whose apiVersion and kind are absent, or are kind in
// groupVersion (upstream's spelling of the group read as Platform's).
func checkKind(plugin, apiVersion, kind, wantKind, groupVersion string) error {
	if apiVersion == "" && kind == "" {
		return nil
	}
	gv := apiVersion
	if i := strings.LastIndex(gv, "/"); i >= 0 {
		gv = naming.Group(gv[:i]) + gv[i:]
	}
	if kind != wantKind || gv != groupVersion {
		return fmt.Errorf("%s: the configuration must be kind %s in %s, not %q in %q", plugin, wantKind, groupVersion, kind, apiVersion)
	}
	return nil
}
