package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"platform.io/libs/pki"
)

// loopbackServer is an HTTPS server of the tool's own on 127.0.0.1, with a CA of its own (the
// webhook, the null server).
type loopbackServer struct {
	url   string // https://127.0.0.1:<port>, no path
	caPEM []byte // the CA that verifies it
	srv   *http.Server
}

// serveLoopback serves h over TLS on a free loopback port until close, named name in its CA and
// certificate. With http2 it offers HTTP/2 and HTTP/1.1 as the servers under test do (a server
// over a TLS listener negotiates ALPN with the listener's configuration, so it must offer h2
// itself); without, HTTP/1.1 only.
func serveLoopback(name string, h http.Handler, http2 bool) (*loopbackServer, error) {
	ca, err := pki.NewCA(name+"-ca", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.IssueServing(name, []string{"127.0.0.1"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv := &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second}
	if http2 {
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetHTTP2(true)
		srv.Protocols = &protos
		tc.NextProtos = []string{"h2", "http/1.1"}
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(lis) }()
	return &loopbackServer{url: "https://" + lis.Addr().(*net.TCPAddr).String(), caPEM: ca.CertPEM, srv: srv}, nil
}

func (s *loopbackServer) close() { _ = s.srv.Close() }
