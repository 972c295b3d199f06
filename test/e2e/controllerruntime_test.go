package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"platform.io/test/stack"
)

// crLogs collects controller-runtime's log (a process-wide logger) for the tests that run it.
var crLogs struct {
	once sync.Once
	mu   sync.Mutex
	buf  bytes.Buffer
}

func crLogger() logr.Logger {
	crLogs.once.Do(func() {
		crlog.SetLogger(funcr.New(func(prefix, args string) {
			crLogs.mu.Lock()
			defer crLogs.mu.Unlock()
			fmt.Fprintf(&crLogs.buf, "%s %s %s\n", time.Now().Format("15:04:05.000"), prefix, args)
		}, funcr.Options{}))
	})
	return crlog.Log
}

// copier is an operator's reconciler: it copies each source ConfigMap's data into a Secret that
// the ConfigMap owns, puts the Secret back when someone changes it, and records an Event.
type copier struct {
	c      client.Client
	scheme *runtime.Scheme
	events record.EventRecorder
}

func (r *copier) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var src corev1.ConfigMap
	if err := r.c.Get(ctx, req.NamespacedName, &src); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !src.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: src.Name + "-copy", Namespace: src.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.c, dst, func() error {
		dst.Data = map[string][]byte{}
		for k, v := range src.Data {
			dst.Data[k] = []byte(v)
		}
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels["copied-from"] = src.Name
		return controllerutil.SetControllerReference(&src, dst, r.scheme)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		r.events.Eventf(&src, corev1.EventTypeNormal, "Copied", "secret %s %s", dst.Name, op)
	}
	return reconcile.Result{}, nil
}

// TestControllerRuntimeOperator runs an operator built with controller-runtime (the library
// kubebuilder and most operators use) against the shared stack, as a user whose only rights are a
// namespace's Role: discovery through its REST mapper, a namespaced cache of two types (list and
// watch), leader election on a Lease, CreateOrUpdate with an owner reference, an Event, an owner
// deleted and created again, and the Lease released when it stops.
func TestControllerRuntimeOperator(t *testing.T) {
	requireKubernetesProfile(t)
	controllerRuntimeOperator(t, useShared(t))
}

func TestControllerRuntimeOperatorAllInOne(t *testing.T) {
	requireKubernetesProfile(t)
	t.Parallel()
	controllerRuntimeOperator(t, startStack(t, stack.Options{Mode: stack.AllInOne}))
}

func controllerRuntimeOperator(t *testing.T, s *stack.Stack) {
	ctx := ctxFor(t, 3*time.Minute)
	admin, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, dynamicClient(t, s), "e2e-operator-")

	// The operator's rights: a Role in its namespace, as an operator's install would bind.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "copier"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
	}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the operator's Role: %v", err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "copier"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "copier"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "e2e-copier"}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the operator's RoleBinding: %v", err)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	const leaseName = "copier-leader"
	mgr, err := ctrl.NewManager(restConfig(t, s, "e2e-copier", "e2e-operators"), ctrl.Options{
		Scheme:                        scheme,
		Logger:                        crLogger(),
		Cache:                         crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(15 * time.Second),
		RenewDeadline:                 ptr.To(10 * time.Second),
		RetryPeriod:                   ptr.To(time.Second),
		Controller:                    crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	isSource := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()["role"] == "source" })
	err = ctrl.NewControllerManagedBy(mgr).Named("copier").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isSource)).
		Owns(&corev1.Secret{}).
		Complete(&copier{c: mgr.GetClient(), scheme: scheme, events: mgr.GetEventRecorderFor("copier")})
	if err != nil {
		t.Fatalf("building the controller: %v", err)
	}
	defer func() {
		if t.Failed() {
			crLogs.mu.Lock()
			t.Logf("--- controller-runtime log ---\n%s", tail(crLogs.buf.String(), 60))
			crLogs.mu.Unlock()
		}
	}()

	mgrCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mgrCtx) }()
	stopOnce := sync.OnceValue(func() error {
		stop()
		select {
		case err := <-stopped:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("the manager did not stop within 30s")
		}
	})
	t.Cleanup(func() { _ = stopOnce() })

	select {
	case <-mgr.Elected():
	case err := <-stopped:
		t.Fatalf("the manager stopped before it was elected: %v", err)
	case <-ctx.Done():
		t.Fatal("the manager was not elected leader")
	}
	lease, err := admin.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader's Lease: %v", err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" || lease.Spec.RenewTime == nil {
		t.Fatalf("the Lease names no holder: %+v", lease.Spec)
	}

	// waitSecret polls for the copy until ok accepts it.
	waitSecret := func(what string, ok func(*corev1.Secret, error) bool) *corev1.Secret {
		t.Helper()
		var last *corev1.Secret
		var lastErr error
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			last, lastErr = admin.CoreV1().Secrets(ns).Get(ctx, "src-copy", metav1.GetOptions{})
			if ok(last, lastErr) {
				return last
			}
		}
		t.Fatalf("%s: the last read was %+v, %v", what, last, lastErr)
		return nil
	}
	hasData := func(want map[string]string) func(*corev1.Secret, error) bool {
		return func(sec *corev1.Secret, err error) bool {
			if err != nil {
				return false
			}
			got := map[string]string{}
			for k, v := range sec.Data {
				got[k] = string(v)
			}
			return maps.Equal(got, want)
		}
	}

	createSource := func(data map[string]string) *corev1.ConfigMap {
		t.Helper()
		cm, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "src", Labels: map[string]string{"role": "source"}},
			Data:       data,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}

	// A source: the copy appears, owned by it.
	src := createSource(map[string]string{"a": "1"})
	// Not a source: the predicate keeps it from the reconciler, so it gets no copy.
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "other"}, Data: map[string]string{"b": "2"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec := waitSecret("the copy of a new source", hasData(map[string]string{"a": "1"}))
	owner := metav1.GetControllerOf(sec)
	if owner == nil || owner.UID != src.UID || owner.Kind != "ConfigMap" || owner.Name != "src" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
		t.Errorf("the copy's controller reference: %+v", sec.OwnerReferences)
	}
	if sec.Labels["copied-from"] != "src" {
		t.Errorf("the copy's labels: %v", sec.Labels)
	}

	// The source changes: so does the copy.
	src.Data = map[string]string{"a": "2", "c": "3"}
	if src, err = admin.CoreV1().ConfigMaps(ns).Update(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec = waitSecret("the copy of an updated source", hasData(map[string]string{"a": "2", "c": "3"}))

	// Someone else changes the copy: the owner's watch of Secrets brings it back.
	sec.Data = map[string][]byte{"a": []byte("tampered")}
	if _, err := admin.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSecret("the copy after it was changed by hand", hasData(map[string]string{"a": "2", "c": "3"}))

	// The operator's Events reached the API, about the source.
	var events *corev1.EventList
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		events, err = admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=src"})
		if err == nil && len(events.Items) > 0 {
			break
		}
	}
	found := false
	if events != nil {
		for _, ev := range events.Items {
			if ev.Reason == "Copied" && ev.InvolvedObject.UID == src.UID && ev.Source.Component == "copier" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no Copied Event about src: %+v, %v", events, err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Get(ctx, "other-copy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a ConfigMap the predicate excludes was copied: %v", err)
	}

	// The source is deleted and created again with other data (a new UID): the operator's cache
	// sees both, and the copy follows the new source, whose controller reference replaces the old.
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	src2 := createSource(map[string]string{"d": "4"})
	if src2.UID == src.UID {
		t.Fatalf("the re-created source kept the UID %s", src.UID)
	}
	sec = waitSecret("the copy of the re-created source", hasData(map[string]string{"d": "4"}))
	if owner := metav1.GetControllerOf(sec); owner == nil || owner.UID != src2.UID || len(sec.OwnerReferences) != 1 {
		t.Errorf("the copy's owner references after the source was re-created: %+v (new source %s)", sec.OwnerReferences, src2.UID)
	}

	// Stopping releases the Lease (ReleaseOnCancel), so a successor need not wait it out.
	if err := stopOnce(); err != nil {
		t.Fatalf("the manager: %v", err)
	}
	lease, err = admin.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("the Lease is still held by %q after the manager stopped", h)
	}

	// With the operator stopped, deleting the source takes its copy along: the garbage collector
	// deletes what the owner reference says the source owns.
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "src", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := admin.CoreV1().Secrets(ns).Get(ctx, "src-copy", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy outlived its owner by a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
