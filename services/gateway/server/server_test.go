package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authn "platform.io/services/authn/server"
	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
	storage "platform.io/services/storage/server"
)

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Spec "Health endpoints": /healthz, /livez, /readyz, verbose, exclude, single checks. With the
// default policy (RBAC, anonymous requests allowed) anyone may read them
// (system:public-info-viewer); a presented credential that fails is 401 there as everywhere.
func TestHealthEndpoints(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{
		ConfigureAuthn: func(c *authn.Config) { c.AnonymousAuth = true },
		ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} },
	})
	anon := e.Anonymous()
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body := get(t, anon, e.URL+p); code != 200 || body != "ok" {
			t.Errorf("%s: %d %q", p, code, body)
		}
		if code, body := get(t, e.Bearer("not-a-token"), e.URL+p); code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"Unauthorized"`) {
			t.Errorf("%s with a bad token: %d %q", p, code, body)
		}
	}
	code, body := get(t, anon, e.URL+"/readyz?verbose")
	for _, line := range []string{"[+]ping ok", "[+]log ok", "[+]storage ok", "[+]poststarthook/bootstrap-namespaces ok", "[+]shutdown ok", "readyz check passed"} {
		if !strings.Contains(body, line) {
			t.Errorf("verbose readyz lacks %q:\n%s", line, body)
		}
	}
	if code != 200 {
		t.Errorf("verbose readyz: %d", code)
	}
	if _, body := get(t, anon, e.URL+"/livez?verbose&exclude=storage"); !strings.Contains(body, "[+]storage excluded: ok") {
		t.Errorf("exclude: %s", body)
	}
	// Single checks are not in system:public-info-viewer (upstream's rules name the three paths).
	if code, body := get(t, e.Admin, e.URL+"/livez/ping"); code != 200 || body != "ok" {
		t.Errorf("/livez/ping: %d %q", code, body)
	}
	if code, _ := get(t, anon, e.URL+"/livez/ping"); code != http.StatusForbidden {
		t.Errorf("/livez/ping as anonymous: %d", code)
	}
	if code, _ := get(t, e.Admin, e.URL+"/readyz/nosuch"); code != 404 {
		t.Errorf("/readyz/nosuch: %d", code)
	}
}

// Authentication and authorization wrap every path, those nothing serves included: a path that
// does not exist is 403 to callers not allowed to ask (anonymous, or authenticated without a
// grant) and 404 only to those allowed; a failed credential is 401 whatever the path.
func TestUnknownPathsAreAuthorizedFirst(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{
		ConfigureAuthn: func(c *authn.Config) { c.AnonymousAuth = true },
		ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} },
	})
	nobody := e.Client("nobody")
	for _, c := range []struct {
		method, path string
	}{{"GET", "/some-unknown-path"}, {"POST", "/other-path"}, {"GET", "/apis/nosuch.example.com/v1/things"}, {"GET", "/api/v1/nosuchresources"}} {
		for name, client := range map[string]*http.Client{"anonymous": e.Anonymous(), "nobody": nobody} {
			code, _, body := e.Do(t, client, c.method, c.path, nil)
			if code != http.StatusForbidden || !strings.Contains(string(body), `"reason":"Forbidden"`) {
				t.Errorf("%s %s as %s: %d %s", c.method, c.path, name, code, body)
			}
		}
		if code, _, body := e.Do(t, e.Bearer("not-a-token"), c.method, c.path, nil); code != http.StatusUnauthorized {
			t.Errorf("%s %s with a bad token: %d %s", c.method, c.path, code, body)
		}
		if code, _, body := e.Do(t, e.Admin, c.method, c.path, nil); code != http.StatusNotFound {
			t.Errorf("%s %s as admin: %d %s", c.method, c.path, code, body)
		}
	}
}

// The storage check follows the storage service: readyz fails while it is down, API requests
// answer 503 promptly instead of hanging, and both recover when storage is back.
func TestStorageOutage(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var storageCfg storage.Config
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureStorage: func(c *storage.Config) { c.Listen = addr; storageCfg = *c }})
	const cms = "/api/v1/namespaces/default/configmaps"
	if code, _ := get(t, e.Admin, e.URL+cms); code != 200 {
		t.Fatalf("list before the outage: %d", code)
	}
	e.Storage.Stop(context.Background())
	code, body := get(t, e.Admin, e.URL+"/readyz?verbose")
	if code != 500 || !strings.Contains(body, "[-]storage failed") {
		t.Errorf("readyz with storage down: %d\n%s", code, body)
	}
	start := time.Now()
	code, body = get(t, e.Admin, e.URL+cms)
	if code != http.StatusServiceUnavailable && code != http.StatusInternalServerError && code != http.StatusGatewayTimeout {
		t.Errorf("list with storage down: %d %s", code, body)
	}
	if !strings.Contains(body, `"kind":"Status"`) || time.Since(start) > 15*time.Second {
		t.Errorf("list with storage down took %v: %s", time.Since(start), body)
	}
	restarted, err := storage.Start(context.Background(), storageCfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Stop(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := get(t, e.Admin, e.URL+cms)
		rcode, _ := get(t, e.Admin, e.URL+"/readyz")
		if code == 200 && rcode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered after storage restart: list %d readyz %d", code, rcode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Spec: --shutdown-delay-duration: on shutdown /readyz fails at once while requests are still
// served for the delay; /livez stays healthy.
func TestShutdownDelay(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) { c.ShutdownDelayDuration = 2 * time.Second }})
	stopped := make(chan struct{})
	go func() { e.Gateway.Stop(context.Background()); close(stopped) }()
	time.Sleep(200 * time.Millisecond)
	code, body := get(t, e.Admin, e.URL+"/readyz?verbose")
	if code != 500 || !strings.Contains(body, "[-]shutdown failed") {
		t.Errorf("readyz during the shutdown delay: %d\n%s", code, body)
	}
	if code, _ := get(t, e.Admin, e.URL+"/livez"); code != 200 {
		t.Errorf("livez during the shutdown delay: %d", code)
	}
	if code, _ := get(t, e.Admin, e.URL+"/api/v1/namespaces"); code != 200 {
		t.Errorf("requests during the shutdown delay: %d", code)
	}
	select {
	case <-stopped:
		t.Fatal("stopped before the delay elapsed")
	case <-time.After(time.Second):
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop after the delay")
	}
	if _, err := e.Admin.Get(e.URL + "/livez"); err == nil {
		t.Error("still serving after shutdown")
	}
}

// Metrics use upstream's names and are only for authenticated callers.
func TestMetrics(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	get(t, e.Admin, e.URL+"/api/v1/namespaces/default/configmaps")
	if code, _ := get(t, e.Anonymous(), e.URL+"/metrics"); code != 401 {
		t.Errorf("anonymous /metrics: %d", code)
	}
	code, body := get(t, e.Admin, e.URL+"/metrics")
	if code != 200 || !strings.Contains(body, `apiserver_request_total{code="200",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="list",version="v1"}`) {
		t.Errorf("/metrics: %d\n%s", code, grep(body, "apiserver_request_total"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Configuration errors name the flag that fixes them.
func TestConfigValidate(t *testing.T) {
	c := server.DefaultConfig()
	c.Storage.Address = "10.0.0.1:7001"
	c.Authz.Address = "10.0.0.2:7003"
	c.RuntimeConfig = "nosuch/v1"
	c.BindAddress = "not-an-ip"
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, flag := range []string{"--tls-cert-file", "--client-ca-file", "--storage-address", "--authz-address", "--runtime-config", "--bind-address"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error does not name %s:\n%v", flag, err)
		}
	}
}

// /debug/pprof/ is upstream's --profiling: on by default, for callers RBAC allows the
// non-resource URL (system:masters; no default role grants it), off with --profiling=false.
func TestProfiling(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} }})
	if code, _ := get(t, e.Anonymous(), e.URL+"/debug/pprof/"); code != 401 {
		t.Errorf("anonymous /debug/pprof/: %d", code)
	}
	if code, _ := get(t, e.Client("alice", "system:authenticated"), e.URL+"/debug/pprof/"); code != 403 {
		t.Errorf("an ordinary user's /debug/pprof/: %d", code)
	}
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile", "/debug/pprof/profile?seconds=1": ""} {
		if code, body := get(t, e.Admin, e.URL+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("admin %s: %d", path, code)
		}
	}
	off := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) { c.Profiling = false }})
	if code, _ := get(t, off.Admin, off.URL+"/debug/pprof/"); code != 404 {
		t.Errorf("--profiling=false: /debug/pprof/ %d", code)
	}
}
