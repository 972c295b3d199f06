package e2e

// Issue 38, upstream compatibility gaps, end to end with upstream's own clients: /openapi/v2
// (client-go's discovery OpenAPISchema, kubectl explain, kubectl's client-side validation models,
// Helm), server-side apply's field validation, continue after compaction and custom resource
// defaults applied on read. Run in both naming profiles (PLATFORM_NAMING_PROFILE=kubernetes).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	utilproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"sigs.k8s.io/yaml"

	"platform.io/test/stack"
)

// compatGroup is the group of the definitions these tests create.
const compatGroup = "compat.example.com"

// gearCRD is a namespaced kind with a closed schema in v1 (an integer, an enum, a string
// without default, an embedded resource) and a v2 whose root keeps unknown fields.
var gearCRD = `apiVersion: ` + crdsGVR.GroupVersion().String() + `
kind: CustomResourceDefinition
metadata:
  name: gears.` + compatGroup + `
spec:
  group: ` + compatGroup + `
  scope: Namespaced
  names: {plural: gears, singular: gear, kind: Gear}
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
              size: {type: integer, description: How big the gear is.}
              color: {type: string, enum: [red, blue]}
              teeth: {type: string}
              template:
                type: object
                x-kubernetes-embedded-resource: true
                properties:
                  metadata: {type: object, properties: {name: {type: string}}}
                  spec: {type: object}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
            properties:
              foo: {type: string}
`

// warningRecorder keeps the Warning headers a client received.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings recorded since the last call.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// openAPIModels reads /openapi/v2 through client-go's discovery (Protobuf, as kubectl reads it)
// into kube-openapi's models, those of kubectl's client-side validation and explain.
func openAPIModels(t *testing.T, cfg *rest.Config) (utilproto.Models, error) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dc.OpenAPISchema()
	if err != nil {
		return nil, err
	}
	return utilproto.NewOpenAPIData(doc)
}

// validateWith validates a YAML object against a model as kubectl's client-side validation does.
func validateWith(t *testing.T, m utilproto.Models, model, obj string) string {
	t.Helper()
	s := m.LookupModel(model)
	if s == nil {
		t.Fatalf("no model %s in /openapi/v2", model)
	}
	var o any
	if err := yaml.Unmarshal([]byte(obj), &o); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, err := range validation.ValidateModel(o, s, model) {
		msgs = append(msgs, err.Error())
	}
	return strings.Join(msgs, "\n")
}

// Built-in kinds in /openapi/v2 on the shared stack: JSON and Protobuf with one ETag, 304 for a
// matching If-None-Match, and models kubectl's client-side validation reads through client-go's
// discovery (a Deployment with a wrong type and an unknown field is refused with kubectl's
// messages).
func TestCompatOpenAPIV2(t *testing.T) {
	s := useShared(t)
	cfg := restConfig(t, s, "e2e-admin")
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/openapi/v2", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}
	resp, data := get("Accept", "application/json")
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || etag == "" || !bytes.Contains(data, []byte(`"swagger":"2.0"`)) {
		t.Fatalf("GET /openapi/v2: %d %s ETag %q %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), etag, data)
	}
	resp, data = get("Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	var doc openapi_v2.Document
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" ||
		proto.Unmarshal(data, &doc) != nil || doc.GetSwagger() != "2.0" {
		t.Fatalf("GET /openapi/v2 as Protobuf: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get("If-None-Match", etag); resp.StatusCode != http.StatusNotModified && resp.Header.Get("Etag") == etag {
		t.Errorf("If-None-Match of the current ETag: %d", resp.StatusCode)
	}
	m, err := openAPIModels(t, cfg)
	if err != nil {
		t.Fatalf("client-go's OpenAPISchema: %v", err)
	}
	msgs := validateWith(t, m, "io.k8s.api.apps.v1.Deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: three\n  bogus: 1\n  selector: {}\n  template: {}\n")
	for _, want := range []string{`invalid type for io.k8s.api.apps.v1.DeploymentSpec.replicas: got "string", expected "integer"`, `unknown field "bogus" in io.k8s.api.apps.v1.DeploymentSpec`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("kubectl's validation of a Deployment: %q lacks %q", msgs, want)
		}
	}
}

// Server-side apply's field validation of built-in kinds on the shared stack: an unknown field
// in spec or metadata is the field manager's schema error, at every level (kubectl apply
// --server-side shows it); keys set twice are refused by Strict with their line and are one
// warning each under Warn.
func TestCompatApplyFieldValidationBuiltin(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-compat-apply-")
	ctx := ctxFor(t, time.Minute)
	cfg := restConfig(t, s, "e2e-admin")
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	wdyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dep := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: my-dep\n  namespace: " + ns + "\n  labels: {app: nginx}%s\nspec:\n  %s\n  selector:\n    matchLabels: {app: nginx}\n  template:\n    metadata:\n      labels: {app: nginx}\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:latest\n"
	for _, c := range []struct{ meta, spec, want string }{
		{"", "unknownField: foo", ".spec.unknownField: field not declared in schema"},
		{"\n  unknownMeta: foo", "replicas: 2", ".metadata.unknownMeta: field not declared in schema"},
	} {
		body := fmt.Sprintf(dep, c.meta, c.spec)
		for _, fv := range []string{"Strict", "Warn"} {
			_, err := dyn.Resource(deploymentsGVR).Namespace(ns).Patch(ctx, "my-dep", types.ApplyPatchType, []byte(body),
				metav1.PatchOptions{FieldManager: "e2e", FieldValidation: fv})
			want := "failed to create typed patch object (" + ns + "/my-dep; apps/v1, Kind=Deployment): " + c.want
			if err == nil || err.Error() != want {
				t.Errorf("apply (%s): %v, want %q", fv, err, want)
			}
		}
	}
	// kubectl apply --server-side (fieldValidation=Strict) prints the same message.
	k := newKubectl(t, s, ns)
	_, errs, code := k.run(fmt.Sprintf(dep, "", "unknownField: foo"), "apply", "--server-side", "-f", "-")
	if code == 0 || !strings.Contains(errs, ".spec.unknownField: field not declared in schema") {
		t.Errorf("kubectl apply --server-side of an unknown field: exit %d, %q", code, errs)
	}

	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dups\ndata:\n  a: \"1\"\n  a: \"2\"\n  b: \"1\"\n  b: \"2\"\n"
	_, err = wdyn.Resource(configMapsGVR).Namespace(ns).Patch(ctx, "dups", types.ApplyPatchType, []byte(cm), metav1.PatchOptions{FieldManager: "e2e", FieldValidation: "Strict"})
	const strictMsg = "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map\n  line 9: key \"b\" already set in map"
	if !apierrors.IsBadRequest(err) || err.Error() != strictMsg {
		t.Errorf("Strict apply with duplicate keys: %v, want %q", err, strictMsg)
	}
	warnings.take()
	got, err := wdyn.Resource(configMapsGVR).Namespace(ns).Patch(ctx, "dups", types.ApplyPatchType, []byte(cm), metav1.PatchOptions{FieldManager: "e2e", FieldValidation: "Warn"})
	if err != nil {
		t.Fatal(err)
	}
	if w := warnings.take(); strings.Join(w, "|") != `line 7: key "a" already set in map|line 9: key "b" already set in map` {
		t.Errorf("Warn apply with duplicate keys: warnings %q", w)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "b"); v != "2" {
		t.Errorf("applied data %v", got.Object["data"])
	}
}

// Continue after compaction with client-go on a stack whose storage keeps little history: the
// expired token is 410 Expired carrying upstream's inconsistent continue token in the Status,
// and listing with it returns the rest of the items (those created since included) at the
// latest revision.
func TestCompatContinueAfterCompaction(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.Split, StorageArgs: []string{"--history-max-events=20", "--compaction-interval=100ms"}})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-compat-continue-")
	ctx := ctxFor(t, time.Minute)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	for i := range 6 {
		if _, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%d", i), nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || first.GetContinue() == "" || len(first.Items) != 2 {
		t.Fatalf("first page: %v, %d items, continue %q", err, len(first.Items), first.GetContinue())
	}
	if _, err := cms.Create(ctx, configMap("cm-9", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var expired error
	stack.Eventually(t, 30*time.Second, "the first page's revision compacted", func() error {
		for i := range 10 {
			if _, err := cms.Update(ctx, configMap("cm-5", nil, map[string]string{"i": fmt.Sprint(i)}), metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		_, expired = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.GetContinue()})
		if !apierrors.IsResourceExpired(expired) {
			return fmt.Errorf("continue: %v", expired)
		}
		return nil
	})
	var status apierrors.APIStatus
	if !errors.As(expired, &status) || status.Status().Code != http.StatusGone || status.Status().ListMeta.Continue == "" ||
		!strings.Contains(status.Status().Message, "use the continue token in this response to retrieve the remainder of the results") {
		t.Fatalf("410: %#v, want an inconsistent continue token and upstream's message", expired)
	}
	latest, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	token := status.Status().ListMeta.Continue
	for token != "" {
		page, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: token})
		if err != nil {
			t.Fatalf("following the inconsistent continue token: %v", err)
		}
		if page.GetResourceVersion() != latest.GetResourceVersion() {
			t.Errorf("page at %s, want the latest revision %s", page.GetResourceVersion(), latest.GetResourceVersion())
		}
		for _, it := range page.Items {
			if strings.HasPrefix(it.GetName(), "cm-") { // not the root CA publisher's
				names = append(names, it.GetName())
			}
		}
		token = page.GetContinue()
	}
	if got := strings.Join(names, " "); got != "cm-2 cm-3 cm-4 cm-5 cm-9" {
		t.Errorf("the rest of the list: %s, want cm-2 cm-3 cm-4 cm-5 cm-9", got)
	}
}

// Custom resources on a stack of their own (definitions change discovery, which tests on the
// shared stack read): server-side apply's field validation names the full path of unknown
// fields (metadata and embedded resources too) and the line of duplicate keys; a default added
// to the definition shows in gets, lists and watches of stored objects without rewriting them;
// Helm refuses a chart whose manifest has a wrong field type; /openapi/v2 publishes every served version under <reversed
// group>.<version>.<kind> and follows definition changes within seconds, client-go's
// OpenAPISchema and kubectl explain (v3 and v2) describe the kind, kubectl's client-side
// validation models refuse a wrong type.
func TestCompatCustomResources(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.Split})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-compat-")
	ctx := ctxFor(t, 4*time.Minute)
	cfg := restConfig(t, s, "e2e-admin")
	var def unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(gearCRD), &def.Object); err != nil {
		t.Fatal(err)
	}
	createEstablished(t, ctx, dyn, &def)
	gears := schema.GroupVersionResource{Group: compatGroup, Version: "v1", Resource: "gears"}
	k := newKubectl(t, s, ns)

	t.Run("ApplyFieldValidation", func(t *testing.T) {
		wcfg := restConfig(t, s, "e2e-admin")
		warnings := &warningRecorder{}
		wcfg.WarningHandler = warnings
		wdyn, err := dynamic.NewForConfig(wcfg)
		if err != nil {
			t.Fatal(err)
		}
		apply := func(version, name, body, fv string) (*unstructured.Unstructured, error) {
			gvr := gears
			gvr.Version = version
			return wdyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "field_validation_mgr", FieldValidation: fv})
		}
		head := func(version, name string) string {
			return "apiVersion: " + compatGroup + "/" + version + "\nkind: Gear\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n"
		}
		for _, c := range []struct{ name, body, want string }{
			{"root", head("v1", "root") + "unknownField: unknown\nspec:\n  size: 1\n", ".unknownField: field not declared in schema"},
			{"spec", head("v1", "spec") + "spec:\n  size: 1\n  extra: 1\n", ".spec.extra: field not declared in schema"},
			{"meta", head("v1", "meta") + "  unknownMeta: unknown\nspec:\n  size: 1\n", ".metadata.unknownMeta: field not declared in schema"},
			{"submeta", head("v1", "submeta") + "spec:\n  template:\n    apiVersion: foo/v1\n    kind: Sub\n    metadata:\n      unknownSubMeta: unknown\n      name: subobject\n", ".spec.template.metadata.unknownSubMeta: field not declared in schema"},
		} {
			for _, fv := range []string{"Strict", "Warn", ""} {
				_, err := apply("v1", c.name, c.body, fv)
				want := "failed to create typed patch object (" + ns + "/" + c.name + "; " + compatGroup + "/v1, Kind=Gear): " + c.want
				if err == nil || err.Error() != want {
					t.Errorf("%s (fieldValidation %q): %v, want %q", c.name, fv, err, want)
				}
			}
		}
		// Duplicate keys under preserved unknown fields (v2 keeps them): upstream's line 9.
		dup := "\n" + head("v2", "%s") + "spec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n"
		if _, err := apply("v2", "dup", strings.Replace(dup, "%s", "dup", 1), "Strict"); err == nil || !strings.Contains(err.Error(), `line 10: key "foo" already set in map`) {
			t.Errorf("Strict apply with a duplicate key: %v", err)
		}
		warnings.take()
		got, err := apply("v2", "dupwarn", strings.Replace(dup, "%s", "dupwarn", 1), "Warn")
		if err != nil {
			t.Fatal(err)
		}
		if w := warnings.take(); len(w) != 1 || w[0] != `line 10: key "foo" already set in map` {
			t.Errorf("Warn apply with a duplicate key: warnings %q", w)
		}
		if foo, _, _ := unstructured.NestedString(got.Object, "spec", "foo"); foo != "foo2" {
			t.Errorf("applied spec %v", got.Object["spec"])
		}
		// kubectl apply --server-side shows the field manager's message.
		_, errs, code := k.run(head("v1", "kubectl")+"spec:\n  size: 1\n  extra: 1\n", "apply", "--server-side", "-f", "-")
		if code == 0 || !strings.Contains(errs, ".spec.extra: field not declared in schema") {
			t.Errorf("kubectl apply --server-side: exit %d, %q", code, errs)
		}
	})

	t.Run("DefaultsOnRead", func(t *testing.T) {
		cr := dyn.Resource(gears).Namespace(ns)
		before, err := cr.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": compatGroup + "/v1", "kind": "Gear",
			"metadata": map[string]any{"name": "stored"}, "spec": map[string]any{"size": int64(3)}}}
		created, err := cr.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedString(created.Object, "spec", "teeth"); found {
			t.Fatalf("defaulted before the definition has a default: %v", created.Object["spec"])
		}
		crd, err := dyn.Resource(crdsGVR).Get(ctx, def.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		_ = unstructured.SetNestedField(versions[0].(map[string]any), "sharp", "schema", "openAPIV3Schema", "properties", "spec", "properties", "teeth", "default")
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		if _, err := dyn.Resource(crdsGVR).Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		defaulted := func(u *unstructured.Unstructured) bool {
			teeth, _, _ := unstructured.NestedString(u.Object, "spec", "teeth")
			size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
			return teeth == "sharp" && size == 3 && u.GetResourceVersion() == created.GetResourceVersion()
		}
		stack.Eventually(t, 10*time.Second, "the new default on a get", func() error {
			got, err := cr.Get(ctx, "stored", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !defaulted(got) {
				return fmt.Errorf("not defaulted: %v (resourceVersion %s)", got.Object["spec"], got.GetResourceVersion())
			}
			return nil
		})
		for _, opts := range []metav1.ListOptions{{}, {Limit: 1}, {ResourceVersion: "0"}} {
			list, err := cr.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				if list.Items[i].GetName() == "stored" && !defaulted(&list.Items[i]) {
					t.Errorf("list %+v: %v", opts, list.Items[i].Object["spec"])
				}
			}
		}
		w, err := cr.Watch(ctx, metav1.ListOptions{ResourceVersion: before.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			u, ok := ev.Object.(*unstructured.Unstructured)
			if ev.Type != watch.Added || !ok || !defaulted(u) {
				t.Errorf("watch from before the creation: %s %v", ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Error("no watch event")
		}
		if out := k.ok("", "get", "gears", "stored", "-o", "jsonpath={.spec.teeth}"); out != "sharp" {
			t.Errorf("kubectl get: %q", out)
		}
	})

	t.Run("Helm", func(t *testing.T) {
		helm := helmBinary(t)
		dir := t.TempDir()
		env := append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
			"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_DATA_HOME="+filepath.Join(dir, "data"), "HELM_NAMESPACE=")
		chart := func(name, manifest string) string {
			d := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Join(d, "templates"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, d, "Chart.yaml", "apiVersion: v2\nname: "+name+"\nversion: 0.1.0\n")
			writeFile(t, filepath.Join(d, "templates"), "manifest.yaml", manifest)
			return d
		}
		install := func(release, dir string) (string, error) {
			c, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(c, helm, "install", release, dir, "--namespace", ns, "--timeout", "1m")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: %s\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - {name: web, image: nginx}\n"
		gear := "apiVersion: " + compatGroup + "/v1\nkind: Gear\nmetadata:\n  name: helm-gear\nspec:\n  size: %s\n"
		for _, c := range []struct{ name, manifest, want string }{
			{"bad-deployment", fmt.Sprintf(deployment, `"three"`), "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"},
			{"bad-gear", fmt.Sprintf(gear, `"big"`), `spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`},
		} {
			out, err := install(c.name, chart(c.name, c.manifest))
			if err == nil || !strings.Contains(out, "INSTALLATION FAILED") || !strings.Contains(out, c.want) {
				t.Errorf("helm install %s: %v\n%s\nwant it refused with %q", c.name, err, out, c.want)
			}
		}
		if out, err := install("good-gear", chart("good-gear", fmt.Sprintf(gear, "3"))); err != nil {
			t.Errorf("helm install of a valid chart: %v\n%s", err, out)
		}
	})

	t.Run("OpenAPIV2", func(t *testing.T) {
		var m utilproto.Models
		stack.Eventually(t, 10*time.Second, "Gear in /openapi/v2", func() error {
			var err error
			if m, err = openAPIModels(t, cfg); err != nil {
				return err
			}
			if m.LookupModel("com.example.compat.v1.Gear") == nil || m.LookupModel("com.example.compat.v2.Gear") == nil || m.LookupModel("com.example.compat.v1.GearList") == nil {
				return fmt.Errorf("no Gear models yet")
			}
			return nil
		})
		msgs := validateWith(t, m, "com.example.compat.v1.Gear", "apiVersion: compat.example.com/v1\nkind: Gear\nmetadata: {name: g}\nspec:\n  size: big\n  bogus: 1\n")
		for _, want := range []string{`invalid type for com.example.compat.v1.Gear.spec.size: got "string", expected "integer"`, `unknown field "bogus" in com.example.compat.v1.Gear.spec`} {
			if !strings.Contains(msgs, want) {
				t.Errorf("kubectl's validation of a Gear: %q lacks %q", msgs, want)
			}
		}
		// v2 keeps unknown fields at its root: a bare object, nothing refused.
		if msgs := validateWith(t, m, "com.example.compat.v2.Gear", "apiVersion: compat.example.com/v2\nkind: Gear\nmetadata: {name: g}\nanything: 1\n"); msgs != "" {
			t.Errorf("a schema keeping unknown fields refuses %q", msgs)
		}
		// kubectl explain through OpenAPI v3 (its default) and v2.
		// v2 is the preferred version (kube-aware order, as upstream): v1 is asked for.
		for _, args := range [][]string{{"explain", "gears.spec", "--api-version=" + compatGroup + "/v1"}, {"explain", "gears.spec", "--api-version=" + compatGroup + "/v1", "--output=plaintext-openapiv2"}} {
			out := k.ok("", args...)
			if !strings.Contains(out, "Gear") || !strings.Contains(out, "size") || !strings.Contains(out, "<integer>") || !strings.Contains(out, "How big the gear is.") {
				t.Errorf("kubectl %s:\n%s", strings.Join(args, " "), out)
			}
		}

		// A version renamed, one no longer served, a schema changed: the document follows
		// within seconds.
		crd, err := dyn.Resource(crdsGVR).Get(ctx, def.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		v1, v2 := versions[0].(map[string]any), versions[1].(map[string]any)
		v2["name"] = "v3"
		_ = unstructured.SetNestedField(v1, map[string]any{"type": "integer"}, "schema", "openAPIV3Schema", "properties", "spec", "properties", "weight")
		_ = unstructured.SetNestedSlice(crd.Object, []any{v1, v2}, "spec", "versions")
		if crd, err = dyn.Resource(crdsGVR).Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stack.Eventually(t, 10*time.Second, "the changed definition in /openapi/v2", func() error {
			m, err := openAPIModels(t, cfg)
			if err != nil {
				return err
			}
			if m.LookupModel("com.example.compat.v2.Gear") != nil || m.LookupModel("com.example.compat.v3.Gear") == nil {
				return fmt.Errorf("the renamed version is not published as v3 yet")
			}
			if msgs := validateWith(t, m, "com.example.compat.v1.Gear", "spec: {weight: heavy}\n"); !strings.Contains(msgs, "com.example.compat.v1.Gear.spec.weight") {
				return fmt.Errorf("the new field is not published yet: %q", msgs)
			}
			return nil
		})
		versions, _, _ = unstructured.NestedSlice(crd.Object, "spec", "versions")
		versions[1].(map[string]any)["served"] = false
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		if _, err := dyn.Resource(crdsGVR).Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stack.Eventually(t, 10*time.Second, "the version no longer served gone from /openapi/v2", func() error {
			m, err := openAPIModels(t, cfg)
			if err != nil {
				return err
			}
			if m.LookupModel("com.example.compat.v3.Gear") != nil {
				return fmt.Errorf("v3 is still published")
			}
			return nil
		})
	})
}

// helmBinary is Helm 3 (stack.Helm: the one on PATH, else one installed into the user cache
// directory); without it the test fails.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin, err := stack.Helm()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
