package rootcacertpublisher

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/services/controllers/internal/testenv"
)

// The answers of a real gateway to writes made from a stale cache: the informers here are never
// started, the test puts into their caches what the controller believes, while the gateway
// knows better. None of these is a failure to retry: a later event brings the namespace back
// when there is something to do.
func TestSyncFromStaleCaches(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	admin := env.Admin.Kubernetes.CoreV1()
	const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	active := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	}

	cases := []struct {
		name string
		// setup prepares the gateway and returns the namespace and the ConfigMap the caches hold
		// (nil: none).
		setup func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap)
		// check looks at the gateway afterwards.
		check func(t *testing.T, ns string)
	}{
		{"upstream: a create refused because the namespace is terminating (403 NamespaceTerminating) is not retried",
			func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap) {
				ns := env.Namespace("stale-term")
				if err := admin.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				// The gateway reuses namespace lookups for up to a second: wait until it refuses.
				testenv.Eventually(t, 10*time.Second, "creates refused in the terminating namespace", func() (bool, string) {
					_, err := admin.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
					return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), testenv.Short(err)
				})
				return active(ns), nil
			},
			func(t *testing.T, ns string) {
				if _, err := admin.ConfigMaps(ns).Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("created in a terminating namespace: %v", err)
				}
			}},
		{"upstream: a create refused because the namespace is gone (404) is not retried",
			func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap) {
				return active("never-created-rootca"), nil
			},
			func(t *testing.T, ns string) {}},
		{"a create that finds the ConfigMap already made waits for its add event (content left to that sync)",
			func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap) {
				ns := env.Namespace("stale-exists")
				if _, err := admin.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: naming.RootCAConfigMap}, Data: map[string]string{CAKey: "theirs"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				return active(ns), nil
			},
			func(t *testing.T, ns string) {
				cm, err := admin.ConfigMaps(ns).Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{})
				if err != nil || cm.Data[CAKey] != "theirs" {
					t.Fatalf("%v %v", cm, err)
				}
			}},
		{"an update from an outdated ConfigMap (409 Conflict) waits for the newer one's event",
			func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap) {
				ns := env.Namespace("stale-conflict")
				old, err := admin.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: naming.RootCAConfigMap}, Data: map[string]string{CAKey: "v1"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				newer := old.DeepCopy()
				newer.Data[CAKey] = "v2"
				if _, err := admin.ConfigMaps(ns).Update(ctx, newer, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return active(ns), old
			},
			func(t *testing.T, ns string) {
				cm, err := admin.ConfigMaps(ns).Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{})
				if err != nil || cm.Data[CAKey] != "v2" {
					t.Fatalf("%v %v", cm, err)
				}
			}},
		{"an update of a ConfigMap deleted since (404) waits for the deletion's event",
			func(t *testing.T) (*corev1.Namespace, *corev1.ConfigMap) {
				ns := env.Namespace("stale-deleted")
				old, err := admin.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: naming.RootCAConfigMap}, Data: map[string]string{CAKey: "v1"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := admin.ConfigMaps(ns).Delete(ctx, naming.RootCAConfigMap, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				return active(ns), old
			},
			func(t *testing.T, ns string) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := env.Informers()
			nsInformer, cmInformer := f.Core().V1().Namespaces(), f.Core().V1().ConfigMaps()
			c, err := New(env.Clients.Kubernetes, nsInformer, cmInformer, []byte(ca), Options{})
			if err != nil {
				t.Fatal(err)
			}
			ns, cm := tc.setup(t)
			if err := nsInformer.Informer().GetIndexer().Add(ns); err != nil {
				t.Fatal(err)
			}
			if cm != nil {
				if err := cmInformer.Informer().GetIndexer().Add(cm); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.sync(ctx, ns.Name); err != nil {
				t.Fatalf("sync failed (would be retried): %v", err)
			}
			tc.check(t, ns.Name)
		})
	}

	// And one that is: a 403 without the NamespaceTerminating cause (here: a client the RBAC
	// policy grants nothing) is a failure, retried with backoff.
	t.Run("upstream: other refusals are failures, retried with backoff", func(t *testing.T) {
		rbacEnv := testenv.StartRBAC(t)
		cert, key := rbacEnv.ClientCert("nobody")
		nobody, err := kubernetes.NewForConfig(&rest.Config{Host: rbacEnv.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: rbacEnv.CAFile, CertData: cert, KeyData: key}})
		if err != nil {
			t.Fatal(err)
		}
		f := rbacEnv.Informers()
		nsInformer, cmInformer := f.Core().V1().Namespaces(), f.Core().V1().ConfigMaps()
		c, err := New(nobody, nsInformer, cmInformer, []byte(ca), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ns := rbacEnv.Namespace("stale-forbidden")
		if err := nsInformer.Informer().GetIndexer().Add(active(ns)); err != nil {
			t.Fatal(err)
		}
		if err := c.sync(ctx, ns); !apierrors.IsForbidden(err) {
			t.Fatalf("sync: %v, want the gateway's 403", err)
		}
	})
}
