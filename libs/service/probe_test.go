package service

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"platform.io/libs/pki"
)

// probe runs this test binary as `<binary> --health-probe args...`, as a container health check
// runs a service's binary, and returns its exit code and output.
func probe(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return run(t, append([]string{HealthProbeFlag}, args...)...)
}

// run runs this test binary with args and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, os.Args[0], args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("running the probe: %v", err)
	return -1, ""
}

func TestHealthProbeGRPC(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("probe-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.Write(caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.IssuePeer("storage", []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(dir, "storage.crt"), filepath.Join(dir, "storage.key")
	if err := pki.WritePair(cf, kf, c, k); err != nil {
		t.Fatal(err)
	}
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", TLSCertFile: cf, TLSPrivateKeyFile: kf, ClientCAFile: caFile, ShutdownTimeout: time.Second}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	s.ServeUnready()
	defer s.Stop(context.Background(), nil)
	target := "grpc://" + s.Addr().String()
	mtls := []string{"--ca-file", caFile, "--cert-file", cf, "--key-file", kf}

	if code, out := probe(t, append([]string{target}, mtls...)...); code != 1 || !strings.Contains(out, "NOT_SERVING") {
		t.Errorf("unready service: exit %d, %q; want 1 and NOT_SERVING", code, out)
	}
	s.SetServing(true)
	if code, out := probe(t, append([]string{target}, mtls...)...); code != 0 {
		t.Errorf("ready service: exit %d, %q; want 0", code, out)
	}
	// The flag=value form works too.
	if code, out := run(t, append([]string{HealthProbeFlag + "=" + target}, mtls...)...); code != 0 {
		t.Errorf("--health-probe=url: exit %d, %q; want 0", code, out)
	}
	// Without a client certificate the service refuses the probe: a probe proves mutual TLS works.
	if code, out := probe(t, target, "--ca-file", caFile); code != 1 {
		t.Errorf("no client certificate: exit %d, %q; want 1", code, out)
	}
	if code, out := probe(t, target, "--timeout", "2s"); code != 1 {
		t.Errorf("plaintext to a TLS service: exit %d, %q; want 1", code, out)
	}
	if code, out := probe(t, "storage:7001"); code != 2 {
		t.Errorf("not a URL: exit %d, %q; want 2", code, out)
	}
	if code, out := probe(t, target, "--cert-file", cf); code != 2 {
		t.Errorf("--cert-file without --key-file: exit %d, %q; want 2", code, out)
	}
}

func TestHealthProbeHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.Error(w, "[-]etcd failed: reason withheld", http.StatusInternalServerError)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := probe(t, srv.URL+"/readyz", "--ca-file", caFile); code != 0 {
		t.Errorf("200: exit %d, %q; want 0", code, out)
	}
	if code, out := probe(t, srv.URL+"/livez", "--ca-file", caFile); code != 1 || !strings.Contains(out, "500") {
		t.Errorf("500: exit %d, %q; want 1 naming the status", code, out)
	}
	// The server's certificate is checked.
	if code, out := probe(t, srv.URL+"/readyz"); code != 1 {
		t.Errorf("unknown CA: exit %d, %q; want 1", code, out)
	}
}
