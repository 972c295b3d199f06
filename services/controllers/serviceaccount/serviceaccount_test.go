package serviceaccount_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/serviceaccount"
)

const bound = 20 * time.Second

func start(t *testing.T) (*testenv.Env, *metrics.Metrics) {
	env := testenv.Start(t)
	m := metrics.New(prometheus.NewRegistry())
	f := env.Informers()
	c, err := serviceaccount.New(env.Clients.Kubernetes, f.Core().V1().Namespaces(), f.Core().V1().ServiceAccounts(), serviceaccount.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 1) }, f)
	return env, m
}

func defaultAccount(env *testenv.Env, ns string) func() (bool, string) {
	return func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	}
}

// Upstream rule: every active namespace has a ServiceAccount "default", the initial namespaces
// included, and one deleted comes back (a new object).
func TestDefaultServiceAccount(t *testing.T) {
	env, _ := start(t)
	ctx := context.Background()
	for _, ns := range []string{metav1.NamespaceDefault, naming.SystemNamespace, naming.PublicNamespace} {
		testenv.Eventually(t, bound, "default account in "+ns, defaultAccount(env, ns))
	}
	ns := env.Namespace("sa")
	testenv.Eventually(t, bound, "default account in a new namespace", defaultAccount(env, ns))

	sas := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns)
	first, err := sas.Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sas.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the deleted default account recreated", func() (bool, string) {
		sa, err := sas.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		return sa.UID != first.UID, "uid " + string(sa.UID) + " is the deleted account's"
	})
	// Other accounts are not the controller's business.
	if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sas.Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sas.Get(ctx, "builder", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a non-default account came back: %v", err)
	}
}

// Upstream rule: a namespace that is not active (terminating) gets no account: the namespace
// controller is emptying it.
func TestTerminatingNamespaceGetsNoAccount(t *testing.T) {
	env, m := start(t)
	ctx := context.Background()
	ns := env.Namespace("sa-term")
	testenv.Eventually(t, bound, "default account", defaultAccount(env, ns))
	// No namespace controller runs here: the namespace stays Terminating with its content.
	if err := env.Admin.Kubernetes.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the namespace terminating", func() (bool, string) {
		n, err := env.Admin.Kubernetes.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		return n.Status.Phase == corev1.NamespaceTerminating, string(n.Status.Phase)
	})
	syncs := testutil.ToFloat64(m.Syncs.WithLabelValues(serviceaccount.Name))
	if err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns).Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion makes the controller look at the namespace; once it has, the account must
	// still be absent.
	testenv.Eventually(t, bound, "a sync after the deletion", func() (bool, string) {
		return testutil.ToFloat64(m.Syncs.WithLabelValues(serviceaccount.Name)) > syncs, "no sync yet"
	})
	// A namespace created after the deletion is served after it (one worker, keys in order of
	// arrival): once it has its account, the terminating one has been looked at too.
	later := env.Namespace("sa-later")
	testenv.Eventually(t, bound, "default account in a later namespace", defaultAccount(env, later))
	if _, err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the default account was recreated in a terminating namespace: %v", err)
	}
}
