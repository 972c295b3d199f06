package matchconditions

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Compilation as upstream's CEL compiler for matchConditions: boolean result, declared
// variables, the request's declared fields, the base environment's libraries.
func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		wantErr string
	}{
		{"true", ""},
		{"object.metadata.name == 'x'", ""},
		{"has(object.metadata.labels) && object.metadata.labels['a'] == 'b'", ""},
		{"oldObject == null", ""},
		{"request.userInfo.username.startsWith('system:')", ""},
		{"request.kind.kind == 'Pod' && request.resource.resource == 'pods' && request.subResource == ''", ""},
		{"request.dryRun || request.options.dryRun == ['All']", ""},
		{"'x'.lowerAscii() == 'x'", ""},                   // strings extension
		{"sets.contains([1, 2], [1])", ""},                // sets extension
		{"object.?spec.?replicas.orValue(1) > 0", ""},     // optional types
		{"[1, 2].all(i, v, i < v)", ""},                   // two-variable comprehensions
		{"1 < 2.0", ""},                                   // cross-type numeric comparison
		{"object.metadata.name", "must evaluate to bool"}, // dyn is not bool
		{"1 + 1", "must evaluate to bool"},                // int
		{"object.metadata.name ==", "compilation failed: ERROR: <input>:1:24: Syntax error"},
		{"params.x == 1", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'"},
		{"authorizer.group('').resource('pods').check('get').allowed()", ""},
		{"authorizer.requestResource.check('update').allowed()", ""},
		{"authorizer.path('/healthz').check('get').allowed() || authorizer.path('/x').check('get').errored()", ""},
		{"authorizer.serviceAccount('ns', 'sa').group('apps').resource('deployments').subresource('scale').namespace('n').name('d').check('update').reason() == ''", ""},
		{"authorizer.group('').resource('pods').check('get')", "must evaluate to bool"},
		{"authorizer.group('').resource('pods').fieldSelector('a=b').check('list').allowed()", "undeclared reference to 'fieldSelector'"},
		{"request.uid == 'x'", "compilation failed: undefined field 'uid'"},
		{"request.userInfo.name == 'x'", "compilation failed: undefined field 'name'"},
		{"has(request.object)", "undefined field 'object'"},
		{"[1, 'a'] == []", "compilation failed"},                  // heterogeneous literal
		{"duration('1x') > duration('1s')", "compilation failed"}, // literal validators
		{"[1].exists(request, request == 1)", ""},                 // a shadowing variable is not the request
	} {
		_, err := Compile(tc.expr)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %v, want %q", tc.expr, err, tc.wantErr)
		}
	}
}

// Evaluation as upstream's matcher: false wins, errors otherwise, cost limits enforced.
func TestMatch(t *testing.T) {
	// contains() costs a tenth of the string's length.
	in := Input{
		Object:  map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"big": strings.Repeat("a", 11_000_000)}},
		Request: map[string]any{"operation": "CREATE", "userInfo": map[string]any{"username": "alice", "groups": []any{"devs"}}},
	}
	cond := func(name, expr string) admissionregistrationv1.MatchCondition {
		return admissionregistrationv1.MatchCondition{Name: name, Expression: expr}
	}
	for _, tc := range []struct {
		name    string
		conds   []admissionregistrationv1.MatchCondition
		matches bool
		failed  string
		wantErr string
	}{
		{"no conditions", nil, true, "", ""},
		{"all true", []admissionregistrationv1.MatchCondition{cond("a", "object.metadata.name == 'p'"), cond("b", "'devs' in request.userInfo.groups")}, true, "", ""},
		{"first false", []admissionregistrationv1.MatchCondition{cond("a", "true"), cond("b", "request.operation == 'DELETE'"), cond("c", "false")}, false, "b", ""},
		{"false beats an error", []admissionregistrationv1.MatchCondition{cond("err", "object.nothing == 1"), cond("no", "false")}, false, "no", ""},
		{"error", []admissionregistrationv1.MatchCondition{cond("err", "object.nothing == 1")}, false, "",
			"expression 'object.nothing == 1' resulted in error: no such key: nothing"},
		{"compile error at run time", []admissionregistrationv1.MatchCondition{cond("bad", "object.x +")}, false, "", "compilation error: compilation failed"},
		{"per-expression cost limit", []admissionregistrationv1.MatchCondition{cond("cost", "!object.spec.big.contains('q')")}, false, "",
			"cost limit exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := NewMatcher(tc.conds).Match(context.Background(), in)
			if tc.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, want error %q", res, tc.wantErr)
				}
				return
			}
			if res.Err != nil || res.Matches != tc.matches || res.FailedCondition != tc.failed {
				t.Fatalf("got %+v", res)
			}
		})
	}
}

// The authorizer: checks go to Authorize with the request's resource for requestResource, a
// service account when asked; a check costs 350,000, so three exceed one expression's limit.
func TestAuthorizer(t *testing.T) {
	var got []Check
	authorize := func(_ context.Context, c Check) (bool, string, error) {
		got = append(got, c)
		switch {
		case c.Resource == "broken":
			return false, "", errors.New("authorizer unavailable")
		case c.ServiceAccountName != "":
			return c.Verb == "get", "sa rule", nil
		}
		return c.Verb != "delete", "rbac", nil
	}
	in := Input{Authorize: authorize, RequestResource: RequestResource{Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "d"}}
	for _, tc := range []struct {
		expr    string
		matches bool
		want    Check
		wantErr string
	}{
		{"authorizer.requestResource.check('update').allowed()", true,
			Check{ResourceRequest: true, Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "d"}, ""},
		{"!authorizer.group('rbac.authorization.k8s.io').resource('roles').namespace('x').check('delete').allowed()", true,
			Check{ResourceRequest: true, Verb: "delete", Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: "x"}, ""},
		{"authorizer.path('/healthz').check('get').reason() == 'rbac'", true, Check{Path: "/healthz", Verb: "get"}, ""},
		{"authorizer.serviceAccount('kube', 'builder').group('').resource('pods').check('get').allowed()", true,
			Check{ServiceAccountNamespace: "kube", ServiceAccountName: "builder", ResourceRequest: true, Verb: "get", Resource: "pods"}, ""},
		{"authorizer.group('').resource('broken').check('get').errored() && authorizer.group('').resource('broken').check('get').error() == 'authorizer unavailable'", true,
			Check{ResourceRequest: true, Verb: "get", Resource: "broken"}, ""},
		{"authorizer.serviceAccount('Not A Namespace', 'x').group('').resource('pods').check('get').allowed()", false, Check{}, "Invalid service account namespace"},
		{"authorizer.path(' ').check('get').allowed()", false, Check{}, "path must not be empty"},
		{"authorizer.group('').resource('a').check('get').allowed() && authorizer.group('').resource('b').check('get').allowed() && authorizer.group('').resource('c').check('get').allowed()",
			false, Check{}, "cost limit exceeded"},
	} {
		got = nil
		res := NewMatcher([]admissionregistrationv1.MatchCondition{{Name: "c", Expression: tc.expr}}).Match(context.Background(), in)
		if tc.wantErr != "" {
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) {
				t.Errorf("%s: got %+v, want %q", tc.expr, res, tc.wantErr)
			}
			continue
		}
		if res.Err != nil || res.Matches != tc.matches || len(got) == 0 || got[0] != tc.want {
			t.Errorf("%s: got %+v, checks %+v, want %+v", tc.expr, res, got, tc.want)
		}
	}
	// Without an authorizer the variables are absent.
	res := NewMatcher([]admissionregistrationv1.MatchCondition{{Name: "c", Expression: "authorizer.path('/x').check('get').allowed()"}}).Match(context.Background(), Input{})
	if res.Err == nil {
		t.Errorf("no authorizer: %+v", res)
	}
}

// The whole webhook's conditions share upstream's 10,000,000 budget.
func TestMatchBudget(t *testing.T) {
	// Each condition costs 900,000 (contains() costs a tenth of the string's length), under the
	// 1,000,000 per-call limit; twelve exceed the 10,000,000 budget.
	obj := map[string]any{"s": strings.Repeat("a", 9_000_000)}
	var conds []admissionregistrationv1.MatchCondition
	for i := 0; i < 12; i++ {
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: string(rune('a' + i)), Expression: "!object.s.contains('q')"})
	}
	if res := NewMatcher(conds[:11]).Match(context.Background(), Input{Object: obj}); res.Err != nil || !res.Matches {
		t.Fatalf("eleven conditions: %+v", res)
	}
	res := NewMatcher(conds).Match(context.Background(), Input{Object: obj})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "running out of cost budget") {
		t.Fatalf("twelve conditions: %+v", res)
	}
}
