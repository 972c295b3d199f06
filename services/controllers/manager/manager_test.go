package manager_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"platform.io/libs/naming"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/csrapproving"
	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/manager"
	"platform.io/services/controllers/serviceaccount"
	"platform.io/services/controllers/serviceaccounttoken"
)

// Short leader election timings keep the tests quick; the bounds below are derived from them.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	bound         = 20 * time.Second
)

func logger(t *testing.T, id string) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", id)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func config(rc *rest.Config, identity string, controllers ...string) manager.Config {
	cfg := manager.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.RESTConfig = rc
	cfg.Identity = identity
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.NamespaceDeletionGracePeriod = 200 * time.Millisecond
	if len(controllers) > 0 {
		cfg.Controllers = controllers
	}
	return cfg
}

func start(t *testing.T, cfg manager.Config) *manager.Manager {
	t.Helper()
	m, err := manager.Start(context.Background(), cfg, logger(t, cfg.Identity))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

// health asks a manager's gRPC health service for its overall status.
func health(t *testing.T, m *manager.Manager) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(m.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.Status
}

// metric reads one series of a manager's registry (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetGauge() != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func lease(t *testing.T, env *testenv.Env) (*coordinationv1.Lease, error) {
	t.Helper()
	return env.Admin.Coordination.Leases(naming.SystemNamespace).Get(context.Background(), manager.LeaseName, metav1.GetOptions{})
}

func defaultAccountIn(env *testenv.Env, ns string) func() (bool, string) {
	return func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	}
}

// Upstream rule: of two replicas only the holder of the Lease runs controllers; stopping it
// releases the lease and the other takes over within the lease bounds.
func TestLeaderElection(t *testing.T) {
	env := testenv.Start(t)
	a := start(t, config(env.Config, "replica-a"))
	testenv.Eventually(t, bound, "replica-a leading", func() (bool, string) { return a.IsLeader(), "not leading" })
	b := start(t, config(env.Config, "replica-b"))

	l, err := lease(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "replica-a" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != int32(leaseDuration/time.Second) {
		t.Fatalf("lease holder %q for %ds, want replica-a for %s", ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseDurationSeconds, 0), leaseDuration)
	}
	// Both replicas are ready (warm caches); only one leads.
	for _, m := range []*manager.Manager{a, b} {
		testenv.Eventually(t, bound, m.Identity()+" SERVING", func() (bool, string) {
			s := health(t, m)
			return s == healthpb.HealthCheckResponse_SERVING, s.String()
		})
	}
	ns := env.Namespace("elect")
	testenv.Eventually(t, bound, "the leader's controllers working", defaultAccountIn(env, ns))
	if b.IsLeader() {
		t.Fatal("two leaders")
	}
	if n := metric(t, b.Metrics(), "controller_syncs_total", "controller", serviceaccount.Name); n != 0 {
		t.Fatalf("the standby synced %v keys", n)
	}
	if metric(t, a.Metrics(), "controller_syncs_total", "controller", serviceaccount.Name) == 0 {
		t.Fatal("the leader counted no syncs")
	}
	if metric(t, a.Metrics(), "leader_election_master_status", "name", manager.LeaseName) != 1 ||
		metric(t, b.Metrics(), "leader_election_master_status", "name", manager.LeaseName) != 0 {
		t.Fatal("leadership gauges wrong")
	}

	// A graceful stop releases the lease: the standby takes it at its next retry, well within
	// the lease duration a crashed leader would cost.
	stopped := time.Now()
	a.Stop(context.Background())
	testenv.Eventually(t, leaseDuration+retryPeriod, "replica-b leading after replica-a stopped", func() (bool, string) { return b.IsLeader(), "not leading" })
	t.Logf("handover after a graceful stop took %s", time.Since(stopped).Round(time.Millisecond))
	if l, err := lease(t, env); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "replica-b" {
		t.Fatalf("lease after handover: %v %v", l, err)
	}
	ns2 := env.Namespace("elect2")
	testenv.Eventually(t, bound, "the new leader's controllers working", defaultAccountIn(env, ns2))
	select {
	case err := <-a.Done():
		t.Fatalf("a graceful stop ended with %v", err)
	default:
	}
}

// Upstream rule: a lease left by a leader that crashed (not released) is taken only once it has
// expired: after the lease duration without renewal, plus up to a retry period.
func TestTakeoverOfExpiredLease(t *testing.T) {
	env := testenv.Start(t)
	now := metav1.NewMicroTime(time.Now())
	dead := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: manager.LeaseName, Namespace: naming.SystemNamespace},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("crashed-replica"), LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	if _, err := env.Admin.Coordination.Leases(naming.SystemNamespace).Create(context.Background(), dead, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	m := start(t, config(env.Config, "replica-c"))
	testenv.Eventually(t, leaseDuration+2*retryPeriod+5*time.Second, "replica-c leading", func() (bool, string) { return m.IsLeader(), "not leading" })
	took := time.Since(started)
	t.Logf("takeover of a crashed leader's lease took %s", took.Round(time.Millisecond))
	// The standby measures the lease from when it first saw the record, which is after it was
	// written: it cannot take it before a full lease duration has passed since start.
	if took < leaseDuration {
		t.Fatalf("took the lease after %s, before it expired (%s)", took, leaseDuration)
	}
	l, err := lease(t, env)
	if err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "replica-c" || ptr.Deref(l.Spec.LeaseTransitions, 0) < 1 {
		t.Fatalf("lease after takeover: %+v %v", l, err)
	}
}

// Upstream rule: a leader that cannot renew its lease stops its controllers and exits (Run
// returns ErrLeaderLost) within the renew deadline.
func TestLostLeaseStopsControllers(t *testing.T) {
	env := testenv.Start(t)
	m := start(t, config(env.Config, "replica-d"))
	testenv.Eventually(t, bound, "replica-d leading", func() (bool, string) { return m.IsLeader(), "not leading" })
	// Another holder takes the lease over (as a partitioned leader would find on its return).
	leases := env.Admin.Coordination.Leases(naming.SystemNamespace)
	for {
		l, err := leases.Get(context.Background(), manager.LeaseName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = ptr.To("usurper"), ptr.To(int32(60)), &now
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	stolen := time.Now()
	select {
	case err := <-m.Done():
		if !errors.Is(err, manager.ErrLeaderLost) {
			t.Fatalf("ended with %v, want ErrLeaderLost", err)
		}
	case <-time.After(renewDeadline + 2*retryPeriod + 5*time.Second):
		t.Fatal("the manager did not notice it lost the lease")
	}
	t.Logf("lost lease noticed after %s", time.Since(stolen).Round(time.Millisecond))
	testenv.Eventually(t, bound, "controllers stopped", func() (bool, string) { return !m.IsLeader(), "still leading" })
	// The stop that follows does not hand the lease back: it is the usurper's.
	m.Stop(context.Background())
	if l, err := lease(t, env); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "usurper" {
		t.Fatalf("lease after the loss: %v %v", l, err)
	}
}

// The health service says NOT_SERVING until the informers have synced: a manager that cannot
// reach the gateway never claims to be ready.
func TestNotServingUntilSynced(t *testing.T) {
	cfg := config(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}, "unreachable")
	cfg.LeaderElect = false
	m := start(t, cfg)
	testenv.Never(t, 2*time.Second, "SERVING without synced informers", func() (bool, string) {
		s := health(t, m)
		return s == healthpb.HealthCheckResponse_SERVING, s.String()
	})
	if m.Synced() {
		t.Fatal("synced without a gateway")
	}
	m.Stop(context.Background())
	if s := health(t, m); s == healthpb.HealthCheckResponse_SERVING {
		t.Fatal("SERVING after Stop")
	}
}

// --controllers decides what runs: bootstrapsigner is off by default (cluster-info is not
// created) and on when named; -serviceaccount turns the account controller off.
func TestControllersSelection(t *testing.T) {
	env := testenv.Start(t)
	cfg := config(env.Config, "selective", "*", "-serviceaccount", "bootstrapsigner")
	cfg.LeaderElect = false
	m := start(t, cfg)
	testenv.Eventually(t, bound, "cluster-info created by the enabled bootstrapsigner", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(naming.PublicNamespace).Get(context.Background(), bootstraptoken.ConfigMapClusterInfo, metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	})
	if !m.IsLeader() {
		t.Fatal("without --leader-elect the controllers run at once")
	}
	// Served after cluster-info's creation: nothing counted for the disabled controller.
	if n := metric(t, m.Metrics(), "controller_syncs_total", "controller", serviceaccount.Name); n != 0 {
		t.Fatalf("the disabled serviceaccount controller synced %v keys", n)
	}
	ns := env.Namespace("nosa")
	testenv.Never(t, time.Second, "a default account created by a disabled controller", defaultAccountIn(env, ns))

	// The default set: no bootstrapsigner, so a deleted cluster-info stays deleted.
	m.Stop(context.Background())
	if err := env.Admin.Kubernetes.CoreV1().ConfigMaps(naming.PublicNamespace).Delete(context.Background(), bootstraptoken.ConfigMapClusterInfo, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := config(env.Config, "defaults")
	d.LeaderElect = false
	start(t, d)
	ns2 := env.Namespace("withsa")
	testenv.Eventually(t, bound, "default account by the default set", defaultAccountIn(env, ns2))
	if _, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(naming.PublicNamespace).Get(context.Background(), bootstraptoken.ConfigMapClusterInfo, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("cluster-info exists without bootstrapsigner: %v", err)
	}
}

// With RBAC as the only authorization mode, the default policy's grants to
// naming.ControllerManagerUser are all the controllers get: every controller must still do its
// work (leader Lease, accounts, token Secrets and account references, aggregation, bootstrap
// tokens, cluster-info, stale certificate signing requests, node client certificate approval,
// namespace deletion).
func TestDefaultPolicyGrantsTheControllers(t *testing.T) {
	env := testenv.StartRBAC(t)
	cfg := config(env.Config, "rbac-replica", "*", "tokencleaner", "bootstrapsigner")
	cfg.TokenGenerator = serviceaccounttoken.TokenGeneratorFunc(func(sa *corev1.ServiceAccount, _ *corev1.Secret) (string, error) {
		mac := hmac.New(sha256.New, []byte("test key"))
		mac.Write([]byte(sa.UID))
		return hex.EncodeToString(mac.Sum(nil)), nil
	})
	m := start(t, cfg)
	testenv.Eventually(t, bound, "leading under RBAC", func() (bool, string) { return m.IsLeader(), "not leading" })
	ctx := context.Background()
	core := env.Admin.Kubernetes.CoreV1()

	ns := env.Namespace("rbac")
	testenv.Eventually(t, bound, "serviceaccount: default account", defaultAccountIn(env, ns))

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}, Secrets: []corev1.ObjectReference{{Name: "bot-token"}}}
	if _, err := core.ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bot-token", Annotations: map[string]string{naming.ServiceAccountNameAnnotation: "bot"}},
		Type: corev1.SecretType(naming.SecretTypeServiceAccountToken)}
	if _, err := core.Secrets(ns).Create(ctx, tok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "serviceaccount-token: secret filled", func() (bool, string) {
		s, err := core.Secrets(ns).Get(ctx, "bot-token", metav1.GetOptions{})
		return err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0, testenv.Short(err)
	})
	if err := core.Secrets(ns).Delete(ctx, "bot-token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "serviceaccount-token: deleted secret dropped from the account", func() (bool, string) {
		sa, err := core.ServiceAccounts(ns).Get(ctx, "bot", metav1.GetOptions{})
		return err == nil && len(sa.Secrets) == 0, fmt.Sprint(testenv.Short(err), sa.Secrets)
	})

	sel := map[string]string{"example.com/aggregate-to-rbac-test": "true"}
	agg := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-aggregate"}, AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: sel}}}}
	if _, err := env.Admin.RBAC.ClusterRoles().Create(ctx, agg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	part := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-part", Labels: sel},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	if _, err := env.Admin.RBAC.ClusterRoles().Create(ctx, part, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "clusterrole-aggregation: rules aggregated", func() (bool, string) {
		r, err := env.Admin.RBAC.ClusterRoles().Get(ctx, "rbac-test-aggregate", metav1.GetOptions{})
		return err == nil && len(r.Rules) == 1, fmt.Sprint(testenv.Short(err))
	})

	expired := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-old123", Namespace: naming.SystemNamespace},
		Type: corev1.SecretType(naming.SecretTypeBootstrapToken),
		Data: map[string][]byte{"token-id": []byte("old123"), "token-secret": []byte("0123456789abcdef"), "expiration": []byte("2000-01-01T00:00:00Z")}}
	if _, err := core.Secrets(naming.SystemNamespace).Create(ctx, expired, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "tokencleaner: expired token deleted", func() (bool, string) {
		_, err := core.Secrets(naming.SystemNamespace).Get(ctx, expired.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), testenv.Short(err)
	})
	signing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-sign12", Namespace: naming.SystemNamespace},
		Type: corev1.SecretType(naming.SecretTypeBootstrapToken),
		Data: map[string][]byte{"token-id": []byte("sign12"), "token-secret": []byte("0123456789abcdef"), "usage-bootstrap-signing": []byte("true")}}
	if _, err := core.Secrets(naming.SystemNamespace).Create(ctx, signing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "bootstrapsigner: cluster-info created and signed", func() (bool, string) {
		cm, err := core.ConfigMaps(naming.PublicNamespace).Get(ctx, bootstraptoken.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		return cm.Data[bootstraptoken.JWSSignaturePrefix+"sign12"] != "", fmt.Sprint(len(cm.Data), " keys")
	})

	csrs := staleDeniedCSR(t, env, "rbac-denied")
	testenv.Eventually(t, bound, "csrcleaner: request denied 2h ago deleted", func() (bool, string) {
		err := csrs.Get().Resource(csrcleaner.Resource).Name("rbac-denied").Do(ctx).Error()
		return apierrors.IsNotFound(err), testenv.Short(err)
	})

	// csrapproving: an admin (allowed the nodeclient subresource as cluster-admin) asks for a
	// node client certificate; the controller approves it through the approval subresource, which
	// the CertificateApproval plugin lets through only with approve on the kubelet client signer.
	nodeClientCSR(t, env, "rbac-node-client", "rbac-n1")
	testenv.Eventually(t, bound, "csrapproving: node client request approved", func() (bool, string) {
		out := &certificatesv1.CertificateSigningRequest{}
		if err := csrs.Get().Resource(csrcleaner.Resource).Name("rbac-node-client").Do(ctx).Into(out); err != nil {
			return false, testenv.Short(err)
		}
		for _, c := range out.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved && c.Reason == csrapproving.ApprovedReason {
				return true, ""
			}
		}
		return false, fmt.Sprint(out.Status.Conditions)
	})

	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*bound, "namespace: deleted namespace emptied and removed", func() (bool, string) {
		n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, testenv.Short(err)
		}
		return false, fmt.Sprint(n.Status.Conditions)
	})
	if n := metric(t, m.Metrics(), "controller_sync_errors_total", "controller", "namespace"); n != 0 {
		t.Errorf("namespace sync errors: %v", n)
	}
}

// nodeClientCSR creates (as an admin) a valid node client request for node.
func nodeClientCSR(t *testing.T, env *testenv.Env, name, node string) {
	t.Helper()
	client := env.Admin.Certificates.RESTClient()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: naming.SignerAPIServerClientKubelet,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	if err := client.Post().Resource(csrcleaner.Resource).Body(csr).Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}
}

// staleDeniedCSR creates a request (as an admin) and denies it with a condition set 2 hours ago,
// so the CSR cleaner may delete it at once; it returns the admin's certificates client.
func staleDeniedCSR(t *testing.T, env *testenv.Env, name string) rest.Interface {
	t.Helper()
	client := env.Admin.Certificates.RESTClient()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/manager-test",
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
		},
	}
	ctx := context.Background()
	if err := client.Post().Resource(csrcleaner.Resource).Body(csr).Do(ctx).Into(csr); err != nil {
		t.Fatal(err)
	}
	then := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue,
		Reason: "Test", LastUpdateTime: then, LastTransitionTime: then}}
	if err := client.Put().Resource(csrcleaner.Resource).Name(name).SubResource("approval").Body(csr).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	return client
}

// The informers cache objects without their managed fields, as upstream's controller manager's
// do: the API's copy has them, the cache's does not.
func TestCachesDropManagedFields(t *testing.T) {
	env := testenv.Start(t)
	cfg := config(env.Config, "trim")
	cfg.LeaderElect = false
	m := start(t, cfg)
	ns := env.Namespace("trim")
	api, err := env.Admin.Kubernetes.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(api.ManagedFields) == 0 {
		t.Fatal("the API's namespace has no managed fields to drop")
	}
	testenv.Eventually(t, bound, "the namespace in the cache", func() (bool, string) {
		_, err := m.CachedNamespace(ns)
		return err == nil, testenv.Short(err)
	})
	cached, _ := m.CachedNamespace(ns)
	if cached.ManagedFields != nil {
		t.Errorf("the cached namespace has managed fields: %v", cached.ManagedFields)
	}
}
