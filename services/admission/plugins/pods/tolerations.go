package pods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Toleration set arithmetic shared by PodTolerationRestriction, RuntimeClass and
// ExtendedResourceToleration, with upstream's semantics (pkg/util/tolerations and the core
// helper AddOrUpdateTolerationInPod), so merged lists come out as upstream's do.

// isSuperset tells whether ss tolerates everything t tolerates.
func isSuperset(ss, t corev1.Toleration) bool {
	if equality.Semantic.DeepEqual(&t, &ss) {
		return true
	}
	// An empty key with operator Exists matches every key.
	if t.Key != ss.Key && (ss.Key != "" || ss.Operator != corev1.TolerationOpExists) {
		return false
	}
	// An empty effect matches every effect.
	if t.Effect != ss.Effect && ss.Effect != "" {
		return false
	}
	if ss.Effect == corev1.TaintEffectNoExecute && ss.TolerationSeconds != nil {
		if t.TolerationSeconds == nil || *t.TolerationSeconds > *ss.TolerationSeconds {
			return false
		}
	}
	switch ss.Operator {
	case corev1.TolerationOpEqual, "": // an empty operator means Equal
		// Upstream compares t's operator literally: a t that leaves it empty is not covered.
		return t.Operator == corev1.TolerationOpEqual && t.Value == ss.Value
	case corev1.TolerationOpExists:
		return true
	default:
		return false
	}
}

// mergeTolerations returns first and second together, dropping every toleration another one
// is a superset of (the first of two equal ones stays).
func mergeTolerations(first, second []corev1.Toleration) []corev1.Toleration {
	all := make([]corev1.Toleration, 0, len(first)+len(second))
	all = append(all, first...)
	all = append(all, second...)
	var merged []corev1.Toleration
next:
	for i, t := range all {
		for _, m := range merged {
			if isSuperset(m, t) {
				continue next
			}
		}
		for _, later := range all[i+1:] {
			if !equality.Semantic.DeepEqual(&t, &later) && isSuperset(later, t) {
				continue next
			}
		}
		merged = append(merged, t)
	}
	return merged
}

// verifyAgainstWhitelist tells whether every toleration is covered by one of the whitelist's
// (an empty whitelist allows everything).
func verifyAgainstWhitelist(tolerations, whitelist []corev1.Toleration) bool {
	if len(whitelist) == 0 {
		return true
	}
next:
	for _, t := range tolerations {
		for _, w := range whitelist {
			if isSuperset(w, t) {
				continue next
			}
		}
		return false
	}
	return true
}

// addOrUpdateToleration puts t into the pod's tolerations, replacing one that matches it (same
// key, operator, value and effect); it tells whether the list changed.
func addOrUpdateToleration(pod *corev1.Pod, t corev1.Toleration) bool {
	var out []corev1.Toleration
	updated := false
	for i := range pod.Spec.Tolerations {
		if t.MatchToleration(&pod.Spec.Tolerations[i]) {
			if equality.Semantic.DeepEqual(t, pod.Spec.Tolerations[i]) {
				return false
			}
			out = append(out, t)
			updated = true
			continue
		}
		out = append(out, pod.Spec.Tolerations[i])
	}
	if !updated {
		out = append(out, t)
	}
	pod.Spec.Tolerations = out
	return true
}

// copyTolerations returns a deep copy (listers share their objects; plugins must not alias them
// into the object under admission).
func copyTolerations(in []corev1.Toleration) []corev1.Toleration {
	if in == nil {
		return nil
	}
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
