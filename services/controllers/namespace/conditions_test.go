package namespace

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

func TestConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	discoveryErr := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.example.com", Version: "v1"}: errors.New("unavailable")}}

	cases := []struct {
		name  string
		start []corev1.NamespaceCondition
		r     func() *report
		// want is type -> status/reason/message; transitionAt the expected transition times.
		want         map[corev1.NamespaceConditionType][3]string
		transitionAt map[corev1.NamespaceConditionType]metav1.Time
		changed      bool
	}{
		{
			name: "upstream: every maintained condition is written, False with its success reason when nothing failed",
			r:    newReport,
			want: map[corev1.NamespaceConditionType][3]string{
				corev1.NamespaceDeletionDiscoveryFailure: {"False", "ResourcesDiscovered", "All resources successfully discovered"},
				corev1.NamespaceDeletionGVParsingFailure: {"False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
				corev1.NamespaceDeletionContentFailure:   {"False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
				corev1.NamespaceContentRemaining:         {"False", "ContentRemoved", "All content successfully removed"},
				corev1.NamespaceFinalizersRemaining:      {"False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
			},
			transitionAt: map[corev1.NamespaceConditionType]metav1.Time{corev1.NamespaceContentRemaining: t1},
			changed:      true,
		},
		{
			name: "upstream: remaining resources and finalizers are listed sorted; group discovery failures are counted",
			r: func() *report {
				r := newReport()
				r.discoveryErr = discoveryErr
				r.contentErrs = []error{errors.New("b failed"), errors.New("a failed")}
				r.remaining[schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}] = 2
				r.remaining[schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}] = 1
				r.byFinalizer["z.example/hold"] = 1
				r.byFinalizer["a.example/hold"] = 2
				return r
			},
			want: map[corev1.NamespaceConditionType][3]string{
				corev1.NamespaceDeletionDiscoveryFailure: {"True", "DiscoveryFailed", "Discovery failed for some groups, 1 failing: " + discoveryErr.Error()},
				corev1.NamespaceDeletionContentFailure:   {"True", "ContentDeletionFailed", "Failed to delete all resource types, 2 remaining: a failed, b failed"},
				corev1.NamespaceContentRemaining:         {"True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 2 resource instances"},
				corev1.NamespaceFinalizersRemaining:      {"True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: a.example/hold in 2 resource instances, z.example/hold in 1 resource instances"},
			},
			changed: true,
		},
		{
			name: "upstream: a condition whose status flips gets a new transition time; an unchanged one keeps its time and is not rewritten",
			start: []corev1.NamespaceCondition{
				{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered", LastTransitionTime: t0},
				{Type: corev1.NamespaceDeletionGVParsingFailure, Status: corev1.ConditionFalse, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed", LastTransitionTime: t0},
				{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionFalse, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization", LastTransitionTime: t0},
				{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain", Message: "Some resources are remaining: pods. has 1 resource instances", LastTransitionTime: t0},
				{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionFalse, Reason: "ContentHasNoFinalizers", Message: "All content-preserving finalizers finished", LastTransitionTime: t0},
			},
			r: newReport,
			want: map[corev1.NamespaceConditionType][3]string{
				corev1.NamespaceContentRemaining:    {"False", "ContentRemoved", "All content successfully removed"},
				corev1.NamespaceFinalizersRemaining: {"False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
			},
			transitionAt: map[corev1.NamespaceConditionType]metav1.Time{
				corev1.NamespaceContentRemaining:         t1,
				corev1.NamespaceDeletionDiscoveryFailure: t0,
			},
			changed: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := corev1.NamespaceStatus{Conditions: append([]corev1.NamespaceCondition(nil), tc.start...)}
			if got := applyConditions(&status, tc.r(), t1); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			if len(status.Conditions) != len(conditionOrder) {
				t.Fatalf("%d conditions, want %d", len(status.Conditions), len(conditionOrder))
			}
			for typ, w := range tc.want {
				i := indexOf(status.Conditions, typ)
				c := status.Conditions[i]
				if string(c.Status) != w[0] || c.Reason != w[1] || c.Message != w[2] {
					t.Errorf("%s = %s/%s/%q, want %s/%s/%q", typ, c.Status, c.Reason, c.Message, w[0], w[1], w[2])
				}
			}
			for typ, at := range tc.transitionAt {
				if c := status.Conditions[indexOf(status.Conditions, typ)]; !c.LastTransitionTime.Equal(&at) {
					t.Errorf("%s transition time = %v, want %v", typ, c.LastTransitionTime, at)
				}
			}
			// Applying the same report again changes nothing.
			if applyConditions(&status, tc.r(), t1) {
				t.Error("applying the same report twice reported a change")
			}
		})
	}
}
