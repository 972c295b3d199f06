package generic

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
)

// gcPolicy is what a kind does with an owner's dependents when a delete names no propagation
// policy (upstream's GarbageCollectionPolicy of its strategies).
type gcPolicy int

const (
	// deleteDependents: the garbage collector deletes the dependents in the background (most kinds).
	deleteDependents gcPolicy = iota
	// orphanDependents: the dependents stay, without the owner reference (the versions kept for
	// backwards compatibility: core/v1 ReplicationControllers, the beta workload versions).
	orphanDependents
	// gcUnsupported: deletes of the kind never wait for dependents, whatever the options (Events).
	gcUnsupported
)

// defaultGCPolicy is res's default, as upstream's strategies decide it by kind and by the version
// the delete was sent to.
func defaultGCPolicy(res *registry.Resource) gcPolicy {
	gk := res.GroupVersionKind().GroupKind()
	switch gk {
	case schema.GroupKind{Group: naming.Group(""), Kind: "Event"}, schema.GroupKind{Group: naming.Group("events.k8s.io"), Kind: "Event"}:
		return gcUnsupported
	case schema.GroupKind{Group: naming.Group(""), Kind: "ReplicationController"}:
		if res.Version == "v1" {
			return orphanDependents
		}
	}
	switch gk.Group {
	case naming.Group("apps"), naming.Group("extensions"):
		if res.Version != "v1" {
			return orphanDependents
		}
	}
	return deleteDependents
}

// shouldOrphan tells whether deleting m with opts orphans its dependents: an explicit option
// first (the deprecated orphanDependents, then propagationPolicy), then a finalizer the object
// already carries, then the kind's default.
func shouldOrphan(policy gcPolicy, m metav1.Object, opts *metav1.DeleteOptions) bool {
	if policy == gcUnsupported {
		return false
	}
	if opts != nil && opts.OrphanDependents != nil { //nolint:staticcheck // the deprecated option is still honoured, as upstream
		return *opts.OrphanDependents //nolint:staticcheck
	}
	if opts != nil && opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy == metav1.DeletePropagationOrphan
	}
	for _, f := range m.GetFinalizers() {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return true
		case metav1.FinalizerDeleteDependents:
			return false
		}
	}
	return policy == orphanDependents
}

// shouldDeleteInForeground tells whether deleting m with opts waits for its blocking dependents
// to be deleted first (the foregroundDeletion finalizer).
func shouldDeleteInForeground(policy gcPolicy, m metav1.Object, opts *metav1.DeleteOptions) bool {
	if policy == gcUnsupported {
		return false
	}
	if opts != nil && opts.OrphanDependents != nil { //nolint:staticcheck
		return false
	}
	if opts != nil && opts.PropagationPolicy != nil {
		return *opts.PropagationPolicy == metav1.DeletePropagationForeground
	}
	for _, f := range m.GetFinalizers() {
		switch f {
		case metav1.FinalizerDeleteDependents:
			return true
		case metav1.FinalizerOrphanDependents:
			return false
		}
	}
	return false
}

// setGCFinalizers gives m the finalizer its deletion needs from the garbage collector (orphan or
// foregroundDeletion, never both) and reports whether its finalizers changed.
func setGCFinalizers(res *registry.Resource, m metav1.Object, opts *metav1.DeleteOptions) bool {
	policy := defaultGCPolicy(res)
	orphan := shouldOrphan(policy, m, opts)
	foreground := !orphan && shouldDeleteInForeground(policy, m, opts)
	old := m.GetFinalizers()
	next := slices.DeleteFunc(slices.Clone(old), func(f string) bool {
		return (f == metav1.FinalizerOrphanDependents && !orphan) || (f == metav1.FinalizerDeleteDependents && !foreground)
	})
	if orphan && !slices.Contains(next, metav1.FinalizerOrphanDependents) {
		next = append(next, metav1.FinalizerOrphanDependents)
	}
	if foreground && !slices.Contains(next, metav1.FinalizerDeleteDependents) {
		next = append(next, metav1.FinalizerDeleteDependents)
	}
	if slices.Equal(old, next) {
		return false
	}
	m.SetFinalizers(next)
	return true
}
