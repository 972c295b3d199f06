package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"platform.io/libs/redistest"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/conformance"
	"platform.io/services/storage/server"
)

var widgets = &storagev1.ResourceType{Group: "test.platform.io", Resource: "widgets"}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caFile = p.write(t, "ca.crt", "CERTIFICATE", der)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue returns the cert and key files of a leaf certificate signed by the CA.
func (p *pki) issue(t *testing.T, name string, server bool) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return p.write(t, name+".crt", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", keyDER)
}

// startService runs the storage service with cfg until the test ends.
func startService(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	srv, err := server.Start(context.Background(), cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return srv
}

func startEmbedded(t *testing.T, tweak func(*server.Config)) *server.Server {
	t.Helper()
	cfg := conformance.TestConfig()
	cfg.Backend, cfg.DataDir = "embedded", t.TempDir()
	if tweak != nil {
		tweak(&cfg)
	}
	return startService(t, cfg)
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, append(opts, storage.CallOptions())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestMutualTLSRejectsClientsWithoutACertificate(t *testing.T) {
	p := newPKI(t)
	serverCert, serverKey := p.issue(t, "storage", true)
	srv := startEmbedded(t, func(c *server.Config) {
		c.TLSCertFile, c.TLSPrivateKeyFile, c.ClientCAFile = serverCert, serverKey, p.caFile
	})
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	req := &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "a", Value: []byte("v")}}

	noCert := dial(t, srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots})))
	if _, err := storage.NewClient(noCert).Create(ctx(t), req); !storage.IsUnavailable(err) {
		t.Fatalf("client without a certificate: got %v, want the connection refused (UNAVAILABLE)", err)
	}
	plain := dial(t, srv.Addr().String())
	if _, err := storage.NewClient(plain).Create(ctx(t), req); err == nil {
		t.Fatal("plaintext client was served by a TLS listener")
	}
	// A certificate from another CA is refused too.
	other := newPKI(t)
	otherCert, otherKey := other.issue(t, "intruder", false)
	oc, _ := tls.LoadX509KeyPair(otherCert, otherKey)
	wrongCA := dial(t, srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{oc}})))
	if _, err := storage.NewClient(wrongCA).Create(ctx(t), req); err == nil {
		t.Fatal("client certificate from an unknown CA was accepted")
	}

	clientCert, clientKey := p.issue(t, "gateway", false)
	cc, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	good := dial(t, srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cc}})))
	if _, err := storage.NewClient(good).Create(ctx(t), req); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
}

func TestUnixSocketListener(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "storage.sock")
	srv := startEmbedded(t, func(c *server.Config) { c.Listen = "unix://" + sock })
	if srv.Addr().Network() != "unix" {
		t.Fatalf("listening on %v", srv.Addr())
	}
	c := storage.NewClient(dial(t, "unix://"+sock))
	if _, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	metricsAddr := l.Addr().String()
	l.Close()
	srv := startEmbedded(t, func(c *server.Config) { c.MetricsBindAddress = metricsAddr })
	conn := dial(t, srv.Addr().String())
	for _, svc := range []string{"", storagev1.Storage_ServiceDesc.ServiceName} {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q: %v %v", svc, resp, err)
		}
	}
	c := storage.NewClient(conn)
	if _, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "missing"})
	w, err := c.Watch(ctx(t), &storagev1.WatchRequest{Type: widgets, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`storage_requests_total{code="OK",method="Create",resource="widgets.test.platform.io"} 1`,
		`storage_requests_total{code="NotFound",method="Get",resource="widgets.test.platform.io"} 1`,
		`storage_request_duration_seconds_count{method="Create",resource="widgets.test.platform.io"} 1`,
		`storage_watchers{resource="widgets.test.platform.io"} 1`,
		`storage_watch_events_sent_total{resource="widgets.test.platform.io"} 1`,
		`storage_revision{resource="widgets.test.platform.io"} 1`,
		`storage_revision_lag{resource="widgets.test.platform.io"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestRedisOutageFailsFastAndRecovers(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{AppendFsync: "always", Password: "s3cret-pw"})
	cfg := conformance.TestConfig()
	cfg.Backend = "redis"
	cfg.RedisURL = "redis://" + rs.Addr() + "/0"
	pwFile := filepath.Join(t.TempDir(), "pw")
	_ = os.WriteFile(pwFile, []byte("s3cret-pw\n"), 0o600)
	cfg.RedisPasswordFile = pwFile
	srv := startService(t, cfg)
	conn := dial(t, srv.Addr().String())
	c := storage.NewClient(conn)
	if _, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx(t), &storagev1.WatchRequest{Type: widgets, ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}

	// A consistent read waits until the type's cache is loaded, so the outage hits a warm cache.
	if _, err := c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := rs.Stop(true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "b"}})
	if !storage.IsUnavailable(err) {
		t.Fatalf("write with Redis down: got %v, want UNAVAILABLE", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("write with Redis down took %v to fail", took)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error leaks the Redis password: %v", err)
	}
	_, err = c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "a"})
	if !storage.IsUnavailable(err) {
		t.Fatalf("consistent read with Redis down: got %v, want UNAVAILABLE", err)
	}
	// Reads that accept any revision are still served from the cache.
	if got, err := c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "a", ResourceVersion: "0"}); err != nil || got.GetObject().GetName() != "a" {
		t.Fatalf("read at any revision with Redis down: %v %v", got, err)
	}
	waitHealth(t, conn, healthpb.HealthCheckResponse_NOT_SERVING)

	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "b"}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service did not recover after Redis returned: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitHealth(t, conn, healthpb.HealthCheckResponse_SERVING)
	// The watch opened before the outage carries on with no gap.
	evs, err := w.Recv()
	if err != nil || len(evs) != 1 || evs[0].GetResourceVersion() != 2 || evs[0].GetObject().GetName() != "b" {
		t.Fatalf("watch after the outage: %v %v", evs, err)
	}
}

func waitHealth(t *testing.T, conn *grpc.ClientConn, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("health is %v (%v), want %v", resp.GetStatus(), err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestConfigValidationNamesTheFlag(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Backend = "etcd"
	cfg.TLSCertFile = "x.crt"
	cfg.HistoryRetention = 0
	err := cfg.Validate()
	for _, flag := range []string{"--backend", "--tls-private-key-file", "--history-retention"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("validation error %v does not name %s", err, flag)
		}
	}
	def := server.DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

// TestRedisLosingWritesNeverMixesHistories restores an older AOF under a running service (what a
// crash with appendfsync everysec, or a restore from backup, does) and writes past the revision
// the service had seen before its log reader reconnects. The service must serve the history Redis
// now has, not the lost writes with the new ones on top, and must end the watches that saw them.
func TestRedisLosingWritesNeverMixesHistories(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{AppendFsync: "everysec"})
	cfg := conformance.TestConfig()
	cfg.Backend, cfg.RedisURL = "redis", rs.URL()
	srv := startService(t, cfg)
	c := storage.NewClient(dial(t, srv.Addr().String()))
	create := func(name string) int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: name, Value: []byte(name)}})
			if err == nil {
				return resp.GetObject().GetResourceVersion()
			}
			if !storage.IsUnavailable(err) || time.Now().After(deadline) {
				t.Fatalf("create %s: %v", name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range 5 {
		create(fmt.Sprint("kept", i))
	}
	// Back up the AOF as of revision 5.
	if err := rs.Restart(false); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "aof")
	copyDir(t, filepath.Join(rs.Dir(), "appendonlydir"), backup)

	for i := range 5 {
		create(fmt.Sprint("lost", i))
	}
	if _, err := c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "lost4"}); err != nil {
		t.Fatal(err) // the cache has applied the writes that will be lost
	}
	w, err := c.Watch(ctx(t), &storagev1.WatchRequest{Type: widgets, ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Stop(true); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(rs.Dir(), "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, backup, filepath.Join(rs.Dir(), "appendonlydir"))
	time.Sleep(2500 * time.Millisecond) // the log reader backs off while Redis is away
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 8 { // past revision 10 before the reader is back
		last = create(fmt.Sprint("new", i))
	}
	if last != 13 {
		t.Fatalf("Redis came back at revision %d, want 5 (+8 writes = 13)", last-8)
	}

	var list *storagev1.ListResponse
	for deadline := time.Now().Add(10 * time.Second); ; {
		list, err = c.List(ctx(t), &storagev1.ListRequest{Type: widgets})
		if err == nil {
			break
		}
		if !storage.IsUnavailable(err) || time.Now().After(deadline) { // UNAVAILABLE while the cache catches up
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var names []string
	for _, it := range list.GetItems() {
		names = append(names, it.GetName())
	}
	if list.GetResourceVersion() != 13 || len(names) != 13 || strings.Contains(strings.Join(names, ","), "lost") {
		t.Fatalf("after Redis lost writes 6-10 and took 8 new ones, the service lists %v at %d", names, list.GetResourceVersion())
	}
	// The watch that had seen revision 10 of the lost history ends instead of going on with the
	// new history's 11-13 as if they followed.
	for {
		evs, err := w.Recv()
		if err != nil {
			break
		}
		for _, ev := range evs {
			t.Fatalf("watch from the lost revision 10 got %v %s@%d", ev.GetType(), ev.GetObject().GetName(), ev.GetResourceVersion())
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRedisOverTLS(t *testing.T) {
	p := newPKI(t)
	cert, key := p.issue(t, "redis", true)
	rs := redistest.Start(t, redistest.Options{TLSCertFile: cert, TLSKeyFile: key, TLSCAFile: p.caFile, Password: "tls-pw"})
	cfg := conformance.TestConfig()
	cfg.Backend, cfg.RedisURL, cfg.RedisCAFile = "redis", rs.URL(), p.caFile
	if !strings.HasPrefix(cfg.RedisURL, "rediss://") {
		t.Fatalf("URL %s is not TLS", cfg.RedisURL)
	}
	srv, err := server.Start(context.Background(), cfg, testLogger())
	if err != nil {
		t.Fatalf("storage over TLS Redis: %v", err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	c := storage.NewClient(dial(t, srv.Addr().String()))
	if _, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: "a", Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: "a"}); err != nil || string(got.GetObject().GetValue()) != "v" {
		t.Fatalf("get over TLS Redis: %v %v", got, err)
	}

	// A Redis whose certificate the service does not trust is refused at start, with no secret in
	// the error.
	cfg.RedisCAFile = newPKI(t).caFile
	_, err = server.Start(context.Background(), cfg, testLogger())
	if err == nil {
		t.Fatal("storage trusted a Redis certificate from an unknown CA")
	}
	t.Logf("untrusted Redis: %v", err)
	if strings.Contains(err.Error(), "tls-pw") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// TestReplicasShareOneRedis runs two storage services on one Redis, as a cluster deployment does:
// a write through one is seen by a consistent read and a watch through the other, and a continue
// token issued by one is honoured by the other.
func TestReplicasShareOneRedis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	var clients [2]*storage.Client
	for i := range clients {
		cfg := conformance.TestConfig()
		cfg.Backend, cfg.RedisURL = "redis", rs.URL()
		srv := startService(t, cfg)
		clients[i] = storage.NewClient(dial(t, srv.Addr().String()))
	}
	a, b := clients[0], clients[1]
	w, err := b.Watch(ctx(t), &storagev1.WatchRequest{Type: widgets, ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		resp, err := a.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Name: fmt.Sprintf("o%02d", i), Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Name: fmt.Sprintf("o%02d", i)})
		if err != nil || got.GetObject().GetResourceVersion() != resp.GetObject().GetResourceVersion() {
			t.Fatalf("consistent read on the other replica right after the write at %d: %v %v", resp.GetObject().GetResourceVersion(), got, err)
		}
	}
	for want := int64(1); want <= 20; {
		evs, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.GetResourceVersion() != want {
				t.Fatalf("watch on the other replica: got %d, want %d", ev.GetResourceVersion(), want)
			}
			want++
		}
	}
	page, err := a.List(ctx(t), &storagev1.ListRequest{Type: widgets, Limit: 8})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := b.List(ctx(t), &storagev1.ListRequest{Type: widgets, Limit: 100, Continue: page.GetContinue()})
	if err != nil {
		t.Fatalf("continue token from the other replica: %v", err)
	}
	if len(rest.GetItems()) != 12 || rest.GetItems()[0].GetName() != "o08" || rest.GetResourceVersion() != page.GetResourceVersion() {
		t.Fatalf("second page on the other replica: %d items from %s at %d", len(rest.GetItems()), rest.GetItems()[0].GetName(), rest.GetResourceVersion())
	}
}
