package namespace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// conditionOrder lists the conditions the deleter maintains, in upstream's order; each is True
// with a failure reason while the problem lasts and False with a success reason otherwise.
var conditionOrder = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// healthy are the reason and message of each condition when nothing is wrong (upstream's texts,
// which kubectl describe shows and users search for).
var healthy = map[corev1.NamespaceConditionType]struct{ reason, message string }{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// report gathers what one pass over a namespace's content found.
type report struct {
	discoveryErr error
	parseErr     error
	contentErrs  []error
	// remaining counts the objects left per resource, byFinalizer the objects each finalizer holds.
	remaining   map[schema.GroupVersionResource]int
	byFinalizer map[string]int
}

func newReport() *report {
	return &report{remaining: map[schema.GroupVersionResource]int{}, byFinalizer: map[string]int{}}
}

// failures are the True conditions of the report, by type.
func (r *report) failures() map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	out := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	set := func(t corev1.NamespaceConditionType, reason, message string) {
		out[t] = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message}
	}
	if r.discoveryErr != nil {
		msg := r.discoveryErr.Error()
		var failed *discovery.ErrGroupDiscoveryFailed
		if errors.As(r.discoveryErr, &failed) {
			msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(failed.Groups), r.discoveryErr)
		}
		set(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
	}
	if r.parseErr != nil {
		set(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", r.parseErr.Error())
	}
	if len(r.contentErrs) > 0 {
		msgs := make([]string, 0, len(r.contentErrs))
		for _, err := range r.contentErrs {
			msgs = append(msgs, err.Error())
		}
		sort.Strings(msgs)
		set(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	if parts := counted(r.remaining, func(gvr schema.GroupVersionResource, n int) string {
		return fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n)
	}); len(parts) > 0 {
		set(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(parts, ", "))
	}
	if parts := counted(r.byFinalizer, func(f string, n int) string {
		return fmt.Sprintf("%s in %d resource instances", f, n)
	}); len(parts) > 0 {
		set(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "+strings.Join(parts, ", "))
	}
	return out
}

// counted formats the non-zero counts of m, sorted so that the message is stable across passes
// (an unchanged message is not written again).
func counted[K comparable](m map[K]int, format func(K, int) string) []string {
	var parts []string
	for k, n := range m {
		if n > 0 {
			parts = append(parts, format(k, n))
		}
	}
	sort.Strings(parts)
	return parts
}

// applyConditions sets the maintained conditions of status from the report and tells whether
// anything changed. A condition's transition time moves only when its status flips.
func applyConditions(status *corev1.NamespaceStatus, r *report, now metav1.Time) bool {
	failures := r.failures()
	changed := false
	for _, t := range conditionOrder {
		want, failing := failures[t]
		if !failing {
			h := healthy[t]
			want = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: h.reason, Message: h.message}
		}
		i := indexOf(status.Conditions, t)
		if i < 0 {
			want.LastTransitionTime = now
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		cur := &status.Conditions[i]
		if cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
			continue
		}
		if cur.Status != want.Status {
			cur.LastTransitionTime = now
		}
		cur.Status, cur.Reason, cur.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	return changed
}

func indexOf(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
