package core_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/core"
)

// namespaces returns the namespace strategy over the real registry's namespaces resource, in
// process (no server: a kind's rules are plain code).
func namespaces(t *testing.T, protect bool) registry.Strategy {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if !ok {
		t.Fatal("namespaces are not served")
	}
	return core.NewNamespace(builtin.New(res, builtin.NewShared(reg.Scheme)), protect)
}

// The namespace lifecycle's rules: Active with the lifecycle finalizer on create (whatever the
// body says); spec.finalizers change only through finalize; a delete makes it Terminating and
// holds it by spec.finalizers; a second delete meanwhile is upstream's conflict; the initial
// namespaces are refused when the gateway guards them.
func TestNamespaceLifecycle(t *testing.T) {
	st := namespaces(t, false)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	st.PrepareForCreate(context.Background(), ns)
	if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != core.NamespaceFinalizer {
		t.Fatalf("created: phase %q finalizers %v", ns.Status.Phase, ns.Spec.Finalizers)
	}
	if errs := st.ValidateName("Not_A_Label"); len(errs) == 0 {
		t.Error("a namespace name must be a DNS label")
	}

	// The main resource cannot drop spec.finalizers; finalize can, and nothing else.
	edit := ns.DeepCopy()
	edit.Spec.Finalizers = nil
	edit.Labels = map[string]string{"a": "b"}
	next, err := st.PrepareForUpdate("", edit.DeepCopy(), ns)
	if err != nil || len(next.(*corev1.Namespace).Spec.Finalizers) != 1 || next.(*corev1.Namespace).Labels["a"] != "b" {
		t.Errorf("update: %v %+v", err, next)
	}
	next, err = st.PrepareForUpdate("finalize", edit.DeepCopy(), ns)
	if err != nil || len(next.(*corev1.Namespace).Spec.Finalizers) != 0 || next.(*corev1.Namespace).Labels["a"] == "b" {
		t.Errorf("finalize: %v %+v", err, next)
	}

	now := metav1.NewTime(time.Now())
	marked := ns.DeepCopy()
	held, err := st.PrepareForDelete(marked, now)
	if err != nil || !held || marked.Status.Phase != corev1.NamespaceTerminating || marked.DeletionTimestamp == nil {
		t.Fatalf("delete: held %v %v, %+v", held, err, marked.Status)
	}
	if !st.Finalizing(marked) {
		t.Error("spec.finalizers hold a terminating namespace")
	}
	again := marked.DeepCopy()
	if _, err := st.PrepareForDelete(again, now); !apierrors.IsConflict(err) {
		t.Errorf("a second delete: %v, want a conflict", err)
	}
	marked.Spec.Finalizers = nil
	if st.Finalizing(marked) {
		t.Error("nothing holds a namespace without finalizers")
	}

	def := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceDefault}}
	if _, err := st.PrepareForDelete(def.DeepCopy(), now); err != nil {
		t.Errorf("default without the gateway's guard (admission guards it): %v", err)
	}
	for _, name := range []string{metav1.NamespaceDefault, naming.SystemNamespace, naming.PublicNamespace} {
		if _, err := namespaces(t, true).PrepareForDelete(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, now); !apierrors.IsForbidden(err) {
			t.Errorf("deleting %s with the guard: %v, want 403", name, err)
		}
	}
}
