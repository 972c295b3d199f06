package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func rule(ops []string, groups, versions, resources []string, scope string) admissionregistrationv1.RuleWithOperations {
	r := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
	for _, o := range ops {
		r.Operations = append(r.Operations, admissionregistrationv1.OperationType(o))
	}
	if scope != "" {
		s := admissionregistrationv1.ScopeType(scope)
		r.Scope = &s
	}
	return r
}

func attrsFor(op admission.Operation, group, version, resource, sub, namespace string) *admission.Attributes {
	return &admission.Attributes{Operation: op, Resource: schema.GroupVersionResource{Group: group, Version: version, Resource: resource},
		Subresource: sub, Namespace: namespace, Name: "x"}
}

// Upstream's rules.Matcher, with Platform's group names.
func TestRuleMatching(t *testing.T) {
	networking := naming.Group("networking.k8s.io")
	all := []string{"*"}
	for _, tc := range []struct {
		name  string
		rule  admissionregistrationv1.RuleWithOperations
		attrs *admission.Attributes
		exact bool
		want  bool
	}{
		{"operation listed", rule([]string{"CREATE"}, []string{""}, all, []string{"pods"}, ""), attrsFor(admission.Create, "", "v1", "pods", "", "ns"), false, true},
		{"operation not listed", rule([]string{"UPDATE", "DELETE"}, []string{""}, all, []string{"pods"}, ""), attrsFor(admission.Create, "", "v1", "pods", "", "ns"), false, false},
		{"operation *", rule(all, []string{""}, all, []string{"pods"}, ""), attrsFor(admission.Connect, "", "v1", "pods", "exec", "ns"), false, false},
		{"CONNECT on pods/exec", rule([]string{"CONNECT"}, []string{""}, all, []string{"pods/exec"}, ""), attrsFor(admission.Connect, "", "v1", "pods", "exec", "ns"), false, true},
		{"upstream group name matches Platform's", rule(all, []string{"networking.k8s.io"}, all, []string{"ingresses"}, ""), attrsFor(admission.Create, networking, "v1", "ingresses", "", "ns"), false, true},
		{"Platform's group name", rule(all, []string{networking}, all, []string{"ingresses"}, ""), attrsFor(admission.Create, networking, "v1", "ingresses", "", "ns"), false, true},
		{"other group", rule(all, []string{"apps"}, all, []string{"ingresses"}, ""), attrsFor(admission.Create, networking, "v1", "ingresses", "", "ns"), false, false},
		{"group *", rule(all, all, all, []string{"deployments"}, ""), attrsFor(admission.Create, "apps", "v1", "deployments", "", "ns"), false, true},
		{"Exact: version must match", rule(all, []string{"apps"}, []string{"v1beta1"}, []string{"deployments"}, ""), attrsFor(admission.Create, "apps", "v1", "deployments", "", "ns"), true, false},
		{"Exact: version matches", rule(all, []string{"apps"}, []string{"v1"}, []string{"deployments"}, ""), attrsFor(admission.Create, "apps", "v1", "deployments", "", "ns"), true, true},
		{"Equivalent: another version of the same resource", rule(all, []string{"apps"}, []string{"v1beta1"}, []string{"deployments"}, ""), attrsFor(admission.Create, "apps", "v1", "deployments", "", "ns"), false, true},
		{"* matches resources, not subresources", rule(all, []string{""}, all, all, ""), attrsFor(admission.Update, "", "v1", "pods", "status", "ns"), false, false},
		{"* matches a resource", rule(all, []string{""}, all, all, ""), attrsFor(admission.Update, "", "v1", "pods", "", "ns"), false, true},
		{"*/* matches subresources", rule(all, []string{""}, all, []string{"*/*"}, ""), attrsFor(admission.Update, "", "v1", "pods", "status", "ns"), false, true},
		{"pods/* matches pods' subresources", rule(all, []string{""}, all, []string{"pods/*"}, ""), attrsFor(admission.Update, "", "v1", "pods", "binding", "ns"), false, true},
		{"pods/* also matches pods itself (upstream's matcher: * matches the empty subresource)", rule(all, []string{""}, all, []string{"pods/*"}, ""), attrsFor(admission.Update, "", "v1", "pods", "", "ns"), false, true},
		{"pods/* does not match services", rule(all, []string{""}, all, []string{"pods/*"}, ""), attrsFor(admission.Update, "", "v1", "services", "status", "ns"), false, false},
		{"*/status matches any status", rule(all, []string{"*"}, all, []string{"*/status"}, ""), attrsFor(admission.Update, "apps", "v1", "deployments", "status", "ns"), false, true},
		{"*/status does not match scale", rule(all, []string{"*"}, all, []string{"*/status"}, ""), attrsFor(admission.Update, "apps", "v1", "deployments", "scale", "ns"), false, false},
		{"pods does not match pods/status", rule(all, []string{""}, all, []string{"pods"}, ""), attrsFor(admission.Update, "", "v1", "pods", "status", "ns"), false, false},
		{"scope Namespaced: namespaced request", rule(all, all, all, all, "Namespaced"), attrsFor(admission.Create, "", "v1", "pods", "", "ns"), false, true},
		{"scope Namespaced: cluster request", rule(all, all, all, all, "Namespaced"), attrsFor(admission.Create, "", "v1", "nodes", "", ""), false, false},
		{"scope Namespaced: a Namespace is cluster-scoped", rule(all, all, all, all, "Namespaced"), attrsFor(admission.Create, "", "v1", "namespaces", "", "ns"), false, false},
		{"scope Cluster: a Namespace", rule(all, all, all, all, "Cluster"), attrsFor(admission.Create, "", "v1", "namespaces", "", "ns"), false, true},
		{"scope Cluster: cluster request", rule(all, all, all, all, "Cluster"), attrsFor(admission.Create, "", "v1", "nodes", "", ""), false, true},
		{"scope Cluster: namespaced request", rule(all, all, all, all, "Cluster"), attrsFor(admission.Create, "", "v1", "pods", "", "ns"), false, false},
		{"scope *", rule(all, all, all, all, "*"), attrsFor(admission.Create, "", "v1", "pods", "", "ns"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ruleMatches(&tc.rule, tc.attrs, tc.exact); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Upstream's namespace and object matchers, through the dispatcher (without calls).
func TestSelectors(t *testing.T) {
	e := newEnv(t)
	e.objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}})
	d, err := newDispatcher("test", false, e.deps, nil, source{list: func() []configuration { return nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prodSel := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	appSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
	nsAttrs := func(op admission.Operation, obj *corev1.Namespace) *admission.Attributes {
		a := attrsFor(op, "", "v1", "namespaces", "", "")
		a.Name = obj.Name
		a.Kind = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
		if op == admission.Delete {
			a.OldObject = obj
		} else {
			a.Object = obj
		}
		return a
	}
	podIn := func(ns string, labels map[string]string) *admission.Attributes {
		p := newPod("p", labels)
		p.Namespace = ns
		return createPod(p)
	}
	for _, tc := range []struct {
		name    string
		ns, obj *metav1.LabelSelector
		attrs   *admission.Attributes
		want    bool
		wantErr string
	}{
		{"namespaceSelector matches the namespace's labels", prodSel, nil, podIn("prod", nil), true, ""},
		{"namespaceSelector does not match", prodSel, nil, podIn("default", nil), false, ""},
		{"namespace unknown: 404", prodSel, nil, podIn("nowhere", nil), false, "not found"},
		{"empty namespaceSelector matches without a lookup", &metav1.LabelSelector{}, nil, podIn("nowhere", nil), true, ""},
		{"namespaceSelector: no effect on cluster-scoped objects", prodSel, nil, attrsFor(admission.Create, "", "v1", "nodes", "", ""), true, ""},
		{"namespaceSelector on a Namespace being created: its own labels", prodSel, nil,
			nsAttrs(admission.Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"env": "prod"}}}), true, ""},
		{"namespaceSelector on a Namespace being deleted: the stored labels", prodSel, nil,
			nsAttrs(admission.Delete, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}), true, ""},
		{"objectSelector matches the object", nil, appSel, podIn("default", map[string]string{"app": "web"}), true, ""},
		{"objectSelector does not match", nil, appSel, podIn("default", map[string]string{"app": "db"}), false, ""},
		{"objectSelector matches the old object (delete)", nil, appSel, func() *admission.Attributes {
			a := podIn("default", map[string]string{"app": "web"})
			a.Operation, a.OldObject, a.Object = admission.Delete, a.Object, nil
			return a
		}(), true, ""},
		{"objectSelector: either object suffices", nil, appSel, func() *admission.Attributes {
			a := podIn("default", map[string]string{"app": "db"})
			a.Operation, a.OldObject = admission.Update, newPod("p", map[string]string{"app": "web"})
			return a
		}(), true, ""},
		{"objectSelector: an object without metadata never matches", nil, appSel, func() *admission.Attributes {
			a := podIn("default", nil)
			a.Object = &unstructured.Unstructured{}
			a.Object.(*unstructured.Unstructured).SetLabels(nil)
			return a
		}(), false, ""},
		{"objectSelector: no object never matches", nil, appSel, func() *admission.Attributes {
			a := podIn("default", nil)
			a.Object = nil
			return a
		}(), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook("cfg", 0, "sel.example.com", []admissionregistrationv1.RuleWithOperations{rule([]string{"*"}, []string{"*"}, []string{"*"}, []string{"*"}, "")},
				nil, nil, tc.ns, tc.obj, nil, nil, []string{"v1"}, admissionregistrationv1.WebhookClientConfig{}, nil)
			st := &requestState{a: tc.attrs, d: d}
			got, err := d.shouldCall(context.Background(), h, tc.attrs, st)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !apierrors.IsNotFound(err) {
					t.Fatalf("got %v %v, want %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// The selectors with a real webhook: only requests they select reach it.
func TestSelectorsCallWebhook(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	e := newEnv(t)
	e.objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}})
	e.addMutating("cfg", hookSpec{name: "sel.example.com", url: srv.url(),
		nsSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		objSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   int64
	}{{"prod", map[string]string{"app": "web"}, 1}, {"prod", map[string]string{"app": "db"}, 0}, {"default", map[string]string{"app": "web"}, 0}} {
		p := newPod("p", tc.labels)
		p.Namespace = tc.ns
		before := srv.calls.Load()
		if err := e.run(createPod(p)); err != nil {
			t.Fatal(err)
		}
		if got := srv.calls.Load() - before; got != tc.want {
			t.Errorf("namespace %s labels %v: %d calls, want %d", tc.ns, tc.labels, got, tc.want)
		}
	}
}

// matchConditions: every condition true calls the webhook, any false skips it, an error follows
// the failurePolicy (Fail: 403 naming the object; Ignore: skip).
func TestMatchConditions(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	cond := func(name, expr string) admissionregistrationv1.MatchCondition {
		return admissionregistrationv1.MatchCondition{Name: name, Expression: expr}
	}
	for _, tc := range []struct {
		name     string
		conds    []admissionregistrationv1.MatchCondition
		policy   admissionregistrationv1.FailurePolicyType
		wantCall bool
		wantErr  string
	}{
		{"all true", []admissionregistrationv1.MatchCondition{
			cond("name", "object.metadata.name == 'p'"),
			cond("user", "request.userInfo.username == 'alice' && 'devs' in request.userInfo.groups"),
			cond("op", "request.operation == 'CREATE' && request.resource.resource == 'pods' && oldObject == null"),
		}, admissionregistrationv1.Fail, true, ""},
		{"one false", []admissionregistrationv1.MatchCondition{cond("name", "object.metadata.name == 'p'"), cond("ns", "request.namespace == 'kube'")},
			admissionregistrationv1.Fail, false, ""},
		{"false wins over an error", []admissionregistrationv1.MatchCondition{cond("err", "object.spec.nothing == 1"), cond("no", "false")},
			admissionregistrationv1.Fail, false, ""},
		{"error under Fail", []admissionregistrationv1.MatchCondition{cond("err", "object.spec.nothing == 1")}, admissionregistrationv1.Fail, false,
			`pods "p" is forbidden: expression 'object.spec.nothing == 1' resulted in error: no such key: nothing`},
		{"error under Ignore", []admissionregistrationv1.MatchCondition{cond("err", "object.spec.nothing == 1")}, admissionregistrationv1.Ignore, false, ""},
		{"stored condition that no longer compiles", []admissionregistrationv1.MatchCondition{cond("bad", "object.metadata.name")}, admissionregistrationv1.Fail, false,
			"compilation error: must evaluate to bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.addValidating("cfg", hookSpec{name: "cond.example.com", url: srv.url(), conditions: tc.conds, failure: tc.policy})
			before := srv.calls.Load()
			err := e.run(createPod(newPod("p", nil)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || statusOf(t, err).ErrStatus.Code != 403 {
					t.Fatalf("got %v, want 403 %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if called := srv.calls.Load() > before; called != tc.wantCall {
				t.Errorf("called = %v, want %v", called, tc.wantCall)
			}
		})
	}
}

// A custom resource (unstructured) is patched and matched like a built-in kind.
func TestCustomResource(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return jsonPatch(map[string]any{"op": "add", "path": "/spec/size", "value": 3})
	})
	e := newEnv(t)
	e.addMutating("cfg", hookSpec{name: "cr.example.com", url: srv.url(),
		rules:      []admissionregistrationv1.RuleWithOperations{rule([]string{"CREATE"}, []string{"example.com"}, []string{"v1"}, []string{"widgets"}, "")},
		conditions: []admissionregistrationv1.MatchCondition{{Name: "color", Expression: "object.spec.color == 'red'"}}})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"color": "red"}}}
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	attrs := &admission.Attributes{Operation: admission.Create, Kind: gvk, Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Namespace: "default", Name: "w", Object: obj, UID: "cr-1"}
	if err := e.run(attrs); err != nil {
		t.Fatal(err)
	}
	got := attrs.Object.(*unstructured.Unstructured).Object["spec"].(map[string]any)["size"]
	if got != int64(3) {
		t.Errorf("size = %#v, want 3", got)
	}
	// A typed object of another group is not matched.
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default"}}
	da := &admission.Attributes{Operation: admission.Create, Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Resource: appsv1.SchemeGroupVersion.WithResource("deployments"),
		Namespace: "default", Name: "d", Object: d, UID: "d-1"}
	before := srv.calls.Load()
	if err := e.run(da); err != nil || srv.calls.Load() != before {
		t.Fatalf("err %v calls %d", err, srv.calls.Load()-before)
	}
}

// matchConditions' authorizer asks the authorization service for the requesting user, with
// upstream's group names read as Platform's.
func TestMatchConditionsAuthorizer(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	var asked []admission.AuthorizationAttributes
	e := newEnv(t)
	e.deps = admissiontest.Deps(e.objects, admissiontest.AuthorizerFunc(func(_ context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
		asked = append(asked, a)
		return a.User != nil && a.User.Name == "admin", "", nil
	}))
	// Skip the webhook for users who may update roles (upstream's documented example).
	e.addValidating("cfg", hookSpec{name: "authz.example.com", url: srv.url(), conditions: []admissionregistrationv1.MatchCondition{
		{Name: "rbac", Expression: "!authorizer.group('rbac.authorization.k8s.io').resource('roles').check('update').allowed()"},
	}})
	for _, tc := range []struct {
		user     string
		wantCall bool
	}{{"alice", true}, {"admin", false}} {
		attrs := createPod(newPod("p", nil))
		attrs.User.Name = tc.user
		before := srv.calls.Load()
		if err := e.run(attrs); err != nil {
			t.Fatal(err)
		}
		if called := srv.calls.Load() > before; called != tc.wantCall {
			t.Errorf("%s: called %v, want %v", tc.user, called, tc.wantCall)
		}
	}
	if len(asked) != 2 || asked[0].APIGroup != naming.Group("rbac.authorization.k8s.io") || asked[0].Resource != "roles" || asked[0].Verb != "update" ||
		!asked[0].ResourceRequest || asked[0].User.Name != "alice" {
		t.Errorf("authorization asked %+v", asked)
	}
}
