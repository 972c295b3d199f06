package server_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
)

// The listers plugins read follow storage: a stored namespace, service account or class appears,
// changes and disappears, with its resourceVersion; List filters by namespace.
func TestListersFollowStorage(t *testing.T) {
	e := start(t)
	objs := e.plugins.getDeps().Objects
	rv := e.put(t, "namespaces", "Namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"x": "1"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}})
	took := eventually(t, "the namespace in the lister", func() bool { _, ok := objs.Namespaces().Get("", "team-a"); return ok })
	t.Logf("a stored namespace reached the lister in %v", took)
	ns, _ := objs.Namespaces().Get("", "team-a")
	if ns.Labels["x"] != "1" || ns.Status.Phase != corev1.NamespaceActive || ns.ResourceVersion != strconv.FormatInt(rv, 10) {
		t.Fatalf("namespace %+v, want resourceVersion %d", ns, rv)
	}
	if all := objs.Namespaces().List(""); len(all) != 1 || all[0].Name != "team-a" {
		t.Fatalf("List(\"\") = %v", all)
	}

	e.put(t, "serviceaccounts", "ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}})
	e.put(t, "serviceaccounts", "ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-b"}})
	e.put(t, "serviceaccounts", "ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "team-b"}})
	eventually(t, "three service accounts", func() bool { return len(objs.ServiceAccounts().List("")) == 3 })
	var names []string
	for _, sa := range objs.ServiceAccounts().List("team-b") {
		names = append(names, sa.Namespace+"/"+sa.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"team-b/builder", "team-b/default"}) {
		t.Fatalf("List(team-b) = %v", names)
	}
	if _, ok := objs.ServiceAccounts().Get("team-a", "builder"); ok {
		t.Fatal("Get found an object in another namespace")
	}

	// A renamed group's kind is watched under Platform's group name.
	value, err := storage.EncodeStored(naming.Group("node.k8s.io")+"/v1", "RuntimeClass", &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Create(context.Background(), &storagev1.CreateRequest{
		Type:   &storagev1.ResourceType{Group: naming.Group("node.k8s.io"), Resource: "runtimeclasses"},
		Object: &storagev1.Object{Name: "gvisor", Value: value},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime class", func() bool { rc, ok := objs.RuntimeClasses().Get("", "gvisor"); return ok && rc.Handler == "runsc" })

	// Deletion is seen too.
	if _, err := e.store.Delete(context.Background(), &storagev1.DeleteRequest{Type: &storagev1.ResourceType{Resource: "namespaces"}, Name: "team-a"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace gone", func() bool { _, ok := objs.Namespaces().Get("", "team-a"); return !ok })
}

// The store's writes are compare-and-swap on resourceVersion and its reads are consistent.
func TestStore(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	st := e.plugins.getDeps().Store

	t.Run("UpdateResourceQuotaStatus", func(t *testing.T) {
		e.put(t, "resourcequotas", "ResourceQuota", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "team-a", UID: "quid"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}})
		q, err := st.GetResourceQuota(ctx, "team-a", "q")
		if err != nil {
			t.Fatal(err)
		}
		stale := q.DeepCopy()
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
		updated, err := st.UpdateResourceQuotaStatus(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		oldRV, _ := strconv.ParseInt(q.ResourceVersion, 10, 64)
		newRV, err := strconv.ParseInt(updated.ResourceVersion, 10, 64)
		if err != nil || newRV <= oldRV {
			t.Fatalf("resourceVersion %q after %q", updated.ResourceVersion, q.ResourceVersion)
		}
		// A consistent read sees the write at once.
		again, err := st.GetResourceQuota(ctx, "team-a", "q")
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != updated.ResourceVersion || again.Status.Used.Pods().String() != "1" || again.Spec.Hard.Pods().String() != "2" || again.UID != "quid" {
			t.Fatalf("read after write: %+v", again)
		}
		// The lister follows.
		eventually(t, "the quota's usage in the lister", func() bool {
			l, ok := e.plugins.getDeps().Objects.ResourceQuotas().Get("team-a", "q")
			return ok && l.ResourceVersion == updated.ResourceVersion && l.Status.Used.Pods().String() == "1"
		})

		// The quota changed since stale was read: conflict, nothing written.
		stale.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
		if _, err := st.UpdateResourceQuotaStatus(ctx, stale); !apierrors.IsConflict(err) {
			t.Fatalf("stale update = %v, want a Conflict", err)
		}
		if cur, _ := st.GetResourceQuota(ctx, "team-a", "q"); cur.Status.Used.Pods().String() != "1" {
			t.Fatalf("a conflicting update was written: %v", cur.Status.Used)
		}

		bad := updated.DeepCopy()
		bad.ResourceVersion = "not-a-revision"
		if _, err := st.UpdateResourceQuotaStatus(ctx, bad); !apierrors.IsBadRequest(err) {
			t.Errorf("unparsable resourceVersion = %v, want BadRequest", err)
		}
		missing := updated.DeepCopy()
		missing.Name = "missing"
		if _, err := st.UpdateResourceQuotaStatus(ctx, missing); !apierrors.IsNotFound(err) {
			t.Errorf("update of a missing quota = %v, want NotFound", err)
		}
		if _, err := st.GetResourceQuota(ctx, "team-a", "missing"); !apierrors.IsNotFound(err) {
			t.Errorf("get of a missing quota = %v, want NotFound", err)
		}
	})

	t.Run("CreateNamespace", func(t *testing.T) {
		if err := st.CreateNamespace(ctx, "auto"); err != nil {
			t.Fatal(err)
		}
		ns, err := st.GetNamespace(ctx, "auto")
		if err != nil {
			t.Fatal(err)
		}
		if ns.Status.Phase != corev1.NamespaceActive || ns.UID == "" || ns.CreationTimestamp.IsZero() || ns.Labels[corev1.LabelMetadataName] != "auto" ||
			!slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{corev1.FinalizerKubernetes}) || ns.ResourceVersion == "" {
			t.Fatalf("created namespace %+v", ns)
		}
		// Creating one that exists (a concurrent request, or NamespaceAutoProvision racing the
		// user) is not an error, and does not replace it.
		if err := st.CreateNamespace(ctx, "auto"); err != nil {
			t.Fatalf("second CreateNamespace = %v", err)
		}
		again, err := st.GetNamespace(ctx, "auto")
		if err != nil || again.UID != ns.UID || again.ResourceVersion != ns.ResourceVersion {
			t.Fatalf("the namespace was replaced: %+v (%v)", again, err)
		}
		eventually(t, "the created namespace in the lister", func() bool {
			_, ok := e.plugins.getDeps().Objects.Namespaces().Get("", "auto")
			return ok
		})
		if _, err := st.GetNamespace(ctx, "nope"); !apierrors.IsNotFound(err) {
			t.Errorf("GetNamespace of a missing namespace = %v, want NotFound", err)
		}
	})

	t.Run("GetServiceAccount", func(t *testing.T) {
		e.put(t, "serviceaccounts", "ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "team-a"},
			Secrets: []corev1.ObjectReference{{Name: "robot-token"}}})
		sa, err := st.GetServiceAccount(ctx, "team-a", "robot")
		if err != nil || len(sa.Secrets) != 1 || sa.ResourceVersion == "" {
			t.Fatalf("GetServiceAccount = %+v, %v", sa, err)
		}
		if _, err := st.GetServiceAccount(ctx, "team-b", "robot"); !apierrors.IsNotFound(err) {
			t.Errorf("GetServiceAccount in another namespace = %v, want NotFound", err)
		}
	})
}
