package namespace_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/namespace"
)

// bound covers the deletion grace period, the requeue after objects held by finalizers (8s, as
// upstream) and the work itself.
const bound = 40 * time.Second

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func start(t *testing.T) *testenv.Env {
	env := testenv.Start(t)
	f := env.Informers()
	c, err := namespace.New(env.Clients.Kubernetes, env.Clients.Dynamic, env.Clients.Discovery, f.Core().V1().Namespaces(),
		namespace.Options{DeletionGracePeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 2) }, f)
	return env
}

// defineWidgets creates the custom resource widgets.example.com and establishes it (the
// gateway's own definition controller is off in these tests, so the test writes the status that
// controller would).
func defineWidgets(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	crds := env.Admin.Dynamic.Resource(schema.GroupVersionResource{Group: naming.Group("apiextensions.k8s.io"), Version: "v1", Resource: "customresourcedefinitions"})
	names := map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": naming.Group("apiextensions.k8s.io") + "/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced", "names": names,
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]any{
		"acceptedNames":  names,
		"storedVersions": []any{"v1"},
		"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
			map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
		},
	}
	if _, err := crds.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "widgets served", func() (bool, string) {
		_, err := env.Admin.Dynamic.Resource(widgets).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, testenv.Short(err)
	})
}

func widget(name string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name}, "spec": map[string]any{"size": 3}}}
	u.SetFinalizers(finalizers)
	return u
}

func namespaceGone(env *testenv.Env, ns string) func() (bool, string) {
	return func() (bool, string) {
		n, err := env.Admin.Kubernetes.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, testenv.Short(err)
		}
		return false, fmt.Sprintf("phase %s, spec.finalizers %v, conditions %v", n.Status.Phase, n.Spec.Finalizers, n.Status.Conditions)
	}
}

// Upstream rule: deleting a namespace removes every namespaced object in it (built-in kinds of
// several groups and custom resources), then the namespace itself; other namespaces keep theirs.
func TestNamespaceContentDeleted(t *testing.T) {
	env := start(t)
	defineWidgets(t, env)
	ctx := context.Background()
	ns := env.Namespace("doomed")
	neighbour := env.Namespace("neighbour")
	core := env.Admin.Kubernetes.CoreV1()
	for _, n := range []string{ns, neighbour} {
		if _, err := core.ConfigMaps(n).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	if _, err := env.Admin.RBAC.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Dynamic.Resource(widgets).Namespace(ns).Create(ctx, widget("w1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := func(what string, list func() (int, error)) {
		testenv.Eventually(t, bound, what+" deleted", func() (bool, string) {
			n, err := list()
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			return err == nil && n == 0, fmt.Sprintf("%d left, %v", n, testenv.Short(err))
		})
	}
	empty("configmaps", func() (int, error) {
		l, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return lenOf(l, err, func() int { return len(l.Items) })
	})
	empty("secrets", func() (int, error) {
		l, err := core.Secrets(ns).List(ctx, metav1.ListOptions{})
		return lenOf(l, err, func() int { return len(l.Items) })
	})
	empty("service accounts", func() (int, error) {
		l, err := core.ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		return lenOf(l, err, func() int { return len(l.Items) })
	})
	empty("roles", func() (int, error) {
		l, err := env.Admin.RBAC.Roles(ns).List(ctx, metav1.ListOptions{})
		return lenOf(l, err, func() int { return len(l.Items) })
	})
	empty("widgets", func() (int, error) {
		l, err := env.Admin.Dynamic.Resource(widgets).Namespace(ns).List(ctx, metav1.ListOptions{})
		return lenOf(l, err, func() int { return len(l.Items) })
	})
	testenv.Eventually(t, bound, "the namespace removed", namespaceGone(env, ns))
	if _, err := core.ConfigMaps(neighbour).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Fatalf("the neighbour's configmap: %v", err)
	}
}

func lenOf[T any](l *T, err error, n func() int) (int, error) {
	if err != nil || l == nil {
		return 0, err
	}
	return n(), nil
}

func condition(n *corev1.Namespace, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Upstream rule: objects held by finalizers keep the namespace (and its "kubernetes" finalizer)
// while the namespace conditions say what remains and which finalizers hold it; once the
// finalizers go, the namespace goes.
func TestNamespaceWaitsForFinalizers(t *testing.T) {
	env := start(t)
	defineWidgets(t, env)
	ctx := context.Background()
	ns := env.Namespace("held")
	core := env.Admin.Kubernetes.CoreV1()
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}
	if _, err := core.ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin.Dynamic.Resource(widgets).Namespace(ns).Create(ctx, widget("w-held", "example.com/hold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "free"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{
		corev1.NamespaceDeletionDiscoveryFailure: {Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
		corev1.NamespaceDeletionGVParsingFailure: {Status: corev1.ConditionFalse, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed"},
		corev1.NamespaceDeletionContentFailure:   {Status: corev1.ConditionFalse, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
		corev1.NamespaceContentRemaining: {Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 1 resource instances"},
		corev1.NamespaceFinalizersRemaining: {Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain",
			Message: "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"},
	}
	testenv.Eventually(t, bound, "the conditions of a namespace held by finalizers", func() (bool, string) {
		n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		for typ, w := range want {
			c := condition(n, typ)
			if c == nil || c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message || c.LastTransitionTime.IsZero() {
				return false, fmt.Sprintf("%s = %+v", typ, c)
			}
		}
		return true, ""
	})
	n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Phase != corev1.NamespaceTerminating || !slices.Contains(n.Spec.Finalizers, namespace.Finalizer) {
		t.Fatalf("a namespace with content left must keep terminating with its finalizer: phase %s, finalizers %v", n.Status.Phase, n.Spec.Finalizers)
	}
	if _, err := core.ConfigMaps(ns).Get(ctx, "free", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the configmap without finalizers should be gone: %v", err)
	}
	cm, err := core.ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("the held configmap should be marked for deletion: %v", err)
	}

	// The finalizers go: so does everything else.
	cm.Finalizers = nil
	if _, err := core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := env.Admin.Dynamic.Resource(widgets).Namespace(ns).Get(ctx, "w-held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetFinalizers(nil)
	if _, err := env.Admin.Dynamic.Resource(widgets).Namespace(ns).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the namespace removed after its finalizers", namespaceGone(env, ns))
}

// Upstream rule: the controller removes only its own spec.finalizers entry; a namespace another
// actor's finalizer holds stays Terminating until that actor finalizes it.
func TestOtherFinalizersKeepNamespace(t *testing.T) {
	env := start(t)
	ctx := context.Background()
	core := env.Admin.Kubernetes.CoreV1()
	name := fmt.Sprintf("shared-%d", time.Now().UnixNano()%100000)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{namespace.Finalizer, "example.com/other"}}}
	if _, err := core.Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := core.Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Namespace
	testenv.Eventually(t, bound, "only the controller's finalizer removed", func() (bool, string) {
		n, err := core.Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		last = n
		return slices.Equal(n.Spec.Finalizers, []corev1.FinalizerName{"example.com/other"}), fmt.Sprint(n.Spec.Finalizers)
	})
	if last.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("phase = %s, want Terminating", last.Status.Phase)
	}
	if _, err := core.ConfigMaps(name).Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the content should be gone before the finalizer: %v", err)
	}
	// The other actor finishes: the namespace goes.
	last.Spec.Finalizers = nil
	if _, err := core.Namespaces().Finalize(ctx, last, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the namespace removed once finalized", namespaceGone(env, name))
}

// Upstream rule: a namespace's pods are deleted gracefully, so the namespace waits for those a
// node still runs (for their longest grace period, without reporting a failure), while pods no
// node runs go at once, also where a scoped ResourceQuota has admission look at every write
// (their deletes were once refused there); the namespace goes once its node has ended the last
// pod.
func TestNamespaceWithPodsAndScopedQuota(t *testing.T) {
	env := start(t)
	ctx := context.Background()
	ns := env.Namespace("pods")
	core := env.Admin.Kubernetes.CoreV1()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "best-effort"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}}
	if _, err := core.ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grace := int64(3)
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	}
	// The quota's usage is measured by no controller here: admission refuses pods while it is
	// unknown, so set it as the quota controller would.
	testenv.Eventually(t, bound, "the quota's usage recorded", func() (bool, string) {
		q, err := core.ResourceQuotas(ns).Get(ctx, "best-effort", metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
		_, err = core.ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{})
		return err == nil, testenv.Short(err)
	})
	for _, p := range []*corev1.Pod{pod("pending", ""), pod("running", "node-1")} {
		testenv.Eventually(t, bound, "pod "+p.Name+" created", func() (bool, string) {
			_, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), testenv.Short(err)
		})
	}
	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the running pod terminating, the pending one gone", func() (bool, string) {
		l, err := core.Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		if len(l.Items) != 1 || l.Items[0].Name != "running" || l.Items[0].DeletionTimestamp == nil {
			return false, fmt.Sprintf("%d pods", len(l.Items))
		}
		n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		c := condition(n, corev1.NamespaceContentRemaining)
		if c == nil || c.Status != corev1.ConditionTrue {
			return false, fmt.Sprintf("conditions %v", n.Status.Conditions)
		}
		if f := condition(n, corev1.NamespaceDeletionContentFailure); f == nil || f.Status != corev1.ConditionFalse {
			return false, fmt.Sprintf("content failure %+v", f)
		}
		return true, ""
	})
	// The node ends the pod.
	zero := int64(0)
	if err := core.Pods(ns).Delete(ctx, "running", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the namespace removed", namespaceGone(env, ns))
}
