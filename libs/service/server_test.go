package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"platform.io/libs/pki"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A service reports NOT_SERVING until it is ready, SERVING after, and NOT_SERVING again once it
// stops; clients reach it over mutual TLS only with a certificate of the client CA.
func TestServeHealthAndMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("service-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.Write(caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	issue := func(name string) (string, string) {
		c, k, err := ca.IssuePeer(name, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := pki.WritePair(cf, kf, c, k); err != nil {
			t.Fatal(err)
		}
		return cf, kf
	}
	sc, sk := issue("server")
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", TLSCertFile: sc, TLSPrivateKeyFile: sk, ClientCAFile: caFile, ShutdownTimeout: time.Second}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	s.ServeUnready()
	defer s.Stop(context.Background(), nil)

	cc, ck := issue("client")
	good := ClientConfig{prefix: "test", Address: s.Addr().String(), CAFile: caFile, CertFile: cc, KeyFile: ck}
	conn, err := good.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if err := CheckHealth(ctx, conn, 5*time.Second); err == nil {
		t.Fatal("an unready service reports healthy")
	}
	s.SetServing(true)
	if err := CheckHealth(ctx, conn, 5*time.Second); err != nil {
		t.Fatalf("a ready service: %v", err)
	}
	// Without a client certificate the handshake is refused.
	anon := ClientConfig{prefix: "test", Address: s.Addr().String(), CAFile: caFile}
	aconn, err := anon.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer aconn.Close()
	if err := CheckHealth(ctx, aconn, 2*time.Second); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	s.Stop(ctx, nil)
	if err := CheckHealth(ctx, conn, time.Second); err == nil {
		t.Fatal("a stopped service reports healthy")
	}
}

// A server stopped before it served (its service failed to start) gives its port back.
func TestStopBeforeServeReleasesTheListener(t *testing.T) {
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", ShutdownTimeout: time.Second}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	s.Stop(context.Background(), nil)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port of a server stopped before serving is still taken: %v", err)
	}
	l.Close()
}

// --profiling serves Go's profiles beside /metrics, only when asked for, and only with a
// metrics listener to serve them on.
func TestProfilingOnTheMetricsListener(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", MetricsBindAddress: "127.0.0.1:0", Profiling: profiling, ShutdownTimeout: time.Second}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		s.Serve()
		base := "http://" + s.mlis.Addr().String()
		for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/heap?debug=1": "heap profile", "/debug/pprof/cmdline": "", "/metrics": "go_goroutines"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			wantCode := 200
			if !profiling && path != "/metrics" {
				wantCode = 404
			}
			if resp.StatusCode != wantCode || (wantCode == 200 && !strings.Contains(string(body), want)) {
				t.Errorf("profiling=%v %s: %d, want %d with %q", profiling, path, resp.StatusCode, wantCode, want)
			}
		}
		s.Stop(context.Background(), nil)
	}
	errs := (&ServerConfig{Listen: "127.0.0.1:0", Profiling: true, ShutdownTimeout: time.Second}).Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "--metrics-bind-address") {
		t.Errorf("--profiling without a metrics listener: %v", errs)
	}
}
