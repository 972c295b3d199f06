package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
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
