package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// warningLog records the Warning headers a client receives.
type warningLog struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningLog) has(text string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.seen {
		if s == text {
			return true
		}
	}
	return false
}

// vapEnv is one namespace of a stack, with clients, for one policy test.
type vapEnv struct {
	t        *testing.T
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	warnings *warningLog
	ns       string
	ctx      context.Context
}

func newVAPEnv(t *testing.T, s *stack.Stack) *vapEnv {
	t.Helper()
	cfg := restConfig(t, s, "e2e-vap-admin")
	w := &warningLog{}
	cfg.WarningHandler = w
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, dyn, "e2e-vap-")
	return &vapEnv{t: t, kube: kube, dyn: dyn, warnings: w, ns: ns, ctx: ctxFor(t, 90*time.Second)}
}

// policy creates a policy (named after the namespace) for config map creates and updates in the
// env's namespace, with the given spec edits; it is deleted at the end of the test.
func (e *vapEnv) policy(name string, edit func(*admissionregistrationv1.ValidatingAdmissionPolicySpec)) *admissionregistrationv1.ValidatingAdmissionPolicy {
	e.t.Helper()
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name + "." + e.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}},
			},
		}}
	if edit != nil {
		edit(&p.Spec)
	}
	created, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating policy %s: %v", p.Name, err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	return created
}

// bind creates a binding of the policy with the given actions (and edits).
func (e *vapEnv) bind(policy *admissionregistrationv1.ValidatingAdmissionPolicy, actions []admissionregistrationv1.ValidationAction,
	edit func(*admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec)) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	e.t.Helper()
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: actions}}
	if edit != nil {
		edit(&b.Spec)
	}
	created, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(e.ctx, b, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating binding %s: %v", b.Name, err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
	})
	return created
}

// createCM creates a config map; err is the API's answer.
func (e *vapEnv) createCM(name string, labels, data map[string]string) error {
	_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}, metav1.CreateOptions{})
	return err
}

// until creates config maps named <name>-<i> (with labels and data) until check accepts the
// answer: the admission service sees new policies, bindings and params through its watches, and
// the gateway the new interest through its stream, milliseconds later.
func (e *vapEnv) until(what, name string, labels, data map[string]string, check func(error) bool) error {
	e.t.Helper()
	var err error
	stack.Eventually(e.t, 10*time.Second, what, func() error {
		name := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
		if err = e.createCM(name, labels, data); check(err) {
			return nil
		}
		return fmt.Errorf("last answer: %v", err)
	})
	return err
}

func isCode(code int32) func(error) bool {
	return func(err error) bool { return statusCode(err) == code }
}

func keys(n int) map[string]string {
	out := map[string]string{}
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("k%d", i)] = "v"
	}
	return out
}

func denied(policy, binding, msg string) string {
	return fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, msg)
}

// ValidatingAdmissionPolicies on the shared split stack (gateway, admission service and storage
// in their own processes), each case in a namespace of its own with policies selecting it.
func TestValidatingAdmissionPolicy(t *testing.T) {
	s := useShared(t)
	logsOnFailure(t, s, "admission")

	t.Run("DenyWithMessageExpression", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		p := e.policy("max-keys", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Variables = []admissionregistrationv1.Variable{{Name: "n", Expression: "has(object.data) ? size(object.data) : 0"}}
			s.Validations = []admissionregistrationv1.Validation{
				{Expression: "variables.n <= 2", MessageExpression: "'at most 2 keys, got ' + string(variables.n)"},
				{Expression: "!object.metadata.name.startsWith('forbidden')", Message: "no forbidden names", Reason: ptrTo(metav1.StatusReasonForbidden)},
			}
		})
		b := e.bind(p, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, nil)
		err := e.until("the policy denies three keys", "big", nil, keys(3), isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), denied(p.Name, b.Name, "at most 2 keys, got 3")) || !apierrors.IsInvalid(err) {
			t.Errorf("denial: %v", err)
		}
		if err := e.createCM("two", nil, keys(2)); err != nil {
			t.Errorf("two keys: %v", err)
		}
		err = e.createCM("forbidden-x", nil, nil)
		if statusCode(err) != http.StatusForbidden || !strings.Contains(err.Error(), denied(p.Name, b.Name, "no forbidden names")) {
			t.Errorf("denial with reason Forbidden: %d %v", statusCode(err), err)
		}
		if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, "forbidden-x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a denied object was stored: %v", err)
		}
		// Updates are matched too.
		cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, "two", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = keys(4)
		if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Update(e.ctx, cm, metav1.UpdateOptions{}); statusCode(err) != http.StatusUnprocessableEntity {
			t.Errorf("update to four keys: %v", err)
		}
	})

	t.Run("Warn", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		p := e.policy("team-label", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.Validations = []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels) && 'team' in object.metadata.labels",
				MessageExpression: "'config map ' + object.metadata.name + ' has no team label'"}}
		})
		b := e.bind(p, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}, nil)
		want := func(name string) string {
			return fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': config map %s has no team label", p.Name, b.Name, name)
		}
		stack.Eventually(t, 10*time.Second, "the warning of the policy", func() error {
			name := fmt.Sprintf("nolabel-%d", time.Now().UnixNano())
			if err := e.createCM(name, nil, nil); err != nil {
				return err // Warn never denies
			}
			if !e.warnings.has(want(name)) {
				return fmt.Errorf("no warning for %s yet (seen %q)", name, e.warnings.seen)
			}
			return nil
		})
		if err := e.createCM("labelled", map[string]string{"team": "a"}, nil); err != nil || e.warnings.has(want("labelled")) {
			t.Errorf("a labelled config map: %v", err)
		}
	})

	t.Run("ClusterScopedParams", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		// A cluster-scoped custom kind holds the limits.
		group := "vap.e2e.example.com"
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crdsGVR.GroupVersion().String(), "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "limits." + group},
			"spec": map[string]any{
				"group": group, "scope": "Cluster",
				"names": map[string]any{"plural": "limits", "singular": "limit", "kind": "Limit", "listKind": "LimitList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object", "properties": map[string]any{
						"maxKeys": map[string]any{"type": "integer"}}}}}}}},
			},
		}}
		createEstablished(t, e.ctx, e.dyn, crd)
		t.Cleanup(func() {
			_ = e.dyn.Resource(crdsGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
		})
		limits := e.dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "limits"})
		limitName := "small-" + e.ns
		if _, err := limits.Create(e.ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Limit",
			"metadata": map[string]any{"name": limitName}, "spec": map[string]any{"maxKeys": int64(1)}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = limits.Delete(context.Background(), limitName, metav1.DeleteOptions{}) })
		p := e.policy("limit", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: group + "/v1", Kind: "Limit"}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "!has(object.data) || size(object.data) <= params.spec.maxKeys",
				MessageExpression: "'at most ' + string(params.spec.maxKeys) + ' keys (' + params.metadata.name + ')'"}}
		})
		b := e.bind(p, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef = &admissionregistrationv1.ParamRef{Name: limitName, ParameterNotFoundAction: ptrTo(admissionregistrationv1.DenyAction)}
		})
		err := e.until("the cluster-scoped param's limit", "two", nil, keys(2), isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), denied(p.Name, b.Name, fmt.Sprintf("at most 1 keys (%s)", limitName))) {
			t.Errorf("denial: %v", err)
		}
		// The param is followed: a larger limit lets two keys through.
		if _, err := limits.Patch(e.ctx, limitName, types.MergePatchType, []byte(`{"spec":{"maxKeys":5}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.until("the raised limit", "two", nil, keys(2), func(err error) bool { return err == nil })
		// parameterNotFoundAction: Deny refuses when the param is gone, Allow lets through.
		if err := limits.Delete(e.ctx, limitName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = e.until("the missing param", "any", nil, nil, isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), denied(p.Name, b.Name, "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")) {
			t.Errorf("missing param with Deny: %v", err)
		}
		b, err = e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(e.ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Spec.ParamRef.ParameterNotFoundAction = ptrTo(admissionregistrationv1.AllowAction)
		if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(e.ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.until("parameterNotFoundAction Allow", "any", nil, keys(3), func(err error) bool { return err == nil })
	})

	t.Run("NamespacedParams", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		// The param: a config map in the request's namespace (not itself checked: no label).
		if err := e.createCM("allowed-names", nil, map[string]string{"names": "a,b"}); err != nil {
			t.Fatal(err)
		}
		p := e.policy("names", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
			s.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"checked": "true"}}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "object.metadata.name.split('-')[0] in params.data.names.split(',')",
				MessageExpression: "'not listed in ' + params.metadata.namespace + '/' + params.metadata.name"}}
		})
		b := e.bind(p, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, func(s *admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) {
			s.ParamRef = &admissionregistrationv1.ParamRef{Name: "allowed-names", ParameterNotFoundAction: ptrTo(admissionregistrationv1.DenyAction)}
		})
		checked := map[string]string{"checked": "true"}
		err := e.until("the namespaced param", "c", checked, nil, isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), denied(p.Name, b.Name, "not listed in "+e.ns+"/allowed-names")) {
			t.Errorf("denial: %v", err)
		}
		if err := e.createCM("a-1", checked, nil); err != nil {
			t.Errorf("a listed name: %v", err)
		}
		if err := e.kube.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "allowed-names", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = e.until("the deleted param", "a", checked, nil, isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), "no params found for policy binding with `Deny` parameterNotFoundAction") {
			t.Errorf("missing param with Deny: %v", err)
		}
	})

	t.Run("MatchConditions", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		p := e.policy("locked", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "not-exempt", Expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"},
				{Name: "not-system", Expression: "!request.userInfo.username.startsWith('system:')"},
			}
			s.Validations = []admissionregistrationv1.Validation{{Expression: "false", Message: "this namespace is locked"}}
		})
		b := e.bind(p, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, nil)
		err := e.until("the lock", "x", nil, nil, isCode(http.StatusUnprocessableEntity))
		if !strings.Contains(err.Error(), denied(p.Name, b.Name, "this namespace is locked")) {
			t.Errorf("denial: %v", err)
		}
		if err := e.createCM("exempt", map[string]string{"exempt": ""}, nil); err != nil {
			t.Errorf("a config map the matchConditions exclude: %v", err)
		}
	})

	t.Run("TypeChecking", func(t *testing.T) {
		t.Parallel()
		e := newVAPEnv(t, s)
		p := e.policy("typed", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
			s.MatchConstraints.ResourceRules[0].APIGroups = []string{"apps"}
			s.MatchConstraints.ResourceRules[0].Resources = []string{"deployments"}
			s.Validations = []admissionregistrationv1.Validation{
				{Expression: "object.spec.replicas <= 5"},
				{Expression: "object.spec.replicas.size() > 0", MessageExpression: "string(object.spec.nosuchfield)"},
			}
		})
		var got *admissionregistrationv1.ValidatingAdmissionPolicy
		stack.Eventually(t, 10*time.Second, "status.typeChecking", func() error {
			var err error
			if got, err = e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.ctx, p.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation || got.Status.TypeChecking == nil {
				return fmt.Errorf("status %+v at generation %d", got.Status, got.Generation)
			}
			return nil
		})
		w := got.Status.TypeChecking.ExpressionWarnings
		if len(w) != 2 || w[0].FieldRef != "spec.validations[1].expression" || w[1].FieldRef != "spec.validations[1].messageExpression" ||
			!strings.Contains(w[0].Warning, "apps/v1, Kind=Deployment: ERROR: <input>:1:26: found no matching overload for 'size' applied to 'int.()'") ||
			!strings.Contains(w[1].Warning, "undefined field 'nosuchfield'") {
			t.Fatalf("expression warnings: %+v", w)
		}
		// Fixed: a new generation, checked again, no warnings.
		got.Spec.Validations = got.Spec.Validations[:1]
		fixed, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(e.ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stack.Eventually(t, 10*time.Second, "status.typeChecking of the fixed policy", func() error {
			if fixed, err = e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.ctx, p.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if fixed.Status.ObservedGeneration != 2 || fixed.Status.TypeChecking == nil || len(fixed.Status.TypeChecking.ExpressionWarnings) != 0 {
				return fmt.Errorf("status %+v at generation %d", fixed.Status, fixed.Generation)
			}
			return nil
		})
		// An expression that does not compile is refused on write.
		bad := fixed.DeepCopy()
		bad.Spec.Validations[0].Expression = "object.spec.replicas <"
		if _, err := e.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(e.ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "spec.validations[0].expression") || !strings.Contains(err.Error(), "compilation failed") {
			t.Errorf("a policy that does not compile: %v", err)
		}
	})
}

// The all-in-one (admission in process) with an audit log: a denial, and the Audit action's
// validation-failure annotation and the policy's audit annotations in the create's audit event.
func TestValidatingAdmissionPolicyAllInOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyFile, logPath := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policyFile, []byte(`apiVersion: `+naming.Group("audit.k8s.io")+`/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: ["configmaps"]}]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stack.Options{Mode: stack.AllInOne, GatewayArgs: []string{"--audit-policy-file=" + policyFile, "--audit-log-path=" + logPath}})
	e := newVAPEnv(t, s)

	deny := e.policy("deny", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{{Expression: "!object.metadata.name.startsWith('denied')", Message: "denied names"}}
	})
	db := e.bind(deny, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, nil)
	err := e.until("the denial", "denied", nil, nil, isCode(http.StatusUnprocessableEntity))
	if !strings.Contains(err.Error(), denied(deny.Name, db.Name, "denied names")) {
		t.Errorf("denial: %v", err)
	}

	audited := e.policy("audited", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{{Expression: "has(object.metadata.labels)", Message: "config maps should have labels"}}
		s.AuditAnnotations = []admissionregistrationv1.AuditAnnotation{{Key: "creator", ValueExpression: "request.userInfo.username"}}
	})
	// Warn beside Audit: the warning tells when the policy is in effect.
	ab := e.bind(audited, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}, nil)
	stack.Eventually(t, 10*time.Second, "the audited policy in effect", func() error {
		name := fmt.Sprintf("audited-%d", time.Now().UnixNano())
		if err := e.createCM(name, nil, nil); err != nil {
			return err // Warn and Audit never deny
		}
		if !e.warnings.has(fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': config maps should have labels", audited.Name, ab.Name)) {
			return fmt.Errorf("no warning for %s yet", name)
		}
		return nil
	})
	failureKey := "validation.policy.admission." + naming.GroupSuffix + "/validation_failure"
	// (The audit log names no object on creates at level Metadata: the event is the create in
	// the namespace that carries the policy's annotations.)
	stack.Eventually(t, 10*time.Second, "the audit event of an audited create", func() error {
		for _, ev := range readAuditLog(t, logPath) {
			if ev.Verb != "create" || ev.ObjectRef == nil || ev.ObjectRef.Namespace != e.ns || ev.Stage != "ResponseComplete" || ev.Annotations[failureKey] == "" {
				continue
			}
			var failures []map[string]any
			if err := json.Unmarshal([]byte(ev.Annotations[failureKey]), &failures); err != nil {
				t.Fatalf("annotations %v: %v", ev.Annotations, err)
			}
			if len(failures) != 1 || failures[0]["policy"] != audited.Name || failures[0]["binding"] != ab.Name || failures[0]["expressionIndex"] != float64(0) ||
				failures[0]["message"] != "config maps should have labels" || fmt.Sprint(failures[0]["validationActions"]) != "[Warn Audit]" {
				t.Fatalf("validation failure annotation: %v", failures)
			}
			if ev.Annotations[audited.Name+"/creator"] != "e2e-vap-admin" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusCreated {
				t.Fatalf("audit event: %+v", ev)
			}
			return nil
		}
		return fmt.Errorf("no audit event of an audited create yet")
	})
}
