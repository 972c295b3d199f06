package crd

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Ratchet drops the violations an update did not cause: errors at a path whose value (or
// absence) is the same in obj and in old, the stored object. A schema made stricter after objects
// were stored then does not block updates of their other fields, as upstream's validation
// ratcheting allows. Paths are matched by position (list items by index), a subset of
// upstream's correlation, which also matches map-list items by key.
func Ratchet(errs field.ErrorList, obj, old map[string]any) field.ErrorList {
	if old == nil {
		return errs
	}
	var out field.ErrorList
	for _, e := range errs {
		newV, newOK := lookupFieldPath(obj, e.Field)
		oldV, oldOK := lookupFieldPath(old, e.Field)
		if newOK == oldOK && equality.Semantic.DeepEqual(newV, oldV) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// lookupFieldPath finds the value at a field.Path string ("spec.ports[0].name",
// "spec.labels[app]") in a decoded JSON object.
func lookupFieldPath(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, step := range splitFieldPath(path) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[step]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// splitFieldPath splits "a.b[3].c[key]" into a, b, 3, c, key.
func splitFieldPath(path string) []string {
	var steps []string
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				steps = append(steps, part)
				break
			}
			if i > 0 {
				steps = append(steps, part[:i])
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				steps = append(steps, part[i+1:])
				break
			}
			steps = append(steps, part[i+1:i+j])
			part = part[i+j+1:]
		}
	}
	return steps
}
