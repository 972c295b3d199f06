package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/pki"
	"platform.io/services/authz/authorizer"
)

// review is what the test webhook reads: both versions, v1beta1 spelling groups "group".
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		User               string              `json:"user"`
		UID                string              `json:"uid"`
		Groups             []string            `json:"groups"`
		Group              []string            `json:"group"`
		Extra              map[string][]string `json:"extra"`
		ResourceAttributes *struct {
			Namespace, Verb, Group, Version, Resource, Subresource, Name string
		} `json:"resourceAttributes"`
		NonResourceAttributes *struct{ Path, Verb string } `json:"nonResourceAttributes"`
	} `json:"spec"`
}

// answer is the webhook's reply: an HTTP status, or a review status.
type answer struct {
	reset      bool // drop the connection with a TCP reset instead of answering
	code       int
	retryAfter bool
	apiVersion string // default: the version received
	allowed    bool
	denied     bool
	reason     string
	evalErr    string
	delay      time.Duration
}

// remote is a real HTTPS authorization webhook with certificates from libs/pki.
type remote struct {
	t      *testing.T
	srv    *httptest.Server
	ca     *pki.CA
	calls  atomic.Int64
	mu     sync.Mutex
	last   review
	auth   string // Authorization header of the last call
	client string // client certificate CN of the last call
	decide func(r review, call int64) answer
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// startRemote serves on 127.0.0.1 with a serving certificate of its own CA; clientCA, if set,
// is required to have signed the caller's certificate.
func startRemote(t *testing.T, clientCA *pki.CA, decide func(review, int64) answer) *remote {
	t.Helper()
	r := &remote{t: t, ca: newCA(t, "webhook-ca"), decide: decide}
	certPEM, keyPEM, err := r.ca.IssueServing("webhook", []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Cert)
		r.srv.TLS.ClientCAs = pool
		r.srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *remote) serve(w http.ResponseWriter, req *http.Request) {
	call := r.calls.Add(1)
	var rv review
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a JSON POST", http.StatusBadRequest)
		return
	}
	if err := json.NewDecoder(req.Body).Decode(&rv); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.last = rv
	r.auth = req.Header.Get("Authorization")
	r.client = ""
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		r.client = req.TLS.PeerCertificates[0].Subject.CommonName
	}
	r.mu.Unlock()
	r.mu.Lock()
	decide := r.decide
	r.mu.Unlock()
	a := decide(rv, call)
	if a.delay > 0 {
		time.Sleep(a.delay)
	}
	if a.reset {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			r.t.Errorf("hijack: %v", err)
			return
		}
		if tc, ok := conn.(*tls.Conn); ok {
			conn = tc.NetConn()
		}
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
		return
	}
	if a.code != 0 && a.code != http.StatusOK {
		if a.retryAfter {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "webhook says no", a.code)
		return
	}
	v := a.apiVersion
	if v == "" {
		v = rv.APIVersion
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": v, "kind": "SubjectAccessReview",
		"status": map[string]any{"allowed": a.allowed, "denied": a.denied, "reason": a.reason, "evaluationError": a.evalErr},
	})
}

func (r *remote) lastReview() (review, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.auth, r.client
}

// kubeconfig writes the webhook's kubeconfig: CA data, and a client certificate from clientCA
// when given (pki.WriteKubeconfig, as operators get them).
func kubeconfig(t *testing.T, server string, caPEM []byte, clientCA *pki.CA) string {
	t.Helper()
	k := pki.Kubeconfig{ClusterName: "webhook", UserName: "api-server", Server: server, CAPEM: caPEM}
	if clientCA != nil {
		var err error
		k.CertPEM, k.KeyPEM, err = clientCA.IssueClient("platform-authz", nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := pki.WriteKubeconfig(path, k); err != nil {
		t.Fatal(err)
	}
	return path
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newAuthorizer(t *testing.T, cfg Config) *Authorizer {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var alice = &authorizer.User{Name: "alice", UID: "uid-1", Groups: []string{"devs", "system:authenticated"},
	Extra: map[string][]string{"scopes": {"a", "b"}}}

func getPod(u *authorizer.User, name string) authorizer.Attributes {
	return authorizer.Attributes{User: u, Verb: "get", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1",
		Resource: "deployments", Subresource: "scale", Namespace: "ns1", Name: name}
}

// Upstream's webhook authorizer: the review sent in both versions, and each kind of answer.
func TestVersionsAndAnswers(t *testing.T) {
	for _, version := range []string{VersionV1beta1, VersionV1} {
		t.Run(version, func(t *testing.T) {
			rem := startRemote(t, nil, func(r review, _ int64) answer {
				switch r.Spec.User {
				case "alice":
					return answer{allowed: true, reason: "alice may"}
				case "bob":
					return answer{denied: true, reason: "bob may not"}
				case "carol":
					return answer{reason: "no rule for carol"}
				case "dave":
					return answer{evalErr: "policy store unavailable"}
				case "eve":
					return answer{allowed: true, denied: true, reason: "confused"}
				case "frank":
					return answer{allowed: true, evalErr: "one policy failed, another allowed"}
				}
				return answer{code: http.StatusBadRequest}
			})
			a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil), Version: version,
				AuthorizedTTL: time.Minute, UnauthorizedTTL: time.Minute})

			got, err := a.Authorize(context.Background(), getPod(alice, "web"))
			if err != nil || got.Decision != authorizer.Allow || got.Reason != "alice may" || !got.Uncacheable || got.NameIndependent {
				t.Fatalf("alice: %+v %v", got, err)
			}
			rv, _, _ := rem.lastReview()
			if rv.APIVersion != "authorization.k8s.io/"+version || rv.Kind != "SubjectAccessReview" {
				t.Errorf("sent %s %s", rv.APIVersion, rv.Kind)
			}
			groups := rv.Spec.Groups
			if version == VersionV1beta1 {
				groups = rv.Spec.Group // v1beta1 spells the field "group"
				if rv.Spec.Groups != nil {
					t.Errorf("v1beta1 must not send groups")
				}
			}
			if rv.Spec.User != "alice" || rv.Spec.UID != "uid-1" || strings.Join(groups, ",") != "devs,system:authenticated" ||
				strings.Join(rv.Spec.Extra["scopes"], ",") != "a,b" {
				t.Errorf("user attributes sent: %+v", rv.Spec)
			}
			ra := rv.Spec.ResourceAttributes
			if ra == nil || ra.Namespace != "ns1" || ra.Verb != "get" || ra.Group != "apps" || ra.Version != "v1" ||
				ra.Resource != "deployments" || ra.Subresource != "scale" || ra.Name != "web" || rv.Spec.NonResourceAttributes != nil {
				t.Errorf("resource attributes sent: %+v", ra)
			}

			cases := []struct {
				user   string
				want   authorizer.Decision
				reason string
				err    bool
			}{
				{"bob", authorizer.Deny, "bob may not", false},
				{"carol", authorizer.NoOpinion, "no rule for carol", false},
				{"dave", authorizer.NoOpinion, "", true},
				{"eve", authorizer.Deny, "confused", false},
				{"frank", authorizer.Allow, "", false},
			}
			for _, c := range cases {
				got, err := a.Authorize(context.Background(), getPod(&authorizer.User{Name: c.user}, "web"))
				if (err != nil) != c.err || got.Decision != c.want || (c.reason != "" && got.Reason != c.reason) || !got.Uncacheable {
					t.Errorf("%s: %+v %v, want %v %q err=%v", c.user, got, err, c.want, c.reason, c.err)
				}
			}

			// A non-resource request.
			got, err = a.Authorize(context.Background(), authorizer.Attributes{User: alice, Verb: "get", Path: "/healthz"})
			if err != nil || got.Decision != authorizer.Allow {
				t.Fatalf("non-resource: %+v %v", got, err)
			}
			rv, _, _ = rem.lastReview()
			if rv.Spec.ResourceAttributes != nil || rv.Spec.NonResourceAttributes == nil ||
				rv.Spec.NonResourceAttributes.Path != "/healthz" || rv.Spec.NonResourceAttributes.Verb != "get" {
				t.Errorf("non-resource attributes sent: %+v", rv.Spec)
			}
		})
	}
}

// Answers are reused for their TTLs (allowed and denied separately), counted as hits; an
// evaluation error is never reused.
func TestCache(t *testing.T) {
	rem := startRemote(t, nil, func(r review, _ int64) answer {
		switch r.Spec.User {
		case "alice":
			return answer{allowed: true}
		case "dave":
			return answer{evalErr: "broken"}
		}
		return answer{denied: true}
	})
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil),
		AuthorizedTTL: time.Hour, UnauthorizedTTL: time.Second})
	ctx := context.Background()
	bob := &authorizer.User{Name: "bob"}
	for i := 0; i < 3; i++ {
		if got, _ := a.Authorize(ctx, getPod(alice, "web")); got.Decision != authorizer.Allow || !got.Uncacheable {
			t.Fatalf("alice: %+v", got)
		}
		if got, _ := a.Authorize(ctx, getPod(bob, "web")); got.Decision != authorizer.Deny {
			t.Fatalf("bob: %+v", got)
		}
	}
	if n := rem.calls.Load(); n != 2 {
		t.Errorf("remote called %d times for 6 decisions of 2 requests, want 2", n)
	}
	if hits, misses := a.Hits(); hits != 4 || misses != 2 {
		t.Errorf("hits %d misses %d, want 4 and 2", hits, misses)
	}
	// Any attribute is part of the key: another name is another question.
	a.Authorize(ctx, getPod(alice, "other"))
	if n := rem.calls.Load(); n != 3 {
		t.Errorf("a different name was answered from the cache")
	}
	// The denial expires after the unauthorized TTL; the allow (1h) does not.
	time.Sleep(1200 * time.Millisecond)
	a.Authorize(ctx, getPod(bob, "web"))
	a.Authorize(ctx, getPod(alice, "web"))
	if n := rem.calls.Load(); n != 4 {
		t.Errorf("remote calls %d after the deny TTL, want 4 (bob asked again, alice cached)", n)
	}
	// Evaluation errors are not cached.
	before := rem.calls.Load()
	for i := 0; i < 2; i++ {
		if _, err := a.Authorize(ctx, getPod(&authorizer.User{Name: "dave"}, "web")); err == nil {
			t.Errorf("evaluation error not reported")
		}
	}
	if n := rem.calls.Load() - before; n != 2 {
		t.Errorf("evaluation error answered from the cache (%d calls for 2 decisions)", n)
	}
}

// Zero TTLs do not cache, as upstream's flags set to 0.
func TestZeroTTLDoesNotCache(t *testing.T) {
	rem := startRemote(t, nil, func(review, int64) answer { return answer{allowed: true} })
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil)})
	for i := 0; i < 3; i++ {
		a.Authorize(context.Background(), getPod(alice, "web"))
	}
	if n := rem.calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// The remote's failures: no opinion with an error, never cached; transient ones retried with
// upstream's backoff rules.
func TestFailures(t *testing.T) {
	fast := Backoff{Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 3}
	cases := []struct {
		rule      string
		answers   []answer // by call; the last repeats
		want      authorizer.Decision
		wantErr   string
		wantCalls int64
	}{
		{"a reset connection is retried", []answer{{reset: true}, {allowed: true}}, authorizer.Allow, "", 2},
		{"HTTP 500 is retried, then succeeds", []answer{{code: 500}, {allowed: true}}, authorizer.Allow, "", 2},
		{"HTTP 500 retried up to the backoff's steps", []answer{{code: 500}}, authorizer.NoOpinion, "HTTP 500", 3},
		{"HTTP 504 is retried", []answer{{code: 504}, {denied: true}}, authorizer.Deny, "", 2},
		{"HTTP 429 is retried", []answer{{code: 429}, {allowed: true}}, authorizer.Allow, "", 2},
		{"Retry-After asks for a retry", []answer{{code: 503, retryAfter: true}, {allowed: true}}, authorizer.Allow, "", 2},
		{"HTTP 503 without Retry-After is final", []answer{{code: 503}}, authorizer.NoOpinion, "HTTP 503", 1},
		{"HTTP 403 is final", []answer{{code: 403}}, authorizer.NoOpinion, "HTTP 403", 1},
		{"an answer in the other version is refused", []answer{{allowed: true, apiVersion: "authorization.k8s.io/v1"}}, authorizer.NoOpinion, "want authorization.k8s.io/v1beta1", 1},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			rem := startRemote(t, nil, func(_ review, call int64) answer {
				if int(call) <= len(c.answers) {
					return c.answers[call-1]
				}
				return c.answers[len(c.answers)-1]
			})
			a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil),
				AuthorizedTTL: time.Hour, UnauthorizedTTL: time.Hour, Backoff: fast})
			got, err := a.Authorize(context.Background(), getPod(alice, "web"))
			if got.Decision != c.want || !got.Uncacheable {
				t.Errorf("decision %+v, want %v", got, c.want)
			}
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
			if n := rem.calls.Load(); n != c.wantCalls {
				t.Errorf("%d calls, want %d", n, c.wantCalls)
			}
			if c.wantErr != "" {
				// Failures are not cached: the next decision asks again.
				a.Authorize(context.Background(), getPod(alice, "web"))
				if rem.calls.Load() == c.wantCalls {
					t.Errorf("a failure was cached")
				}
			}
		})
	}
}

// A webhook that is down fails fast (a refused connection is not retried), with no opinion.
func TestServerDown(t *testing.T) {
	rem := startRemote(t, nil, func(review, int64) answer { return answer{allowed: true} })
	cfgPath := kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil)
	rem.srv.Close()
	a := newAuthorizer(t, Config{ConfigFile: cfgPath, AuthorizedTTL: time.Hour, UnauthorizedTTL: time.Hour})
	start := time.Now()
	got, err := a.Authorize(context.Background(), getPod(alice, "web"))
	if err == nil || got.Decision != authorizer.NoOpinion || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("server down: %+v %v", got, err)
	}
	if d := time.Since(start); d > 450*time.Millisecond {
		t.Errorf("server down took %v: a refused connection must not wait for the retry backoff", d)
	}
}

// A call is bounded by the request timeout.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	rem := startRemote(t, nil, func(review, int64) answer { <-release; return answer{allowed: true} })
	defer close(release)
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil), RequestTimeout: 200 * time.Millisecond})
	start := time.Now()
	got, err := a.Authorize(context.Background(), getPod(alice, "web"))
	if err == nil || got.Decision != authorizer.NoOpinion {
		t.Errorf("hung webhook: %+v %v", got, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("hung webhook answered after %v, want about the 200ms timeout", d)
	}
}

// The webhook's certificate must chain to the kubeconfig's CA.
func TestWrongCA(t *testing.T) {
	rem := startRemote(t, nil, func(review, int64) answer { return answer{allowed: true} })
	other := newCA(t, "other-ca")
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, other.CertPEM, nil)})
	got, err := a.Authorize(context.Background(), getPod(alice, "web"))
	if err == nil || got.Decision != authorizer.NoOpinion || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("wrong CA: %+v %v", got, err)
	}
	if rem.calls.Load() != 0 {
		t.Errorf("the request reached a server that failed verification")
	}
}

// The API server authenticates to the webhook with the kubeconfig's client certificate.
func TestClientCertificate(t *testing.T) {
	clientCA := newCA(t, "client-ca")
	rem := startRemote(t, clientCA, func(review, int64) answer { return answer{allowed: true} })
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, clientCA)})
	got, err := a.Authorize(context.Background(), getPod(alice, "web"))
	if err != nil || got.Decision != authorizer.Allow {
		t.Fatalf("with a client certificate: %+v %v", got, err)
	}
	if _, _, cn := rem.lastReview(); cn != "platform-authz" {
		t.Errorf("webhook saw client %q", cn)
	}
	// Without one, the webhook refuses the handshake.
	anon := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil)})
	if got, err := anon.Authorize(context.Background(), getPod(alice, "web")); err == nil || got.Decision != authorizer.NoOpinion {
		t.Errorf("without a client certificate: %+v %v", got, err)
	}
	// A certificate from another CA is refused too.
	stranger := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, newCA(t, "stranger"))})
	if _, err := stranger.Authorize(context.Background(), getPod(alice, "web")); err == nil {
		t.Errorf("a stranger's client certificate was accepted")
	}
}

// A kubeconfig with a bearer token and a certificate-authority file (relative to the kubeconfig,
// as clientcmd resolves it); the token is sent and never logged.
func TestTokenAndCAFile(t *testing.T) {
	rem := startRemote(t, nil, func(review, int64) answer { return answer{allowed: true} })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), rem.ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "s3cr3t-webhook-token"
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster:
    server: %s
    certificate-authority: ca.crt
users:
- name: api-server
  user:
    token: %s
contexts:
- name: webhook
  context:
    cluster: webhook
    user: api-server
current-context: webhook
`, rem.srv.URL, token)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a := newAuthorizer(t, Config{ConfigFile: path, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if got, err := a.Authorize(context.Background(), getPod(alice, "web")); err != nil || got.Decision != authorizer.Allow {
		t.Fatalf("%+v %v", got, err)
	}
	if _, auth, _ := rem.lastReview(); auth != "Bearer "+token {
		t.Errorf("Authorization %q", auth)
	}
	// Failures are logged; the token is not.
	rem.mu.Lock()
	rem.decide = func(review, int64) answer { return answer{code: 403} }
	rem.mu.Unlock()
	a.Authorize(context.Background(), getPod(alice, "other"))
	if !strings.Contains(logs.String(), "webhook authorization failed") {
		t.Errorf("failure not logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), base64.StdEncoding.EncodeToString([]byte(token))) {
		t.Errorf("token in the logs: %s", logs.String())
	}
}

// Many callers at once (run with -race): every one gets the answer; each is a hit or a miss.
func TestConcurrentDecisions(t *testing.T) {
	rem := startRemote(t, nil, func(review, int64) answer { return answer{allowed: true} })
	a := newAuthorizer(t, Config{ConfigFile: kubeconfig(t, rem.srv.URL, rem.ca.CertPEM, nil), AuthorizedTTL: time.Hour})
	const n = 32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got, err := a.Authorize(context.Background(), getPod(alice, fmt.Sprintf("p%d", i%4)))
			if err != nil || got.Decision != authorizer.Allow {
				t.Errorf("%+v %v", got, err)
			}
		}(i)
	}
	wg.Wait()
	hits, misses := a.Hits()
	if hits+misses != n || misses < 4 || misses != rem.calls.Load() {
		t.Errorf("hits %d misses %d calls %d", hits, misses, rem.calls.Load())
	}
}

// kube-apiserver's flags and defaults; errors name the flag.
func TestConfigFlags(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("authz", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	if c.Version != "v1beta1" || c.AuthorizedTTL != 5*time.Minute || c.UnauthorizedTTL != 30*time.Second {
		t.Errorf("defaults %+v", c)
	}
	if err := fs.Parse([]string{"--authorization-webhook-config-file=/x", "--authorization-webhook-version=v1",
		"--authorization-webhook-cache-authorized-ttl=1m", "--authorization-webhook-cache-unauthorized-ttl=0s"}); err != nil {
		t.Fatal(err)
	}
	if c.ConfigFile != "/x" || c.Version != "v1" || c.AuthorizedTTL != time.Minute || c.UnauthorizedTTL != 0 {
		t.Errorf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	for _, bad := range []struct {
		c    Config
		flag string
	}{
		{Config{}, "--authorization-webhook-config-file"},
		{Config{ConfigFile: "/x", Version: "v2"}, "--authorization-webhook-version"},
		{Config{ConfigFile: "/x", AuthorizedTTL: -1}, "--authorization-webhook-cache-authorized-ttl"},
		{Config{ConfigFile: "/x", UnauthorizedTTL: -1}, "--authorization-webhook-cache-unauthorized-ttl"},
	} {
		if err := bad.c.Validate(); err == nil || !strings.Contains(err.Error(), bad.flag) {
			t.Errorf("%+v: error %v does not name %s", bad.c, err, bad.flag)
		}
		if _, err := New(bad.c); err == nil {
			t.Errorf("New accepted %+v", bad.c)
		}
	}
	if _, err := New(Config{ConfigFile: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "--authorization-webhook-config-file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCacheEviction(t *testing.T) {
	c := newDecisionCache(2)
	now := time.Now()
	c.add("a", status{Allowed: true}, now.Add(time.Hour))
	c.add("b", status{}, now.Add(time.Hour))
	c.get("a", now) // a is now the most recent
	c.add("c", status{}, now.Add(time.Hour))
	if _, ok := c.get("b", now); ok {
		t.Errorf("least recently used entry kept")
	}
	if st, ok := c.get("a", now); !ok || !st.Allowed {
		t.Errorf("recently used entry evicted")
	}
	if _, ok := c.get("c", now.Add(2*time.Hour)); ok {
		t.Errorf("expired entry served")
	}
}

// The cost of an answer from the cache (the hot path) and of a call to the remote over HTTPS.
func BenchmarkAuthorize(b *testing.B) {
	rem := startRemoteB(b, func(review, int64) answer { return answer{allowed: true} })
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Hour}, {"remote", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := New(Config{ConfigFile: kubeconfigB(b, rem), AuthorizedTTL: bc.ttl, Log: quietLog()})
			if err != nil {
				b.Fatal(err)
			}
			at := getPod(alice, "web")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r, err := a.Authorize(context.Background(), at); err != nil || r.Decision != authorizer.Allow {
					b.Fatal(r, err)
				}
			}
		})
	}
}

func startRemoteB(b *testing.B, decide func(review, int64) answer) *remote {
	ca, err := pki.NewCA("webhook-ca", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	r := &remote{ca: ca, decide: decide}
	certPEM, keyPEM, err := ca.IssueServing("webhook", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	r.srv.StartTLS()
	b.Cleanup(r.srv.Close)
	return r
}

func kubeconfigB(b *testing.B, r *remote) string {
	path := filepath.Join(b.TempDir(), "webhook.kubeconfig")
	if err := pki.WriteKubeconfig(path, pki.Kubeconfig{ClusterName: "webhook", UserName: "api-server", Server: r.srv.URL, CAPEM: r.ca.CertPEM}); err != nil {
		b.Fatal(err)
	}
	return path
}
