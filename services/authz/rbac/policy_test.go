package rbac

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"platform.io/services/authz/authorizer"
)

// TestDumpedPolicy loads what --dump-policy prints (Policy and Data written as files, the way
// `opa eval -d policy.rego -d data.json` loads them) into a fresh OPA and checks every rule case
// decides the same from the dumped text and InputJSON as Authorize does.
func TestDumpedPolicy(t *testing.T) {
	a := newAuthorizer(t, fixture())
	data, err := a.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ast.ParseModuleWithOpts("policy.rego", a.Policy(), ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
		t.Fatalf("the policy is not Rego v1: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(a.Policy()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prepare := func(query string) rego.PreparedEvalQuery {
		q, err := rego.New(
			rego.SetRegoVersion(ast.RegoV1),
			rego.Load([]string{dir}, nil),
			rego.Query(query),
			// Strict mode (as `opa check --strict`): no unused variables, imports or shadowing.
			rego.Strict(true),
		).PrepareForEval(ctx)
		if err != nil {
			t.Fatalf("opa could not load the dumped policy and data: %v", err)
		}
		return q
	}
	decision, allow := prepare(DecisionQuery), prepare("data.rbac.allow")

	for _, c := range ruleCases() {
		t.Run(c.rule, func(t *testing.T) {
			raw, err := InputJSON(c.at)
			if err != nil {
				t.Fatal(err)
			}
			var input map[string]any
			if err := json.Unmarshal(raw, &input); err != nil {
				t.Fatal(err)
			}
			rs, err := decision.Eval(ctx, rego.EvalInput(input))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := rs[0].Expressions[0].Value.(map[string]any)
			if !ok {
				t.Fatalf("decision %#v", rs[0].Expressions[0].Value)
			}
			want := map[string]any{"allowed": c.allow, "reason": c.reason, "nameIndependent": c.nameIndependent}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("dumped policy: %s=%v, want %v", k, got[k], v)
				}
			}
			fromGo, err := a.Authorize(ctx, c.at)
			if err != nil {
				t.Fatal(err)
			}
			if (fromGo.Decision == authorizer.Allow) != got["allowed"] || fromGo.Reason != got["reason"] || fromGo.NameIndependent != got["nameIndependent"] {
				t.Errorf("Authorize %+v differs from the dumped policy %v", fromGo, got)
			}
			rs, err = allow.Eval(ctx, rego.EvalInput(input))
			if err != nil {
				t.Fatal(err)
			}
			if rs[0].Expressions[0].Value != c.allow {
				t.Errorf("data.rbac.allow = %v, want %v", rs[0].Expressions[0].Value, c.allow)
			}
		})
	}
}

// TestDataDocument checks the data document is the documented index: subjects keyed
// "user:<name>" and "group:<name>", scopes "*" and namespaces, service accounts as users, the
// binding and role names in every grant, missing roles absent.
func TestDataDocument(t *testing.T) {
	a := newAuthorizer(t, fixture())
	raw, err := a.Data()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Subjects map[string]map[string]struct {
			Resources       map[string]map[string]map[string]map[string]json.RawMessage `json:"resources"`
			NonResourceURLs map[string]map[string]map[string]json.RawMessage            `json:"nonResourceURLs"`
		} `json:"subjects"`
		Grants []struct {
			Binding struct{ Kind, Name, Namespace string }
			Role    struct{ Kind, Name string }
			Subject struct{ Kind, Name string }
			Reason  string
		} `json:"grants"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var id int
	entry := doc.Subjects["user:system:serviceaccount:team-a:deployer"]["team-a"].Resources["update"]["apps"]["deployments/scale"]["any"]
	if err := json.Unmarshal(entry, &id); err != nil || id < 0 || id >= len(doc.Grants) {
		t.Fatalf("the deployer's entry is missing or malformed: %s: %v", entry, err)
	}
	grant := doc.Grants[id]
	if grant.Binding.Kind != "RoleBinding" || grant.Binding.Name != "deployer" || grant.Binding.Namespace != "team-a" ||
		grant.Role.Kind != "Role" || grant.Role.Name != "scale-role" || grant.Subject.Kind != "ServiceAccount" || grant.Subject.Name != "deployer/team-a" ||
		grant.Reason != `RBAC: allowed by RoleBinding "deployer/team-a" of Role "scale-role" to ServiceAccount "deployer/team-a"` {
		t.Errorf("grant %+v", grant)
	}
	var names map[string]int
	if err := json.Unmarshal(doc.Subjects["group:readers"]["team-a"].Resources["get"][""]["secrets"]["names"], &names); err != nil || len(names) != 2 {
		t.Errorf("resourceNames s1, s2 of group readers: %v, %v", names, err)
	}
	if _, ok := doc.Subjects["group:admins"]["*"].Resources["*"]["*"]["*"]["any"]; !ok {
		t.Error(`cluster-admin-like grant of group "admins" missing under scope "*"`)
	}
	if _, ok := doc.Subjects["group:system:authenticated"]["*"].NonResourceURLs["get"]["prefixes"]["/logs/"]; !ok {
		t.Error(`"/logs/*" is not indexed as the prefix "/logs/"`)
	}
	if _, ok := doc.Subjects["group:system:authenticated"]["*"].NonResourceURLs["post"]["prefixes"]["/metrics"]; !ok {
		t.Error(`"/metrics**" is not indexed as the prefix "/metrics"`)
	}
	for _, absent := range []string{"user:mallory", "user:carol", "user:*x", "user:system:serviceaccount::nobody"} {
		if _, ok := doc.Subjects[absent]; ok {
			t.Errorf("%s holds grants, but its only bindings grant nothing", absent)
		}
	}
	if strings.Contains(string(raw), "does-not-exist") || bytes.Contains(raw, []byte(`"nope"`)) {
		t.Error("bindings to missing roles are in the data")
	}
}
