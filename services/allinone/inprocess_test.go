package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/service"
)

// The services of the all-in-one call each other in process: creates and updates that every hop
// takes part in (gateway to each service, admission to authorization, authentication to storage,
// storage's watchers) make no gRPC call over the unix sockets (gRPC's transport records a
// span for each call it carries, client and server side, which the in-process connections never
// do), while the gateway did ask admission. Stop then ends everything within seconds, and the
// in-process connections answer UNAVAILABLE.
func TestServicesCallEachOtherInProcess(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	cfg := defaultConfig()
	fs := pflag.NewFlagSet("platform", pflag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := fs.Parse([]string{"--data-dir=" + t.TempDir(), "--secure-port=0"}); err != nil {
		t.Fatal(err)
	}
	cfg.parsed(fs)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			p.stop(context.Background())
		}
	}()

	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.Host = p.url // the kubeconfig names port 0
	cs := kubernetes.NewForConfigOrDie(rc)
	before := admissionAsked(t, rc)
	// Namespaces are of interest to admission (PodSecurity), so their creates are asked.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "in-process"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-process"}, Data: map[string]string{"a": "b"}}
	if _, err := cs.CoreV1().ConfigMaps("in-process").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.CoreV1().ConfigMaps("in-process").Get(ctx, "in-process", metav1.GetOptions{}); err != nil || got.Data["a"] != "b" {
		t.Fatalf("get: %v, %v", got, err)
	}
	// A service account token: authentication looks the account up in storage.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}
	if _, err := cs.CoreV1().ServiceAccounts("in-process").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("in-process").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	robot := rest.AnonymousClientConfig(rc)
	robot.BearerToken = tr.Status.Token
	_, err = kubernetes.NewForConfigOrDie(robot).CoreV1().ConfigMaps("in-process").Get(ctx, "in-process", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("get as the service account: %v, want forbidden (authenticated, not authorized)", err)
	}
	// Approving a CSR: admission (CertificateApproval) asks authorization.
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "in-process"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t), SignerName: "example.com/in-process",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}
	if csr, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := admissionAsked(t, rc); after <= before {
		t.Errorf("gateway_admission_requests_total{result=asked}: %v before the create, %v after: admission was not in the path", before, after)
	}
	checkEveryServiceMetrics(t, rc)

	// Every span the recorder saw, ended or not (watches last until Stop).
	var overSocket []string
	for _, s := range rec.Started() {
		if name := s.Name(); strings.HasPrefix(name, "platform.") || strings.HasPrefix(name, "grpc.") {
			overSocket = append(overSocket, name+" ("+s.SpanKind().String()+")")
		}
	}
	if len(overSocket) > 0 {
		t.Errorf("gRPC calls over the sockets: %v", overSocket)
	}

	begin := time.Now()
	done := make(chan struct{})
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		p.stop(sctx)
		close(done)
	}()
	select {
	case <-done:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatal("stop did not return within 30s")
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("stop took %v", took)
	}
	for name, check := range map[string]func() error{
		"storage":   func() error { return service.CheckHealth(context.Background(), p.storage.InProcess(), time.Second) },
		"authn":     func() error { return service.CheckHealth(context.Background(), p.authn.InProcess(), time.Second) },
		"authz":     func() error { return service.CheckHealth(context.Background(), p.authz.InProcess(), time.Second) },
		"admission": func() error { return service.CheckHealth(context.Background(), p.admission.InProcess(), time.Second) },
	} {
		if err := check(); status.Code(err) != codes.Unavailable {
			t.Errorf("%s in process after stop: %v, want UNAVAILABLE", name, err)
		}
	}
	// Nothing of the platform's keeps running after stop (a goroutine left in a handler, a pipe
	// or a watch would be a leak; client-go's idle connections are not ours). The webhook plugins'
	// interest pollers end once the plugins are garbage: drop the platform and collect.
	p = nil
	var left []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		left = platformGoroutines()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the platform after stop:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// platformGoroutines are the stacks of the goroutines running platform code, but this test's.
func platformGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "platform.io/") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// csrPEM is a PEM certificate request for a new key.
func csrPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "in-process"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// admissionAsked is the gateway's count of writes it asked the admission service about.
func admissionAsked(t *testing.T, rc *rest.Config) float64 {
	t.Helper()
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(rc.Host + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	var n float64
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `gateway_admission_requests_total{result="asked"} `); ok {
			if n, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
	}
	return n
}

// checkEveryServiceMetrics scrapes the all-in-one's /metrics: one family of each service it runs
// in process is there (under the name the service's own endpoint uses), and the Go runtime's and
// the process's series once (a series twice would make the scrape fail).
func checkEveryServiceMetrics(t *testing.T, rc *rest.Config) {
	t.Helper()
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(rc.Host + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
		}
		// The controllers start last: their series appear once they run.
		if strings.Contains(string(body), "\ncontroller_syncs_total{") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	families := map[string]int{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			families[name]++
		}
	}
	for service, family := range map[string]string{
		"gateway":       "apiserver_request_total",
		"storage":       "storage_requests_total",
		"authn":         "authentication_attempts",
		"authz":         "apiserver_authorization_decisions_total",
		"admission":     "apiserver_admission_controller_admission_duration_seconds",
		"controllers":   "controller_syncs_total",
		"runtime, once": "go_goroutines",
	} {
		if families[family] != 1 {
			t.Errorf("%s: family %s appears %d times in /metrics", service, family, families[family])
		}
	}
	if n := strings.Count(string(body), "\ngo_goroutines "); n != 1 {
		t.Errorf("go_goroutines: %d series, want the process's one", n)
	}
}
