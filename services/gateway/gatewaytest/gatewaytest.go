// Package gatewaytest starts a real gateway for tests: a storage service (embedded backend, or
// Redis), the authentication, authorization and admission services on loopback sockets, a cluster CA, and
// the gateway serving HTTPS with client certificates. Tests talk to it over real TLS.
package gatewaytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	storageclient "platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	admission "platform.io/services/admission/server"
	authn "platform.io/services/authn/server"
	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/server"
	storage "platform.io/services/storage/server"
)

// Options adjust the environment.
type Options struct {
	// Configure edits the gateway's configuration before it starts.
	Configure func(*server.Config)
	// ConfigureStorage edits the storage service's configuration before it starts.
	ConfigureStorage func(*storage.Config)
	// ConfigureAuthn and ConfigureAuthz edit the authentication and authorization services'
	// configurations. By default authorization is AlwaysAllow with anonymous requests refused (as
	// upstream defaults anonymous requests with AlwaysAllow), client certificates from the test
	// CA, and service account tokens signed with a key of the environment.
	ConfigureAuthn func(*authn.Config)
	ConfigureAuthz func(*authz.Config)
	// ConfigureAdmission edits the admission service's configuration. By default it runs the
	// spec's default plugins but ServiceAccount (which needs the controllers service's default
	// service accounts, not run here).
	ConfigureAdmission func(*admission.Config)
	// Log receives the services' logs (default: discarded unless the test is verbose).
	Log *slog.Logger
}

// Env is a running gateway with its storage.
type Env struct {
	// URL is the gateway's base URL (https://127.0.0.1:<port>).
	URL string
	// CA is the cluster CA that signs client certificates.
	CA *pki.CA
	// CAFile is the CA certificate's path; Dir the environment's directory.
	CAFile, Dir string
	// Admin is an HTTP/2 client authenticated as an admin (group system:masters).
	Admin *http.Client
	// Gateway, Storage, Authn, Authz and Admission are the running services.
	Gateway   *server.Server
	Storage   *storage.Server
	Authn     *authn.Server
	Authz     *authz.Server
	Admission *admission.Server
	// ServiceAccountKeyFile is the private key that signs service account tokens;
	// ServiceAccountIssuer their issuer.
	ServiceAccountKeyFile, ServiceAccountIssuer string
	pool                                        *x509.CertPool
	tb                                          testing.TB
	// rbac is whether the authorization service runs the RBAC mode.
	rbac bool
}

// Start starts storage and the gateway; both stop when the test ends.
func Start(tb testing.TB, opts Options) *Env {
	tb.Helper()
	dir := tb.TempDir()
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.Write(caFile, filepath.Join(dir, "ca.key")); err != nil {
		tb.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("gateway", []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := pki.WritePair(certFile, keyFile, certPEM, keyPEM); err != nil {
		tb.Fatal(err)
	}

	sc := storage.DefaultConfig()
	sc.Backend = "embedded"
	sc.DataDir = filepath.Join(dir, "storage")
	sc.Listen = "127.0.0.1:0"
	sc.FutureRevisionWait = time.Second
	if opts.ConfigureStorage != nil {
		opts.ConfigureStorage(&sc)
	}
	ctx := context.Background()
	st, err := storage.Start(ctx, sc, log.With("service", "storage"))
	if err != nil {
		tb.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := pki.WriteSigningKey(saKey); err != nil {
		tb.Fatal(err)
	}
	const issuer = "https://platform.test"
	ac := authn.DefaultConfig()
	ac.Listen = "127.0.0.1:0"
	ac.Storage.Address = st.Addr().String()
	ac.ClientCAFile = caFile
	ac.AnonymousAuth = false
	ac.ServiceAccountIssuers = []string{issuer}
	ac.ServiceAccountKeyFiles = []string{saKey}
	ac.ServiceAccountSigningKeyFile = saKey
	ac.EnableBootstrapTokenAuth = true
	if opts.ConfigureAuthn != nil {
		opts.ConfigureAuthn(&ac)
	}
	an, err := authn.Start(ctx, ac, authn.Options{}, log.With("service", "authn"))
	if err != nil {
		st.Stop(ctx)
		tb.Fatal(err)
	}
	zc := authz.DefaultConfig()
	zc.Listen = "127.0.0.1:0"
	zc.Storage.Address = st.Addr().String()
	zc.Modes = []string{authz.ModeAlwaysAllow}
	if opts.ConfigureAuthz != nil {
		opts.ConfigureAuthz(&zc)
	}
	az, err := authz.Start(ctx, zc, authz.Options{}, log.With("service", "authz"))
	if err != nil {
		an.Stop(ctx)
		st.Stop(ctx)
		tb.Fatal(err)
	}
	dc := admission.DefaultConfig()
	dc.Listen = "127.0.0.1:0"
	dc.Storage.Address = st.Addr().String()
	dc.Authz.Address = az.Addr().String()
	dc.DisablePlugins = []string{"ServiceAccount"}
	if opts.ConfigureAdmission != nil {
		opts.ConfigureAdmission(&dc)
	}
	ad, err := admission.Start(ctx, dc, admission.Options{}, log.With("service", "admission"))
	if err != nil {
		az.Stop(ctx)
		an.Stop(ctx)
		st.Stop(ctx)
		tb.Fatal(err)
	}
	gc := server.DefaultConfig()
	gc.SecurePort = 0
	gc.TLSCertFile, gc.TLSPrivateKeyFile, gc.ClientCAFile = certFile, keyFile, caFile
	gc.Storage.Address = st.Addr().String()
	gc.Authn.Address = an.Addr().String()
	gc.Authz.Address = az.Addr().String()
	gc.Admission.Address = ad.Addr().String()
	gc.ShutdownTimeout = 5 * time.Second
	if opts.Configure != nil {
		opts.Configure(&gc)
	}
	gw, err := server.Start(ctx, gc, server.Options{}, log.With("service", "gateway"))
	if err != nil {
		ad.Stop(ctx)
		az.Stop(ctx)
		an.Stop(ctx)
		st.Stop(ctx)
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	e := &Env{URL: "https://" + gw.Addr().String(), CA: ca, CAFile: caFile, Dir: dir, Gateway: gw, Storage: st, Authn: an, Authz: az, Admission: ad,
		ServiceAccountKeyFile: saKey, ServiceAccountIssuer: issuer, pool: pool, tb: tb, rbac: slices.Contains(zc.Modes, authz.ModeRBAC)}
	e.Admin = e.Client("admin", "system:masters")
	tb.Cleanup(func() {
		gw.Stop(context.Background())
		ad.Stop(context.Background())
		az.Stop(context.Background())
		an.Stop(context.Background())
		st.Stop(context.Background())
	})
	e.WaitReady()
	e.waitPolicy()
	return e
}

// waitPolicy waits until the authorization service enforces everything stored at start (the
// default policy is stored by /readyz, compiled a moment later: the spec bounds it at a second):
// with RBAC, until its policy is built from storage revisions at least as new as the stored RBAC
// objects'; otherwise until an authenticated user may read discovery (immediate with AlwaysAllow).
func (e *Env) waitPolicy() {
	e.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	if want, ok := e.rbacRevisions(); ok {
		for time.Now().Before(deadline) {
			if got, ok := e.Authz.RBACCompiledAt(); ok && got[0] >= want[0] && got[1] >= want[1] && got[2] >= want[2] && got[3] >= want[3] {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		e.tb.Fatal("the default RBAC policy did not take effect within 10s")
	}
	probe := e.Client("gatewaytest-probe")
	for time.Now().Before(deadline) {
		resp, err := probe.Get(e.URL + "/api")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.tb.Fatal("discovery was not allowed within 10s")
}

// rbacRevisions reads the stored revisions of the RBAC types, when the authorization service
// runs RBAC.
func (e *Env) rbacRevisions() ([4]int64, bool) {
	var revs [4]int64
	if !e.rbac {
		return revs, false
	}
	conn, err := grpc.NewClient(e.Storage.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.tb.Fatal(err)
	}
	defer conn.Close()
	c := storageclient.NewClient(conn)
	group := naming.Group("rbac.authorization.k8s.io")
	for i, res := range []string{"roles", "clusterroles", "rolebindings", "clusterrolebindings"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Revision(ctx, &storagev1.RevisionRequest{Type: &storagev1.ResourceType{Group: group, Resource: res}})
		cancel()
		if err != nil {
			e.tb.Fatal(err)
		}
		revs[i] = resp.GetCurrent()
	}
	return revs, true
}

// Client returns an HTTP/2 client with a client certificate for user in groups.
func (e *Env) Client(user string, groups ...string) *http.Client {
	e.tb.Helper()
	certPEM, keyPEM, err := e.CA.IssueClient(user, groups, time.Hour)
	if err != nil {
		e.tb.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		e.tb.Fatal(err)
	}
	return e.client(&tls.Config{RootCAs: e.pool, Certificates: []tls.Certificate{cert}})
}

// Anonymous returns a client that presents no certificate.
func (e *Env) Anonymous() *http.Client {
	return e.client(&tls.Config{RootCAs: e.pool})
}

// HTTP1 returns an admin client that speaks HTTP/1.1 only.
func (e *Env) HTTP1(user string, groups ...string) *http.Client {
	c := e.Client(user, groups...)
	t := c.Transport.(*http2.Transport)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: t.TLSClientConfig, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
}

func (e *Env) client(tc *tls.Config) *http.Client {
	tc.MinVersion = tls.VersionTLS12
	return &http.Client{Transport: &http2.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
}

// ClientCert returns PEM credentials for user, for clients built from a rest.Config.
func (e *Env) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte) {
	e.tb.Helper()
	c, k, err := e.CA.IssueClient(user, groups, time.Hour)
	if err != nil {
		e.tb.Fatal(err)
	}
	return c, k
}

// WaitReady waits until /readyz answers 200 (the initial namespaces exist).
func (e *Env) WaitReady() {
	e.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := e.Admin.Get(e.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.tb.Fatal("the gateway did not become ready")
}

// Bearer returns an HTTP/2 client that presents no certificate and sends token as its bearer
// token.
func (e *Env) Bearer(token string) *http.Client {
	c := e.Anonymous()
	c.Transport = bearerTransport{token: token, next: c.Transport}
	return c
}

type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Do sends one request to the gateway with client c and returns the answer's code, header and
// body. body is nil, a string or bytes (sent as they are), or a value sent as JSON; any body goes
// with Content-Type application/json unless headers set another. headers alternate name and value
// (a name given twice adds a second value).
func (e *Env) Do(tb testing.TB, c *http.Client, method, path string, body any, headers ...string) (int, http.Header, []byte) {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if rd != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}
