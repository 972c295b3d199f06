package requestheader_test

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"platform.io/libs/pki"
	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/requestheader"
	certauth "platform.io/services/authn/x509"
)

// outcome is what the test server answers: which method decided and how.
type outcome struct {
	Method  string
	User    *authenticator.User
	NotMine bool
	Err     string
}

// serve starts a real HTTPS server that requests client certificates, forwards to the methods only
// the headers the proxy method announces (as the gateway does), and answers the first decision of
// methods in order (upstream's union: the first method that does not pass decides).
func serve(t testing.TB, rh *requestheader.Authenticator, methods ...authenticator.Method) (url string, roots *stdx509.CertPool) {
	t.Helper()
	ca, err := pki.NewCA("serving CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("127.0.0.1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := http.Header{}
		for k, v := range r.Header {
			if slices.Contains(rh.Names(), k) || slices.ContainsFunc(rh.Prefixes(), func(p string) bool {
				return len(k) >= len(p) && strings.EqualFold(k[:len(p)], p)
			}) {
				h[k] = v
			}
		}
		req := &authenticator.Request{PeerCertificates: r.TLS.PeerCertificates, Header: h}
		o := outcome{NotMine: true}
		for _, m := range methods {
			resp, err := m.Authenticate(r.Context(), req)
			if errors.Is(err, authenticator.ErrNotMine) {
				continue
			}
			o = outcome{Method: m.Name()}
			if err != nil {
				o.Err = err.Error()
			} else {
				o.User = resp.User
			}
			break
		}
		_ = json.NewEncoder(w).Encode(o)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots = stdx509.NewCertPool()
	roots.AddCert(ca.Cert)
	return srv.URL, roots
}

func ask(t testing.TB, url string, roots *stdx509.CertPool, cert *tls.Certificate, header http.Header) outcome {
	t.Helper()
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		conf.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v // raw names: what a proxy sends, before any canonicalization
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o outcome
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

func clientCert(t testing.TB, ca *pki.CA, cn string, groups ...string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueClient(cn, groups, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func writeCA(t testing.TB, ca *pki.CA) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAuthenticate(t *testing.T) {
	proxyCA, err := pki.NewCA("front proxy CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientCA, err := pki.NewCA("client CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := requestheader.New(requestheader.Config{
		ClientCAFile:        writeCA(t, proxyCA),
		AllowedNames:        []string{"front-proxy-client"},
		UsernameHeaders:     []string{"X-Remote-User", "x-forwarded-user"},
		UIDHeaders:          []string{"X-Remote-Uid"},
		GroupHeaders:        []string{"X-Remote-Group", "X-Other-Group"},
		ExtraHeaderPrefixes: []string{"X-Remote-Extra-", "x-acme-"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, err := certauth.New(certauth.Config{ClientCAFile: writeCA(t, clientCA)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, roots := serve(t, rh, rh, x)

	proxy := clientCert(t, proxyCA, "front-proxy-client")
	otherProxy := clientCert(t, proxyCA, "other-proxy")
	alice := clientCert(t, clientCA, "alice", "dev")

	tests := []struct {
		name   string
		rule   string
		cert   *tls.Certificate
		header http.Header
		method string
		want   *authenticator.User
		errHas string
	}{
		{
			name: "allowed proxy", rule: "first username header with a value; every value of every group header; extras lower-cased and percent-decoded",
			cert: proxy, method: requestheader.MethodName,
			header: http.Header{
				"X-Remote-User":                     {""},
				"X-Forwarded-User":                  {"bob", "ignored"},
				"X-Remote-Uid":                      {"uid-7"},
				"X-Remote-Group":                    {"g1", "", "g2"},
				"X-Other-Group":                     {"g3"},
				"X-Remote-Extra-Acme.com%2Fproject": {"p1"},
				"X-Remote-Extra-Scopes":             {"read", "write"},
				"x-remote-extra-scopes":             {"admin"},
				"X-Acme-Bad%zz":                     {"kept"},
				"X-Remote-Extra-%E2%98%83":          {"snow"},
			},
			want: &authenticator.User{
				Name: "bob", UID: "uid-7", Groups: []string{"g1", "g2", "g3"},
				Extra: map[string][]string{"acme.com/project": {"p1"}, "scopes": {"read", "write", "admin"}, "bad%zz": {"kept"}, "☃": {"snow"}},
			},
		},
		{
			name: "refused proxy name", rule: "a verified proxy certificate not among --requestheader-allowed-names is an error",
			cert: otherProxy, header: http.Header{"X-Remote-User": {"bob"}},
			method: requestheader.MethodName, errHas: "x509: subject with cn=other-proxy is not in the allowed list",
		},
		{
			name: "no username header", rule: "a trusted proxy naming no user leaves the request to the other methods",
			cert: proxy, header: http.Header{"X-Remote-Group": {"system:masters"}},
			method: certauth.MethodName, errHas: "certificate signed by unknown authority",
		},
		{
			name: "untrusted certificate", rule: "headers of a certificate that does not verify against the proxy CA are ignored; the certificate authenticates itself",
			cert: alice, header: http.Header{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}},
			method: certauth.MethodName, want: &authenticator.User{Name: "alice", Groups: []string{"dev"}},
		},
		{
			name: "no certificate", rule: "headers without a proxy certificate are ignored",
			header: http.Header{"X-Remote-User": {"admin"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ask(t, url, roots, tc.cert, tc.header)
			if got.Method != tc.method {
				t.Fatalf("%s: decided by %q, want %q (%+v)", tc.rule, got.Method, tc.method, got)
			}
			if tc.errHas != "" && !strings.Contains(got.Err, tc.errHas) {
				t.Errorf("%s: error %q does not contain %q", tc.rule, got.Err, tc.errHas)
			}
			if tc.want == nil {
				if got.User != nil {
					t.Errorf("%s: authenticated %+v", tc.rule, got.User)
				}
				return
			}
			if got.User == nil {
				t.Fatalf("%s: not authenticated: %+v", tc.rule, got)
			}
			u := got.User
			if u.Name != tc.want.Name || u.UID != tc.want.UID || !slices.Equal(u.Groups, tc.want.Groups) {
				t.Errorf("%s: user %+v, want %+v", tc.rule, u, tc.want)
			}
			if tc.method == requestheader.MethodName {
				if len(u.Extra) != len(tc.want.Extra) {
					t.Errorf("%s: extra %v, want %v", tc.rule, u.Extra, tc.want.Extra)
				}
				for k, v := range tc.want.Extra {
					if !slices.Equal(u.Extra[k], v) {
						t.Errorf("%s: extra[%q] = %v, want %v", tc.rule, k, u.Extra[k], v)
					}
				}
			}
		})
	}
}

// With no allowed names, any certificate from the proxy CA may assert identities (upstream).
func TestAnyNameWhenNoneAllowed(t *testing.T) {
	proxyCA, err := pki.NewCA("front proxy CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := requestheader.New(requestheader.Config{ClientCAFile: writeCA(t, proxyCA), UsernameHeaders: []string{"X-Remote-User"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, roots := serve(t, rh, rh)
	got := ask(t, url, roots, clientCert(t, proxyCA, "anything"), http.Header{"X-Remote-User": {"carol"}, "X-Remote-Group": {"ignored: not configured"}})
	if got.User == nil || got.User.Name != "carol" || len(got.User.Groups) != 0 || got.User.Extra != nil {
		t.Errorf("got %+v, want user carol without groups or extras", got)
	}
}

func TestNamesAndPrefixes(t *testing.T) {
	proxyCA, err := pki.NewCA("front proxy CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := requestheader.New(requestheader.Config{
		ClientCAFile:        writeCA(t, proxyCA),
		UsernameHeaders:     []string{"x-remote-user", " X-Forwarded-User "},
		UIDHeaders:          []string{"x-remote-uid"},
		GroupHeaders:        []string{"x-remote-group", "X-REMOTE-USER"},
		ExtraHeaderPrefixes: []string{"x-remote-extra-"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rh.Names(), []string{"X-Remote-User", "X-Forwarded-User", "X-Remote-Uid", "X-Remote-Group"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q (canonical, each once)", got, want)
	}
	if got, want := rh.Prefixes(), []string{"X-Remote-Extra-"}; !slices.Equal(got, want) {
		t.Errorf("Prefixes() = %q, want %q", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		cfg    requestheader.Config
		errHas string
	}{
		{name: "no CA", cfg: requestheader.Config{UsernameHeaders: []string{"X-Remote-User"}}, errHas: "--requestheader-client-ca-file is required"},
		{name: "blank header", cfg: requestheader.Config{ClientCAFile: "ca", GroupHeaders: []string{" "}}, errHas: "--requestheader-group-headers has an empty entry"},
		{name: "uid without user", cfg: requestheader.Config{ClientCAFile: "ca", UIDHeaders: []string{"X-Remote-Uid"}}, errHas: "--requestheader-uid-headers needs --requestheader-username-headers"},
		{name: "ok", cfg: requestheader.Config{ClientCAFile: "ca", UsernameHeaders: []string{"X-Remote-User"}}},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.errHas == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.errHas)
		}
	}
}

// Bad input never panics: absent headers, nil header maps, nil and unparsed certificates.
func TestBadInput(t *testing.T) {
	proxyCA, err := pki.NewCA("front proxy CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rh, err := requestheader.New(requestheader.Config{ClientCAFile: writeCA(t, proxyCA), UsernameHeaders: []string{"X-Remote-User"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy := clientCert(t, proxyCA, "proxy")
	leaf, _ := stdx509.ParseCertificate(proxy.Certificate[0])
	for _, req := range []*authenticator.Request{
		{},
		{PeerCertificates: []*stdx509.Certificate{nil}},
		{PeerCertificates: []*stdx509.Certificate{{}}, Header: http.Header{"X-Remote-User": {"x"}}},
		{PeerCertificates: []*stdx509.Certificate{leaf}},
		{PeerCertificates: []*stdx509.Certificate{leaf}, Header: http.Header{"X-Remote-User": {}}},
		{PeerCertificates: []*stdx509.Certificate{leaf}, Header: http.Header{"X-Remote-Extra-": {"v"}, "X-Remote-User": {"u"}}},
	} {
		resp, err := rh.Authenticate(context.Background(), req)
		if req.Header.Get("X-Remote-User") == "u" {
			if err != nil || resp.User.Name != "u" {
				t.Errorf("%+v: resp %+v err %v", req.Header, resp, err)
			}
			continue
		}
		if !errors.Is(err, authenticator.ErrNotMine) {
			t.Errorf("%+v: err %v, want ErrNotMine", req, err)
		}
	}
}
