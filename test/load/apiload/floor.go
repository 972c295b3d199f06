package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// The floor scenarios, which --scenario=all does not run: they measure what a request costs
// below the resource API, to compare the other rows with.
const (
	// scenarioVersion: every client GETs /version of the server under test as the run's
	// identity, over the load's transport: TLS, HTTP/2, authentication and authorization, a small
	// JSON answer, no storage.
	scenarioVersion = "version"
	// scenarioNull: every client GETs a fixed answer from a do-nothing HTTPS server that apiload
	// serves itself (nullServer): the client, TLS, HTTP/2 and the kernel, with no server work.
	scenarioNull = "null"
)

// floorScenarios in the order they are listed.
var floorScenarios = []string{scenarioVersion, scenarioNull}

// nullBody is the null server's answer: a ConfigMap as our server answers a get scenario's GET
// (the same fields, managedFields included, the same four data values, a namespace name of the
// default --namespace's length), 904 bytes, built once.
var nullBody = []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"get-00000","namespace":"apiload-00000000-get","uid":"1ff85c7d-ce44-4dcf-8a41-527e342180b0",` +
	`"resourceVersion":"1","creationTimestamp":"2026-11-27T07:43:21Z","labels":{"app":"apiload"},"managedFields":[{"manager":"Go-http-client","operation":"Update",` +
	`"apiVersion":"v1","time":"2026-11-27T07:43:21Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:a.properties":{},"f:b.properties":{},"f:c.properties":{},` +
	`"f:d.properties":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}]},"data":{"a.properties":"` + fillerValue + `","b.properties":"` + fillerValue +
	`","c.properties":"` + fillerValue + `","d.properties":"` + fillerValue + `"}}`)

// nullServer is an HTTPS server on loopback, with a CA of its own, that answers every GET with
// nullBody; it offers HTTP/2 and HTTP/1.1, as the servers under test do.
type nullServer struct {
	*loopbackServer
}

// startNullServer serves the null server until close.
func startNullServer() (*nullServer, error) {
	length := strconv.Itoa(len(nullBody))
	s, err := serveLoopback("apiload-null", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", length)
		_, _ = w.Write(nullBody)
	}), true)
	if err != nil {
		return nil, err
	}
	return &nullServer{s}, nil
}

// client is a client of the null server over one transport that all its users share, as the
// load's: HTTP/2 unless http1, trusting the server's CA, no client certificate.
func (n *nullServer) client(http1 bool, conns int) (*apiClient, *http.Transport, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(n.caPEM) {
		return nil, nil, errors.New("the null server's CA holds no PEM certificate")
	}
	tr := newTransport(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, http1, true, conns)
	return &apiClient{base: n.url, hc: &http.Client{Transport: tr}}, tr, nil
}

// runVersion: every client GETs /version of the server under test, as the run's identity.
func (r *runner) runVersion(ctx context.Context) error {
	for _, n := range r.o.clients {
		err := r.drive(ctx, scenarioVersion, n, func(ctx context.Context, w *worker, _ int) error {
			return r.loadFor(w).do(ctx, http.MethodGet, "/version", nil, http.StatusOK, &w.buf)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runNull: every client GETs the null server's fixed answer, over one shared transport.
func (r *runner) runNull(ctx context.Context) error {
	ns, err := startNullServer()
	if err != nil {
		return err
	}
	defer ns.close()
	c, tr, err := ns.client(r.o.http1, slices.Max(r.o.clients)+16)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	// The protocol the clients speak to it, for the note.
	proto, err := c.probe(ctx, "/")
	if err != nil {
		return fmt.Errorf("the null server: %w", err)
	}
	for _, n := range r.o.clients {
		err := r.drive(ctx, scenarioNull, n, func(ctx context.Context, w *worker, _ int) error {
			return c.do(ctx, http.MethodGet, "/api/v1/namespaces/apiload-null/configmaps/get-00000", nil, http.StatusOK, &w.buf)
		})
		if err != nil {
			return err
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("null: a do-nothing HTTPS server inside apiload, over %s (every GET answers a fixed %d-byte ConfigMap JSON): the floor of client, TLS, "+
		"HTTP and kernel; its CPU is part of apiload's in the CPU notes", proto, len(nullBody)))
	return nil
}
