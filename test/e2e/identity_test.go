package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/libs/oidctest"
	"platform.io/test/stack"
)

// whoamiHTTP posts a SelfSubjectReview with client c and returns the user name, or the HTTP
// status when it is not 201.
func whoamiHTTP(t *testing.T, c *http.Client, base string, header ...string) (string, int) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/apis/"+naming.Group("authentication.k8s.io")+"/v1/selfsubjectreviews", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", resp.StatusCode
	}
	var r struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo.Username + "|" + strings.Join(r.Status.UserInfo.Groups, ","), resp.StatusCode
}

// bearerClient is an HTTP client that trusts the stack and sends a bearer token.
func bearerClient(s *stack.Stack, token string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return (&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(s)}}).RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// OIDC with a real issuer (discovery and JWKS over TLS) that starts after the stack: tokens are
// refused until it is reachable, then accepted with the username and groups claims and prefixes;
// a bad signature, a missing required claim or another audience are 401; after a key rotation new
// tokens work and the old key's do not.
func TestOIDC(t *testing.T) {
	iss, err := oidctest.Start(oidctest.Options{Deferred: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iss.Stop)
	s := startStack(t, stack.Options{Mode: stack.Split, AuthnArgs: []string{
		"--oidc-issuer-url", iss.URL(), "--oidc-client-id", "platform", "--oidc-ca-file", iss.CAFile(),
		"--oidc-username-claim", "email", "--oidc-groups-claim", "groups", "--oidc-groups-prefix", "oidc:",
		"--oidc-required-claim", "tenant=acme",
	}})
	claims := func() map[string]any {
		c := iss.Claims("platform", "u-123", time.Hour)
		c["email"], c["email_verified"], c["groups"], c["tenant"] = "ann@example.com", true, []string{"ops"}, "acme"
		return c
	}
	token := iss.Token(claims())
	if _, code := whoamiHTTP(t, bearerClient(s, token), s.URL); code == http.StatusCreated {
		t.Fatal("an OIDC token was accepted before the issuer could be reached")
	}
	if err := iss.Serve(); err != nil {
		t.Fatal(err)
	}
	var who string
	stack.Eventually(t, 20*time.Second, "the issuer to be discovered", func() error {
		var code int
		if who, code = whoamiHTTP(t, bearerClient(s, token), s.URL); code != http.StatusCreated {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
	if who != "ann@example.com|oidc:ops,system:authenticated" {
		t.Errorf("OIDC identity: %q", who)
	}
	// kubectl with the token in its kubeconfig.
	k := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, token), "")
	if got := whoamiName(t, k); got != "ann@example.com" {
		t.Errorf("kubectl auth whoami with an OIDC token: %q", got)
	}
	foreign, err := oidctest.NewKey(oidctest.RS256, "unknown")
	if err != nil {
		t.Fatal(err)
	}
	noTenant := claims()
	delete(noTenant, "tenant")
	otherAud := claims()
	otherAud["aud"] = "someone-else"
	expired := claims()
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	for name, tok := range map[string]string{
		"bad signature":          iss.TokenWithKey(foreign, claims()),
		"missing required claim": iss.Token(noTenant),
		"another audience":       iss.Token(otherAud),
		"expired":                iss.Token(expired),
	} {
		if _, code := whoamiHTTP(t, bearerClient(s, tok), s.URL); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	// Key rotation: the new key's tokens are accepted once the key set is fetched again for the
	// unknown key id (at most once per refresh interval, 10s, so forged key ids cannot make the
	// service hammer the provider); the dropped key's tokens are refused from then on, once the
	// gateway's decision cache (10s) forgets them.
	if err := iss.RotateKey(); err != nil {
		t.Fatal(err)
	}
	rotated := iss.Token(claims())
	stack.Eventually(t, 30*time.Second, "the rotated key's token to be accepted", func() error {
		if who, code := whoamiHTTP(t, bearerClient(s, rotated), s.URL); code != http.StatusCreated {
			return fmt.Errorf("status %d %s", code, who)
		}
		return nil
	})
	stack.Eventually(t, 30*time.Second, "the dropped key's token to be refused (after the decision cache bound)", func() error {
		if _, code := whoamiHTTP(t, bearerClient(s, token), s.URL); code != http.StatusUnauthorized {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
}

// Webhook token review: a real HTTPS TokenReview service (v1) decides tokens nobody else knows;
// its answers are cached for --authentication-token-webhook-cache-ttl.
func TestWebhookTokenReview(t *testing.T) {
	var calls atomic.Int64
	hook, caPEM := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var review map[string]any
		decodeJSONBody(t, r, &review)
		spec, _ := review["spec"].(map[string]any)
		status := map[string]any{"authenticated": false, "error": "unknown token"}
		if spec["token"] == "hook-token" {
			status = map[string]any{"authenticated": true, "user": map[string]any{"username": "hooked", "uid": "42", "groups": []string{"hook-users"}}}
		}
		// Sent in the profile's group (the spec's authentication.platform.io; upstream's in the
		// kubernetes profile).
		if want := naming.Group("authentication.k8s.io") + "/v1"; review["apiVersion"] != want {
			t.Errorf("TokenReview sent as %v, want %s", review["apiVersion"], want)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": status})
	}))
	s := startStack(t, stack.Options{Mode: stack.Split, AuthnArgs: []string{
		"--authentication-token-webhook-config-file", webhookKubeconfig(t, hook+"/authenticate", caPEM), "--authentication-token-webhook-version", "v1",
	}})
	for i := 0; i < 3; i++ {
		if who, code := whoamiHTTP(t, bearerClient(s, "hook-token"), s.URL); code != http.StatusCreated || who != "hooked|hook-users,system:authenticated" {
			t.Fatalf("webhook identity: %d %q", code, who)
		}
	}
	if _, code := whoamiHTTP(t, bearerClient(s, "other-token"), s.URL); code != http.StatusUnauthorized {
		t.Errorf("a token the webhook refuses: %d", code)
	}
	// Three requests with the same token, then another token: the first of each is asked, the
	// repeats come from the caches.
	if n := calls.Load(); n != 2 {
		t.Errorf("webhook calls: %d, want 2 (one per distinct token)", n)
	}
}

// An authenticating proxy in front of the gateway: a reverse proxy with a client certificate of an
// allowed name passes the user in headers; the headers of any other caller are ignored (and
// stripped), so nobody can claim an identity by sending them.
func TestAuthenticatingProxy(t *testing.T) {
	args := []string{"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-", "--requestheader-allowed-names", "front-proxy"}
	// The proxy CA is the stack's own CA here (the flag names the file the stack writes).
	s := startStack(t, stack.Options{Mode: stack.Split, RequestHeaderArgs: args})
	proxyFor := func(cn string) string {
		tc, err := s.TLSConfig(cn)
		if err != nil {
			t.Fatal(err)
		}
		target, _ := url.Parse(s.URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.Transport = &http.Transport{TLSClientConfig: tc}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The proxy authenticated its caller somehow; it asserts who that is.
			r.Header.Set("X-Remote-User", r.Header.Get("X-Login"))
			r.Header.Set("X-Remote-Group", "proxied")
			r.Header.Set("X-Remote-Extra-Scopes", "read")
			rp.ServeHTTP(w, r)
		})}
		lis := listen(t)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(func() { _ = srv.Close() })
		return "http://" + lis.Addr().String()
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if who, code := whoamiHTTP(t, plain, proxyFor("front-proxy"), "X-Login", "alice"); code != http.StatusCreated || who != "alice|proxied,system:authenticated" {
		t.Errorf("through the allowed proxy: %d %q", code, who)
	}
	// A proxy certificate without an allowed name: its headers are not honoured; the certificate
	// itself (from the cluster CA) is who the caller is.
	if who, code := whoamiHTTP(t, plain, proxyFor("other-proxy"), "X-Login", "alice"); code != http.StatusCreated || !strings.HasPrefix(who, "other-proxy|") {
		t.Errorf("through a refused proxy: %d %q", code, who)
	}
	// A client sending the headers itself.
	admin, err := s.HTTPClient("carol")
	if err != nil {
		t.Fatal(err)
	}
	if who, code := whoamiHTTP(t, admin, s.URL, "X-Remote-User", "alice", "X-Remote-Group", "system:masters"); code != http.StatusCreated || who != "carol|system:authenticated" {
		t.Errorf("headers from a plain client: %d %q", code, who)
	}
}

// The Webhook authorization mode with a real HTTPS SubjectAccessReview service, consulted after
// RBAC: it allows what RBAC has no opinion on for its users, and denies explicitly.
func TestAuthorizationWebhook(t *testing.T) {
	var calls atomic.Int64
	hook, caPEM := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var review map[string]any
		decodeJSONBody(t, r, &review)
		spec, _ := review["spec"].(map[string]any)
		status := map[string]any{"allowed": false}
		switch spec["user"] {
		case "hooked":
			status = map[string]any{"allowed": true, "reason": "the hook says so"}
		case "banned":
			status = map[string]any{"allowed": false, "denied": true, "reason": "banned by the hook"}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview", "status": status})
	}))
	s := startStack(t, stack.Options{Mode: stack.Split, AuthzArgs: []string{
		"--authorization-mode", "Node,RBAC,Webhook", "--authorization-webhook-config-file", webhookKubeconfig(t, hook+"/authorize", caPEM), "--authorization-webhook-version", "v1",
	}})
	list := func(user string) int {
		c, err := s.HTTPClient(user)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(s.URL + "/api/v1/namespaces/default/secrets")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if user == "banned" && !strings.Contains(string(body), "banned by the hook") {
			t.Errorf("the webhook's reason is not in the 403: %s", body)
		}
		return resp.StatusCode
	}
	if code := list("hooked"); code != http.StatusOK {
		t.Errorf("allowed by the webhook: %d", code)
	}
	if code := list("banned"); code != http.StatusForbidden {
		t.Errorf("denied by the webhook: %d", code)
	}
	if code := list("nobody"); code != http.StatusForbidden {
		t.Errorf("no opinion anywhere: %d", code)
	}
	if calls.Load() == 0 {
		t.Error("the webhook was never called")
	}
}
