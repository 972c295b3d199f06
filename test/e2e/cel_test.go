package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"platform.io/test/stack"
)

// Issue 32: CEL validation rules (x-kubernetes-validations) of custom resources, with
// client-go's dynamic client, which reads a refusal's causes as it reads upstream's.

// gizmoCRD is a definition in group whose rules cover a message with fieldPath, a
// messageExpression with reason Forbidden, a transition rule, upstream's quantity and CIDR
// libraries and a rule on the status subresource.
func gizmoCRD(group string) *unstructured.Unstructured {
	return crdFromYAML(`
metadata:
  name: gizmos.` + group + `
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "!has(self.minReplicas) || self.minReplicas <= self.replicas"
              message: replicas must be at least minReplicas
              fieldPath: .replicas
            properties:
              replicas: {type: integer}
              minReplicas: {type: integer}
              size:
                type: string
                maxLength: 16
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: size is immutable}
              mode:
                type: string
                maxLength: 16
                x-kubernetes-validations:
                - rule: self != 'legacy'
                  messageExpression: "'mode ' + self + ' is not allowed'"
                  reason: FieldValueForbidden
              memory:
                type: string
                maxLength: 16
                x-kubernetes-validations:
                - {rule: "isQuantity(self) && quantity(self).isLessThan(quantity('1Gi'))", message: memory must be below 1Gi}
              network:
                type: string
                maxLength: 64
                x-kubernetes-validations:
                - {rule: "isCIDR(self) && cidr(self).ip().family() == 4", message: network must be an IPv4 CIDR}
          status:
            type: object
            properties:
              ready: {type: integer}
            x-kubernetes-validations:
            - {rule: self.ready >= 0, message: ready must not be negative}
`)
}

// crdFromYAML is a definition in the stack's apiextensions group.
func crdFromYAML(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(err)
	}
	u.SetAPIVersion(crdsGVR.GroupVersion().String())
	u.SetKind("CustomResourceDefinition")
	return u
}

func celGizmo(group, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// causes are an Invalid error's causes as client-go reads them: "field|reason|message".
func causes(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		t.Fatalf("no details in %v", err)
	}
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, fmt.Sprintf("%s|%s|%s", c.Field, c.Type, c.Message))
	}
	return out
}

func wantCauses(t *testing.T, err error, want ...string) {
	t.Helper()
	if got := causes(t, err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("causes of %v:\n  %s\nwant:\n  %s", err, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// checkCELRules runs the rules of gizmoCRD through every kind of write, and definitions whose
// rules do not compile or cost too much.
func checkCELRules(t *testing.T, s *stack.Stack, group string) {
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-cel-")
	ctx := ctxFor(t, 90*time.Second)
	createEstablished(t, ctx, dyn, gizmoCRD(group))
	t.Cleanup(func() {
		_ = dyn.Resource(crdsGVR).Delete(context.Background(), "gizmos."+group, metav1.DeleteOptions{})
	})
	gizmos := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}).Namespace(ns)

	if _, err := gizmos.Create(ctx, celGizmo(group, "g1", map[string]any{"replicas": int64(2), "minReplicas": int64(1), "size": "small",
		"mode": "fast", "memory": "512Mi", "network": "10.0.0.0/8"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Create: one cause per failing rule, with upstream's field, reason and message.
	_, err := gizmos.Create(ctx, celGizmo(group, "bad", map[string]any{"replicas": int64(1), "minReplicas": int64(3), "mode": "legacy"}), metav1.CreateOptions{})
	wantCauses(t, err,
		`spec.replicas|FieldValueInvalid|Invalid value: "object": replicas must be at least minReplicas`,
		`spec.mode|FieldValueForbidden|Forbidden: mode legacy is not allowed`)
	if !strings.HasPrefix(err.Error(), `Gizmo.`+group+` "bad" is invalid: [`) {
		t.Errorf("message: %v", err)
	}
	_, err = gizmos.Create(ctx, celGizmo(group, "bad", map[string]any{"memory": "2Gi"}), metav1.CreateOptions{})
	wantCauses(t, err, `spec.memory|FieldValueInvalid|Invalid value: "string": memory must be below 1Gi`)
	_, err = gizmos.Create(ctx, celGizmo(group, "bad", map[string]any{"network": "fd00::/8"}), metav1.CreateOptions{})
	wantCauses(t, err, `spec.network|FieldValueInvalid|Invalid value: "string": network must be an IPv4 CIDR`)

	// Update, patch and apply: the transition rule compares with the stored object.
	immutable := `spec.size|FieldValueInvalid|Invalid value: "string": size is immutable`
	cur, err := gizmos.Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, "large", "spec", "size")
	_, err = gizmos.Update(ctx, cur, metav1.UpdateOptions{})
	wantCauses(t, err, immutable)
	_, err = gizmos.Patch(ctx, "g1", "application/merge-patch+json", []byte(`{"spec":{"size":"large"}}`), metav1.PatchOptions{})
	wantCauses(t, err, immutable)
	_, err = gizmos.Apply(ctx, "g1", celGizmo(group, "g1", map[string]any{"size": "large", "replicas": int64(2)}), metav1.ApplyOptions{FieldManager: "e2e", Force: true})
	wantCauses(t, err, immutable)
	if _, err := gizmos.Apply(ctx, "g1", celGizmo(group, "g1", map[string]any{"size": "small", "replicas": int64(3)}), metav1.ApplyOptions{FieldManager: "e2e", Force: true}); err != nil {
		t.Fatalf("apply: %v", err)
	}

	// The status subresource.
	cur, err = gizmos.Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["status"] = map[string]any{"ready": int64(-1)}
	_, err = gizmos.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	wantCauses(t, err, `status|FieldValueInvalid|Invalid value: "object": ready must not be negative`)
	cur.Object["status"] = map[string]any{"ready": int64(1)}
	if _, err := gizmos.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status: %v", err)
	}

	// Definitions: a rule that does not compile, and one whose estimated cost is over the limit.
	bad := crdFromYAML(`
metadata: {name: duds.` + group + `}
spec:
  group: ` + group + `
  scope: Cluster
  names: {plural: duds, kind: Dud}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              a: {type: string, maxLength: 8, x-kubernetes-validations: [{rule: self.nope}]}
              list:
                type: array
                items: {type: string}
                x-kubernetes-validations: [{rule: "self.all(x, self.all(y, x == y))"}]
`)
	_, err = dyn.Resource(crdsGVR).Create(ctx, bad, metav1.CreateOptions{})
	const at = "spec.versions[0].schema.openAPIV3Schema"
	got := causes(t, err)
	for _, want := range []string{
		at + `.properties[spec].properties[a].x-kubernetes-validations[0].rule|FieldValueInvalid|Invalid value: apiextensions.ValidationRule{Rule:"self.nope", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: type 'string' does not support field selection`,
		at + `.properties[spec].properties[list].x-kubernetes-validations[0].rule|FieldValueForbidden|Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
		at + `|FieldValueForbidden|Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
	} {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, want)
		}
		if !found {
			t.Errorf("no cause %s in:\n  %s", want, strings.Join(got, "\n  "))
		}
	}
	if _, err := dyn.Resource(crdsGVR).Get(ctx, "duds."+group, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused definition: %v", err)
	}
}

func TestCELValidationRules(t *testing.T) {
	s := useShared(t)
	checkCELRules(t, s, "cel.example.com")
}

// gatewayAPIDir is the directory of the sigs.k8s.io/gateway-api module this module requires
// (its version pinned in go.mod): its CRDs are read from there, never copied.
func gatewayAPIDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatal("the sigs.k8s.io/gateway-api module is not in the module cache (go mod download)")
	}
	return dir
}

// toUnstructured converts a typed Gateway API object.
func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// Issue 32 part 5: the Gateway API's standard CRDs (the sigs.k8s.io/gateway-api module's own
// YAML, with their hundreds of CEL rules) are accepted; a valid Gateway and HTTPRoute are
// stored, with their schema defaults; invalid ones are refused with the messages of the CRDs'
// own rules, as an upstream API server refuses them. It runs on the all-in-one binary, on a
// stack of its own: in the platform naming profile the shared stack's discovery must not show
// a *.k8s.io group (TestDiscoveryRESTMapper), which gateway.networking.k8s.io is.
func TestGatewayAPI(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	dyn := dynamicClient(t, s)
	ctx := ctxFor(t, 120*time.Second)
	files, err := filepath.Glob(filepath.Join(gatewayAPIDir(t), "config", "crd", "standard", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the Gateway API CRDs: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatal(err)
		}
		crd.SetAPIVersion(crdsGVR.GroupVersion().String())
		delete(crd.Object, "status")
		createEstablished(t, ctx, dyn, crd)
	}
	ns := createNamespace(t, dyn, "e2e-gwapi-")
	gateways := dyn.Resource(schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: "v1", Resource: "gateways"}).Namespace(ns)
	routes := dyn.Resource(schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: "v1", Resource: "httproutes"}).Namespace(ns)
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: kind}
	}

	gateway := func(name string, listeners ...gatewayv1.Listener) *unstructured.Unstructured {
		return toUnstructured(t, &gatewayv1.Gateway{TypeMeta: typeMeta("Gateway"), ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "example", Listeners: listeners}})
	}
	if _, err := gateways.Create(ctx, gateway("gw", gatewayv1.Listener{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid Gateway: %v", err)
	}
	_, err = gateways.Create(ctx, gateway("tcp", gatewayv1.Listener{Name: "tcp", Protocol: gatewayv1.TCPProtocolType, Port: 9000,
		Hostname: ptrTo(gatewayv1.Hostname("tcp.example.com"))}), metav1.CreateOptions{})
	wantCauses(t, err, `spec.listeners|FieldValueInvalid|Invalid value: "array": hostname must not be specified for protocols ['TCP', 'UDP']`)
	_, err = gateways.Create(ctx, gateway("tls", gatewayv1.Listener{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
		TLS: &gatewayv1.GatewayTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}}), metav1.CreateOptions{})
	wantCauses(t, err, `spec.listeners|FieldValueInvalid|Invalid value: "array": tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']`)

	route := func(name, path string) *unstructured.Unstructured {
		return toUnstructured(t, &gatewayv1.HTTPRoute{TypeMeta: typeMeta("HTTPRoute"), ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gatewayv1.Hostname{"app.example.com"},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptrTo(gatewayv1.PathMatchPathPrefix), Value: ptrTo(path)}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: "app", Port: ptrTo(gatewayv1.PortNumber(8080))}}}},
				}},
			}})
	}
	created, err := routes.Create(ctx, route("app", "/app"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a valid HTTPRoute: %v", err)
	}
	// The schema's defaults were applied (the backend's weight and kind).
	backends, _, _ := unstructured.NestedSlice(created.Object, "spec", "rules")
	if len(backends) != 1 || fmt.Sprint(backends[0].(map[string]any)["backendRefs"]) != "[map[group: kind:Service name:app port:8080 weight:1]]" {
		t.Errorf("the stored route's rules: %v", backends)
	}
	_, err = routes.Create(ctx, route("relative", "app"), metav1.CreateOptions{})
	wantCauses(t, err, `spec.rules[0].matches[0].path|FieldValueInvalid|Invalid value: "object": value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']`)

	// A route whose redirect filter is used together with backendRefs.
	redirect := route("redirect", "/r")
	rules, _, _ := unstructured.NestedSlice(redirect.Object, "spec", "rules")
	rules[0].(map[string]any)["filters"] = []any{map[string]any{"type": "RequestRedirect", "requestRedirect": map[string]any{"scheme": "https"}}}
	_ = unstructured.SetNestedSlice(redirect.Object, rules, "spec", "rules")
	_, err = routes.Create(ctx, redirect, metav1.CreateOptions{})
	if got := causes(t, err); len(got) != 1 || !strings.HasPrefix(got[0], `spec.rules[0]|FieldValueInvalid|Invalid value: "object": RequestRedirect filter must not be used together with backendRefs`) {
		t.Errorf("redirect with backends: %v", got)
	}
	if _, err := routes.Get(ctx, "redirect", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused route: %v", err)
	}
}
