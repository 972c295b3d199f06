package pods

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// defaultTolerationSeconds is DefaultTolerationSeconds: a pod that does not already tolerate the
// not-ready and unreachable NoExecute taints gets tolerations for them with a bounded
// tolerationSeconds, so its node's failure evicts it after that time instead of never (no
// toleration would evict at once).
type defaultTolerationSeconds struct {
	notReady, unreachable int64
}

// DefaultTolerationSecondsConfig is DefaultTolerationSeconds' configuration, the plugin's entry
// of the admission configuration file. Upstream 1.33 takes the two values from the flags
// --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds (300
// each); here they are the flat fields named after those flags, or the nested form of upstream's
// later configuration kind (Configuration in defaulttolerationseconds.admission.<suffix>/v1alpha1,
// field defaultTolerationSecondsConfig). A value left out keeps its default.
type DefaultTolerationSecondsConfig struct {
	// DefaultNotReadyTolerationSeconds is the tolerationSeconds of the not-ready toleration.
	DefaultNotReadyTolerationSeconds *int64 `json:"defaultNotReadyTolerationSeconds,omitempty"`
	// DefaultUnreachableTolerationSeconds is the tolerationSeconds of the unreachable toleration.
	DefaultUnreachableTolerationSeconds *int64 `json:"defaultUnreachableTolerationSeconds,omitempty"`
	// Nested is upstream's later spelling of the same two values.
	Nested *struct {
		// NotReadyTolerationSeconds is DefaultNotReadyTolerationSeconds in the nested form.
		NotReadyTolerationSeconds *int64 `json:"notReadyTolerationSeconds,omitempty"`
		// UnreachableTolerationSeconds is DefaultUnreachableTolerationSeconds in the nested form.
		UnreachableTolerationSeconds *int64 `json:"unreachableTolerationSeconds,omitempty"`
	} `json:"defaultTolerationSecondsConfig,omitempty"`
}

// defaultTolerationSecondsValue is upstream's default for both flags (the spec's 5 minutes).
const defaultTolerationSecondsValue = 300

func newDefaultTolerationSeconds(_ admission.Deps, config []byte) (admission.Plugin, error) {
	p := defaultTolerationSeconds{notReady: defaultTolerationSecondsValue, unreachable: defaultTolerationSecondsValue}
	if len(config) == 0 {
		return p, nil
	}
	var c DefaultTolerationSecondsConfig
	if err := decodeConfig(admission.DefaultTolerationSeconds, config, &c); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		dst *int64
		src *int64
	}{
		{&p.notReady, c.DefaultNotReadyTolerationSeconds},
		{&p.unreachable, c.DefaultUnreachableTolerationSeconds},
	} {
		if v.src != nil {
			*v.dst = *v.src
		}
	}
	if c.Nested != nil {
		if c.Nested.NotReadyTolerationSeconds != nil {
			p.notReady = *c.Nested.NotReadyTolerationSeconds
		}
		if c.Nested.UnreachableTolerationSeconds != nil {
			p.unreachable = *c.Nested.UnreachableTolerationSeconds
		}
	}
	// A negative tolerationSeconds means evicting at once; upstream's configuration refuses it.
	var errs []string
	if p.notReady < 0 {
		errs = append(errs, fmt.Sprintf("defaultNotReadyTolerationSeconds: Invalid value: %d: must be not less than 0", p.notReady))
	}
	if p.unreachable < 0 {
		errs = append(errs, fmt.Sprintf("defaultUnreachableTolerationSeconds: Invalid value: %d: must be not less than 0", p.unreachable))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid config: %s", admission.DefaultTolerationSeconds, strings.Join(errs, "; "))
	}
	return p, nil
}

func (defaultTolerationSeconds) Name() string { return admission.DefaultTolerationSeconds }

// Interests: pod creates and updates (an update of a pod admitted without the plugin gets the
// tolerations too, as upstream's does).
func (defaultTolerationSeconds) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create, admission.Update)}
}

func (p defaultTolerationSeconds) Admit(_ context.Context, a *admission.Attributes) error {
	if !isPodWrite(a) {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *api.Pod but got %T", a.Object))
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		anyEffect := t.Effect == corev1.TaintEffectNoExecute || t.Effect == ""
		if (t.Key == naming.TaintNodeNotReady || t.Key == "") && anyEffect {
			notReady = true
		}
		if (t.Key == naming.TaintNodeUnreachable || t.Key == "") && anyEffect {
			unreachable = true
		}
	}
	if !notReady {
		seconds := p.notReady
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key: naming.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds,
		})
	}
	if !unreachable {
		seconds := p.unreachable
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key: naming.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds,
		})
	}
	return nil
}
