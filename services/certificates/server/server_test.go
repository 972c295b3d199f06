package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/certificates/server"
	storageserver "platform.io/services/storage/server"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

var csrType = &storagev1.ResourceType{Group: "certificates." + naming.GroupSuffix, Resource: "certificatesigningrequests"}

// env is a storage service, the signers' CAs in files, and a client of storage.
type env struct {
	storageAddr string
	store       *storage.Client
	// defaultCA signs for every signer but the kubelet serving one, which has servingCA.
	defaultCA, servingCA *pki.CA
	defaultFiles         server.KeyPair
	servingFiles         server.KeyPair
	now                  time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	sc := storageserver.DefaultConfig()
	sc.DataDir = filepath.Join(t.TempDir(), "storage")
	sc.Listen = "127.0.0.1:0"
	st, err := storageserver.Start(context.Background(), sc, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Stop(context.Background()) })
	conn, err := grpc.NewClient(st.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e := &env{storageAddr: st.Addr().String(), store: storage.NewClient(conn), now: time.Now().Truncate(time.Second)}
	dir := t.TempDir()
	if e.defaultCA, err = pki.NewCA("cluster-signing-ca", 10*365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if e.servingCA, err = pki.NewCA("kubelet-serving-ca", 10*365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	e.defaultFiles = server.KeyPair{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key")}
	e.servingFiles = server.KeyPair{CertFile: filepath.Join(dir, "serving.crt"), KeyFile: filepath.Join(dir, "serving.key")}
	if err := e.defaultCA.Write(e.defaultFiles.CertFile, e.defaultFiles.KeyFile); err != nil {
		t.Fatal(err)
	}
	if err := e.servingCA.Write(e.servingFiles.CertFile, e.servingFiles.KeyFile); err != nil {
		t.Fatal(err)
	}
	return e
}

// start starts a certificates service over the env's storage, with the clock at e.now, and waits
// until it is SERVING (its first list is in).
func (e *env) start(t *testing.T, configure func(*server.Config)) *server.Server {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = e.storageAddr
	cfg.Signing.Default = e.defaultFiles
	cfg.Signing.KubeletServing = e.servingFiles
	cfg.ShutdownTimeout = 5 * time.Second
	if configure != nil {
		configure(&cfg)
	}
	s, err := server.Start(context.Background(), cfg, server.Options{Now: func() time.Time { return e.now }}, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	waitFor(t, "the certificates service SERVING", func() bool {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING
	})
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > 15*time.Second {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(begin)
}

// csrPEM is a PEM certificate request for a fresh key.
func csrPEM(t *testing.T, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func condition(t certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue, Reason: "Test", Message: "set by the test"}
}

var approved = []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateApproved)}

type csrSpec struct {
	signer     string
	request    []byte
	usages     []certificatesv1.KeyUsage
	exp        *int32
	conditions []certificatesv1.CertificateSigningRequestCondition
}

// create stores a request as the gateway does.
func (e *env) create(t *testing.T, name string, s csrSpec) int64 {
	t.Helper()
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"test": "yes"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: s.request, SignerName: s.signer, Usages: s.usages, ExpirationSeconds: s.exp,
			Username: "requester", Groups: []string{"system:authenticated"}},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: s.conditions},
	}
	value, err := storage.EncodeStored("certificates."+naming.GroupSuffix+"/v1", "CertificateSigningRequest", csr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.store.Create(context.Background(), &storagev1.CreateRequest{Type: csrType, Object: &storagev1.Object{
		Name: name, Value: value, Uid: string(csr.UID), Labels: csr.Labels,
		Fields: map[string]string{"metadata.name": name, "spec.signerName": s.signer},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetObject().GetResourceVersion()
}

// get reads a request as stored now.
func (e *env) get(t *testing.T, name string) (*certificatesv1.CertificateSigningRequest, int64) {
	t.Helper()
	resp, err := e.store.Get(context.Background(), &storagev1.GetRequest{Type: csrType, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := storage.DecodeStored(resp.GetObject().GetValue(), csr); err != nil {
		t.Fatal(err)
	}
	return csr, resp.GetObject().GetResourceVersion()
}

// approve adds the Approved condition, as the approval subresource does.
func (e *env) approve(t *testing.T, name string) {
	t.Helper()
	csr, rv := e.get(t, name)
	csr.Status.Conditions = append(csr.Status.Conditions, condition(certificatesv1.CertificateApproved))
	value, err := storage.EncodeStored("certificates."+naming.GroupSuffix+"/v1", "CertificateSigningRequest", csr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(context.Background(), &storagev1.UpdateRequest{Type: csrType,
		Object:        &storagev1.Object{Name: name, Value: value, Uid: string(csr.UID), Fields: map[string]string{"metadata.name": name, "spec.signerName": csr.Spec.SignerName}},
		Preconditions: &storagev1.Preconditions{ResourceVersion: rv}}); err != nil {
		t.Fatal(err)
	}
}

// waitSigned waits for the request's certificate and parses it.
func (e *env) waitSigned(t *testing.T, name string) (*certificatesv1.CertificateSigningRequest, *x509.Certificate) {
	t.Helper()
	var csr *certificatesv1.CertificateSigningRequest
	took := waitFor(t, name+" signed", func() bool {
		csr, _ = e.get(t, name)
		return len(csr.Status.Certificate) > 0
	})
	t.Logf("%s signed %v after it could be", name, took)
	cert, err := pki.ParseCertificatePEM(csr.Status.Certificate)
	if err != nil {
		t.Fatalf("%s: status.certificate: %v", name, err)
	}
	return csr, cert
}

func pool(ca *pki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func ptr(i int32) *int32 { return &i }

func node(name string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}
}

var (
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
)

// Each signer issues, for an approved request, a certificate crypto/x509 verifies against its CA
// with the requested usage, for the request's subject and SANs, with the right lifetime: a
// smaller expirationSeconds wins, --cluster-signing-duration wins otherwise.
func TestEachSignerIssues(t *testing.T) {
	e := newEnv(t)
	const duration = 2 * time.Hour
	e.start(t, func(c *server.Config) { c.Signing.Duration = duration })
	backdated := e.now.Add(-5 * time.Minute)

	type tc struct {
		name     string
		spec     csrSpec
		ca, not  *pki.CA
		usage    x509.ExtKeyUsage
		dnsName  string
		cn       string
		notAfter time.Time
	}
	cases := []tc{
		{"client-short", csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice", Organization: []string{"dev"}}}),
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, exp: ptr(3600), conditions: approved},
			e.defaultCA, e.servingCA, x509.ExtKeyUsageClientAuth, "", "alice", e.now.Add(time.Hour)},
		{"client-duration", csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "bob"}}),
			usages: clientUsages, exp: ptr(int32((3 * time.Hour).Seconds())), conditions: approved},
			e.defaultCA, e.servingCA, x509.ExtKeyUsageClientAuth, "", "bob", e.now.Add(duration)},
		{"kubelet-client", csrSpec{signer: naming.SignerAPIServerClientKubelet, request: csrPEM(t, x509.CertificateRequest{Subject: node("n1")}),
			usages: clientUsages, conditions: approved},
			e.defaultCA, e.servingCA, x509.ExtKeyUsageClientAuth, "", "system:node:n1", e.now.Add(duration)},
		{"kubelet-serving", csrSpec{signer: naming.SignerKubeletServing, request: csrPEM(t, x509.CertificateRequest{Subject: node("n1"), DNSNames: []string{"n1.example.com"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}),
			usages: servingUsages, exp: ptr(1800), conditions: approved},
			e.servingCA, e.defaultCA, x509.ExtKeyUsageServerAuth, "n1.example.com", "system:node:n1", e.now.Add(30 * time.Minute)},
	}
	for _, c := range cases {
		e.create(t, c.name, c.spec)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			csr, cert := e.waitSigned(t, c.name)
			opts := x509.VerifyOptions{Roots: pool(c.ca), DNSName: c.dnsName, KeyUsages: []x509.ExtKeyUsage{c.usage}, CurrentTime: e.now}
			if _, err := cert.Verify(opts); err != nil {
				t.Fatalf("verify against the signer's CA: %v", err)
			}
			opts.Roots = pool(c.not)
			if _, err := cert.Verify(opts); err == nil {
				t.Error("verified against another signer's CA")
			}
			other := x509.ExtKeyUsageServerAuth
			if c.usage == x509.ExtKeyUsageServerAuth {
				other = x509.ExtKeyUsageClientAuth
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool(c.ca), KeyUsages: []x509.ExtKeyUsage{other}, CurrentTime: e.now}); err == nil {
				t.Error("verified for a usage not requested")
			}
			if cert.Subject.CommonName != c.cn {
				t.Errorf("subject %v", cert.Subject)
			}
			if !cert.NotBefore.Equal(backdated) || !cert.NotAfter.Equal(c.notAfter) {
				t.Errorf("valid %v..%v, want %v..%v", cert.NotBefore, cert.NotAfter, backdated, c.notAfter)
			}
			// The rest of the object is as it was.
			if string(csr.UID) != "uid-"+c.name || csr.Labels["test"] != "yes" || csr.Spec.Username != "requester" || len(csr.Status.Conditions) != 1 {
				t.Errorf("the request changed beyond its certificate: %+v", csr)
			}
		})
	}

	// The default duration (one year) is backdated at both ends.
	e2 := newEnv(t)
	e2.start(t, nil)
	e2.create(t, "year", csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "carol"}}),
		usages: clientUsages, conditions: approved})
	_, cert := e2.waitSigned(t, "year")
	if want := e2.now.Add(8760*time.Hour - 5*time.Minute); !cert.NotAfter.Equal(want) {
		t.Errorf("a year's certificate ends %v, want %v", cert.NotAfter, want)
	}
}

// A request breaking its signer's rules gets Failed (reason SignerValidationFailure, a message
// naming the rule) and never a certificate.
func TestBrokenRulesFail(t *testing.T) {
	e := newEnv(t)
	e.start(t, nil)
	tampered := func() []byte {
		b, _ := pem.Decode(csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}))
		b.Bytes[len(b.Bytes)-1] ^= 0xff
		return pem.EncodeToMemory(b)
	}()
	cases := map[string]struct {
		spec csrSpec
		want string
	}{
		"client-server-auth": {csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "a"}}),
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth}, conditions: approved}, `"server auth" is not allowed`},
		"kubelet-client-dns": {csrSpec{signer: naming.SignerAPIServerClientKubelet, request: csrPEM(t, x509.CertificateRequest{Subject: node("n1"), DNSNames: []string{"n1"}}),
			usages: clientUsages, conditions: approved}, "DNS subject alternative names are not allowed"},
		"kubelet-client-masters": {csrSpec{signer: naming.SignerAPIServerClientKubelet, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:masters"}}}),
			usages: clientUsages, conditions: approved}, "organization must be exactly [system:nodes]"},
		"serving-no-san": {csrSpec{signer: naming.SignerKubeletServing, request: csrPEM(t, x509.CertificateRequest{Subject: node("n1")}),
			usages: servingUsages, conditions: approved}, "at least one DNS or IP subject alternative name"},
		"not-pem": {csrSpec{signer: naming.SignerAPIServerClient, request: []byte("not a request"),
			usages: clientUsages, conditions: approved}, "not PEM encoded"},
		"bad-signature": {csrSpec{signer: naming.SignerAPIServerClient, request: tampered,
			usages: clientUsages, conditions: approved}, "signature does not verify"},
	}
	for name, c := range cases {
		e.create(t, name, c.spec)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var csr *certificatesv1.CertificateSigningRequest
			waitFor(t, name+" Failed", func() bool {
				csr, _ = e.get(t, name)
				return len(csr.Status.Conditions) == 2
			})
			f := csr.Status.Conditions[1]
			if f.Type != certificatesv1.CertificateFailed || f.Status != corev1.ConditionTrue || f.Reason != "SignerValidationFailure" ||
				!strings.Contains(f.Message, c.want) || !f.LastUpdateTime.Time.Equal(e.now) || !f.LastTransitionTime.Time.Equal(e.now) {
				t.Errorf("condition %+v, want Failed/SignerValidationFailure with %q", f, c.want)
			}
			if len(csr.Status.Certificate) != 0 {
				t.Error("a failed request got a certificate")
			}
		})
	}
}

// Pending, denied, failed and already-signed requests, and requests for signers this service
// does not run, are left as they are; a pending request is signed once approved.
func TestOnlyApprovedRequestsOfOwnSigners(t *testing.T) {
	e := newEnv(t)
	// The kubelet serving signer is not run here.
	e.start(t, func(c *server.Config) {
		c.Signing.Default = server.KeyPair{}
		c.Signing.APIServerClient = e.defaultFiles
		c.Signing.KubeletClient = e.defaultFiles
		c.Signing.KubeletServing = server.KeyPair{}
	})
	req := func() []byte { return csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "u"}}) }
	client := naming.SignerAPIServerClient
	denied := condition(certificatesv1.CertificateDenied)
	failed := condition(certificatesv1.CertificateFailed)
	untouched := map[string]csrSpec{
		"pending":           {signer: client, request: req(), usages: clientUsages},
		"denied":            {signer: client, request: req(), usages: clientUsages, conditions: []certificatesv1.CertificateSigningRequestCondition{denied}},
		"approved-denied":   {signer: client, request: req(), usages: clientUsages, conditions: append([]certificatesv1.CertificateSigningRequestCondition{denied}, approved...)},
		"approved-failed":   {signer: client, request: req(), usages: clientUsages, conditions: append([]certificatesv1.CertificateSigningRequestCondition{failed}, approved...)},
		"approved-false":    {signer: client, request: req(), usages: clientUsages, conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionFalse}}},
		"unknown-signer":    {signer: "example.com/mine", request: req(), usages: clientUsages, conditions: approved},
		"legacy-unknown":    {signer: naming.SignerLegacyUnknown, request: req(), usages: clientUsages, conditions: approved},
		"signer-not-run":    {signer: naming.SignerKubeletServing, request: req(), usages: servingUsages, conditions: approved},
		"upstream-spelling": {signer: "kubernetes.io/kube-apiserver-client", request: req(), usages: clientUsages, conditions: approved},
	}
	rvs := map[string]int64{}
	for name, s := range untouched {
		rvs[name] = e.create(t, name, s)
	}
	// A request created after them is handled after them: once it is signed, they have been seen.
	e.create(t, "barrier", csrSpec{signer: client, request: req(), usages: clientUsages, conditions: approved})
	e.waitSigned(t, "barrier")
	for name := range untouched {
		csr, rv := e.get(t, name)
		if rv != rvs[name] || len(csr.Status.Certificate) > 0 {
			t.Errorf("%s was written (resourceVersion %d, was %d)", name, rv, rvs[name])
		}
	}
	// Approving the pending one gets it signed.
	e.approve(t, "pending")
	e.waitSigned(t, "pending")
}

// Two replicas over the same storage issue each request's certificate exactly once: every
// request is written once (its certificate set) and never again.
func TestTwoReplicasSignOnce(t *testing.T) {
	e := newEnv(t)
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	metricsA, metricsB := port(), port()
	a := e.start(t, func(c *server.Config) { c.MetricsBindAddress = metricsA })
	b := e.start(t, func(c *server.Config) { c.MetricsBindAddress = metricsB })

	// The watch below starts after this request (of a signer no one runs).
	start := e.create(t, "start", csrSpec{signer: "example.com/none", request: csrPEM(t, x509.CertificateRequest{}), usages: clientUsages, conditions: approved})
	const n = 30
	for i := range n {
		e.create(t, fmt.Sprintf("r%02d", i), csrSpec{signer: naming.SignerAPIServerClient,
			request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: fmt.Sprint("user-", i)}}), usages: clientUsages, conditions: approved})
	}
	certs := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("r%02d", i)
		csr, _ := e.waitSigned(t, name)
		certs[name] = csr.Status.Certificate
	}
	// The replicas' counters add up to one signing per request.
	waitFor(t, "the replicas' signed counters adding up", func() bool { return signedCount(t, metricsA)+signedCount(t, metricsB) == n })
	t.Logf("replica a signed %d, replica b %d", signedCount(t, metricsA), signedCount(t, metricsB))
	// Both replicas stop (their workers end), then every write since the start is read back.
	a.Stop(context.Background())
	b.Stop(context.Background())
	end, err := e.store.Revision(context.Background(), &storagev1.RevisionRequest{Type: csrType})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := e.store.Watch(ctx, &storagev1.WatchRequest{Type: csrType, ResourceVersion: strconv.FormatInt(start, 10)})
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]int{}
	for seen := start; seen < end.GetCurrent(); {
		events, err := w.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		for _, ev := range events {
			seen = max(seen, ev.GetResourceVersion())
			if ev.GetType() != storagev1.EventType_MODIFIED {
				continue
			}
			writes[ev.GetObject().GetName()]++
			csr := &certificatesv1.CertificateSigningRequest{}
			if err := storage.DecodeStored(ev.GetObject().GetValue(), csr); err != nil {
				t.Fatal(err)
			}
			if string(csr.Status.Certificate) != string(certs[csr.Name]) {
				t.Errorf("%s: a write with another certificate", csr.Name)
			}
		}
	}
	for name := range certs {
		if writes[name] != 1 {
			t.Errorf("%s written %d times, want once", name, writes[name])
		}
	}
}

var signedLine = regexp.MustCompile(`(?m)^certificates_signer_requests_total\{result="signed",signer="([^"]+)"\} (\d+)$`)

// signedCount reads the signed counter from a metrics endpoint (0 when it is not served).
func signedCount(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, m := range signedLine.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.Atoi(m[2])
		total += v
	}
	return total
}

// The metrics count signed and failed requests by signer.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	e.start(t, func(c *server.Config) { c.MetricsBindAddress = addr })
	e.create(t, "ok", csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "a"}}), usages: clientUsages, conditions: approved})
	e.create(t, "bad", csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "b"}}),
		usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}, conditions: approved})
	e.waitSigned(t, "ok")
	waitFor(t, "the failed counter", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `certificates_signer_requests_total{result="failed",signer="`+naming.SignerAPIServerClient+`"} 1`) &&
			strings.Contains(string(body), `certificates_signer_requests_total{result="signed",signer="`+naming.SignerAPIServerClient+`"} 1`)
	})
}

func TestConfig(t *testing.T) {
	c := server.DefaultConfig()
	if c.Signing.Duration != 8760*time.Hour || c.Listen != "127.0.0.1:7005" || c.Storage.Address != "127.0.0.1:7001" {
		t.Fatalf("defaults %+v", c)
	}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--cluster-signing-cert-file") {
		t.Fatalf("no CA: %v", err)
	}
	c.Signing.Default = server.KeyPair{CertFile: "ca.crt"}
	c.Signing.KubeletServing = server.KeyPair{KeyFile: "k.key"}
	c.Signing.Duration = 0
	err = c.Validate()
	for _, want := range []string{"--cluster-signing-cert-file and --cluster-signing-key-file go together",
		"--cluster-signing-kubelet-serving-cert-file and --cluster-signing-kubelet-serving-key-file go together", "--cluster-signing-duration"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	// Per-signer files override the default; signers with neither do not run.
	c = server.DefaultConfig()
	c.Signing.Default = server.KeyPair{CertFile: "d.crt", KeyFile: "d.key"}
	c.Signing.KubeletServing = server.KeyPair{CertFile: "s.crt", KeyFile: "s.key"}
	files := c.Signing.CAFiles()
	if files[naming.SignerKubeletServing].CertFile != "s.crt" || files[naming.SignerAPIServerClient].CertFile != "d.crt" || files[naming.SignerAPIServerClientKubelet].CertFile != "d.crt" {
		t.Errorf("CAFiles() = %v", files)
	}
	c.Signing.Default = server.KeyPair{}
	if files := c.Signing.CAFiles(); len(files) != 1 {
		t.Errorf("CAFiles() = %v, want the serving signer alone", files)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("one signer configured: %v", err)
	}

	// Start fails on CA files that do not load, naming the signer.
	e := newEnv(t)
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = e.storageAddr
	cfg.Signing.Default = server.KeyPair{CertFile: e.defaultFiles.CertFile, KeyFile: e.servingFiles.KeyFile}
	if _, err := server.Start(context.Background(), cfg, server.Options{}, discard); err == nil || !strings.Contains(err.Error(), "the CA of signer") {
		t.Errorf("Start with a mismatched CA pair = %v", err)
	}
	cfg.Signing.Default = server.KeyPair{CertFile: filepath.Join(t.TempDir(), "missing.crt"), KeyFile: e.defaultFiles.KeyFile}
	if _, err := server.Start(context.Background(), cfg, server.Options{}, discard); err == nil {
		t.Error("Start with a missing CA file succeeded")
	}
}
