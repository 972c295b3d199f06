// Package envtest runs a controller-runtime test suite through
// sigs.k8s.io/controller-runtime/pkg/envtest, unchanged, with Platform's all-in-one as the
// control plane: KUBEBUILDER_ASSETS names a directory whose kube-apiserver and etcd are links to
// the all-in-one binary (its kube-apiserver and etcd stand-ins, services/allinone/envtest.go),
// which TestMain builds. Issue 36, part 3; the set-up for operator authors is in
// docs/operations.md, "envtest".
package envtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"platform.io/test/stack"
)

// assets is the KUBEBUILDER_ASSETS directory TestMain prepares.
var assets string

func TestMain(m *testing.M) {
	crlog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "platform-envtest-assets-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := prepareAssets(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		assets = dir
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// prepareAssets builds the all-in-one into dir (or takes it from $PLATFORM_BIN_DIR) and links
// kube-apiserver and etcd to it, then points envtest at dir as an operator's Makefile would.
func prepareAssets(dir string) error {
	bin := filepath.Join(dir, "platform")
	if prebuilt := os.Getenv("PLATFORM_BIN_DIR"); prebuilt != "" {
		bin = filepath.Join(prebuilt, "platform")
	} else {
		cmd := exec.Command("go", "build", "-o", bin, "./services/allinone")
		cmd.Dir = stack.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the all-in-one: %v\n%s", err, out)
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return os.Setenv("KUBEBUILDER_ASSETS", dir)
}

var widgetGVK = schema.GroupVersionKind{Group: "envtest.example.com", Version: "v1", Kind: "Widget"}

// newEnvironment is the suite's environment, as an operator's suite_test.go writes it.
func newEnvironment() *envtest.Environment {
	return &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "crds")}},
		ErrorIfCRDPathMissing: true,
	}
}

// widgetReconciler is an operator's reconciler: each Widget gets a ConfigMap it owns with its
// color, and its status records the generation it has seen.
type widgetReconciler struct{ c client.Client }

func (r *widgetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.c.Get(ctx, req.NamespacedName, w); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.GetNamespace(), Name: "widget-" + w.GetName()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.c, cm, func() error {
		cm.Data = map[string]string{"color": color}
		return controllerutil.SetControllerReference(w, cm, r.c.Scheme())
	}); err != nil {
		return reconcile.Result{}, err
	}
	if gen, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration"); gen == w.GetGeneration() {
		return reconcile.Result{}, nil
	}
	_ = unstructured.SetNestedField(w.Object, "Ready", "status", "phase")
	_ = unstructured.SetNestedField(w.Object, w.GetGeneration(), "status", "observedGeneration")
	return reconcile.Result{}, r.c.Status().Update(ctx, w)
}

// TestEnvtestSuite: envtest starts the control plane from KUBEBUILDER_ASSETS, installs the
// suite's CRD from CRDInstallOptions, and the suite creates and reads objects with
// controller-runtime's client and client-go's typed clientset, runs a manager with a reconciler
// (watches, its cache, the status subresource, owner references), and stops the control plane.
func TestEnvtestSuite(t *testing.T) {
	env := newEnvironment()
	began := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Logf("envtest started the control plane and installed the CRD in %v", time.Since(began).Round(time.Millisecond))
	defer func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	}()
	if len(env.CRDs) != 1 || env.CRDs[0].Name != "widgets.envtest.example.com" {
		t.Fatalf("installed CRDs: %v", env.CRDs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suite"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "suite", Name: "settings"}, Data: map[string]string{"a": "1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := typed.CoreV1().ConfigMaps("suite").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || got.Data["a"] != "1" {
		t.Fatalf("typed get: %v %v", got, err)
	}
	// The API server validates the CRD's schema (the enum).
	bad := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"color": "purple"}}}
	bad.SetGroupVersionKind(widgetGVK)
	bad.SetNamespace("suite")
	bad.SetName("bad")
	if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		t.Fatalf("a Widget against the schema: %v", err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(widgetGVK)
	if err := ctrl.NewControllerManagedBy(mgr).For(watched).Owns(&corev1.ConfigMap{}).Complete(&widgetReconciler{c: mgr.GetClient()}); err != nil {
		t.Fatal(err)
	}
	mctx, stopManager := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stopManager()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"color": "red"}}}
	w.SetGroupVersionKind(widgetGVK)
	w.SetNamespace("suite")
	w.SetName("first")
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 1 {
		t.Errorf("the schema's default: size %d", size)
	}
	reconciled := func(color string, generation int64) {
		t.Helper()
		stack.Eventually(t, 30*time.Second, "the Widget reconciled ("+color+")", func() error {
			var owned corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: "suite", Name: "widget-first"}, &owned); err != nil {
				return err
			}
			if owned.Data["color"] != color || len(owned.OwnerReferences) != 1 || owned.OwnerReferences[0].Kind != "Widget" {
				return fmt.Errorf("ConfigMap %v, owners %v", owned.Data, owned.OwnerReferences)
			}
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(widgetGVK)
			if err := c.Get(ctx, client.ObjectKey{Namespace: "suite", Name: "first"}, cur); err != nil {
				return err
			}
			phase, _, _ := unstructured.NestedString(cur.Object, "status", "phase")
			gen, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
			if phase != "Ready" || gen != generation {
				return fmt.Errorf("status %v, generation %d", cur.Object["status"], cur.GetGeneration())
			}
			return nil
		})
	}
	reconciled("red", 1)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"color":"blue"}}`))
	if err := c.Patch(ctx, w, patch); err != nil {
		t.Fatal(err)
	}
	reconciled("blue", 2)
}

// BenchmarkEnvtestStartStop is envtest's start (the control plane ready, the CRD installed)
// and stop per op: what every test package of an operator pays.
func BenchmarkEnvtestStartStop(b *testing.B) {
	var startTotal, stopTotal time.Duration
	for i := 0; i < b.N; i++ {
		env := newEnvironment()
		began := time.Now()
		if _, err := env.Start(); err != nil {
			b.Fatal(err)
		}
		stopping := time.Now()
		startTotal += stopping.Sub(began)
		if err := env.Stop(); err != nil {
			b.Fatal(err)
		}
		stopTotal += time.Since(stopping)
	}
	b.ReportMetric(float64(startTotal.Milliseconds())/float64(b.N), "start-ms/op")
	b.ReportMetric(float64(stopTotal.Milliseconds())/float64(b.N), "stop-ms/op")
}
