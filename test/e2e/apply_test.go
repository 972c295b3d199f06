package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// fieldOwners lists, sorted, the managers ("manager/Operation") whose managedFields entries own
// the field at path: object keys such as "data", "color" (fieldsV1 keys "f:data", "f:color"), or
// list element keys as fieldsV1 writes them (`k:{"name":"web"}`).
func fieldOwners(t *testing.T, entries []metav1.ManagedFieldsEntry, path ...string) []string {
	t.Helper()
	owners := []string{}
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &node); err != nil {
			t.Fatalf("managedFields entry of %q: fieldsV1 %s: %v", e.Manager, e.FieldsV1.Raw, err)
		}
		found := true
		for _, key := range path {
			if !strings.HasPrefix(key, "k:") && !strings.HasPrefix(key, "v:") {
				key = "f:" + key
			}
			next, ok := node[key].(map[string]any)
			if !ok {
				found = false
				break
			}
			node = next
		}
		if found {
			owners = append(owners, e.Manager+"/"+string(e.Operation))
		}
	}
	sort.Strings(owners)
	return owners
}

// managerEntry is the managedFields entry of manager with operation op, or nil.
func managerEntry(entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) *metav1.ManagedFieldsEntry {
	for i := range entries {
		if entries[i].Manager == manager && entries[i].Operation == op {
			return &entries[i]
		}
	}
	return nil
}

// kubectlObject is `kubectl get <args> -o yaml --show-managed-fields`, decoded, with the YAML text.
func kubectlObject(t *testing.T, k *kubectlRunner, args ...string) (*unstructured.Unstructured, string) {
	t.Helper()
	out := k.ok("", append(append([]string{"get"}, args...), "-o", "yaml", "--show-managed-fields")...)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(out), &u.Object); err != nil {
		t.Fatalf("kubectl get %s -o yaml: %v\n%s", strings.Join(args, " "), err, out)
	}
	return u, out
}

// kubectlValidateFlags probes /openapi/v3 as TestKubectl does: without it kubectl's client-side
// validation fails, so the tests pass --validate=false.
func kubectlValidateFlags(t *testing.T, k *kubectlRunner) []string {
	t.Helper()
	if _, errs, code := k.run("", "get", "--raw", "/openapi/v3"); code != 0 {
		t.Logf("the server has no /openapi/v3 (%s); applying with --validate=false", strings.TrimSpace(errs))
		return []string{"--validate=false"}
	}
	return nil
}

const ssaManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa-settings
  labels:
    app: ssa-web
data:
  color: blue
  greeting: hello
  shape: round
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ssa-web
  labels:
    app: ssa-web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: ssa-web
  template:
    metadata:
      labels:
        app: ssa-web
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

// ssaOtherConfig is the config of the manager "other": a different color, the same shape.
const ssaOtherConfig = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa-settings
data:
  color: red
  shape: round
`

// ssaKubectlReduced is kubectl's config after the handover: color (now other's) and greeting
// (kubectl's alone) and shape (shared with other) dropped.
const ssaKubectlReduced = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa-settings
  labels:
    app: ssa-web
data: {}
`

// Spec 000 "Server-side apply" (1: PATCH with application/apply-patch+yaml; 2: fieldManager; 3:
// conflicts fail apply, force resolves them) and the "Field ownership (server-side apply)" table;
// issue 4 "Patch and server-side apply": kubectl apply --server-side creates a ConfigMap and an
// apps/v1 Deployment (serverside-applied) and records manager kubectl with operation Apply. A
// second manager applying a different value of kubectl's field is rejected with a conflict
// naming the manager and the field, and nothing changes; with --force-conflicts the value
// changes and the second manager is the field's only owner; applying the same value shares
// ownership. kubectl then applying a config that omits a field it alone owned removes the field,
// while a field another manager still owns keeps its value.
func TestKubectlServerSideApply(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-ssa-")
	k := newKubectl(t, s, ns)
	vflg := kubectlValidateFlags(t, k)
	apply := func(config string, extra ...string) (string, string, int) {
		t.Helper()
		args := append(append([]string{"apply", "--server-side", "-f", "-"}, vflg...), extra...)
		return k.run(config, args...)
	}

	out, errs, code := apply(ssaManifest)
	if code != 0 {
		t.Fatalf("kubectl apply --server-side: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "configmap/ssa-settings serverside-applied") || !strings.Contains(out, "deployment.apps/ssa-web serverside-applied") {
		t.Errorf("kubectl apply --server-side:\n%s", out)
	}
	if out := k.ok("", "get", "deploy", "ssa-web", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].image}"); out != "2 nginx:1.27" {
		t.Errorf("the applied Deployment: replicas and images %q", out)
	}

	cm, text := kubectlObject(t, k, "cm", "ssa-settings")
	if !strings.Contains(text, "manager: kubectl\n") || !strings.Contains(text, "operation: Apply\n") {
		t.Errorf("kubectl get -o yaml --show-managed-fields lacks manager: kubectl, operation: Apply:\n%s", text)
	}
	mf := cm.GetManagedFields()
	if e := managerEntry(mf, "kubectl", metav1.ManagedFieldsOperationApply); e == nil || e.APIVersion != "v1" || e.FieldsType != "FieldsV1" {
		t.Errorf("managedFields after the first apply: %+v", mf)
	}
	for _, key := range []string{"color", "greeting", "shape"} {
		if got := fieldOwners(t, mf, "data", key); strings.Join(got, " ") != "kubectl/Apply" {
			t.Errorf(".data.%s is owned by %v, want kubectl/Apply", key, got)
		}
	}
	if got := fieldOwners(t, mf, "metadata", "labels", "app"); strings.Join(got, " ") != "kubectl/Apply" {
		t.Errorf(".metadata.labels.app is owned by %v, want kubectl/Apply", got)
	}
	rv := cm.GetResourceVersion()

	// A different value of a field kubectl owns, no force: a conflict; ownership and value unchanged.
	out, errs, code = apply(ssaOtherConfig, "--field-manager=other")
	if code == 0 || !strings.Contains(errs, `conflict with "kubectl"`) || !strings.Contains(errs, ".data.color") {
		t.Errorf("apply of a field kubectl owns by another manager: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if strings.Contains(errs, ".data.shape") {
		t.Errorf("the conflict names .data.shape, which other applies with the live value:\n%s", errs)
	}
	cm, _ = kubectlObject(t, k, "cm", "ssa-settings")
	if cm.GetResourceVersion() != rv || nestedString(cm, "data", "color") != "blue" {
		t.Errorf("the rejected apply changed the object: resourceVersion %s (was %s), color %q", cm.GetResourceVersion(), rv, nestedString(cm, "data", "color"))
	}
	if e := managerEntry(cm.GetManagedFields(), "other", metav1.ManagedFieldsOperationApply); e != nil {
		t.Errorf("the rejected apply recorded an entry for other: %+v", e)
	}

	// --force-conflicts: other takes color over alone; shape (same value) is shared.
	out, errs, code = apply(ssaOtherConfig, "--field-manager=other", "--force-conflicts")
	if code != 0 || !strings.Contains(out, "configmap/ssa-settings serverside-applied") {
		t.Fatalf("kubectl apply --force-conflicts: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	cm, _ = kubectlObject(t, k, "cm", "ssa-settings")
	mf = cm.GetManagedFields()
	if got := nestedString(cm, "data", "color"); got != "red" {
		t.Errorf("color after the forced apply: %q, want red", got)
	}
	if got := fieldOwners(t, mf, "data", "color"); strings.Join(got, " ") != "other/Apply" {
		t.Errorf(".data.color after the forced apply is owned by %v, want other/Apply alone", got)
	}
	if got := fieldOwners(t, mf, "data", "shape"); strings.Join(got, " ") != "kubectl/Apply other/Apply" {
		t.Errorf(".data.shape (same value) is owned by %v, want kubectl/Apply and other/Apply", got)
	}
	if got := fieldOwners(t, mf, "data", "greeting"); strings.Join(got, " ") != "kubectl/Apply" {
		t.Errorf(".data.greeting is owned by %v, want kubectl/Apply", got)
	}

	// kubectl drops color (other's now), greeting (its own alone) and shape (shared) from its
	// config: greeting is removed, shape and color stay.
	out, errs, code = apply(ssaKubectlReduced)
	if code != 0 {
		t.Fatalf("kubectl re-apply without greeting: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	cm, _ = kubectlObject(t, k, "cm", "ssa-settings")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if _, ok := data["greeting"]; ok || data["color"] != "red" || data["shape"] != "round" {
		t.Errorf("data after kubectl dropped greeting, color and shape: %v, want color red and shape round only", data)
	}
	mf = cm.GetManagedFields()
	if got := fieldOwners(t, mf, "data", "shape"); strings.Join(got, " ") != "other/Apply" {
		t.Errorf(".data.shape after kubectl gave it up is owned by %v, want other/Apply", got)
	}
	if got := fieldOwners(t, mf, "metadata", "labels", "app"); strings.Join(got, " ") != "kubectl/Apply" || cm.GetLabels()["app"] != "ssa-web" {
		t.Errorf(".metadata.labels.app: owners %v, labels %v", got, cm.GetLabels())
	}
}

// Spec README (strategic merge patch application/strategic-merge-patch+json, "match what kubectl
// expects"), spec 000 "Content negotiation" (merge patch, JSON patch) and issue 4 "Patch and
// server-side apply": kubectl patch with --type json, --type merge and the default strategic
// merge patch (a container list merged by name: a new container is added, not the list
// replaced), kubectl label and annotate. A JSON patch whose test operation fails is refused and
// changes nothing. Each non-apply write is recorded in managedFields as an Update by kubectl's
// manager names (spec 000 "Field ownership (server-side apply)": update operations become owners).
func TestKubectlPatch(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-kpatch-")
	k := newKubectl(t, s, ns)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := dyn.Resource(configMapsGVR).Namespace(ns).Create(ctx, configMap("kp", nil, map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(deploymentsGVR).Namespace(ns).Create(ctx, deployment("kp-web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jsonpath := func(kind, name, expr string) string {
		t.Helper()
		return k.ok("", "get", kind, name, "-o", "jsonpath="+expr)
	}

	out := k.ok("", "patch", "cm", "kp", "--type", "json", "-p", `[{"op":"replace","path":"/data/k","value":"v2"},{"op":"add","path":"/data/j","value":"added"}]`)
	if strings.TrimSpace(out) != "configmap/kp patched" {
		t.Errorf("kubectl patch --type json: %q", out)
	}
	if got := jsonpath("cm", "kp", "{.data.k} {.data.j}"); got != "v2 added" {
		t.Errorf("after the JSON patch: k j = %q, want \"v2 added\"", got)
	}

	out = k.ok("", "patch", "cm", "kp", "--type", "merge", "-p", `{"data":{"j":null,"m":"merged"}}`)
	if strings.TrimSpace(out) != "configmap/kp patched" {
		t.Errorf("kubectl patch --type merge: %q", out)
	}
	if got := jsonpath("cm", "kp", "{.data}"); got != `{"k":"v2","m":"merged"}` {
		t.Errorf("after the merge patch: data = %s, want k v2 and m merged (j removed)", got)
	}

	out = k.ok("", "patch", "deploy", "kp-web", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}`)
	if strings.TrimSpace(out) != "deployment.apps/kp-web patched" {
		t.Errorf("kubectl patch (strategic): %q", out)
	}
	// Upstream's strategic merge puts the patch's new elements before the live-only ones.
	got := strings.Fields(jsonpath("deploy", "kp-web", `{range .spec.template.spec.containers[*]}{.name}={.image} {end}`))
	sort.Strings(got)
	if strings.Join(got, " ") != "sidecar=busybox web=nginx:1.27" {
		t.Errorf("after the strategic merge patch: containers %q, want web=nginx:1.27 and sidecar=busybox (merged by name)", got)
	}

	if out := k.ok("", "label", "cm", "kp", "a=b"); strings.TrimSpace(out) != "configmap/kp labeled" {
		t.Errorf("kubectl label: %q", out)
	}
	if out := k.ok("", "annotate", "cm", "kp", "n=v"); strings.TrimSpace(out) != "configmap/kp annotated" {
		t.Errorf("kubectl annotate: %q", out)
	}
	if got := jsonpath("cm", "kp", "{.metadata.labels.a} {.metadata.annotations.n}"); got != "b v" {
		t.Errorf("after label and annotate: %q, want \"b v\"", got)
	}

	before, _ := kubectlObject(t, k, "cm", "kp")
	out, errs, code := k.run("", "patch", "cm", "kp", "--type", "json", "-p", `[{"op":"test","path":"/data/k","value":"wrong"},{"op":"replace","path":"/data/k","value":"never"}]`)
	if code == 0 {
		t.Errorf("kubectl patch with a failing test operation succeeded: %q", out)
	}
	t.Logf("kubectl patch with a failing test operation: exit %d, stderr %q", code, strings.TrimSpace(errs))
	after, _ := kubectlObject(t, k, "cm", "kp")
	if after.GetResourceVersion() != before.GetResourceVersion() || nestedString(after, "data", "k") != "v2" {
		t.Errorf("the failed JSON patch changed the object: resourceVersion %s (was %s), k %q", after.GetResourceVersion(), before.GetResourceVersion(), nestedString(after, "data", "k"))
	}

	mf := after.GetManagedFields()
	for _, c := range []struct{ path []string }{
		{[]string{"data", "m"}}, {[]string{"metadata", "labels", "a"}}, {[]string{"metadata", "annotations", "n"}},
	} {
		if got := fieldOwners(t, mf, c.path...); len(got) != 1 || !strings.HasPrefix(got[0], "kubectl-") || !strings.HasSuffix(got[0], "/Update") {
			t.Errorf(".%s is owned by %v, want one kubectl-* manager with operation Update", strings.Join(c.path, "."), got)
		}
	}
	if got := fieldOwners(t, mf, "metadata", "labels", "a"); strings.Join(got, " ") != "kubectl-label/Update" {
		t.Errorf(".metadata.labels.a is owned by %v, want kubectl-label/Update", got)
	}
	if got := fieldOwners(t, mf, "metadata", "annotations", "n"); strings.Join(got, " ") != "kubectl-annotate/Update" {
		t.Errorf(".metadata.annotations.n is owned by %v, want kubectl-annotate/Update", got)
	}
}

// Spec 000 "Server-side apply" (2: fieldManager; 3: conflicts and force) and the "Field
// ownership (server-side apply)" table; issue 4 "Patch and server-side apply": client-go's typed
// Apply with an apply configuration creates a ConfigMap, then updates it; a second manager
// applying a different value gets a Conflict (409) and, with Force, takes the field over. The
// dynamic client's Apply does the same for a cluster-scoped kind of a renamed group
// (rbac.authorization.platform.io/v1 ClusterRole), and the result carries managedFields.
func TestClientGoApply(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-apply-")
	ctx := ctxFor(t, 30*time.Second)

	t.Run("Typed", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-apply"))
		if err != nil {
			t.Fatal(err)
		}
		cms := cs.CoreV1().ConfigMaps(ns)
		created, err := cms.Apply(ctx, corev1ac.ConfigMap("typed", ns).WithData(map[string]string{"color": "blue"}), metav1.ApplyOptions{FieldManager: "e2e-typed"})
		if err != nil {
			t.Fatalf("apply (create): %v", err)
		}
		if created.UID == "" || created.ResourceVersion == "" || created.Data["color"] != "blue" {
			t.Fatalf("apply (create) returned %+v", created)
		}
		if got := fieldOwners(t, created.ManagedFields, "data", "color"); strings.Join(got, " ") != "e2e-typed/Apply" {
			t.Errorf(".data.color after the create is owned by %v, want e2e-typed/Apply", got)
		}

		updated, err := cms.Apply(ctx, corev1ac.ConfigMap("typed", ns).WithData(map[string]string{"color": "green", "size": "L"}), metav1.ApplyOptions{FieldManager: "e2e-typed"})
		if err != nil {
			t.Fatalf("apply (update): %v", err)
		}
		if updated.UID != created.UID || updated.ResourceVersion == created.ResourceVersion || updated.Data["color"] != "green" || updated.Data["size"] != "L" {
			t.Fatalf("apply (update) returned %+v (created %+v)", updated, created)
		}

		_, err = cms.Apply(ctx, corev1ac.ConfigMap("typed", ns).WithData(map[string]string{"color": "red"}), metav1.ApplyOptions{FieldManager: "e2e-second"})
		if !apierrors.IsConflict(err) {
			t.Fatalf("apply of e2e-typed's field by e2e-second: %v, want a Conflict", err)
		}
		if !strings.Contains(err.Error(), `conflict with "e2e-typed"`) || !strings.Contains(err.Error(), ".data.color") {
			t.Errorf("the conflict does not name the manager and the field: %v", err)
		}
		if got, err := cms.Get(ctx, "typed", metav1.GetOptions{}); err != nil || got.ResourceVersion != updated.ResourceVersion || got.Data["color"] != "green" {
			t.Errorf("after the refused apply: %v %+v", err, got)
		}

		forced, err := cms.Apply(ctx, corev1ac.ConfigMap("typed", ns).WithData(map[string]string{"color": "red"}), metav1.ApplyOptions{FieldManager: "e2e-second", Force: true})
		if err != nil {
			t.Fatalf("forced apply: %v", err)
		}
		if forced.Data["color"] != "red" || forced.Data["size"] != "L" {
			t.Errorf("forced apply: data %v, want color red and size L", forced.Data)
		}
		if got := fieldOwners(t, forced.ManagedFields, "data", "color"); strings.Join(got, " ") != "e2e-second/Apply" {
			t.Errorf(".data.color after the forced apply is owned by %v, want e2e-second/Apply alone", got)
		}
		if got := fieldOwners(t, forced.ManagedFields, "data", "size"); strings.Join(got, " ") != "e2e-typed/Apply" {
			t.Errorf(".data.size is owned by %v, want e2e-typed/Apply", got)
		}
	})

	t.Run("DynamicClusterRole", func(t *testing.T) {
		roles := dyn.Resource(clusterRolesGVR)
		name := ns + "-role"
		t.Cleanup(func() { _ = roles.Delete(ctx, name, metav1.DeleteOptions{}) })
		role := func(verbs ...string) *unstructured.Unstructured {
			v := []any{}
			for _, verb := range verbs {
				v = append(v, verb)
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": clusterRolesGVR.GroupVersion().String(), "kind": "ClusterRole",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"e2e": "apply"}},
				"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": v}},
			}}
		}
		created, err := roles.Apply(ctx, name, role("get"), metav1.ApplyOptions{FieldManager: "e2e-dynamic"})
		if err != nil {
			t.Fatalf("dynamic apply (create): %v", err)
		}
		if created.GetUID() == "" || created.GetAPIVersion() != clusterRolesGVR.GroupVersion().String() || created.GetKind() != "ClusterRole" {
			t.Fatalf("dynamic apply (create) returned %v", created.Object)
		}
		e := managerEntry(created.GetManagedFields(), "e2e-dynamic", metav1.ManagedFieldsOperationApply)
		if e == nil || e.APIVersion != clusterRolesGVR.GroupVersion().String() {
			t.Errorf("managedFields after the create: %+v, want an Apply entry of e2e-dynamic for %s", created.GetManagedFields(), clusterRolesGVR.GroupVersion())
		}
		if got := fieldOwners(t, created.GetManagedFields(), "rules"); strings.Join(got, " ") != "e2e-dynamic/Apply" {
			t.Errorf(".rules is owned by %v, want e2e-dynamic/Apply", got)
		}

		updated, err := roles.Apply(ctx, name, role("get", "list"), metav1.ApplyOptions{FieldManager: "e2e-dynamic"})
		if err != nil {
			t.Fatalf("dynamic apply (update): %v", err)
		}
		rules, _, _ := unstructured.NestedSlice(updated.Object, "rules")
		if updated.GetUID() != created.GetUID() || updated.GetResourceVersion() == created.GetResourceVersion() || len(rules) != 1 ||
			fmt.Sprint(rules[0].(map[string]any)["verbs"]) != "[get list]" {
			t.Errorf("dynamic apply (update) returned %v", updated.Object)
		}
		if got := fieldOwners(t, updated.GetManagedFields(), "metadata", "labels", "e2e"); strings.Join(got, " ") != "e2e-dynamic/Apply" {
			t.Errorf(".metadata.labels.e2e is owned by %v, want e2e-dynamic/Apply", got)
		}
		if n := len(updated.GetManagedFields()); n != 1 {
			t.Errorf("managedFields has %d entries, want one (e2e-dynamic's): %+v", n, updated.GetManagedFields())
		}
	})
}

// Spec 000 "Content negotiation" (merge patch, JSON patch; strategic merge patch from the README's
// upstream reference), "Server-side apply" 2 (apply needs fieldManager) and the "Field ownership
// (server-side apply)" table (a non-apply PATCH makes its manager an owner, operation Update);
// issue 4 "Patch and server-side apply": the dynamic client patches a Deployment with each patch
// type; an apply patch without fieldManager is a 400.
func TestClientGoPatch(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-patch-")
	ctx := ctxFor(t, 30*time.Second)
	deps := dyn.Resource(deploymentsGVR).Namespace(ns)
	created, err := deps.Create(ctx, deployment("web", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	merged, err := deps.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}},"spec":{"replicas":3}}`), metav1.PatchOptions{FieldManager: "e2e-merge"})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(merged.Object, "spec", "replicas"); r != 3 || merged.GetLabels()["tier"] != "front" || merged.GetLabels()["app"] != "web" {
		t.Errorf("merge patch: replicas %d, labels %v", r, merged.GetLabels())
	}
	if merged.GetResourceVersion() == created.GetResourceVersion() {
		t.Error("the merge patch did not change the resourceVersion")
	}
	if got := fieldOwners(t, merged.GetManagedFields(), "spec", "replicas"); strings.Join(got, " ") != "e2e-merge/Update" {
		t.Errorf(".spec.replicas after the merge patch is owned by %v, want e2e-merge/Update", got)
	}

	jp, err := deps.Patch(ctx, "web", types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.28"}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("JSON patch: %v", err)
	}
	if got := containerImages(jp); got != "web=nginx:1.28" {
		t.Errorf("JSON patch: containers %s", got)
	}
	// Without fieldManager the manager is the user agent's name before the first "/".
	if got := fieldOwners(t, jp.GetManagedFields(), "spec", "template", "spec", "containers", `k:{"name":"web"}`, "image"); !slices.Contains(got, "platform-e2e/Update") {
		t.Errorf("the image after the JSON patch is owned by %v, want platform-e2e/Update (the user agent's name)", got)
	}

	sm, err := deps.Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}`), metav1.PatchOptions{FieldManager: "e2e-strategic"})
	if err != nil {
		t.Fatalf("strategic merge patch: %v", err)
	}
	if got := containerImages(sm); got != "sidecar=busybox web=nginx:1.28" {
		t.Errorf("strategic merge patch: containers %s, want the sidecar added by name", got)
	}
	if got := fieldOwners(t, sm.GetManagedFields(), "spec", "template", "spec", "containers", `k:{"name":"sidecar"}`); strings.Join(got, " ") != "e2e-strategic/Update" {
		t.Errorf("the sidecar is owned by %v, want e2e-strategic/Update", got)
	}

	_, err = deps.Patch(ctx, "web", types.ApplyPatchType, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n"), metav1.PatchOptions{})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("apply patch without fieldManager: %v, want BadRequest (400)", err)
	}
	if got, err := deps.Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if got.GetResourceVersion() != sm.GetResourceVersion() {
		t.Errorf("the refused apply changed the object: resourceVersion %s (was %s)", got.GetResourceVersion(), sm.GetResourceVersion())
	}
}

// containerImages is "name=image" of each container of a Deployment's pod template, sorted
// (upstream's strategic merge puts a patch's new list elements first).
func containerImages(u *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, c := range cs {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprint(m["name"])+"="+fmt.Sprint(m["image"]))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
