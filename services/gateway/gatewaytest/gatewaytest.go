// Package gatewaytest starts a real gateway for tests: a storage service (embedded backend, or
// Redis) on a loopback socket, a cluster CA, and the gateway serving HTTPS with client
// certificates. Tests talk to it over real TLS.
package gatewaytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"platform.io/libs/pki"
	"platform.io/services/gateway/server"
	storage "platform.io/services/storage/server"
)

// Options adjust the environment.
type Options struct {
	// Configure edits the gateway's configuration before it starts.
	Configure func(*server.Config)
	// ConfigureStorage edits the storage service's configuration before it starts.
	ConfigureStorage func(*storage.Config)
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
	// Gateway and Storage are the running services.
	Gateway *server.Server
	Storage *storage.Server
	pool    *x509.CertPool
	tb      testing.TB
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
	gc := server.DefaultConfig()
	gc.SecurePort = 0
	gc.TLSCertFile, gc.TLSPrivateKeyFile, gc.ClientCAFile = certFile, keyFile, caFile
	gc.StorageAddress = st.Addr().String()
	gc.ShutdownTimeout = 5 * time.Second
	if opts.Configure != nil {
		opts.Configure(&gc)
	}
	gw, err := server.Start(ctx, gc, server.Options{}, log.With("service", "gateway"))
	if err != nil {
		st.Stop(ctx)
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	e := &Env{URL: "https://" + gw.Addr().String(), CA: ca, CAFile: caFile, Dir: dir, Gateway: gw, Storage: st, pool: pool, tb: tb}
	e.Admin = e.Client("admin", "system:masters")
	tb.Cleanup(func() {
		gw.Stop(context.Background())
		st.Stop(context.Background())
	})
	e.WaitReady()
	return e
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
