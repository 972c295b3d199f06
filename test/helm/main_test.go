// Package helm tests the Helm chart charts/platform without a Kubernetes cluster: `helm lint`
// and `helm template` for every values file under charts/platform/ci/; every rendered object
// sent to a real Platform API server as a server-side dry run (so the API server's validation
// of Deployments, StatefulSets, PodDisruptionBudgets, NetworkPolicies, Jobs, ... judges them,
// not a schema of ours); every flag the chart passes to a service parsed by that service's own
// binary; the PKI hook's `platform certs` command run against the API with the arguments the
// chart renders; and `helm install`, `upgrade` and `uninstall` into the running Platform.
//
// Platform runs in the kubernetes naming profile here (the chart's apps/v1, policy/v1,
// networking.k8s.io/v1 and rbac.authorization.k8s.io/v1 objects are upstream's names); when
// the test binary starts in another profile it runs itself again with
// PLATFORM_NAMING_PROFILE=kubernetes. The Platform is the all-in-one (every service in one
// process, embedded storage): the same API code as the split stack, started in a second.
//
// Nothing runs the installed objects: Platform stores Deployments and Jobs but has no
// scheduler or kubelet, so these tests prove the chart renders, validates and installs, not
// that its pods start (docs/operations.md, "Helm").
//
// helm is the one on PATH when it is Helm 3, else `go install helm.sh/helm/v3/cmd/helm@<stack.HelmVersion>`
// into the user cache directory (once; about 5 minutes on a cold 2-core machine). Without Go's
// module proxy or a helm the tests fail; they do not skip.
package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

var (
	// setupErr is why the shared setup failed; every test reports it (fails, never skips).
	setupErr error
	platform *stack.Stack
	helmBin  string
	// chartDir is charts/platform; bins holds the service binaries stack.Build compiled.
	chartDir, bins string
	// helmEnv keeps helm's configuration, cache and data away from the user's.
	helmEnv []string
)

func TestMain(m *testing.M) {
	if naming.ProfileName() != naming.KubernetesProfile {
		os.Exit(rerunInKubernetesProfile())
	}
	os.Exit(run(m))
}

// rerunInKubernetesProfile runs this test binary again, with the same arguments, in the
// kubernetes naming profile (chosen when the naming package initialises, so not switchable
// inside the process), and returns its exit code.
func rerunInKubernetesProfile() int {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), naming.ProfileEnv+"="+naming.KubernetesProfile)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm tests: running again in the kubernetes naming profile:", err)
		return 1
	}
	return 0
}

func run(m *testing.M) int {
	defer stack.CleanupBuild()
	start := time.Now()
	chartDir = filepath.Join(stack.RepoRoot(), "charts", "platform")
	work, err := os.MkdirTemp("", "platform-helm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	helmEnv = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(work, "helm-config"), "HELM_CACHE_HOME="+filepath.Join(work, "helm-cache"),
		"HELM_DATA_HOME="+filepath.Join(work, "helm-data"), "HELM_NAMESPACE=", "KUBECONFIG=")
	setupErr = setup(work)
	fmt.Fprintf(os.Stderr, "helm tests: setup took %v\n", time.Since(start).Round(time.Millisecond))
	if platform != nil {
		defer platform.Stop()
	}
	return m.Run()
}

func setup(work string) error {
	var err error
	if helmBin, err = stack.Helm(); err != nil {
		return err
	}
	if bins, err = stack.Build(); err != nil {
		return err
	}
	if platform, err = stack.Start(stack.Options{Mode: stack.AllInOne, Dir: filepath.Join(work, "platform")}); err != nil {
		return fmt.Errorf("starting Platform: %w", err)
	}
	helmEnv = append(helmEnv, "KUBECONFIG="+platform.Kubeconfig)
	return installCRDs(filepath.Join(stack.RepoRoot(), "test", "helm", "testdata", "cert-manager-crds.yaml"))
}

// requireSetup fails the test when the shared setup did.
func requireSetup(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setup: %v", setupErr)
	}
}

// runHelm runs helm with args and returns its standard output; a failure fails the test.
func runHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmOutput(args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// helmOutput runs helm and returns its standard output, or an error with its standard error.
func helmOutput(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = helmEnv
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v\n%s%s", err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// valuesFiles are the chart's ci/*.yaml, by base name.
func valuesFiles(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range files {
		m[strings.TrimSuffix(filepath.Base(f), ".yaml")] = f
	}
	for _, want := range []string{"default-values", "external-redis-values", "redis-cluster-values", "cert-manager-values", "existing-secret-values", "kubernetes-profile-values"} {
		if m[want] == "" {
			t.Errorf("charts/platform/ci/%s.yaml is missing", want)
		}
	}
	return m
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseManifests splits helm's multi-document YAML into objects (empty documents dropped).
func parseManifests(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("parsing the rendered manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// restConfig is an admin client configuration for the Platform.
func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	cert, key, err := platform.ClientCert("helm-test-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: platform.URL, QPS: -1, UserAgent: "platform-helm-test",
		TLSClientConfig: rest.TLSClientConfig{CAData: platform.CAPEM, CertData: cert, KeyData: key}}
}

// client is a dynamic client and a REST mapper of the Platform's discovery.
type client struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newClient(t *testing.T) *client {
	t.Helper()
	cfg := restConfig(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &client{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// resource is the client of obj's kind, in obj's namespace (ns when it has none) when namespaced.
func (c *client) resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s is not served: %w", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dyn.Resource(mapping.Resource), nil
	}
	if obj.GetNamespace() != "" {
		ns = obj.GetNamespace()
	}
	return c.dyn.Resource(mapping.Resource).Namespace(ns), nil
}

// createNamespace creates namespace name (and deletes it at the end of the test).
func (c *client) createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := c.dyn.Resource(gvr).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.dyn.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// installCRDs creates the custom resource definitions in file and waits until they are served.
func installCRDs(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cert, key, err := platform.ClientCert("helm-test-admin", "system:masters")
	if err != nil {
		return err
	}
	cfg := &rest.Config{Host: platform.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: platform.CAPEM, CertData: cert, KeyData: key}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var names []string
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		obj := &unstructured.Unstructured{Object: m}
		if _, err := dyn.Resource(gvr).Create(context.Background(), obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CustomResourceDefinition %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for {
			got, err := dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CustomResourceDefinition %s not Established in 30s (%v)", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
