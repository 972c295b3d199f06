package evaluator

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Arithmetic over resource lists, with upstream's semantics (a missing key is zero where the
// operation needs one, never an error).

// Add returns a + b over the keys of both.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for k, v := range a {
		out[k] = v.DeepCopy()
	}
	for k, v := range b {
		if cur, ok := out[k]; ok {
			cur.Add(v)
			out[k] = cur
		} else {
			out[k] = v.DeepCopy()
		}
	}
	return out
}

// Subtract returns a - b over the keys of both (a key only in b comes out negative).
func Subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Sub(o)
		}
		out[k] = q
	}
	for k, v := range b {
		if _, ok := out[k]; !ok {
			q := v.DeepCopy()
			q.Neg()
			out[k] = q
		}
	}
	return out
}

// SubtractNonNegative returns a - b with every negative result raised to zero: what an update
// charges is never a refund (deletes and shrinks are released by the quota controller).
func SubtractNonNegative(a, b corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(a)+len(b))
	for k, v := range a {
		q := v.DeepCopy()
		if o, ok := b[k]; ok {
			q.Sub(o)
		}
		if q.Sign() > 0 {
			out[k] = q
		} else {
			out[k] = resource.Quantity{Format: v.Format}
		}
	}
	for k, v := range b {
		if _, ok := out[k]; !ok {
			out[k] = resource.Quantity{Format: v.Format}
		}
	}
	return out
}

// Mask returns the entries of list whose names are in names.
func Mask(list corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range names {
		if v, ok := list[n]; ok {
			out[n] = v.DeepCopy()
		}
	}
	return out
}

// LessThanOrEqual tells whether a <= b for every key of b that a has, and lists the keys that
// exceed.
func LessThanOrEqual(a, b corev1.ResourceList) (bool, []corev1.ResourceName) {
	var exceeded []corev1.ResourceName
	for k, limit := range b {
		if v, ok := a[k]; ok && v.Cmp(limit) > 0 {
			exceeded = append(exceeded, k)
		}
	}
	return len(exceeded) == 0, exceeded
}

// Equals tells whether a and b have the same keys with equal quantities.
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		o, ok := b[k]
		if !ok || v.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// Negative lists the names whose quantity is below zero.
func Negative(list corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for k, v := range list {
		if v.Sign() < 0 {
			out = append(out, k)
		}
	}
	return out
}

// RemoveZeros returns list without its zero entries.
func RemoveZeros(list corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range list {
		if !v.IsZero() {
			out[k] = v
		}
	}
	return out
}

// Names returns the names of list.
func Names(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for k := range list {
		out = append(out, k)
	}
	return out
}

// Format prints a list as upstream's quota messages do: name=quantity, sorted by name, joined by
// commas ("pods=1,requests.cpu=500m").
func Format(list corev1.ResourceList) string {
	keys := make([]string, 0, len(list))
	for k := range list {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := list[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ",")
}

// FormatNames prints names sorted and joined by commas.
func FormatNames(names []corev1.ResourceName) string {
	s := make([]string, 0, len(names))
	for _, n := range names {
		s = append(s, string(n))
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func contains(names []corev1.ResourceName, n corev1.ResourceName) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

func intersect(input, allowed []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range input {
		if contains(allowed, n) {
			out = append(out, n)
		}
	}
	return out
}

// addInto adds b into a in place.
func addInto(a, b corev1.ResourceList) {
	for k, v := range b {
		if cur, ok := a[k]; ok {
			cur.Add(v)
			a[k] = cur
		} else {
			a[k] = v.DeepCopy()
		}
	}
}

// maxInto raises each entry of a to b's where b's is larger (adding b's missing keys).
func maxInto(a, b corev1.ResourceList) {
	for k, v := range b {
		if cur, ok := a[k]; !ok || v.Cmp(cur) > 0 {
			a[k] = v.DeepCopy()
		}
	}
}

// maxOf returns the per-key maximum of a and b.
func maxOf(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	addInto(out, a)
	maxInto(out, b)
	return out
}
