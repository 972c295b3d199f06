package apiserver_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

// celGadgetCRD is a kind whose schema has CEL validation rules: a rule on spec with a message, a
// fieldPath and a reason, a messageExpression with reason Forbidden, a transition rule (size is
// immutable), a rule on the status subresource, and an expensive rule bounded by maxItems.
const celGadgetCRD = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"gadgets.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"gadgets","kind":"Gadget"},
    "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object",
          "x-kubernetes-validations":[
            {"rule":"!has(self.minReplicas) || self.minReplicas <= self.replicas","message":"replicas must be at least minReplicas","fieldPath":".replicas"}],
          "properties":{
            "size":{"type":"string","maxLength":16,"x-kubernetes-validations":[{"rule":"self == oldSelf","message":"size is immutable"}]},
            "replicas":{"type":"integer"},
            "minReplicas":{"type":"integer"},
            "mode":{"type":"string","maxLength":16,"x-kubernetes-validations":[
              {"rule":"self != 'legacy'","messageExpression":"'mode ' + self + ' is not allowed'","reason":"FieldValueForbidden"}]},
            "numbers":{"type":"array","maxItems":1000,"items":{"type":"integer"},
              "x-kubernetes-validations":[{"rule":"self.all(x, self.all(y, x + y >= 0))","message":"numbers must not sum below zero"}]}}},
        "status":{"type":"object","properties":{"ready":{"type":"integer"}},
          "x-kubernetes-validations":[{"rule":"self.ready >= 0","message":"ready must not be negative"}]}}}}}]}}`

const gadgets = "/apis/example.com/v1/namespaces/default/gadgets"

func gadget(name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":%q},"spec":%s}`, name, spec)
}

// causes returns an Invalid Status's causes as "field|reason|message".
func causes(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	list, _ := path(r.obj(t), "details.causes").([]any)
	for _, c := range list {
		m := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v|%v|%v", m["field"], m["reason"], m["message"]))
	}
	return out
}

func wantCauses(t *testing.T, r response, want ...string) {
	t.Helper()
	r.status(t, http.StatusUnprocessableEntity, "Invalid")
	got := causes(t, r)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("causes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Issue 32: x-kubernetes-validations rules are evaluated on every write of a custom object
// (create, update, merge patch, apply, status), with upstream's field paths, reasons and
// messages; transition rules see the stored object; rules failing on values an update leaves
// alone are ratcheted; the runtime cost is bounded.
func TestCustomResourceValidationRules(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	establish(t, e, celGadgetCRD, "/apis/example.com/v1", "gadgets")

	must(t, do(t, e, "POST", gadgets, gadget("g1", `{"size":"small","replicas":2,"minReplicas":1,"mode":"fast","numbers":[1,2,3]}`)), http.StatusCreated)

	// Create: every failing rule, one cause each.
	r := do(t, e, "POST", gadgets, gadget("bad", `{"size":"small","replicas":1,"minReplicas":3,"mode":"legacy"}`))
	wantCauses(t, r,
		`spec.replicas|FieldValueInvalid|Invalid value: "object": replicas must be at least minReplicas`,
		`spec.mode|FieldValueForbidden|Forbidden: mode legacy is not allowed`)
	if msg := r.status(t, http.StatusUnprocessableEntity, "Invalid"); !strings.HasPrefix(msg, `Gadget.example.com "bad" is invalid: [`) {
		t.Errorf("message: %s", msg)
	}

	// Update, merge patch and apply: the transition rule sees the stored value.
	cur := must(t, do(t, e, "GET", gadgets+"/g1", nil), http.StatusOK)
	cur["spec"].(map[string]any)["size"] = "large"
	immutable := `spec.size|FieldValueInvalid|Invalid value: "string": size is immutable`
	wantCauses(t, do(t, e, "PUT", gadgets+"/g1", cur), immutable)
	wantCauses(t, do(t, e, "PATCH", gadgets+"/g1", `{"spec":{"size":"large"}}`, "Content-Type", "application/merge-patch+json"), immutable)
	apply := func(spec string) response {
		return do(t, e, "PATCH", gadgets+"/g1?fieldManager=tester&force=true", gadget("g1", spec), "Content-Type", "application/apply-patch+yaml")
	}
	wantCauses(t, apply(`{"size":"large","replicas":2}`), immutable)
	must(t, apply(`{"size":"small","replicas":3}`), http.StatusOK)
	wantCauses(t, do(t, e, "PATCH", gadgets+"/g1", `{"spec":{"minReplicas":5}}`, "Content-Type", "application/merge-patch+json"),
		`spec.replicas|FieldValueInvalid|Invalid value: "object": replicas must be at least minReplicas`)

	// The status subresource: its rules run on status writes.
	wantCauses(t, do(t, e, "PATCH", gadgets+"/g1/status", `{"status":{"ready":-1}}`, "Content-Type", "application/merge-patch+json"),
		`status|FieldValueInvalid|Invalid value: "object": ready must not be negative`)
	must(t, do(t, e, "PATCH", gadgets+"/g1/status", `{"status":{"ready":1}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)

	// Dry-run writes are validated alike.
	wantCauses(t, do(t, e, "POST", gadgets+"?dryRun=All", gadget("dry", `{"replicas":1,"minReplicas":2}`)),
		`spec.replicas|FieldValueInvalid|Invalid value: "object": replicas must be at least minReplicas`)

	// Schema violations that make the object unfit for its rules stop them, as upstream.
	wantCauses(t, do(t, e, "POST", gadgets, gadget("typed", `{"replicas":"two","minReplicas":3}`)),
		`spec.replicas|FieldValueTypeInvalid|Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
		`<nil>|FieldValueInvalid|Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`)

	// Runtime cost: a rule within the definition's estimate that exceeds the per-call limit on
	// this object is stopped and the object refused.
	var nums []string
	for i := 0; i < 1000; i++ {
		nums = append(nums, fmt.Sprint(i))
	}
	r = do(t, e, "POST", gadgets, gadget("costly", `{"numbers":[`+strings.Join(nums, ",")+`]}`))
	if msg := r.status(t, http.StatusUnprocessableEntity, "Invalid"); !strings.Contains(msg, "spec.numbers: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: numbers must not sum below zero") {
		t.Errorf("runtime cost: %s", msg)
	}

	// Ratcheting: a rule added later does not block updates that leave its failing value alone.
	must(t, do(t, e, "POST", gadgets, gadget("g2", `{"size":"small","replicas":8}`)), http.StatusCreated)
	crd := must(t, do(t, e, "GET", crdsPath+"/gadgets.example.com", nil), http.StatusOK)
	replicas := path(crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any), "schema.openAPIV3Schema.properties.spec.properties.replicas").(map[string]any)
	replicas["x-kubernetes-validations"] = []any{map[string]any{"rule": "self <= 5", "message": "at most 5 replicas"}}
	must(t, do(t, e, "PUT", crdsPath+"/gadgets.example.com", crd), http.StatusOK)
	waitFor(t, "the new rule", func() bool {
		return do(t, e, "POST", gadgets+"?dryRun=All", gadget("g3", `{"replicas":8}`)).code == http.StatusUnprocessableEntity
	})
	must(t, do(t, e, "PATCH", gadgets+"/g2", `{"spec":{"mode":"slow"}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	wantCauses(t, do(t, e, "PATCH", gadgets+"/g2", `{"spec":{"replicas":9}}`, "Content-Type", "application/merge-patch+json"),
		`spec.replicas|FieldValueInvalid|Invalid value: "integer": at most 5 replicas`)
}

// Definitions whose rules do not compile or cost too much are refused (422) naming each rule,
// with upstream's messages (the rule shown as upstream's internal ValidationRule, as an upstream
// API server prints it); nothing is stored.
func TestCRDValidationRulesRefused(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	def := func(name, props string) string {
		return fmt.Sprintf(`{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
		  "metadata":{"name":"%ss.example.com"},
		  "spec":{"group":"example.com","scope":"Cluster","names":{"plural":"%ss","kind":"Thing"},
		    "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
		      "spec":{"type":"object","properties":%s}}}}}]}}`, name, name, props)
	}
	const at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].x-kubernetes-validations[0]"
	for _, tc := range []struct {
		name, props string
		want        []string
	}{
		{"compile", `{"list":{"type":"array","maxItems":4,"items":{"type":"string","maxLength":4},"x-kubernetes-validations":[{"rule":"self.nope"}]}}`,
			[]string{at + `.rule|FieldValueInvalid|Invalid value: apiextensions.ValidationRule{Rule:"self.nope", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: type 'list(string)' does not support field selection` +
				"\n | self.nope\n | ....^"}},
		{"message", `{"list":{"type":"array","maxItems":4,"items":{"type":"string","maxLength":4},"x-kubernetes-validations":[{"rule":"true","messageExpression":"1"}]}}`,
			[]string{at + `.messageExpression|FieldValueInvalid|Invalid value: apiextensions.ValidationRule{Rule:"true", Message:"", MessageExpression:"1", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string`}},
		{"cost", `{"list":{"type":"array","items":{"type":"string"},"x-kubernetes-validations":[{"rule":"self.all(x, self.all(y, x == y))"}]}}`,
			[]string{
				at + `.rule|FieldValueForbidden|Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
				at + `.rule|FieldValueForbidden|Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema`,
				`spec.versions[0].schema.openAPIV3Schema|FieldValueForbidden|Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCauses(t, do(t, e, "POST", crdsPath, def(tc.name, tc.props)), tc.want...)
			do(t, e, "GET", crdsPath+"/"+tc.name+"s.example.com", nil).status(t, http.StatusNotFound, "NotFound")
		})
	}
}
