package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/webhook"
)

// reviewServer is a real HTTPS TokenReview webhook (mutual TLS: it requires the client certificate
// the kubeconfig names), deciding by token as a test table says.
type reviewServer struct {
	srv      *httptest.Server
	serverCA *pki.CA
	clientCA *pki.CA

	calls atomic.Int64

	mu sync.Mutex
	// answerVersion, when set, is the apiVersion of every answer (otherwise the one received).
	answerVersion string
	// answerKind, when set, is the kind of every answer (otherwise TokenReview).
	answerKind string
	// received are the reviews received, in order.
	received []receivedReview
	// failures counts down, per token, answers of 500 before the real one.
	failures map[string]int
}

type receivedReview struct {
	APIVersion, Kind string
	Token            string
	Audiences        []string
	ClientCN         string
}

func newReviewServer(t testing.TB) *reviewServer {
	t.Helper()
	serverCA, err := pki.NewCA("webhook serving CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientCA, err := pki.NewCA("webhook client CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := serverCA.IssueServing("127.0.0.1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	rs := &reviewServer{serverCA: serverCA, clientCA: clientCA, failures: map[string]int{}}
	rs.srv = httptest.NewUnstartedServer(http.HandlerFunc(rs.handle))
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	rs.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	rs.srv.StartTLS()
	t.Cleanup(rs.srv.Close)
	return rs
}

// kubeconfig writes a kubeconfig naming the server, its CA (or caPEM instead) and a client
// certificate from the server's client CA.
func (rs *reviewServer) kubeconfig(t testing.TB, caPEM []byte) string {
	t.Helper()
	if caPEM == nil {
		caPEM = rs.serverCA.CertPEM
	}
	certPEM, keyPEM, err := rs.clientCA.IssueClient("platform-apiserver", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := pki.WriteKubeconfig(path, pki.Kubeconfig{
		ClusterName: "token-webhook", UserName: "apiserver", Server: rs.srv.URL + "/authenticate",
		CAPEM: caPEM, CertPEM: certPEM, KeyPEM: keyPEM,
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

func (rs *reviewServer) handle(w http.ResponseWriter, r *http.Request) {
	rs.calls.Add(1)
	var in struct {
		APIVersion string                           `json:"apiVersion"`
		Kind       string                           `json:"kind"`
		Spec       authenticationv1.TokenReviewSpec `json:"spec"`
	}
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/authenticate" || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &in) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rs.mu.Lock()
	rs.received = append(rs.received, receivedReview{
		APIVersion: in.APIVersion, Kind: in.Kind, Token: in.Spec.Token, Audiences: in.Spec.Audiences,
		ClientCN: r.TLS.PeerCertificates[0].Subject.CommonName,
	})
	version, kind := in.APIVersion, "TokenReview"
	if rs.answerVersion != "" {
		version = rs.answerVersion
	}
	if rs.answerKind != "" {
		kind = rs.answerKind
	}
	fail := rs.failures[in.Spec.Token] > 0
	if fail {
		rs.failures[in.Spec.Token]--
	}
	rs.mu.Unlock()
	if fail {
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	out := map[string]any{"apiVersion": version, "kind": kind}
	status := authenticationv1.TokenReviewStatus{}
	token := in.Spec.Token
	switch {
	case token == "good" || strings.HasPrefix(token, "good-"):
		status.Authenticated = true
		status.User = authenticationv1.UserInfo{
			Username: "jane", UID: "uid-1", Groups: []string{"dev", "ops"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"read", "write"}},
		}
	case token == "aud-other":
		status.Authenticated = true
		status.User.Username = "jane"
		status.Audiences = []string{"other"}
	case token == "aud-both":
		status.Authenticated = true
		status.User.Username = "jane"
		status.Audiences = []string{"api", "other"}
	case token == "no-username":
		status.Authenticated = true
	case token == "with-error":
		status.Error = "token has been revoked"
	case token == "bad-request":
		http.Error(w, "no", http.StatusBadRequest)
		return
	case token == "garbage":
		_, _ = w.Write([]byte("<html>not json</html>"))
		return
	case token == "no-typemeta":
		out = map[string]any{}
		status.Authenticated = true
		status.User.Username = "typeless"
	case token == "slow":
		time.Sleep(300 * time.Millisecond)
		status.Authenticated = true
		status.User.Username = "sloth"
	default:
		// Not authenticated, without saying why.
	}
	out["status"] = status
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (rs *reviewServer) last() receivedReview {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.received[len(rs.received)-1]
}

var fastBackoff = webhook.Backoff{Initial: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

func newAuthenticator(t testing.TB, cfg webhook.Config) *webhook.Authenticator {
	t.Helper()
	if cfg.Backoff == (webhook.Backoff{}) {
		cfg.Backoff = fastBackoff
	}
	a, err := webhook.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// upstreamGroup is upstream's TokenReview group, which answers may name in every profile.
const upstreamGroup = "authentication.k8s.io"

// profileGroup is the TokenReview group the spec names for the profile the tests run in, spelled
// out rather than derived with naming.Group, so that a mistake in either is caught.
func profileGroup(t testing.TB) string {
	t.Helper()
	switch naming.ProfileName() {
	case naming.PlatformProfile:
		return "authentication.platform.io"
	case naming.KubernetesProfile:
		return upstreamGroup
	}
	t.Fatalf("unknown naming profile %q", naming.ProfileName())
	return ""
}

// Reviews are sent in the naming profile's group (the spec's authentication.platform.io;
// upstream's in the kubernetes profile), in the version configured.
func TestVersions(t *testing.T) {
	group := profileGroup(t)
	if got := naming.Group(upstreamGroup); got != group {
		t.Fatalf("naming.Group(%q) = %q in the %s profile, want %q", upstreamGroup, got, naming.ProfileName(), group)
	}
	for _, tc := range []struct {
		version, wantAPIVersion string
	}{
		{"", group + "/v1beta1"},
		{"v1beta1", group + "/v1beta1"},
		{"v1", group + "/v1"},
	} {
		t.Run("version="+tc.version, func(t *testing.T) {
			rs := newReviewServer(t)
			a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), Version: tc.version, CacheTTL: time.Minute, APIAudiences: []string{"api"}})
			resp, err := a.Authenticate(context.Background(), &authenticator.Request{Token: "good"})
			if err != nil {
				t.Fatal(err)
			}
			got := rs.last()
			if got.APIVersion != tc.wantAPIVersion || got.Kind != "TokenReview" || got.Token != "good" {
				t.Errorf("review sent as %s %s with token %q, want %s TokenReview (the %s profile's group)", got.APIVersion, got.Kind, got.Token, tc.wantAPIVersion, naming.ProfileName())
			}
			if !slices.Equal(got.Audiences, []string{"api"}) {
				t.Errorf("spec.audiences = %v, want the API audiences when the request names none", got.Audiences)
			}
			if got.ClientCN != "platform-apiserver" {
				t.Errorf("client certificate CN %q, want the kubeconfig user's", got.ClientCN)
			}
			u := resp.User
			if u.Name != "jane" || u.UID != "uid-1" || !slices.Equal(u.Groups, []string{"dev", "ops"}) || !slices.Equal(u.Extra["scopes"], []string{"read", "write"}) {
				t.Errorf("user %+v: want status.user's username, uid, groups and extra", u)
			}
			if !slices.Equal(resp.Audiences, []string{"api"}) {
				t.Errorf("audiences %v, want [api] (no status.audiences: the API server's)", resp.Audiences)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	rs := newReviewServer(t)
	a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: time.Minute})
	ctx := context.Background()
	tests := []struct {
		token   string
		rule    string
		errIs   error
		errText string
		unavail bool
	}{
		{token: "unknown", rule: "not authenticated without status.error: upstream's generic message", errIs: webhook.ErrNotAuthenticated, errText: "invalid bearer token"},
		{token: "with-error", rule: "not authenticated: the error carries status.error", errText: "token has been revoked"},
		{token: "no-username", rule: "authenticated without a username is not an identity", unavail: true, errText: "no status.user.username"},
		{token: "bad-request", rule: "a non-2xx answer is an error, never authenticated", unavail: true, errText: "400 Bad Request"},
		{token: "garbage", rule: "an answer that is not a TokenReview is an error", unavail: true, errText: "not a TokenReview"},
	}
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			resp, err := a.Authenticate(ctx, &authenticator.Request{Token: tc.token})
			if resp != nil || err == nil {
				t.Fatalf("%s: resp %+v err %v", tc.rule, resp, err)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("%s: err %v, want %v", tc.rule, err, tc.errIs)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: err %q does not contain %q", tc.rule, err, tc.errText)
			}
			if authenticator.IsUnavailable(err) != tc.unavail {
				t.Errorf("%s: unavailable = %v, want %v (%v)", tc.rule, authenticator.IsUnavailable(err), tc.unavail, err)
			}
			if errors.Is(err, authenticator.ErrNotMine) {
				t.Errorf("%s: a bearer token is always the webhook's to judge", tc.rule)
			}
		})
	}
	if _, err := a.Authenticate(ctx, &authenticator.Request{}); !errors.Is(err, authenticator.ErrNotMine) {
		t.Errorf("no token: err %v, want ErrNotMine", err)
	}
	// A typeless answer is read as the version sent (upstream's decoder defaults it).
	resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "no-typemeta"})
	if err != nil || resp.User.Name != "typeless" {
		t.Errorf("answer without apiVersion/kind: resp %+v err %v", resp, err)
	}
}

// The answer must be a TokenReview in the version sent; its group may be the one sent (the
// profile's) or upstream's, since webhooks built on upstream's types answer in that. Anything else
// is an error, never an identity.
func TestAnswerGroups(t *testing.T) {
	for _, version := range []string{webhook.VersionV1, webhook.VersionV1beta1} {
		other := webhook.VersionV1
		if version == webhook.VersionV1 {
			other = webhook.VersionV1beta1
		}
		for _, tc := range []struct {
			rule             string
			apiVersion, kind string
			accepted         bool
		}{
			{rule: "the profile's group and the version sent", apiVersion: profileGroup(t) + "/" + version, accepted: true},
			{rule: "upstream's group and the version sent", apiVersion: upstreamGroup + "/" + version, accepted: true},
			{rule: "the profile's group, another version", apiVersion: profileGroup(t) + "/" + other},
			{rule: "upstream's group, another version", apiVersion: upstreamGroup + "/" + other},
			{rule: "another group", apiVersion: "authentication.example.io/" + version},
			{rule: "no group", apiVersion: version},
			{rule: "another kind", apiVersion: profileGroup(t) + "/" + version, kind: "SubjectAccessReview"},
			{rule: "upstream's group, another kind", apiVersion: upstreamGroup + "/" + version, kind: "TokenRequest"},
		} {
			t.Run(version+"/"+tc.rule, func(t *testing.T) {
				rs := newReviewServer(t)
				rs.mu.Lock()
				rs.answerVersion, rs.answerKind = tc.apiVersion, tc.kind
				rs.mu.Unlock()
				a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), Version: version, CacheTTL: time.Minute})
				resp, err := a.Authenticate(context.Background(), &authenticator.Request{Token: "good"})
				if sent := rs.last().APIVersion; sent != profileGroup(t)+"/"+version {
					t.Errorf("review sent as %s, want %s/%s", sent, profileGroup(t), version)
				}
				if tc.accepted {
					if err != nil || resp.User.Name != "jane" {
						t.Errorf("answer %s %s: resp %+v err %v, want jane", tc.apiVersion, tc.kind, resp, err)
					}
					return
				}
				if resp != nil || !authenticator.IsUnavailable(err) || !strings.Contains(err.Error(), "must answer in the version it was sent") {
					t.Fatalf("answer %s %s: resp %+v err %v, want an unavailable version error", tc.apiVersion, tc.kind, resp, err)
				}
				// A refused answer is an error, not a decision: the next request asks again.
				if _, err := a.Authenticate(context.Background(), &authenticator.Request{Token: "good"}); err == nil || rs.calls.Load() != 2 {
					t.Errorf("second request: err %v, webhook calls %d, want an error and 2 calls", err, rs.calls.Load())
				}
			})
		}
	}
}

// Upstream caches successes and plain refusals for the TTL, keyed by token and audiences, and
// does not cache errors (status.error included).
func TestCache(t *testing.T) {
	rs := newReviewServer(t)
	const ttl = 2 * time.Second
	a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: ttl, APIAudiences: []string{"api"}})
	start := time.Now()
	ctx := context.Background()
	call := func(token string, auds ...string) error {
		_, err := a.Authenticate(ctx, &authenticator.Request{Token: token, Audiences: auds})
		return err
	}
	steps := []struct {
		what      string
		run       func() error
		wantErr   bool
		wantCalls int64
		wantHits  int64
	}{
		{"first good", func() error { return call("good") }, false, 1, 0},
		{"good again: cached", func() error { return call("good") }, false, 1, 1},
		{"good with the API audience named: same as implicit", func() error { return call("good", "api") }, false, 1, 2},
		{"good for other audiences: another key", func() error { return call("good", "aud-x") }, true, 2, 2},
		{"plain refusal", func() error { return call("nobody") }, true, 3, 2},
		{"plain refusal again: cached", func() error { return call("nobody") }, true, 3, 3},
		{"status.error", func() error { return call("with-error") }, true, 4, 3},
		{"status.error again: not cached", func() error { return call("with-error") }, true, 5, 3},
	}
	var firstDone time.Time // the first decision was cached before this
	for i, s := range steps {
		err := s.run()
		if i == 0 {
			firstDone = time.Now()
		}
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: err %v", s.what, err)
		}
		hits, _ := a.Hits()
		if rs.calls.Load() != s.wantCalls || hits != s.wantHits {
			t.Fatalf("%s: webhook calls %d hits %d, want %d and %d", s.what, rs.calls.Load(), hits, s.wantCalls, s.wantHits)
		}
	}
	if time.Since(start) > ttl {
		t.Fatalf("the steps took %v, longer than the TTL: the checks above are meaningless", time.Since(start))
	}
	time.Sleep(time.Until(firstDone.Add(ttl + 50*time.Millisecond)))
	if err := call("good"); err != nil {
		t.Fatal(err)
	}
	if rs.calls.Load() != 6 {
		t.Errorf("after the TTL: webhook calls %d, want 6 (the decision expired)", rs.calls.Load())
	}
	// TTL 0: no cache.
	b := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil)})
	before := rs.calls.Load()
	for range 3 {
		if _, err := b.Authenticate(ctx, &authenticator.Request{Token: "good"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := rs.calls.Load() - before; got != 3 {
		t.Errorf("cache TTL 0: %d calls for 3 requests, want 3", got)
	}
}

// A burst of requests with a new token costs the webhook one call.
func TestConcurrentRequestsShareOneReview(t *testing.T) {
	rs := newReviewServer(t)
	a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: time.Minute})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := a.Authenticate(context.Background(), &authenticator.Request{Token: "slow"}); err != nil || resp.User.Name != "sloth" {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || rs.calls.Load() != 1 {
		t.Errorf("%d failures, %d webhook calls; want 0 and 1", failed.Load(), rs.calls.Load())
	}
}

func TestAudiences(t *testing.T) {
	rs := newReviewServer(t)
	a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: time.Minute, APIAudiences: []string{"api"}})
	ctx := context.Background()
	tests := []struct {
		token string
		asked []string
		rule  string
		want  []string // nil: refused
	}{
		{"good", []string{"api", "x"}, "no status.audiences: valid for the API server's audiences only", []string{"api"}},
		{"good-1", []string{"x"}, "no status.audiences and no API audience asked: refused", nil},
		{"aud-other", []string{"api", "other"}, "status.audiences must intersect the request's", []string{"other"}},
		{"aud-other", []string{"api"}, "status.audiences disjoint from the request's: refused", nil},
		{"aud-both", nil, "no audiences asked: the API server's", []string{"api"}},
	}
	for _, tc := range tests {
		before := rs.calls.Load()
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: tc.token, Audiences: tc.asked})
		if rs.calls.Load() != before+1 {
			t.Fatalf("%s: answered without asking the webhook", tc.rule)
		}
		if got := rs.last().Audiences; !slices.Equal(got, orAPI(tc.asked)) {
			t.Errorf("%s: spec.audiences %v, want %v", tc.rule, got, orAPI(tc.asked))
		}
		if tc.want == nil {
			if !errors.Is(err, webhook.ErrNotAuthenticated) {
				t.Errorf("%s: resp %+v err %v, want ErrNotAuthenticated", tc.rule, resp, err)
			}
			continue
		}
		if err != nil || !slices.Equal(resp.Audiences, tc.want) {
			t.Errorf("%s: resp %+v err %v, want audiences %v", tc.rule, resp, err, tc.want)
		}
	}
}

func orAPI(a []string) []string {
	if len(a) == 0 {
		return []string{"api"}
	}
	return a
}

func TestTransportFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("server down", func(t *testing.T) {
		rs := newReviewServer(t)
		kc := rs.kubeconfig(t, nil)
		rs.srv.Close()
		a := newAuthenticator(t, webhook.Config{ConfigFile: kc, CacheTTL: time.Minute, Backoff: webhook.Backoff{Initial: time.Second, Factor: 2, Steps: 5}})
		start := time.Now()
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"})
		if resp != nil || !authenticator.IsUnavailable(err) {
			t.Fatalf("resp %+v err %v, want an unavailable error", resp, err)
		}
		if time.Since(start) > 900*time.Millisecond {
			t.Errorf("a refused connection was retried (%v): upstream retries only transient failures", time.Since(start))
		}
		// Errors are not cached: the next request asks again (and fails again).
		if _, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"}); !authenticator.IsUnavailable(err) {
			t.Errorf("second attempt: %v", err)
		}
		if hits, misses := a.Hits(); hits != 0 || misses != 2 {
			t.Errorf("hits %d misses %d, want 0 and 2", hits, misses)
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		rs := newReviewServer(t)
		other, err := pki.NewCA("other CA", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, other.CertPEM)})
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"})
		if resp != nil || !authenticator.IsUnavailable(err) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("resp %+v err %v, want an unavailable TLS verification error", resp, err)
		}
		if rs.calls.Load() != 0 {
			t.Errorf("the token reached a server the CA does not vouch for")
		}
	})
	t.Run("wrong version answered", func(t *testing.T) {
		rs := newReviewServer(t)
		rs.mu.Lock()
		rs.answerVersion = naming.Group(upstreamGroup) + "/v1"
		rs.mu.Unlock()
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), Version: "v1beta1"})
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"})
		if resp != nil || err == nil || !strings.Contains(err.Error(), "must answer in the version it was sent") {
			t.Fatalf("resp %+v err %v, want a version error", resp, err)
		}
	})
	t.Run("retry after 500", func(t *testing.T) {
		rs := newReviewServer(t)
		rs.mu.Lock()
		rs.failures["good"] = 2
		rs.mu.Unlock()
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil)})
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"})
		if err != nil || resp.User.Name != "jane" {
			t.Fatalf("resp %+v err %v, want jane after retries", resp, err)
		}
		if rs.calls.Load() != 3 {
			t.Errorf("calls %d, want 3 (two 500s retried, as upstream)", rs.calls.Load())
		}
	})
	t.Run("500 until the retries run out", func(t *testing.T) {
		rs := newReviewServer(t)
		rs.mu.Lock()
		rs.failures["good"] = 100
		rs.mu.Unlock()
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil)})
		resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"})
		if resp != nil || !authenticator.IsUnavailable(err) || !strings.Contains(err.Error(), "500") {
			t.Fatalf("resp %+v err %v, want unavailable after retries", resp, err)
		}
		if rs.calls.Load() != int64(fastBackoff.Steps) {
			t.Errorf("calls %d, want %d (the backoff's steps)", rs.calls.Load(), fastBackoff.Steps)
		}
	})
	t.Run("400 is not retried", func(t *testing.T) {
		rs := newReviewServer(t)
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil)})
		if _, err := a.Authenticate(ctx, &authenticator.Request{Token: "bad-request"}); err == nil {
			t.Fatal("400 authenticated")
		}
		if rs.calls.Load() != 1 {
			t.Errorf("calls %d, want 1", rs.calls.Load())
		}
	})
	t.Run("caller gives up", func(t *testing.T) {
		rs := newReviewServer(t)
		a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: time.Minute})
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := a.Authenticate(cctx, &authenticator.Request{Token: "slow"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want the caller's deadline", err)
		}
		// The review went on: the next caller joins it or finds its answer cached.
		if resp, err := a.Authenticate(ctx, &authenticator.Request{Token: "slow"}); err != nil || resp.User.Name != "sloth" || rs.calls.Load() != 1 {
			t.Errorf("resp %+v err %v calls %d, want sloth from the cache", resp, err, rs.calls.Load())
		}
	})
}

// Bad tokens (malformed, truncated, oversized, binary) are sent as they are and judged by the
// webhook; nothing panics and none authenticates.
func TestBadTokens(t *testing.T) {
	rs := newReviewServer(t)
	a := newAuthenticator(t, webhook.Config{ConfigFile: rs.kubeconfig(t, nil), CacheTTL: time.Minute})
	for _, tok := range []string{"a.b", "eyJhbGciOiJSUzI1NiJ9.", strings.Repeat("x", 1<<20), "\x00\xff\xfe", "good\n", " good"} {
		resp, err := a.Authenticate(context.Background(), &authenticator.Request{Token: tok})
		if resp != nil || !errors.Is(err, webhook.ErrNotAuthenticated) {
			t.Errorf("token of %d bytes: resp %+v err %v, want ErrNotAuthenticated", len(tok), resp, err)
		}
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		cfg    webhook.Config
		errHas string
	}{
		{webhook.Config{}, "--authentication-token-webhook-config-file is required"},
		{webhook.Config{ConfigFile: "x", Version: "v2"}, "--authentication-token-webhook-version must be v1 or v1beta1"},
		{webhook.Config{ConfigFile: "x", CacheTTL: -1}, "--authentication-token-webhook-cache-ttl must not be negative"},
	}
	for _, tc := range tests {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.errHas)
		}
	}
	if _, err := webhook.New(webhook.Config{ConfigFile: filepath.Join(t.TempDir(), "missing")}, nil); err == nil || !strings.Contains(err.Error(), "--authentication-token-webhook-config-file") {
		t.Errorf("missing kubeconfig: err %v", err)
	}
}
