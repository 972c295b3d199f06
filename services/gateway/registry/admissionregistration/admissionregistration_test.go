package admissionregistration_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/admissionregistration"
	"platform.io/services/gateway/registry/builtin"
)

// policies returns the ValidatingAdmissionPolicy strategy over the real registry, in process.
func policies(t *testing.T) registry.Strategy {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Resource(schema.GroupVersionResource{Group: naming.Group("admissionregistration.k8s.io"), Version: "v1", Resource: "validatingadmissionpolicies"})
	if !ok || !res.HasSubresource("status") {
		t.Fatal("validatingadmissionpolicies are not served with a status subresource")
	}
	return admissionregistration.NewPolicy(builtin.New(res, builtin.NewShared(reg.Scheme)), reg, func(string, ...any) {})
}

func policy(validations ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}},
			}}},
			Validations: validations,
		}}
}

// Type checking: status.typeChecking holds upstream's warnings for expressions that do not
// check against the matched kinds' schemas (and the param kind's), with observedGeneration;
// a write that does not change the spec keeps the status, one that does checks again.
func TestPolicyTypeChecking(t *testing.T) {
	st := policies(t)
	p := policy(
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <= int(params.data.max)"},
		admissionregistrationv1.Validation{Expression: "object.spec.replicas.size() > 0", MessageExpression: "string(object.spec.nosuchfield)"},
	)
	p.Status.ObservedGeneration = 7 // a client's status is dropped on create
	st.Default(p)
	st.PrepareForCreate(context.Background(), p)
	if errs := st.Validate(p, nil); len(errs) != 0 {
		t.Fatalf("valid policy refused: %v", errs)
	}
	if p.Status.ObservedGeneration != 1 || p.Status.TypeChecking == nil {
		t.Fatalf("status after create: %+v", p.Status)
	}
	w := p.Status.TypeChecking.ExpressionWarnings
	if len(w) != 2 || w[0].FieldRef != "spec.validations[1].expression" || w[1].FieldRef != "spec.validations[1].messageExpression" {
		t.Fatalf("warnings: %+v", w)
	}
	if !strings.Contains(w[0].Warning, "apps/v1, Kind=Deployment") || !strings.Contains(w[0].Warning, "found no matching overload for 'size'") ||
		!strings.Contains(w[1].Warning, "undefined field 'nosuchfield'") {
		t.Errorf("warnings: %q %q", w[0].Warning, w[1].Warning)
	}

	// Labels only: the spec is the same, the status is kept.
	edit := p.DeepCopy()
	edit.Labels = map[string]string{"a": "b"}
	edit.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	next, err := st.PrepareForUpdate("", edit, p)
	if err != nil {
		t.Fatal(err)
	}
	if n := next.(*admissionregistrationv1.ValidatingAdmissionPolicy); n.Status.ObservedGeneration != 1 || len(n.Status.TypeChecking.ExpressionWarnings) != 2 {
		t.Errorf("status after a label change: %+v", n.Status)
	}
	// A fixed spec: a new generation, checked again, no warnings.
	fixed := p.DeepCopy()
	fixed.Spec.Validations = fixed.Spec.Validations[:1]
	next, err = st.PrepareForUpdate("", fixed, p)
	if err != nil {
		t.Fatal(err)
	}
	if n := next.(*admissionregistrationv1.ValidatingAdmissionPolicy); n.Generation != 2 || n.Status.ObservedGeneration != 2 || n.Status.TypeChecking == nil || len(n.Status.TypeChecking.ExpressionWarnings) != 0 {
		t.Errorf("status after a fix: generation %d %+v", n.Generation, n.Status)
	}
}

// Validation on write: upstream's required fields, compile errors with CEL's message, the
// binding's rules.
func TestPolicyValidation(t *testing.T) {
	st := policies(t)
	bad := policy(admissionregistrationv1.Validation{Expression: "object.spec.replicas >", Message: "two\nlines"})
	bad.Spec.MatchConstraints.ResourceRules = nil
	bad.Spec.ParamKind.Kind = ""
	st.Default(bad)
	errs := st.Validate(bad, nil)
	got := errs.ToAggregate().Error()
	for _, want := range []string{
		"spec.paramKind.kind: Required value",
		"spec.matchConstraints.resourceRules: Required value",
		"spec.validations[0].expression: Invalid value: \"object.spec.replicas >\": compilation failed: ERROR: <input>:1:23: Syntax error",
		"spec.validations[0].message: Invalid value: \"two\\nlines\": message must not contain line breaks",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors: %s", len(errs), got)
	}
	empty := policy()
	st.Default(empty)
	if got := st.Validate(empty, nil).ToAggregate().Error(); !strings.Contains(got, "spec.validations: Required value: validations or auditAnnotations must contain at least one item") {
		t.Errorf("no validations: %s", got)
	}

	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "x", Selector: &metav1.LabelSelector{}},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Warn, admissionregistrationv1.Deny},
		}}
	got = admissionregistration.New(nil).Validate(binding, nil).ToAggregate().Error()
	for _, want := range []string{
		"spec.policyName: Required value",
		"spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
		"spec.paramRef.parameterNotFoundAction: Required value",
		"spec.validationActions[2]: Duplicate value: \"Deny\"",
		"must not contain both Deny and Warn",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("binding errors lack %q:\n%s", want, got)
		}
	}
}
