package generic

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
)

// beforeDelete is upstream's graceful deletion rule (rest.BeforeDelete) for kinds whose strategy
// is a registry.GracefulDeleter: it marks next (a copy of the stored object) and returns whether
// the delete is graceful (next carries the deletionTimestamp and deletionGracePeriodSeconds to
// store) or pending (a graceful deletion with a shorter or equal period is under way: the object
// is answered as it is). opts is the delete's options, a copy the rule may change: a negative
// grace period means 1 second, and the kind fills in its default period.
//
// A first graceful delete sets deletionTimestamp to now plus the period and bumps a generation
// that is counted. An object already being deleted gracefully may only have its period
// shortened (its deletionTimestamp moves by the difference); one being deleted with no period
// left (0 or none) is not graceful, so the delete completes it.
func beforeDelete(res *registry.Resource, next runtime.Object, opts *metav1.DeleteOptions, now time.Time) (graceful, pending bool) {
	m := registry.Meta(next)
	one := int64(1)
	if p := opts.GracePeriodSeconds; p != nil && *p < 0 {
		opts.GracePeriodSeconds = &one
	}
	if p := m.GetDeletionGracePeriodSeconds(); p != nil && *p < 0 {
		m.SetDeletionGracePeriodSeconds(&one)
	}
	g, ok := res.Strategy().(registry.GracefulDeleter)
	if !ok {
		return false, false
	}
	if ts := m.GetDeletionTimestamp(); ts != nil {
		current := m.GetDeletionGracePeriodSeconds()
		if current == nil || *current == 0 {
			return false, false
		}
		if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds >= *current {
			opts.GracePeriodSeconds = current
			return false, true
		}
		period := *opts.GracePeriodSeconds
		moved := metav1.NewTime(ts.Add(-time.Duration(*current) * time.Second).Add(time.Duration(period) * time.Second))
		m.SetDeletionTimestamp(&moved)
		m.SetDeletionGracePeriodSeconds(&period)
		return true, false
	}
	if !g.CheckGracefulDelete(next, opts) || opts.GracePeriodSeconds == nil {
		return false, false
	}
	period := *opts.GracePeriodSeconds
	at := metav1.NewTime(now.Add(time.Duration(period) * time.Second))
	m.SetDeletionTimestamp(&at)
	m.SetDeletionGracePeriodSeconds(&period)
	if gen := m.GetGeneration(); gen > 0 {
		m.SetGeneration(gen + 1)
	}
	return true, false
}

// noGracePeriodLeft tells whether an object being deleted waits for no grace period: none was
// given (deletions held by finalizers) or it was 0.
func noGracePeriodLeft(m metav1.Object) bool {
	p := m.GetDeletionGracePeriodSeconds()
	return p == nil || *p == 0
}
