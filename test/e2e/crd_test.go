package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// crdsGVR is where CustomResourceDefinitions are served (upstream's apiextensions.k8s.io, renamed).
var crdsGVR = schema.GroupVersionResource{Group: naming.Group("apiextensions.k8s.io"), Version: "v1", Resource: "customresourcedefinitions"}

// cronTabCRD is upstream's CronTab example: namespaced, short name ct, in the category all, one
// version with a status subresource, printer columns (Image only in -o wide) and a schema with a
// pattern, bounds and a default.
var cronTabCRD = `apiVersion: ` + crdsGVR.GroupVersion().String() + `
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    - name: Image
      type: string
      jsonPath: .spec.image
      priority: 1
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec:
                type: string
                pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
              image:
                type: string
              replicas:
                type: integer
                minimum: 1
                maximum: 10
                default: 1
          status:
            type: object
            properties:
              replicas:
                type: integer
`

// cronTab is a CronTab manifest; extraSpec is appended to its spec (indented by four spaces).
func cronTab(name, image, extraSpec string) string {
	return "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: " + name + "\nspec:\n" +
		"  cronSpec: \"* * * * */5\"\n  image: " + image + "\n" + extraSpec
}

// writeFile writes content to name in dir and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 5 with kubectl: a CustomResourceDefinition applied with kubectl becomes Established
// (kubectl wait); its kind is then usable like a built-in one: apply, get with the definition's
// printer columns (-o wide adds the priority-1 column), the short name and the category all,
// jsonpath, merge and JSON patches (generation bumps, a schema violation is "invalid" and
// changes nothing), schema defaults, strict field validation by default and pruning with
// --validate=false, server-side apply with managedFields, and kubectl explain from the
// definition's OpenAPI. Deleting the definition deletes the kind and its objects: kubectl no
// longer knows the type, and defining it again starts empty.
//
// Definitions are cluster-wide and change discovery (the category all, too), which the tests on
// the shared stack read while they run in parallel: each custom resource test has a stack of its own.
func TestKubectlCustomResources(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.Split})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-kcrd-")
	k := newKubectl(t, s, ns)
	dir := t.TempDir()
	const crdName = "crontabs.stable.example.com"

	crdFile := writeFile(t, dir, "crd.yaml", cronTabCRD)
	out := k.ok("", "apply", "-f", crdFile)
	if strings.TrimSpace(out) != "customresourcedefinition."+crdsGVR.Group+"/"+crdName+" created" {
		t.Errorf("kubectl apply -f crd.yaml: %q", out)
	}
	out = k.ok("", "wait", "--for", "condition=established", "crd/"+crdName, "--timeout=20s")
	if strings.TrimSpace(out) != "customresourcedefinition."+crdsGVR.Group+"/"+crdName+" condition met" {
		t.Errorf("kubectl wait --for condition=established: %q", out)
	}

	// A CronTab without replicas: the schema's default (1) is applied.
	out = k.ok("", "apply", "-f", writeFile(t, dir, "ct.yaml", cronTab("nightly", "backup:1", "")))
	if strings.TrimSpace(out) != "crontab.stable.example.com/nightly created" {
		t.Errorf("kubectl apply -f ct.yaml: %q", out)
	}
	out = k.ok("", "get", "crontabs")
	if !regexp.MustCompile(`(?m)^NAME\s+SPEC\s+REPLICAS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^nightly\s+\* \* \* \* \*/5\s+1\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get crontabs: want the columns NAME SPEC REPLICAS AGE and nightly with replicas 1:\n%s", out)
	}
	out = k.ok("", "get", "ct", "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+SPEC\s+REPLICAS\s+AGE\s+IMAGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^nightly\s+\* \* \* \* \*/5\s+1\s+\d+s\s+backup:1$`).MatchString(out) {
		t.Errorf("kubectl get ct -o wide: want the IMAGE column too:\n%s", out)
	}
	out = k.ok("", "get", "all")
	if !regexp.MustCompile(`(?m)^crontab\.stable\.example\.com/nightly\s+\* \* \* \* \*/5\s+1\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get all lacks crontab.stable.example.com/nightly:\n%s", out)
	}
	jsonpath := func(expr string) string {
		t.Helper()
		return k.ok("", "get", "ct", "nightly", "-o", "jsonpath="+expr)
	}
	if got := jsonpath("{.spec.replicas}"); got != "1" {
		t.Errorf("defaulted spec.replicas = %q, want 1", got)
	}
	if got := jsonpath("{.metadata.generation}"); got != "1" {
		t.Errorf("metadata.generation after create = %q, want 1", got)
	}

	// Patches (kubectl edit sends a merge patch for custom resources).
	out = k.ok("", "patch", "ct", "nightly", "--type", "merge", "-p", `{"spec":{"replicas":3}}`)
	if strings.TrimSpace(out) != "crontab.stable.example.com/nightly patched" {
		t.Errorf("kubectl patch --type merge: %q", out)
	}
	if got := jsonpath("{.spec.replicas} {.metadata.generation}"); got != "3 2" {
		t.Errorf("after the merge patch: replicas generation = %q, want \"3 2\"", got)
	}
	out = k.ok("", "patch", "ct", "nightly", "--type", "json", "-p", `[{"op":"replace","path":"/spec/image","value":"backup:2"}]`)
	if strings.TrimSpace(out) != "crontab.stable.example.com/nightly patched" {
		t.Errorf("kubectl patch --type json: %q", out)
	}
	if got := jsonpath("{.spec.image} {.spec.replicas} {.metadata.generation}"); got != "backup:2 3 3" {
		t.Errorf("after the JSON patch: image replicas generation = %q, want \"backup:2 3 3\"", got)
	}
	rv := jsonpath("{.metadata.resourceVersion}")
	for _, p := range []struct{ typ, patch string }{
		{"merge", `{"spec":{"replicas":50}}`},
		{"json", `[{"op":"replace","path":"/spec/replicas","value":50}]`},
	} {
		out, errs, code := k.run("", "patch", "ct", "nightly", "--type", p.typ, "-p", p.patch)
		if code == 0 || !strings.Contains(errs, `The CronTab "nightly" is invalid`) || !strings.Contains(errs, "spec.replicas") {
			t.Errorf("kubectl patch --type %s to replicas 50: exit %d, stdout %q, stderr %q; want the invalid message naming spec.replicas", p.typ, code, out, errs)
		}
	}
	if got := jsonpath("{.spec.replicas} {.metadata.resourceVersion}"); got != "3 "+rv {
		t.Errorf("after the rejected patches: replicas resourceVersion = %q, want \"3 %s\"", got, rv)
	}

	// Unknown fields: kubectl's default validation (Strict, checked by the server) rejects them;
	// with --validate=false the object is created and the field pruned.
	bogusFile := writeFile(t, dir, "bogus.yaml", cronTab("bogus", "backup:1", "  bogus: true\n"))
	out, errs, code := k.run("", "apply", "-f", bogusFile)
	if code == 0 || !strings.Contains(errs, `unknown field "spec.bogus"`) {
		t.Errorf("kubectl apply of an unknown field: exit %d, stdout %q, stderr %q; want an error naming spec.bogus", code, out, errs)
	}
	if _, _, code := k.run("", "get", "ct", "bogus"); code == 0 {
		t.Error("the strictly rejected CronTab was stored")
	}
	out, errs, code = k.run("", "apply", "-f", bogusFile, "--validate=false")
	if code != 0 || strings.TrimSpace(out) != "crontab.stable.example.com/bogus created" {
		t.Errorf("kubectl apply --validate=false: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if strings.TrimSpace(errs) != "" {
		t.Errorf("kubectl apply --validate=false (fieldValidation=Ignore) printed %q; unknown fields are dropped silently", errs)
	}
	if y := k.ok("", "get", "ct", "bogus", "-o", "yaml"); strings.Contains(y, "bogus: true") || !strings.Contains(y, "image: backup:1") {
		t.Errorf("the unknown field was not pruned (or the object is not what was applied):\n%s", y)
	}

	// Server-side apply: created, then changed; managedFields name kubectl with operation Apply.
	ssaFile := writeFile(t, dir, "ssa.yaml", cronTab("hourly", "report:1", "  replicas: 2\n"))
	if out := k.ok("", "apply", "--server-side", "-f", ssaFile); strings.TrimSpace(out) != "crontab.stable.example.com/hourly serverside-applied" {
		t.Errorf("kubectl apply --server-side: %q", out)
	}
	writeFile(t, dir, "ssa.yaml", cronTab("hourly", "report:1", "  replicas: 4\n"))
	if out := k.ok("", "apply", "--server-side", "-f", ssaFile); strings.TrimSpace(out) != "crontab.stable.example.com/hourly serverside-applied" {
		t.Errorf("kubectl apply --server-side (again): %q", out)
	}
	obj, text := kubectlObject(t, k, "ct", "hourly")
	if r, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas"); fmt.Sprint(r) != "4" {
		t.Errorf("after the second server-side apply spec.replicas = %v, want 4", r)
	}
	if managerEntry(obj.GetManagedFields(), "kubectl", metav1.ManagedFieldsOperationApply) == nil ||
		!strings.Contains(text, "manager: kubectl\n") || !strings.Contains(text, "operation: Apply\n") {
		t.Errorf("--show-managed-fields lacks manager kubectl with operation Apply:\n%s", text)
	}
	if got := fieldOwners(t, obj.GetManagedFields(), "spec", "replicas"); strings.Join(got, " ") != "kubectl/Apply" {
		t.Errorf(".spec.replicas is owned by %v, want kubectl/Apply", got)
	}

	// kubectl explain reads the kind's schema from /openapi/v3/apis/stable.example.com/v1.
	out = k.ok("", "explain", "crontab.spec")
	for _, re := range []string{`(?m)^KIND:\s+CronTab$`, `(?m)^\s+cronSpec\s+<string>$`, `(?m)^\s+image\s+<string>$`, `(?m)^\s+replicas\s+<integer>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl explain crontab.spec does not match %s:\n%s", re, out)
		}
	}

	// Deleting the definition: the kind is gone for kubectl, and so are its objects.
	out = k.ok("", "delete", "crd", crdName)
	if strings.TrimSpace(out) != "customresourcedefinition."+crdsGVR.Group+` "`+crdName+`" deleted` {
		t.Errorf("kubectl delete crd: %q", out)
	}
	// kubectl still has crontabs in its discovery cache: the list is a 404.
	out, errs, code = k.run("", "get", "crontabs")
	if code == 0 || !strings.Contains(errs, "Error from server (NotFound)") {
		t.Errorf("kubectl get crontabs after the definition was deleted: exit %d, stdout %q, stderr %q; want NotFound", code, out, errs)
	}
	// With a fresh discovery cache kubectl does not know the type at all.
	out, errs, code = newKubectl(t, s, ns).run("", "get", "crontabs")
	if code == 0 || !strings.Contains(errs, `the server doesn't have a resource type "crontabs"`) {
		t.Errorf("kubectl get crontabs (fresh discovery) after the definition was deleted: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	k.ok("", "apply", "-f", crdFile)
	k.ok("", "wait", "--for", "condition=established", "crd/"+crdName, "--timeout=20s")
	out, errs, code = k.run("", "get", "crontabs", "-A")
	if code != 0 || strings.TrimSpace(out) != "" || strings.TrimSpace(errs) != "No resources found" {
		t.Errorf("kubectl get crontabs -A after defining the kind again: exit %d, stdout %q, stderr %q; want no resources", code, out, errs)
	}
}

// widgetGroup is the group of the dynamic client's test kind.
const widgetGroup = "e2e.example.com"

var (
	widgetsV1      = schema.GroupVersionResource{Group: widgetGroup, Version: "v1", Resource: "widgets"}
	widgetsV1beta1 = schema.GroupVersionResource{Group: widgetGroup, Version: "v1beta1", Resource: "widgets"}
)

// widgetCRDObject is a namespaced definition with two served versions (v1 stores, v1beta1 is
// also served), a status subresource and a schema with bounds, an enum and a list.
func widgetCRDObject() *unstructured.Unstructured {
	schemaProps := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"spec": map[string]any{
				"type": "object", "required": []any{"size"},
				"properties": map[string]any{
					"size":  map[string]any{"type": "integer", "minimum": int64(1), "maximum": int64(10)},
					"color": map[string]any{"type": "string", "enum": []any{"red", "blue"}},
					"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				},
			},
			"status": map[string]any{
				"type":       "object",
				"properties": map[string]any{"replicas": map[string]any{"type": "integer"}},
			},
		},
	}
	version := func(name string, storage bool) map[string]any {
		return map[string]any{
			"name": name, "served": true, "storage": storage,
			"subresources": map[string]any{"status": map[string]any{}},
			"schema":       map[string]any{"openAPIV3Schema": runtime.DeepCopyJSON(schemaProps)},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crdsGVR.GroupVersion().String(), "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + widgetGroup},
		"spec": map[string]any{
			"group": widgetGroup, "scope": "Namespaced",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{version("v1", true), version("v1beta1", false)},
		},
	}}
}

// widget is a Widget object in version v1.
func widget(name string, size int64, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetGroup + "/v1", "kind": "Widget",
		"spec": map[string]any{"size": size, "color": "red"},
	}}
	u.SetName(name)
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

// createEstablished creates a definition with the dynamic client and waits until it is
// Established.
func createEstablished(t *testing.T, ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(crdsGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the definition: %v", err)
	}
	stack.Eventually(t, 20*time.Second, "the definition Established", func() error {
		got, err := dyn.Resource(crdsGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := crdCondition(got, "Established"); st != "True" {
			return fmt.Errorf("Established is %q; status %v", st, got.Object["status"])
		}
		return nil
	})
}

// crdCondition is the status of a definition's condition of type typ ("" when absent).
func crdCondition(crd *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// Issue 5 with client-go: a CustomResourceDefinition created with the dynamic client becomes
// Established, and its kind then works with the dynamic client as built-in kinds do: create,
// get, list by label, update, merge and JSON patches, UpdateStatus (only status changes through
// the subresource), paging with limit and continue; a schema violation is one 422 Invalid with
// a cause per violated field; an informer sees adds, updates and deletes; both served versions
// read the same object in their own apiVersion; a Protobuf-only request is 406 Not Acceptable
// (custom resources have no Protobuf); deleting the definition makes the resource 404.
// This one runs on the all-in-one binary (embedded storage), the split stack having its turn above.
func TestDynamicClientCustomResources(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-dcrd-")
	ctx := ctxFor(t, 90*time.Second)
	crd := widgetCRDObject()
	createEstablished(t, ctx, dyn, crd)
	widgets := dyn.Resource(widgetsV1).Namespace(ns)
	// Established means served, at once (no 404 after the condition is True).
	if _, err := widgets.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list right after Established: %v", err)
	}

	// Create and get.
	created, err := widgets.Create(ctx, widget("w1", 2, map[string]string{"app": "a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetAPIVersion() != widgetGroup+"/v1" || created.GetKind() != "Widget" || created.GetUID() == "" ||
		created.GetResourceVersion() == "" || created.GetGeneration() != 1 || created.GetNamespace() != ns {
		t.Errorf("create returned %v", created.Object)
	}
	got, err := widgets.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("get %v, create returned %v", got.Object, created.Object)
	}
	if _, err := widgets.Create(ctx, widget("w2", 3, map[string]string{"app": "b"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := widgets.List(ctx, metav1.ListOptions{LabelSelector: "app=a"})
	if err != nil {
		t.Fatal(err)
	}
	if names := itemNames(list); list.GetKind() != "WidgetList" || fmt.Sprint(names) != "[w1]" || list.GetResourceVersion() == "" {
		t.Errorf("list app=a: %s %v at %q, want WidgetList [w1]", list.GetKind(), names, list.GetResourceVersion())
	}

	// Update: a spec change bumps generation; a stale resourceVersion conflicts.
	stale := got.DeepCopy()
	if err := unstructured.SetNestedField(got.Object, int64(4), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	updated, err := widgets.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(updated.Object, "spec", "size"); size != 4 || updated.GetGeneration() != 2 {
		t.Errorf("update: size %d generation %d, want 4 and 2", size, updated.GetGeneration())
	}
	if _, err := widgets.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
	}

	// Patches.
	merged, err := widgets.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"color":"blue"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nestedString(merged, "spec", "color") != "blue" || merged.GetGeneration() != 3 {
		t.Errorf("merge patch: color %q generation %d, want blue and 3", nestedString(merged, "spec", "color"), merged.GetGeneration())
	}
	patched, err := widgets.Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/tags","value":["x","y"]},{"op":"replace","path":"/spec/size","value":5}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tags, _, _ := unstructured.NestedStringSlice(patched.Object, "spec", "tags"); fmt.Sprint(tags) != "[x y]" || patched.GetGeneration() != 4 {
		t.Errorf("JSON patch: tags %v generation %d, want [x y] and 4", tags, patched.GetGeneration())
	}
	if size, _, _ := unstructured.NestedInt64(patched.Object, "spec", "size"); size != 5 {
		t.Errorf("JSON patch: size %d, want 5", size)
	}
	if _, err := widgets.Patch(ctx, "w1", types.StrategicMergePatchType, []byte(`{"spec":{"size":6}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch of a custom resource: %v, want UnsupportedMediaType (415)", err)
	}

	// UpdateStatus: the status changes; a spec change sent with it is ignored, and generation stays.
	withStatus := patched.DeepCopy()
	if err := unstructured.SetNestedField(withStatus.Object, int64(2), "status", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(withStatus.Object, int64(9), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	st, err := widgets.UpdateStatus(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(st.Object, "status", "replicas"); r != 2 {
		t.Errorf("UpdateStatus: status.replicas %d, want 2", r)
	}
	if size, _, _ := unstructured.NestedInt64(st.Object, "spec", "size"); size != 5 || st.GetGeneration() != 4 {
		t.Errorf("UpdateStatus changed the spec: size %d generation %d, want 5 and 4", size, st.GetGeneration())
	}
	// ... and the main resource does not change status.
	main := st.DeepCopy()
	if err := unstructured.SetNestedField(main.Object, int64(7), "status", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringMap(main.Object, map[string]string{"app": "a", "touched": "yes"}, "metadata", "labels"); err != nil {
		t.Fatal(err)
	}
	main, err = widgets.Update(ctx, main, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(main.Object, "status", "replicas"); r != 2 || main.GetLabels()["touched"] != "yes" {
		t.Errorf("update of the main resource: status.replicas %d (want 2, unchanged), labels %v", r, main.GetLabels())
	}

	// A schema violation: one 422 with every violated field, nothing stored.
	bad := widget("bad", 20, nil)
	bad.Object["spec"] = map[string]any{"size": int64(20), "color": "green", "tags": "x"}
	_, err = widgets.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create with schema violations: %v, want Invalid (422)", err)
	}
	var fields []string
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	sort.Strings(fields)
	if fmt.Sprint(fields) != "[spec.color spec.size spec.tags]" {
		t.Errorf("422 causes name the fields %v, want spec.color, spec.size and spec.tags: %v", fields, err)
	}
	if _, err := widgets.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of the invalid widget: %v, want NotFound", err)
	}

	// Two served versions, one object: each reads it in its own apiVersion.
	beta, err := dyn.Resource(widgetsV1beta1).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if beta.GetAPIVersion() != widgetGroup+"/v1beta1" || beta.GetUID() != main.GetUID() || beta.GetResourceVersion() != main.GetResourceVersion() {
		t.Errorf("v1beta1 read: %s %s@%s, want %s/v1beta1 %s@%s", beta.GetAPIVersion(), beta.GetUID(), beta.GetResourceVersion(), widgetGroup, main.GetUID(), main.GetResourceVersion())
	}
	if size, _, _ := unstructured.NestedInt64(beta.Object, "spec", "size"); size != 5 {
		t.Errorf("v1beta1 read: size %d, want 5", size)
	}
	betaObj := widget("from-beta", 1, nil)
	betaObj.SetAPIVersion(widgetGroup + "/v1beta1")
	if _, err := dyn.Resource(widgetsV1beta1).Namespace(ns).Create(ctx, betaObj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through v1beta1: %v", err)
	}
	if v1, err := widgets.Get(ctx, "from-beta", metav1.GetOptions{}); err != nil || v1.GetAPIVersion() != widgetGroup+"/v1" {
		t.Errorf("v1 read of an object created through v1beta1: %v %v", err, v1)
	}
	betaList, err := dyn.Resource(widgetsV1beta1).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if betaList.GetAPIVersion() != widgetGroup+"/v1beta1" || len(betaList.Items) != 3 || betaList.Items[0].GetAPIVersion() != widgetGroup+"/v1beta1" {
		t.Errorf("v1beta1 list: %s with %d items (first %s)", betaList.GetAPIVersion(), len(betaList.Items), betaList.Items[0].GetAPIVersion())
	}

	t.Run("Paging", func(t *testing.T) {
		pns := createNamespace(t, dyn, "e2e-dcrd-paging-")
		pw := dyn.Resource(widgetsV1).Namespace(pns)
		for i := range 5 {
			if _, err := pw.Create(ctx, widget(fmt.Sprintf("p%d", i), 1, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var names []string
		var sizes, remaining []string
		token, snapshot := "", ""
		for page := 0; ; page++ {
			l, err := pw.List(ctx, metav1.ListOptions{Limit: 2, Continue: token})
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			if page == 0 {
				snapshot = l.GetResourceVersion()
			} else if l.GetResourceVersion() != snapshot {
				t.Errorf("page %d at resourceVersion %s, the first at %s", page, l.GetResourceVersion(), snapshot)
			}
			names = append(names, itemNames(l)...)
			sizes = append(sizes, fmt.Sprint(len(l.Items)))
			if rc := l.GetRemainingItemCount(); rc != nil {
				remaining = append(remaining, fmt.Sprint(*rc))
			} else {
				remaining = append(remaining, "-")
			}
			if token = l.GetContinue(); token == "" {
				break
			}
			if page > 5 {
				t.Fatal("paging does not end")
			}
		}
		sort.Strings(names)
		if fmt.Sprint(names) != "[p0 p1 p2 p3 p4]" || strings.Join(sizes, " ") != "2 2 1" || strings.Join(remaining, " ") != "3 1 -" {
			t.Errorf("paging: names %v, page sizes %v, remainingItemCount %v; want the 5 once, 2 2 1, 3 1 -", names, sizes, remaining)
		}
	})

	t.Run("Informer", func(t *testing.T) {
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = "informer=yes"
		})
		inf := factory.ForResource(widgetsV1).Informer()
		events := make(chan informerEvent, 100)
		if _, err := inf.AddEventHandler(recordingHandler(events)); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		factory.Start(stop)
		syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			t.Fatal("the informer did not sync in 10s")
		}
		c, err := widgets.Create(ctx, widget("watched", 1, map[string]string{"informer": "yes"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expectEvent(t, events, "add", "watched", c.GetResourceVersion())
		m, err := widgets.Patch(ctx, "watched", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expectEvent(t, events, "update", "watched", m.GetResourceVersion())
		if err := widgets.Delete(ctx, "watched", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, events, "delete", "watched", "")
	})

	t.Run("ProtobufNotAcceptable", func(t *testing.T) {
		cfg := restConfig(t, s, "e2e-admin")
		cfg.APIPath = "/apis"
		cfg.GroupVersion = &schema.GroupVersion{Group: widgetGroup, Version: "v1"}
		cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		// Upstream's media type (what client-go's typed clients send) and the platform's.
		for _, accept := range []string{"application/vnd.kubernetes.protobuf", platformProtobuf} {
			cfg.AcceptContentTypes = accept
			rc, err := rest.RESTClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var code int
			err = rc.Get().Namespace(ns).Resource("widgets").Name("w1").Do(ctx).StatusCode(&code).Error()
			if code != http.StatusNotAcceptable || !apierrors.IsNotAcceptable(err) {
				t.Errorf("get of a custom resource accepting only %s: %d %v, want 406 NotAcceptable", accept, code, err)
			}
		}
		// The same client accepting JSON as well gets JSON.
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf, application/json"
		rc, err := rest.RESTClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var ct string
		body, err := rc.Get().Namespace(ns).Resource("widgets").Name("w1").Do(ctx).ContentType(&ct).Raw()
		var obj map[string]any
		if err != nil || ct != "application/json" || json.Unmarshal(body, &obj) != nil || obj["kind"] != "Widget" {
			t.Errorf("a get accepting Protobuf or JSON: %v, Content-Type %q, body %.200s", err, ct, body)
		}
	})

	// Deleting the definition deletes its objects and stops serving the resource.
	if err := dyn.Resource(crdsGVR).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stack.Eventually(t, 10*time.Second, "the custom resource 404 after its definition is deleted", func() error {
		_, err := widgets.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("list: %v", err)
	})
	t.Logf("the resource was 404 %v after the delete of its definition", time.Since(start).Round(time.Millisecond))
	for _, gvr := range []schema.GroupVersionResource{widgetsV1, widgetsV1beta1} {
		if _, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get %s after the definition is gone: %v, want NotFound", gvr.Version, err)
		}
	}
	stack.Eventually(t, 10*time.Second, "the definition removed", func() error {
		_, err := dyn.Resource(crdsGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get: %v", err)
	})
}

// Issue 5: definitions and their objects survive a restart of the all-in-one, and the kinds are
// served as soon as the server is ready (readyz waits for the stored definitions to be read).
func TestCustomResourcesAcrossRestart(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-rcrd-")
	ctx := ctxFor(t, 90*time.Second)
	createEstablished(t, ctx, dyn, widgetCRDObject())
	widgets := dyn.Resource(widgetsV1).Namespace(ns)
	created, err := widgets.Create(ctx, widget("kept", 2, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restart("allinone", false); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// No retry: ready means the definitions are served.
	got, err := widgets.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get right after the restart: %v", err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("after the restart: %s@%s, before %s@%s", got.GetUID(), got.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
	}
}
