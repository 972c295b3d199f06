package policy

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// env is a test's objects and the plugin over them.
type env struct {
	t         *testing.T
	objects   *admissiontest.Objects
	resources *admissiontest.Resources
	deps      admission.Deps
	plugin    *Plugin
}

var widgetKind = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Limit"}

func newEnv(t *testing.T, authz admission.Authorizer) *env {
	t.Helper()
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "test"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
	)
	deps := admissiontest.Deps(objects, authz)
	res := &admissiontest.Resources{Kinds: map[schema.GroupVersionKind]admission.Mapping{
		widgetKind: {Kind: widgetKind, Resource: widgetKind.GroupVersion().WithResource("limits")},
	}}
	deps.Resources = res
	return &env{t: t, objects: objects, resources: res, deps: deps, plugin: New(deps, nil)}
}

// policy stores a policy for config map creates and updates with the given validations.
func (e *env) policy(name string, edit func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: uuid.NewString()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy: ptr(admissionregistrationv1.Equivalent),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			},
		}}
	if edit != nil {
		edit(&p.Spec)
	}
	e.objects.PolicyList.Add(p)
}

func (e *env) binding(name, policy string, edit func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)) {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: uuid.NewString()},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if edit != nil {
		edit(&b.Spec)
	}
	e.objects.PolicyBindingList.Add(b)
}

func (e *env) validate(a *admission.Attributes) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.plugin.Validate(ctx, a)
}

var (
	cmKind     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	cmResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func configMap(ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
}

func createCM(cm *corev1.ConfigMap) *admission.Attributes {
	return &admission.Attributes{
		Operation: admission.Create, Kind: cmKind, Resource: cmResource, RequestKind: cmKind, RequestResource: cmResource,
		Namespace: cm.Namespace, Name: cm.Name, Object: cm, Options: []byte(`{"kind":"CreateOptions","apiVersion":"meta.platform.io/v1"}`),
		User: &admission.User{Name: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"}}, UID: uuid.NewString(),
	}
}

func statusOf(t *testing.T, err error) *apierrors.StatusError {
	t.Helper()
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("error %T %v is not a StatusError", err, err)
	}
	return se
}

func ptr[T any](v T) *T { return &v }

func validation(expr, msg string) admissionregistrationv1.Validation {
	return admissionregistrationv1.Validation{Expression: expr, Message: msg}
}

// Deny: upstream's message and code (422 unless a reason says otherwise), message expressions
// over variables, the first failing validation of the first policy in name order.
func TestDeny(t *testing.T) {
	e := newEnv(t, nil)
	e.policy("b-size", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Variables = []admissionregistrationv1.Variable{{Name: "keys", Expression: "has(object.data) ? size(object.data) : 0"}}
		s.Validations = []admissionregistrationv1.Validation{{
			Expression:        "variables.keys <= 2",
			MessageExpression: "'too many keys: ' + string(variables.keys)",
		}}
	})
	e.policy("a-name", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{
			validation("object.metadata.name != 'forbidden'", "the name is taken"),
			{Expression: "!object.metadata.name.startsWith('secret')", Message: "no secrets", Reason: ptr(metav1.StatusReasonForbidden)},
		}
	})
	e.binding("size", "b-size", nil)
	e.binding("name", "a-name", nil)

	if err := e.validate(createCM(configMap("default", "ok", nil, map[string]string{"a": "1"}))); err != nil {
		t.Fatalf("allowed create: %v", err)
	}
	err := e.validate(createCM(configMap("default", "big", nil, map[string]string{"a": "1", "b": "2", "c": "3"})))
	se := statusOf(t, err)
	if se.ErrStatus.Code != http.StatusUnprocessableEntity || se.ErrStatus.Reason != metav1.StatusReasonInvalid ||
		se.ErrStatus.Message != "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'b-size' with binding 'size' denied request: too many keys: 3" {
		t.Errorf("denial: %d %s %q", se.ErrStatus.Code, se.ErrStatus.Reason, se.ErrStatus.Message)
	}
	se = statusOf(t, e.validate(createCM(configMap("default", "secret-x", nil, nil))))
	if se.ErrStatus.Code != http.StatusForbidden || !strings.HasSuffix(se.ErrStatus.Message, "ValidatingAdmissionPolicy 'a-name' with binding 'name' denied request: no secrets") {
		t.Errorf("denial with reason Forbidden: %d %q", se.ErrStatus.Code, se.ErrStatus.Message)
	}
	// Both policies fail: the first in name order answers.
	se = statusOf(t, e.validate(createCM(configMap("default", "forbidden", nil, map[string]string{"a": "1", "b": "2", "c": "3"}))))
	if !strings.Contains(se.ErrStatus.Message, "'a-name' with binding 'name' denied request: the name is taken") {
		t.Errorf("two denials: %q", se.ErrStatus.Message)
	}
	// Other kinds and operations are not matched.
	del := createCM(configMap("default", "forbidden", nil, nil))
	del.Operation, del.OldObject, del.Object = admission.Delete, del.Object, nil
	if err := e.validate(del); err != nil {
		t.Errorf("a delete the rules do not name: %v", err)
	}
	// A policy without a binding does nothing; a binding without its policy neither.
	e.policy("c-unbound", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{validation("false", "never")}
	})
	e.binding("orphan", "missing", nil)
	if err := e.validate(createCM(configMap("default", "ok", nil, nil))); err != nil {
		t.Errorf("unbound policy: %v", err)
	}
}

// Warn and Audit: a warning with upstream's text, and the validation-failure audit annotation
// (Platform's group suffix) with upstream's value; auditAnnotations under "<policy>/<key>".
func TestWarnAndAudit(t *testing.T) {
	e := newEnv(t, nil)
	e.policy("labels", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{
			validation("has(object.metadata.labels) && 'team' in object.metadata.labels", "a team label is required"),
		}
		s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "owner", ValueExpression: "'created by ' + request.userInfo.username"}}
	})
	e.binding("warn-audit", "labels", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
	})
	a := createCM(configMap("default", "nolabel", nil, nil))
	if err := e.validate(a); err != nil {
		t.Fatalf("warn and audit do not deny: %v", err)
	}
	if w := a.Warnings(); len(w) != 1 || w[0] != "Validation failed for ValidatingAdmissionPolicy 'labels' with binding 'warn-audit': a team label is required" {
		t.Errorf("warnings = %q", w)
	}
	ann := a.Annotations()
	key := "validation.policy.admission." + naming.GroupSuffix + "/validation_failure"
	var failures []map[string]any
	if err := json.Unmarshal([]byte(ann[key]), &failures); err != nil {
		t.Fatalf("annotation %s = %q: %v (all: %v)", key, ann[key], err, ann)
	}
	want := []map[string]any{{"message": "a team label is required", "policy": "labels", "binding": "warn-audit", "expressionIndex": float64(0),
		"validationActions": []any{"Warn", "Audit"}}}
	if !reflect.DeepEqual(failures, want) {
		t.Errorf("validation failure annotation = %v, want %v", failures, want)
	}
	if ann["labels/owner"] != "created by alice" {
		t.Errorf("audit annotation labels/owner = %q", ann["labels/owner"])
	}
	// A passing object: no warning, no failure annotation, the audit annotation still.
	a = createCM(configMap("default", "labelled", map[string]string{"team": "x"}, nil))
	if err := e.validate(a); err != nil || len(a.Warnings()) != 0 || a.Annotations()[key] != "" || a.Annotations()["labels/owner"] == "" {
		t.Errorf("passing object: %v %q %v", err, a.Warnings(), a.Annotations())
	}
}

// Params: a cluster-scoped custom kind by name, namespaced config maps in the request's
// namespace or a named one, by selector (every match is evaluated), parameterNotFoundAction.
func TestParams(t *testing.T) {
	e := newEnv(t, nil)
	limit := func(name string, max int64, labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Limit",
			"metadata": map[string]any{"name": name, "labels": labels}, "spec": map[string]any{"maxKeys": max}}}
	}
	e.resources.Add(widgetKind.GroupVersion().WithResource("limits"), limit("small", 1, nil))
	e.policy("max-keys", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Limit"}
		s.Validations = []admissionregistrationv1.Validation{{Expression: "!has(object.data) || size(object.data) <= params.spec.maxKeys",
			MessageExpression: "'at most ' + string(params.spec.maxKeys) + ' keys (' + params.metadata.name + ')'"}}
		s.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}
	})
	e.binding("max-keys", "max-keys", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Name: "small", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}
	})
	two := map[string]string{"a": "1", "b": "2"}
	se := statusOf(t, e.validate(createCM(configMap("default", "two", nil, two))))
	if !strings.HasSuffix(se.ErrStatus.Message, "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys' denied request: at most 1 keys (small)") {
		t.Errorf("cluster-scoped param: %q", se.ErrStatus.Message)
	}
	if err := e.validate(createCM(configMap("prod", "two", nil, two))); err != nil {
		t.Errorf("namespaceSelector excludes prod: %v", err)
	}

	// Namespaced params: config maps, in the request's namespace (no paramRef.namespace).
	e.policy("allowed-names", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "true"}}
		s.Validations = []admissionregistrationv1.Validation{{Expression: "object.metadata.name in params.data.names.split(',')",
			MessageExpression: "'not in ' + params.metadata.namespace + '/' + params.metadata.name"}}
	})
	e.binding("allowed-names", "allowed-names", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Name: "names", ParameterNotFoundAction: ptr(admissionregistrationv1.AllowAction)}
	})
	e.resources.Add(cmResource, configMap("prod", "names", nil, map[string]string{"names": "a,b"}))
	checked := map[string]string{"checked": "true"}
	if err := e.validate(createCM(configMap("prod", "a", checked, nil))); err != nil {
		t.Errorf("name in the param: %v", err)
	}
	se = statusOf(t, e.validate(createCM(configMap("prod", "c", checked, nil))))
	if !strings.HasSuffix(se.ErrStatus.Message, "'allowed-names' with binding 'allowed-names' denied request: not in prod/names") {
		t.Errorf("namespaced param: %q", se.ErrStatus.Message)
	}
	// No param in default: Allow lets it through; Deny (the first binding) refuses.
	if err := e.validate(createCM(configMap("default", "c", checked, nil))); err != nil {
		t.Errorf("missing param with action Allow: %v", err)
	}
	e.binding("allowed-names", "allowed-names", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Name: "names", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}
	})
	se = statusOf(t, e.validate(createCM(configMap("default", "c", checked, nil))))
	if !strings.HasSuffix(se.ErrStatus.Message, "'allowed-names' with binding 'allowed-names' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction") {
		t.Errorf("missing param with action Deny: %q", se.ErrStatus.Message)
	}
	// paramRef.namespace and a selector: every matching param is evaluated.
	e.resources.Add(cmResource,
		configMap("policies", "one", map[string]string{"set": "names"}, map[string]string{"names": "a,b,c"}),
		configMap("policies", "two", map[string]string{"set": "names"}, map[string]string{"names": "c,d"}))
	e.binding("allowed-names", "allowed-names", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Namespace: "policies", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "names"}},
			ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}
	})
	if err := e.validate(createCM(configMap("default", "c", checked, nil))); err != nil {
		t.Errorf("in both selected params: %v", err)
	}
	if err := e.validate(createCM(configMap("default", "a", checked, nil))); err == nil || !strings.Contains(err.Error(), "not in policies/two") {
		t.Errorf("in one selected param only: %v", err)
	}
}

// failurePolicy: a param kind that is not served is a configuration error; Fail refuses the
// requests the policy matches, Ignore lets them through. A runtime error likewise.
func TestFailurePolicy(t *testing.T) {
	e := newEnv(t, nil)
	e.policy("unknown-param", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "nowhere.example.com/v1", Kind: "Nothing"}
		s.Validations = []admissionregistrationv1.Validation{validation("true", "")}
	})
	e.binding("unknown-param", "unknown-param", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		s.ParamRef = &admissionregistrationv1.ParamRef{Name: "x", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}
	})
	se := statusOf(t, e.validate(createCM(configMap("default", "x", nil, nil))))
	if se.ErrStatus.Code != http.StatusUnprocessableEntity ||
		!strings.HasSuffix(se.ErrStatus.Message, "ValidatingAdmissionPolicy 'unknown-param' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'nowhere.example.com/v1, Kind=Nothing'") {
		t.Errorf("configuration error under Fail: %d %q", se.ErrStatus.Code, se.ErrStatus.Message)
	}
	e.policy("unknown-param", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.FailurePolicy = ptr(admissionregistrationv1.Ignore)
		s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "nowhere.example.com/v1", Kind: "Nothing"}
		s.Validations = []admissionregistrationv1.Validation{validation("true", "")}
	})
	if err := e.validate(createCM(configMap("default", "x", nil, nil))); err != nil {
		t.Errorf("configuration error under Ignore: %v", err)
	}
	// An evaluation error (no such key) follows the failurePolicy too.
	e.policy("runtime", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{validation("object.data['missing'] == 'x'", "")}
	})
	e.binding("runtime", "runtime", nil)
	if err := e.validate(createCM(configMap("default", "y", nil, map[string]string{"a": "b"}))); err == nil || !strings.Contains(err.Error(), "expression 'object.data['missing'] == 'x'' resulted in error: no such key: missing") {
		t.Errorf("runtime error under Fail: %v", err)
	}
}

// Matching: matchConditions (with the authorizer), excludeResourceRules, resourceNames,
// bindings' matchResources, rules written with upstream's group names, and the exempt policy
// kinds.
func TestMatching(t *testing.T) {
	var asked []admission.AuthorizationAttributes
	e := newEnv(t, admissiontest.AuthorizerFunc(func(_ context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
		asked = append(asked, a)
		return a.User.Name == "admin", "", nil
	}))
	e.policy("deny-all", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.MatchConditions = []admissionregistrationv1.MatchCondition{
			{Name: "not-admins", Expression: "!authorizer.group('rbac.authorization.k8s.io').resource('roles').namespace(object.metadata.namespace).check('escalate').allowed()"},
			{Name: "not-kept", Expression: "!has(object.metadata.labels) || !('keep' in object.metadata.labels)"},
		}
		s.MatchConstraints.ResourceRules[0].APIGroups = []string{"", "rbac.authorization.k8s.io"}
		s.MatchConstraints.ResourceRules[0].Resources = []string{"configmaps", "roles"}
		s.MatchConstraints.ExcludeResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{ResourceNames: []string{"excluded"},
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"*"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}}
		s.Validations = []admissionregistrationv1.Validation{validation("false", "denied")}
	})
	e.binding("deny-all", "deny-all", func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
		// (As the gateway defaults them: selectors that select everything, Equivalent.)
		s.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{},
			MatchPolicy: ptr(admissionregistrationv1.Equivalent), ObjectSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "free", Operator: metav1.LabelSelectorOpDoesNotExist}}}}
	})
	if err := e.validate(createCM(configMap("default", "x", nil, nil))); err == nil {
		t.Error("a matched config map was allowed")
	}
	if len(asked) != 1 || asked[0].APIGroup != naming.Group("rbac.authorization.k8s.io") || asked[0].Verb != "escalate" || asked[0].Namespace != "default" || asked[0].User.Name != "alice" {
		t.Errorf("authorizer asked %+v", asked)
	}
	admin := createCM(configMap("default", "x", nil, nil))
	admin.User = &admission.User{Name: "admin"}
	for what, a := range map[string]*admission.Attributes{
		"matchConditions (authorizer)": admin,
		"matchConditions (labels)":     createCM(configMap("default", "x", map[string]string{"keep": ""}, nil)),
		"excludeResourceRules":         createCM(configMap("default", "excluded", nil, nil)),
		"binding's objectSelector":     createCM(configMap("default", "x", map[string]string{"free": ""}, nil)),
	} {
		if err := e.validate(a); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// A Role, under Platform's group, is matched by the rule naming upstream's.
	roleKind := schema.GroupVersionKind{Group: naming.Group("rbac.authorization.k8s.io"), Version: "v1", Kind: "Role"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r"}}
	role.GetObjectKind().SetGroupVersionKind(roleKind)
	ra := &admission.Attributes{Operation: admission.Create, Kind: roleKind, Resource: roleKind.GroupVersion().WithResource("roles"),
		Namespace: "default", Name: "r", Object: role, User: &admission.User{Name: "alice"}}
	if err := e.validate(ra); err == nil {
		t.Error("a role was not matched by the rule with upstream's group name")
	}
	// The policies and bindings themselves are exempt.
	e.policy("everything", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.MatchConstraints.ResourceRules[0].APIGroups = []string{"*"}
		s.MatchConstraints.ResourceRules[0].Resources = []string{"*"}
		s.Validations = []admissionregistrationv1.Validation{validation("false", "denied")}
	})
	e.binding("everything", "everything", nil)
	pk := schema.GroupVersionKind{Group: naming.Group("admissionregistration.k8s.io"), Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}
	b, _ := e.objects.PolicyBindingList.Get("", "everything")
	if err := e.validate(&admission.Attributes{Operation: admission.Create, Kind: pk, Resource: pk.GroupVersion().WithResource("validatingadmissionpolicybindings"),
		Name: "everything", Object: b, User: &admission.User{Name: "alice"}}); err != nil {
		t.Errorf("a binding write was evaluated: %v", err)
	}
}

// The interest is the bound policies' rules, groups in Platform's names; a new binding is
// signalled through Changed.
func TestInterest(t *testing.T) {
	e := newEnv(t, nil)
	e.policy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.MatchConstraints.ResourceRules[0].APIGroups = []string{"apps"}
		s.MatchConstraints.ResourceRules[0].Resources = []string{"deployments", "deployments/scale"}
		s.MatchConstraints.ResourceRules[0].Scope = ptr(admissionregistrationv1.NamespacedScope)
		s.Validations = []admissionregistrationv1.Validation{validation("true", "")}
	})
	if got := e.plugin.Interests(); len(got) != 0 {
		t.Errorf("interest of an unbound policy = %+v", got)
	}
	changed := e.plugin.Changed()
	e.binding("p", "p", nil)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a new binding was not signalled")
	}
	want := []admission.Interest{{Operations: []admission.Operation{admission.Create, admission.Update}, APIGroups: []string{"apps"},
		Resources: []string{"deployments", "deployments/scale"}, Scope: "Namespaced"}}
	if got := e.plugin.Interests(); !reflect.DeepEqual(got, want) {
		t.Errorf("interest = %+v, want %+v", got, want)
	}
	// A bound policy without resource rules matches every request.
	e.policy("p", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.MatchConstraints.ResourceRules = nil
		s.Validations = []admissionregistrationv1.Validation{validation("true", "")}
	})
	if got := e.plugin.Interests(); len(got) != 1 || got[0].Resources[0] != "*/*" || got[0].APIGroups[0] != "*" {
		t.Errorf("interest of a policy without rules = %+v", got)
	}
}

var _ runtime.Object = (*unstructured.Unstructured)(nil)
