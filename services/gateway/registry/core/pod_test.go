package core_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/core"
)

func pods(t *testing.T) registry.Strategy {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if !ok {
		t.Fatal("pods are not served")
	}
	return core.NewPod(builtin.New(res, builtin.NewShared(reg.Scheme)))
}

func seconds(n int64) *int64 { return &n }

// TestPodUpdateRules: upstream's rules of pod updates. The image of a container, the active
// deadline (set, or lowered), tolerations (added, or their tolerationSeconds changed), scheduling
// gates (removed) and a negative terminationGracePeriodSeconds (to 1) may change; anything else
// in the spec is refused with upstream's message (422, spec: Forbidden).
func TestPodUpdateRules(t *testing.T) {
	st := pods(t)
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		Containers:                    []corev1.Container{{Name: "c", Image: "nginx:1"}},
		InitContainers:                []corev1.Container{{Name: "i", Image: "busybox:1"}},
		Tolerations:                   []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds(300)}},
		SchedulingGates:               []corev1.PodSchedulingGate{{Name: "example.com/gate"}},
		TerminationGracePeriodSeconds: seconds(30),
		ActiveDeadlineSeconds:         seconds(100),
	}}
	forbidden := "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		old  func(*corev1.Pod)
		want string // "" allowed; else a substring of the single error
	}{
		{name: "nothing", edit: func(*corev1.Pod) {}},
		{name: "labels and annotations", edit: func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }},
		{name: "images", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "nginx:2"
			p.Spec.InitContainers[0].Image = "busybox:2"
		}},
		{name: "an empty image", edit: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, want: "spec.containers[0].image: Required value"},
		{name: "an image with spaces", edit: func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" }, want: "must not have leading or trailing whitespace"},
		{name: "resources", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, want: "spec: Forbidden: " + forbidden},
		{name: "a container added", edit: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "x"})
		},
			want: "spec.containers: Forbidden: pod updates may not add or remove containers"},
		{name: "the node", edit: func(p *corev1.Pod) { p.Spec.NodeName = "elsewhere" }, want: forbidden},
		{name: "the service account", edit: func(p *corev1.Pod) { p.Spec.ServiceAccountName = "other" }, want: forbidden},
		{name: "a lower deadline", edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = seconds(50) }},
		{name: "a higher deadline", edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = seconds(200) }, want: "must be less than or equal to previous value"},
		{name: "no deadline", edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, want: "must not update from a positive integer to nil value"},
		{name: "a negative deadline", edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = seconds(-1) }, want: "must be between 0 and 2147483647, inclusive"},
		{name: "a first deadline", old: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }, edit: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = seconds(10) }},
		{name: "a toleration added", edit: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists})
		}},
		{name: "tolerationSeconds changed", edit: func(p *corev1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = seconds(10) }},
		{name: "a toleration changed", edit: func(p *corev1.Pod) { p.Spec.Tolerations[0].Key = "other" },
			want: "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"},
		{name: "a toleration removed", edit: func(p *corev1.Pod) { p.Spec.Tolerations = nil }, want: "existing toleration can not be modified"},
		{name: "an invalid toleration added", edit: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpEqual, Value: "v"})
		}, want: "operator must be Exists when `key` is empty"},
		{name: "a gate removed", edit: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil }},
		{name: "a gate added", edit: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/new"})
		}, want: "only deletion is allowed, but found new scheduling gate 'example.com/new'"},
		{name: "a gated pod's node selector grows", edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }},
		{name: "an ungated pod's node selector", old: func(p *corev1.Pod) { p.Spec.SchedulingGates = nil },
			edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }, want: forbidden},
		{name: "a gated pod's node selector changed", old: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} },
			edit: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }, want: "only additions to spec.nodeSelector are allowed"},
		{name: "a negative grace period to 1", old: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = seconds(-1) },
			edit: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = seconds(1) }},
		{name: "the grace period", edit: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = seconds(5) }, want: forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base.DeepCopy()
			if tc.old != nil {
				tc.old(old)
			}
			next := old.DeepCopy()
			tc.edit(next)
			errs := st.Validate(next, old)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs.ToAggregate())
			case tc.want != "" && len(errs) != 1:
				t.Errorf("errors %v, want one with %q", errs, tc.want)
			case tc.want != "" && !strings.Contains(errs[0].Error(), tc.want):
				t.Errorf("error %q, want %q", errs[0].Error(), tc.want)
			}
		})
	}
	// Creates (no old object) are not ruled here.
	if errs := st.Validate(base.DeepCopy(), nil); len(errs) > 0 {
		t.Errorf("create: %v", errs)
	}
}
