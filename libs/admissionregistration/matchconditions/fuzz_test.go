package matchconditions

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// FuzzCompileAndMatch compiles arbitrary expressions (configurations are user input) and
// evaluates the ones that compile: never a panic, and a compiled expression evaluates to a
// result or an error.
func FuzzCompileAndMatch(f *testing.F) {
	for _, s := range []string{"true", "object.metadata.name == 'x'", "request.userInfo.groups.exists(g, g == 'a')",
		"authorizer.requestResource.check('get').allowed()", "[1,2].all(i, v, i < v)", "object.?spec.orValue(1) == 1"} {
		f.Add(s)
	}
	in := Input{Object: map[string]any{"metadata": map[string]any{"name": "x"}}, Request: map[string]any{"userInfo": map[string]any{"groups": []any{"a"}}},
		Authorize: func(context.Context, Check) (bool, string, error) { return true, "", nil }}
	f.Fuzz(func(t *testing.T, expr string) {
		if _, err := Compile(expr); err != nil {
			return
		}
		NewMatcher([]admissionregistrationv1.MatchCondition{{Name: "f", Expression: expr}}).Match(context.Background(), in)
	})
}
