package pods

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// extendedResourceToleration is ExtendedResourceToleration: a new pod that requests an
// extended resource (a domain-prefixed name outside the platform's own, such as
// example.com/gpu) tolerates the NoSchedule taint of that name, so operators can keep nodes with
// such devices for the pods that ask for them by tainting the nodes with the resource's name.
type extendedResourceToleration struct{}

func newExtendedResourceToleration(admission.Deps, []byte) (admission.Plugin, error) {
	return extendedResourceToleration{}, nil
}

func (extendedResourceToleration) Name() string { return admission.ExtendedResourceToleration }

// Interests: pod creates.
func (extendedResourceToleration) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create)}
}

func (extendedResourceToleration) Admit(_ context.Context, a *admission.Attributes) error {
	if !isPod(a) || a.Operation != admission.Create {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *core.Pod but got %T", a.Object))
	}
	names := map[string]bool{}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			for r := range c.Resources.Requests {
				if isExtendedResourceName(r) {
					names[string(r)] = true
				}
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	// Sorted, as upstream's set, so the tolerations come out in a stable order.
	sort.Strings(sorted)
	for _, n := range sorted {
		addOrUpdateToleration(pod, corev1.Toleration{Key: n, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return nil
}

// requestsQuotaPrefix is what quota prefixes resource names with (upstream's
// DefaultResourceRequestsPrefix); an extended resource's name must stay a qualified name with it.
const requestsQuotaPrefix = "requests."

// isExtendedResourceName is upstream's helper: a name with a domain that is not the platform's
// own (native resources are unprefixed or carry the platform's domain), not a quota name, and
// that remains a qualified name under the quota prefix.
func isExtendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, naming.ResourceDefaultNamespacePrefix) {
		return false
	}
	if strings.HasPrefix(s, requestsQuotaPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(requestsQuotaPrefix+s)) == 0
}
