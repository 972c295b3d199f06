package garbagecollector_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/garbagecollector"
	"platform.io/services/controllers/internal/testenv"
)

const bound = 30 * time.Second

// start runs the collector against a gateway that authorizes by RBAC only, so it works with
// exactly what the default policy grants the controller manager.
func start(t *testing.T) *testenv.Env {
	env := testenv.StartRBAC(t)
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := garbagecollector.New(env.Clients.Kubernetes, md, env.Clients.Discovery, garbagecollector.Options{ResyncPeriod: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 4) })
	return env
}

func ref(apiVersion, kind string, m metav1.Object, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: m.GetName(), UID: m.GetUID()}
	if block {
		r.BlockOwnerDeletion = &block
	}
	return r
}

func configMap(t *testing.T, env *testenv.Env, ns, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func gone(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	testenv.Eventually(t, bound, "configmap "+ns+"/"+name+" collected", func() (bool, string) {
		cm, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("%v %v", testenv.Short(err), cm.GetObjectMeta())
	})
}

func stays(t *testing.T, env *testenv.Env, ns, name string, d time.Duration) {
	t.Helper()
	testenv.Never(t, d, "configmap "+ns+"/"+name+" collected", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), testenv.Short(err)
	})
}

func deleteCM(t *testing.T, env *testenv.Env, ns, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	opts := metav1.DeleteOptions{}
	if policy != "" {
		opts.PropagationPolicy = &policy
	}
	if err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, opts); err != nil {
		t.Fatal(err)
	}
}

func TestGarbageCollector(t *testing.T) {
	env := start(t)
	cms := func(ns string) func(string) (*corev1.ConfigMap, error) {
		return func(name string) (*corev1.ConfigMap, error) {
			return env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		}
	}

	t.Run("Background", func(t *testing.T) {
		ns := env.Namespace("gc-bg")
		owner := configMap(t, env, ns, "owner")
		configMap(t, env, ns, "dep", ref("v1", "ConfigMap", owner, false))
		secret, err := env.Admin.Kubernetes.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "dep-secret", OwnerReferences: []metav1.OwnerReference{ref("v1", "ConfigMap", owner, false)}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		configMap(t, env, ns, "unowned")
		deleteCM(t, env, ns, "owner", metav1.DeletePropagationBackground)
		gone(t, env, ns, "dep")
		testenv.Eventually(t, bound, "secret collected", func() (bool, string) {
			_, err := env.Admin.Kubernetes.CoreV1().Secrets(ns).Get(context.Background(), secret.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), testenv.Short(err)
		})
		stays(t, env, ns, "unowned", 500*time.Millisecond)
	})

	t.Run("ChainOfThree", func(t *testing.T) {
		ns := env.Namespace("gc-chain")
		a := configMap(t, env, ns, "a")
		b := configMap(t, env, ns, "b", ref("v1", "ConfigMap", a, false))
		configMap(t, env, ns, "c", ref("v1", "ConfigMap", b, false))
		deleteCM(t, env, ns, "a", "")
		gone(t, env, ns, "b")
		gone(t, env, ns, "c")
	})

	t.Run("Orphan", func(t *testing.T) {
		ns := env.Namespace("gc-orphan")
		owner := configMap(t, env, ns, "owner")
		other := configMap(t, env, ns, "other-owner")
		configMap(t, env, ns, "dep", ref("v1", "ConfigMap", owner, true), ref("v1", "ConfigMap", other, false))
		deleteCM(t, env, ns, "owner", metav1.DeletePropagationOrphan)
		gone(t, env, ns, "owner")
		dep, err := cms(ns)("dep")
		if err != nil {
			t.Fatal(err)
		}
		if len(dep.OwnerReferences) != 1 || dep.OwnerReferences[0].UID != other.UID {
			t.Errorf("the orphaned dependent keeps only its other owner: %+v", dep.OwnerReferences)
		}
		stays(t, env, ns, "dep", 500*time.Millisecond)
	})

	t.Run("ForegroundWaitsForBlockingDependents", func(t *testing.T) {
		ns := env.Namespace("gc-fg")
		owner := configMap(t, env, ns, "owner")
		// The blocking dependent is held by a finalizer of its own: the owner must wait for it.
		held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"},
			OwnerReferences: []metav1.OwnerReference{ref("v1", "ConfigMap", owner, true)}}}
		if _, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Create(context.Background(), held, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		configMap(t, env, ns, "nonblocking", ref("v1", "ConfigMap", owner, false))
		deleteCM(t, env, ns, "owner", metav1.DeletePropagationForeground)
		gone(t, env, ns, "nonblocking")
		testenv.Eventually(t, bound, "the held dependent marked for deletion", func() (bool, string) {
			d, err := cms(ns)("held")
			return err == nil && d.DeletionTimestamp != nil, testenv.Short(err)
		})
		o, err := cms(ns)("owner")
		if err != nil || o.DeletionTimestamp == nil || !slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("the owner waits with foregroundDeletion: %v %+v", err, o)
		}
		stays(t, env, ns, "owner", time.Second)
		d, err := cms(ns)("held")
		if err != nil {
			t.Fatal(err)
		}
		d.Finalizers = nil
		if _, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		gone(t, env, ns, "held")
		gone(t, env, ns, "owner")
	})

	t.Run("OwnerThatNeverExisted", func(t *testing.T) {
		ns := env.Namespace("gc-never")
		ghost := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: types.UID("00000000-0000-0000-0000-000000000001")}}
		configMap(t, env, ns, "dep", ref("v1", "ConfigMap", ghost, false))
		gone(t, env, ns, "dep")
	})

	t.Run("OwnerRecreatedWithSameName", func(t *testing.T) {
		// The dependent names a uid the live owner of that name does not have: the owner it
		// named is gone, and the new one adopts nothing.
		ns := env.Namespace("gc-recreated")
		live := configMap(t, env, ns, "owner")
		stale := live.DeepCopy()
		stale.UID = types.UID("00000000-0000-0000-0000-000000000002")
		configMap(t, env, ns, "dep", ref("v1", "ConfigMap", stale, false))
		configMap(t, env, ns, "live-dep", ref("v1", "ConfigMap", live, false))
		gone(t, env, ns, "dep")
		stays(t, env, ns, "live-dep", 500*time.Millisecond)
	})

	t.Run("ClusterScopedOwner", func(t *testing.T) {
		ns := env.Namespace("gc-cluster")
		role, err := env.Admin.RBAC.ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-owner"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		configMap(t, env, ns, "dep", ref(apiclient.RBACGroupVersion.String(), "ClusterRole", role, false))
		stays(t, env, ns, "dep", time.Second)
		if err := env.Admin.RBAC.ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		gone(t, env, ns, "dep")
	})
}

// A cluster-scoped object naming a namespaced owner cannot be resolved: as upstream, it is not
// collected, and an OwnerRefInvalidNamespace event says why.
func TestNamespacedOwnerOfClusterScopedObject(t *testing.T) {
	env := start(t)
	ns := env.Namespace("gc-invalid")
	owner := configMap(t, env, ns, "owner")
	role, err := env.Admin.RBAC.ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-dependent", OwnerReferences: []metav1.OwnerReference{ref("v1", "ConfigMap", owner, false)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "an OwnerRefInvalidNamespace event", func() (bool, string) {
		evs, err := env.Admin.Kubernetes.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Reason == "OwnerRefInvalidNamespace" && ev.InvolvedObject.UID == role.UID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none about the role", len(evs.Items))
	})
	testenv.Never(t, time.Second, "the cluster-scoped dependent collected", func() (bool, string) {
		_, err := env.Admin.RBAC.ClusterRoles().Get(context.Background(), role.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), testenv.Short(err)
	})
}
