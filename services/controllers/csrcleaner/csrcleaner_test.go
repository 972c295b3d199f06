package csrcleaner_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/metrics"
)

const bound = 20 * time.Second

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)  { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *clock) String() string   { return c.Now().Format(time.RFC3339) }
func newClock(t time.Time) *clock { return &clock{t: t} }
func ago(d time.Duration) metav1.Time {
	return metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
}

// records keeps what the controller logs.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level < slog.LevelInfo {
		return nil
	}
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "name" {
			msg += " " + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	return nil
}

func (r *records) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// csrs talks to the gateway as an admin.
type csrs struct {
	t      *testing.T
	client rest.Interface
}

func newCSRs(t *testing.T, env *testenv.Env) *csrs {
	return &csrs{t: t, client: env.Admin.Certificates.RESTClient()}
}

func (c *csrs) get(name string) (*certificatesv1.CertificateSigningRequest, error) {
	out := &certificatesv1.CertificateSigningRequest{}
	err := c.client.Get().Resource(csrcleaner.Resource).Name(name).Do(context.Background()).Into(out)
	return out, err
}

// create creates a request for a real PKCS#10 request of a custom signer.
func (c *csrs) create(name string) *certificatesv1.CertificateSigningRequest {
	c.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		c.t.Fatal(err)
	}
	in := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/csrcleaner-test",
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	out := &certificatesv1.CertificateSigningRequest{}
	if err := c.client.Post().Resource(csrcleaner.Resource).Body(in).Do(context.Background()).Into(out); err != nil {
		c.t.Fatalf("creating %s: %v", name, err)
	}
	return out
}

// put writes csr through a subresource.
func (c *csrs) put(csr *certificatesv1.CertificateSigningRequest, subresource string) error {
	return c.client.Put().Resource(csrcleaner.Resource).Name(csr.Name).SubResource(subresource).Body(csr).Do(context.Background()).Error()
}

// condition adds a condition set at the given time: Approved and Denied through the approval
// subresource (as kubectl certificate approve/deny), Failed through status (as a signer).
func (c *csrs) condition(name string, typ certificatesv1.RequestConditionType, at metav1.Time) {
	c.t.Helper()
	csr, err := c.get(name)
	if err != nil {
		c.t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: typ, Status: "True", Reason: "Test", Message: "set by the test", LastUpdateTime: at, LastTransitionTime: at,
	})
	sub := "approval"
	if typ == certificatesv1.CertificateFailed {
		sub = "status"
	}
	if err := c.put(csr, sub); err != nil {
		c.t.Fatalf("%s %s: %v", typ, name, err)
	}
}

// issue sets status.certificate to a certificate valid until notAfter.
func (c *csrs) issue(name string, notAfter time.Time) {
	c.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		c.t.Fatal(err)
	}
	csr, err := c.get(name)
	if err != nil {
		c.t.Fatal(err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := c.put(csr, "status"); err != nil {
		c.t.Fatalf("issuing %s: %v", name, err)
	}
}

func (c *csrs) gone(name string) func() (bool, string) {
	return func() (bool, string) {
		_, err := c.get(name)
		return apierrors.IsNotFound(err), testenv.Short(err)
	}
}

func (c *csrs) deleted(names ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, n := range names {
			if _, err := c.get(n); apierrors.IsNotFound(err) {
				return true, n + " deleted"
			}
		}
		return false, ""
	}
}

func start(t *testing.T, env *testenv.Env, opts csrcleaner.Options) {
	t.Helper()
	inf := env.Informers().Certificates().V1().CertificateSigningRequests()
	c, err := csrcleaner.New(env.Clients.Certificates, inf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go inf.Informer().Run(ctx.Done())
	go func() { defer close(done); c.Run(ctx, 1) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Every deadline of the spec, with an injected clock that the test moves past each one; the
// periodic pass (every 50ms here) sees every move. Before a deadline the request stays.
func TestDeadlines(t *testing.T) {
	env := testenv.Start(t)
	api := newCSRs(t, env)
	t0 := time.Now().UTC().Truncate(time.Second)
	at := metav1.NewTime(t0)

	api.create("approved")
	api.condition("approved", certificatesv1.CertificateApproved, at)
	api.issue("approved", t0.Add(365*24*time.Hour))
	// Spec: Approved is enough (upstream also wants the certificate issued).
	api.create("approved-unissued")
	api.condition("approved-unissued", certificatesv1.CertificateApproved, at)
	api.create("denied")
	api.condition("denied", certificatesv1.CertificateDenied, at)
	api.create("failed")
	api.condition("failed", certificatesv1.CertificateFailed, at)
	pending := api.create("pending")
	// Approved an hour after t0 (clock-wise), but its certificate expires 10 minutes after t0.
	api.create("expired")
	api.condition("expired", certificatesv1.CertificateApproved, metav1.NewTime(t0.Add(time.Hour)))
	api.issue("expired", t0.Add(10*time.Minute))

	clk := newClock(t0)
	m := metrics.New(prometheus.NewRegistry())
	logs := &records{}
	start(t, env, csrcleaner.Options{Now: clk.Now, Interval: 50 * time.Millisecond, Metrics: m, Log: slog.New(logs)})
	testenv.Eventually(t, bound, "the requests synced", func() (bool, string) {
		n := testutil.ToFloat64(m.Syncs.WithLabelValues(csrcleaner.Name))
		return n >= 12, fmt.Sprint(n, " syncs")
	})
	const quiet = time.Second
	all := []string{"approved", "approved-unissued", "denied", "failed", "pending", "expired"}

	clk.Set(t0.Add(10*time.Minute - time.Second))
	testenv.Never(t, quiet, "a deletion before any deadline at "+clk.String(), api.deleted(all...))
	clk.Set(t0.Add(10*time.Minute + time.Second))
	testenv.Eventually(t, bound, "the request with an expired certificate deleted", api.gone("expired"))

	finished := []string{"approved", "approved-unissued", "denied", "failed"}
	clk.Set(t0.Add(time.Hour - time.Second))
	testenv.Never(t, quiet, "a deletion before 1h at "+clk.String(), api.deleted(append(finished, "pending")...))
	clk.Set(t0.Add(time.Hour + time.Second))
	for _, n := range finished {
		testenv.Eventually(t, bound, n+" deleted after 1h", api.gone(n))
	}

	created := pending.CreationTimestamp.Time
	clk.Set(created.Add(24*time.Hour - time.Second))
	testenv.Never(t, quiet, "pending deleted before 24h at "+clk.String(), api.deleted("pending"))
	clk.Set(created.Add(24*time.Hour + time.Second))
	testenv.Eventually(t, bound, "pending deleted after 24h", api.gone("pending"))

	if n := testutil.ToFloat64(m.Errors.WithLabelValues(csrcleaner.Name)); n != 0 {
		t.Errorf("%v sync errors", n)
	}
	// Quiet: one log line per deletion, nothing about the requests it had to wait for. A line is
	// written once the API has answered the deletion, which the test may see first.
	testenv.Eventually(t, bound, "a deletion line for each request", func() (bool, string) {
		got := logs.all()
		return len(got) >= len(all), fmt.Sprintf("%q", got)
	})
	got := logs.all()
	if len(got) != len(all) {
		t.Errorf("logged %q, want one deletion line for each of %v", got, all)
	}
}

// Without the periodic pass (an hour apart), each request is looked at again at the moment it
// becomes deletable; one that is far from it costs no syncs meanwhile.
func TestRequeuedAtDeadline(t *testing.T) {
	env := testenv.Start(t)
	api := newCSRs(t, env)
	m := metrics.New(prometheus.NewRegistry())
	start(t, env, csrcleaner.Options{Interval: time.Hour, PendingTTL: 3 * time.Second, Metrics: m})

	api.create("kept")
	api.condition("kept", certificatesv1.CertificateDenied, ago(0))
	// Denied 1h less 3s ago: deletable about 3s from now.
	api.create("denied-soon")
	api.condition("denied-soon", certificatesv1.CertificateDenied, ago(time.Hour-3*time.Second))
	api.create("pending-soon")
	// Approved, its certificate expiring in 3s.
	api.create("expiring")
	api.condition("expiring", certificatesv1.CertificateApproved, ago(0))
	api.issue("expiring", time.Now().Add(3*time.Second))

	for _, n := range []string{"denied-soon", "pending-soon", "expiring"} {
		testenv.Eventually(t, bound, n+" deleted at its deadline", api.gone(n))
	}
	syncs := func() float64 { return testutil.ToFloat64(m.Syncs.WithLabelValues(csrcleaner.Name)) }
	before := syncs()
	testenv.Never(t, time.Second, "syncs while nothing is due", func() (bool, string) {
		return syncs() > before+1, fmt.Sprint(syncs()-before, " syncs")
	})
	if _, err := api.get("kept"); err != nil {
		t.Errorf("kept: %v", err)
	}
	if n := testutil.ToFloat64(m.Errors.WithLabelValues(csrcleaner.Name)); n != 0 {
		t.Errorf("%v sync errors", n)
	}
}
