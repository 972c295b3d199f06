package rootcacertpublisher_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/manager"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/rootcacertpublisher"
	"platform.io/services/controllers/serviceaccount"
)

const bound = 20 * time.Second

const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func TestDesired(t *testing.T) {
	withMeta := func(data map[string]string, labels, annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: naming.RootCAConfigMap, Namespace: "ns", ResourceVersion: "7", Labels: labels, Annotations: annotations},
			Data:       data,
		}
	}
	good := map[string]string{rootcacertpublisher.CAKey: pem}
	described := map[string]string{naming.DescriptionAnnotation: rootcacertpublisher.Description}
	cases := []struct {
		name string
		cm   *corev1.ConfigMap
		// want is nil when no write is due.
		want *corev1.ConfigMap
	}{
		{"upstream: a missing ConfigMap is created with ca.crt and the description",
			nil,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: naming.RootCAConfigMap, Annotations: described}, Data: good}},
		{"upstream: right data and a description need no write",
			withMeta(good, nil, described), nil},
		{"upstream: any non-empty description is accepted while the data is right",
			withMeta(good, nil, map[string]string{naming.DescriptionAnnotation: "ours"}), nil},
		{"upstream: changed ca.crt is restored, other labels and annotations kept",
			withMeta(map[string]string{rootcacertpublisher.CAKey: "tampered"}, map[string]string{"team": "a"}, map[string]string{naming.DescriptionAnnotation: "ours", "note": "x"}),
			withMeta(good, map[string]string{"team": "a"}, map[string]string{naming.DescriptionAnnotation: rootcacertpublisher.Description, "note": "x"})},
		{"upstream: data is exactly ca.crt: extra keys are removed",
			withMeta(map[string]string{rootcacertpublisher.CAKey: pem, "extra": "1"}, nil, described),
			withMeta(good, nil, described)},
		{"upstream: a missing ca.crt is put back",
			withMeta(nil, nil, described),
			withMeta(good, nil, described)},
		{"upstream: a missing description is added, other annotations kept",
			withMeta(good, nil, map[string]string{"note": "x"}),
			withMeta(good, nil, map[string]string{naming.DescriptionAnnotation: rootcacertpublisher.Description, "note": "x"})},
		{"upstream: an empty description counts as missing",
			withMeta(good, nil, map[string]string{naming.DescriptionAnnotation: ""}),
			withMeta(good, nil, described)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before *corev1.ConfigMap
			if tc.cm != nil {
				before = tc.cm.DeepCopy()
			}
			got := rootcacertpublisher.Desired(tc.cm, pem)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("a write is due: %+v", got)
				}
				return
			}
			if got == nil {
				t.Fatal("no write is due")
			}
			if got.Name != tc.want.Name || got.ResourceVersion != tc.want.ResourceVersion || !maps.Equal(got.Data, tc.want.Data) ||
				!maps.Equal(got.Labels, tc.want.Labels) || !maps.Equal(got.Annotations, tc.want.Annotations) {
				t.Fatalf("got %s rv %q data %v labels %v annotations %v\nwant %s rv %q data %v labels %v annotations %v",
					got.Name, got.ResourceVersion, got.Data, got.Labels, got.Annotations,
					tc.want.Name, tc.want.ResourceVersion, tc.want.Data, tc.want.Labels, tc.want.Annotations)
			}
			// The lister's object is shared with the informer's cache: never modified.
			if tc.cm != nil && (!maps.Equal(tc.cm.Data, before.Data) || !maps.Equal(tc.cm.Annotations, before.Annotations)) {
				t.Fatal("the input ConfigMap was modified")
			}
		})
	}
}

// start runs the publisher with informers selected as the manager selects them.
func start(t *testing.T, env *testenv.Env) (*metrics.Metrics, []byte) {
	t.Helper()
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	kube := env.Clients.Kubernetes
	shared := env.Informers()
	cms := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", naming.RootCAConfigMap).String()
		}))
	c, err := rootcacertpublisher.New(kube, shared.Core().V1().Namespaces(), cms.Core().V1().ConfigMaps(), ca, rootcacertpublisher.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, rootcacertpublisher.DefaultWorkers) }, shared, cms)
	return m, ca
}

// published waits for ns's ConfigMap to hold exactly the CA and the description, and returns it.
func published(t *testing.T, env *testenv.Env, ns string, ca []byte, what string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	testenv.Eventually(t, bound, what, func() (bool, string) {
		var err error
		cm, err = env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Get(context.Background(), naming.RootCAConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		ok := len(cm.Data) == 1 && cm.Data[rootcacertpublisher.CAKey] == string(ca) && cm.Annotations[naming.DescriptionAnnotation] != ""
		return ok, fmt.Sprintf("%d keys, ca.crt of %d bytes (want %d), description %q", len(cm.Data), len(cm.Data[rootcacertpublisher.CAKey]), len(ca), cm.Annotations[naming.DescriptionAnnotation])
	})
	return cm
}

// Upstream rules, against a real gateway: every namespace, the initial ones included, gets the
// ConfigMap with the CA bundle and the description; one deleted is created again; changed data is
// restored and a removed description added back, while other labels and annotations are kept;
// other ConfigMaps are left alone.
func TestPublishes(t *testing.T) {
	env := testenv.Start(t)
	_, ca := start(t, env)
	ctx := context.Background()
	for _, ns := range []string{metav1.NamespaceDefault, naming.SystemNamespace, naming.PublicNamespace} {
		published(t, env, ns, ca, "the root CA ConfigMap in "+ns)
	}
	ns := env.Namespace("rootca")
	first := published(t, env, ns, ca, "the root CA ConfigMap in a new namespace")
	if first.Annotations[naming.DescriptionAnnotation] != rootcacertpublisher.Description {
		t.Fatalf("description %q", first.Annotations[naming.DescriptionAnnotation])
	}
	cms := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns)

	if err := cms.Delete(ctx, naming.RootCAConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the deleted ConfigMap created again", func() (bool, string) {
		cm, err := cms.Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		return cm.UID != first.UID && cm.Data[rootcacertpublisher.CAKey] == string(ca), "uid " + string(cm.UID) + " is the deleted one's"
	})

	// Tamper with the data, drop the description, add a label and an annotation of our own.
	cm, err := cms.Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{rootcacertpublisher.CAKey: "not the CA", "extra": "x"}
	cm.Labels = map[string]string{"team": "a"}
	cm.Annotations = map[string]string{"note": "kept"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm = published(t, env, ns, ca, "the edited ConfigMap restored")
	if cm.Labels["team"] != "a" || cm.Annotations["note"] != "kept" || cm.Annotations[naming.DescriptionAnnotation] != rootcacertpublisher.Description {
		t.Fatalf("labels %v annotations %v after the restore", cm.Labels, cm.Annotations)
	}

	// A description of one's own is accepted while the data is right (upstream checks only
	// that one is there).
	cm.Annotations[naming.DescriptionAnnotation] = "ours"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A later namespace is served after the update event (one worker, keys in order of
	// arrival): once it has its ConfigMap, the edited one has been looked at.
	published(t, env, env.Namespace("rootca-later"), ca, "the root CA ConfigMap in a later namespace")
	if cm, err := cms.Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{}); err != nil || cm.Annotations[naming.DescriptionAnnotation] != "ours" {
		t.Fatalf("own description replaced: %v %v", cm.Annotations, err)
	}

	// Other ConfigMaps are not the controller's business.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{rootcacertpublisher.CAKey: "mine"}}
	if _, err := cms.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Never(t, time.Second, "another ConfigMap rewritten", func() (bool, string) {
		cm, err := cms.Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return true, testenv.Short(err)
		}
		return cm.Data[rootcacertpublisher.CAKey] != "mine" || len(cm.Annotations) != 0, fmt.Sprint(cm.Data, cm.Annotations)
	})
}

// Upstream rule: a terminating namespace gets no ConfigMap back, and is not retried: the
// namespace controller is emptying it. Deleting the ConfigMap there leads to one sync and no
// failure, and nothing spins.
func TestTerminatingNamespaceNoHotLoop(t *testing.T) {
	env := testenv.Start(t)
	m, ca := start(t, env)
	ctx := context.Background()
	ns := env.Namespace("rootca-term")
	published(t, env, ns, ca, "the root CA ConfigMap")
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
	syncs := func() float64 { return testutil.ToFloat64(m.Syncs.WithLabelValues(rootcacertpublisher.Name)) }
	before := syncs()
	if err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Delete(ctx, naming.RootCAConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "a sync after the deletion", func() (bool, string) {
		return syncs() > before, "no sync yet"
	})
	later := env.Namespace("rootca-after")
	published(t, env, later, ca, "the root CA ConfigMap in a later namespace")
	after := syncs()
	if _, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns).Get(ctx, naming.RootCAConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap was recreated in a terminating namespace: %v", err)
	}
	// No retries: over two seconds at most the stray events of the later namespace are synced.
	time.Sleep(2 * time.Second)
	if n := syncs() - after; n > 2 {
		t.Fatalf("%v syncs in 2s with nothing to do: a hot loop", n)
	}
	if n := testutil.ToFloat64(m.Errors.WithLabelValues(rootcacertpublisher.Name)); n != 0 {
		t.Fatalf("%v failed syncs", n)
	}
	t.Logf("syncs: %v before the deletion, %v after the later namespace, %v at the end", before, after, syncs())
}

// With RBAC as the only authorization mode, the default policy's grants to
// naming.ControllerManagerUser are enough to list and watch namespaces and the ConfigMaps of
// that name across namespaces, and to create and update them.
func TestDefaultPolicySuffices(t *testing.T) {
	env := testenv.StartRBAC(t)
	m, ca := start(t, env)
	ns := env.Namespace("rootca-rbac")
	published(t, env, ns, ca, "the root CA ConfigMap under RBAC")
	cms := env.Admin.Kubernetes.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(context.Background(), naming.RootCAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[rootcacertpublisher.CAKey] = "changed"
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	published(t, env, ns, ca, "the ConfigMap restored under RBAC")
	if n := testutil.ToFloat64(m.Errors.WithLabelValues(rootcacertpublisher.Name)); n != 0 {
		t.Fatalf("%v failed syncs", n)
	}
}

func managerConfig(rc *rest.Config, identity string) manager.Config {
	cfg := manager.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.RESTConfig = rc
	cfg.Identity = identity
	cfg.LeaderElect = false
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

func startManager(t *testing.T, cfg manager.Config) *manager.Manager {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	m, err := manager.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

// The manager runs the publisher by default (upstream: root-ca-cert-publisher is in "*") with the
// CA that verifies the gateway; without any CA it does not run, and the others still do.
func TestManagerWiring(t *testing.T) {
	env := testenv.Start(t)
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	m := startManager(t, managerConfig(env.Config, "with-ca"))
	ns := env.Namespace("rootca-manager")
	published(t, env, ns, ca, "the root CA ConfigMap published by the manager's default set")
	m.Stop(context.Background())

	// No --root-ca-file and a kubeconfig without a CA (insecure): nothing to publish.
	insecure := rest.CopyConfig(env.Config)
	insecure.TLSClientConfig.CAFile = ""
	insecure.TLSClientConfig.Insecure = true
	startManager(t, managerConfig(insecure, "without-ca"))
	bare := env.Namespace("rootca-noca")
	testenv.Eventually(t, bound, "the default account (the other controllers run)", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(bare).Get(context.Background(), serviceaccount.DefaultServiceAccounts[0], metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	})
	testenv.Never(t, time.Second, "a root CA ConfigMap published without a CA", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(bare).Get(context.Background(), naming.RootCAConfigMap, metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	})
}
