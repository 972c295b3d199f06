package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// kubeconfigFile is the part of the kubeconfig schema (clientcmd v1) the tool reads: the
// server, how to verify it, and a client certificate. *-data fields are base64 in the file,
// which is how encoding/json fills []byte.
type kubeconfigFile struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
			TLSServerName            string `json:"tls-server-name"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData []byte `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         []byte `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
}

// credentials are the server to load and what the client presents and trusts.
type credentials struct {
	server                string
	caPEM, certPEM        []byte
	keyPEM                []byte
	serverName            string
	insecureSkipTLSVerify bool
}

// readKubeconfig reads the current context's server, CA and client certificate from a
// kubeconfig file. Relative file references are relative to the file's directory, as kubectl
// resolves them.
func readKubeconfig(path string) (*credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if len(kc.Contexts) == 0 {
		return nil, fmt.Errorf("kubeconfig %s: no contexts", path)
	}
	ctxIdx := 0
	if kc.CurrentContext != "" {
		ctxIdx = -1
		for i, c := range kc.Contexts {
			if c.Name == kc.CurrentContext {
				ctxIdx = i
			}
		}
		if ctxIdx < 0 {
			return nil, fmt.Errorf("kubeconfig %s: current-context %q not found", path, kc.CurrentContext)
		}
	}
	kctx := kc.Contexts[ctxIdx].Context
	dir := filepath.Dir(path)
	readRef := func(ref string, inline []byte) ([]byte, error) {
		if len(inline) > 0 || ref == "" {
			return inline, nil
		}
		if !filepath.IsAbs(ref) {
			ref = filepath.Join(dir, ref)
		}
		return os.ReadFile(ref)
	}
	cr := &credentials{}
	found := false
	for _, c := range kc.Clusters {
		if c.Name != kctx.Cluster {
			continue
		}
		found = true
		cr.server = c.Cluster.Server
		cr.serverName = c.Cluster.TLSServerName
		cr.insecureSkipTLSVerify = c.Cluster.InsecureSkipTLSVerify
		if cr.caPEM, err = readRef(c.Cluster.CertificateAuthority, c.Cluster.CertificateAuthorityData); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: certificate-authority: %w", path, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("kubeconfig %s: cluster %q of context %q not found", path, kctx.Cluster, kc.Contexts[ctxIdx].Name)
	}
	found = false
	for _, u := range kc.Users {
		if u.Name != kctx.User {
			continue
		}
		found = true
		if cr.certPEM, err = readRef(u.User.ClientCertificate, u.User.ClientCertificateData); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: client-certificate: %w", path, err)
		}
		if cr.keyPEM, err = readRef(u.User.ClientKey, u.User.ClientKeyData); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: client-key: %w", path, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("kubeconfig %s: user %q of context %q not found", path, kctx.User, kc.Contexts[ctxIdx].Name)
	}
	return cr, nil
}

// loadCredentials combines --kubeconfig with the flags that override it.
func loadCredentials(o *options) (*credentials, error) {
	cr := &credentials{}
	if o.kubeconfig != "" {
		var err error
		if cr, err = readKubeconfig(o.kubeconfig); err != nil {
			return nil, err
		}
	}
	if o.server != "" {
		cr.server = o.server
	}
	for _, f := range []struct {
		flag, path string
		into       *[]byte
	}{{"ca-file", o.caFile, &cr.caPEM}, {"cert-file", o.certFile, &cr.certPEM}, {"key-file", o.keyFile, &cr.keyPEM}} {
		if f.path == "" {
			continue
		}
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", f.flag, err)
		}
		*f.into = data
	}
	if err := checkServerURL(cr.server); err != nil {
		return nil, err
	}
	return cr, nil
}

func checkServerURL(s string) error {
	if s == "" {
		return errors.New("no server: give --server or a kubeconfig that names one")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("server %q: %v", s, err)
	}
	if u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("server %q: want https://host:port", s)
	}
	return nil
}

// tlsConfig is the client TLS configuration: the client certificate, and the CA (system roots
// when none is given).
func (cr *credentials) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cr.serverName, InsecureSkipVerify: cr.insecureSkipTLSVerify} //nolint:gosec // only when the kubeconfig asks for it
	if len(cr.caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cr.caPEM) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	switch {
	case len(cr.certPEM) > 0 && len(cr.keyPEM) > 0:
		cert, err := tls.X509KeyPair(cr.certPEM, cr.keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case len(cr.certPEM) > 0 || len(cr.keyPEM) > 0:
		return nil, errors.New("a client certificate needs its key, and a key its certificate")
	default:
		return nil, errors.New("no client certificate: the gateway authenticates clients by certificate (--kubeconfig, or --cert-file and --key-file)")
	}
	return tc, nil
}

// newTransport is the one transport every client of a run shares: over HTTP/2 (offered unless
// http1) the clients' requests are streams of one connection, as client-go's are; over HTTP/1.1
// each concurrent request holds a keep-alive connection of its own, so the idle pool is sized for
// all of them. Unless gzip, requests do not offer Accept-Encoding: gzip (Go's transport does by
// default, and decompresses the answer).
func newTransport(tc *tls.Config, http1, gzip bool, conns int) *http.Transport {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(!http1)
	return &http.Transport{
		TLSClientConfig:     tc,
		Protocols:           &protos,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        conns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  !gzip,
	}
}

// requestTimeout bounds every request but watches.
const requestTimeout = 30 * time.Second

// apiClient sends requests to the server.
type apiClient struct {
	base string // the server URL, no trailing slash
	hc   *http.Client
}

// statusError is an answer with an unexpected status.
type statusError struct {
	method, path string
	code         int
	body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.code, e.body)
}

// do sends a request, reads the whole answer into buf (reset first) and checks that its status
// is want. The body, if any, is JSON.
func (a *apiClient) do(ctx context.Context, method, path string, body []byte, want int, buf *bytes.Buffer) error {
	return a.doAs(ctx, method, path, "application/json", body, want, buf)
}

// doAs is do with a body of the given Content-Type (patches).
func (a *apiClient) doAs(ctx context.Context, method, path, contentType string, body []byte, want int, buf *bytes.Buffer) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		msg := buf.String()
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return &statusError{method: method, path: path, code: resp.StatusCode, body: strings.TrimSpace(msg)}
	}
	return nil
}

// probe checks that the server answers a GET of path, and returns the protocol it was reached with.
func (a *apiClient) probe(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("server %s does not answer: %w", a.base, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s: %s", a.base, path, resp.Status)
	}
	return resp.Proto, nil
}

func namespacePath(ns string) string { return "/api/v1/namespaces/" + ns }

// createNamespace creates a namespace that must not exist yet.
func (a *apiClient) createNamespace(ctx context.Context, ns string) error {
	body := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `","labels":{"app.kubernetes.io/managed-by":"apiload"}}}`)
	var buf bytes.Buffer
	err := a.do(ctx, http.MethodPost, "/api/v1/namespaces", body, http.StatusCreated, &buf)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusConflict {
		return fmt.Errorf("namespace %s exists already: the tool works in namespaces of its own (choose another --namespace)", ns)
	}
	return err
}

// delete asks for an object's deletion: a namespace's, whose content the server's namespace
// controller removes afterwards, or a CustomResourceDefinition's, whose objects the server
// removes before the definition goes. An object that is gone already is no error.
func (a *apiClient) delete(ctx context.Context, path string) error {
	var buf bytes.Buffer
	err := a.do(ctx, http.MethodDelete, path, nil, http.StatusOK, &buf)
	if se := (*statusError)(nil); errors.As(err, &se) && (se.code == http.StatusAccepted || se.code == http.StatusNotFound) {
		return nil
	}
	return err
}
