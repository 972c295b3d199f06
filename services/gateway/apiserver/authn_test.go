package apiserver_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/gatewaytest"
)

const (
	ssrPath = "/apis/authentication.platform.io/v1/selfsubjectreviews"
	saPath  = "/api/v1/namespaces/default/serviceaccounts"
)

// startNoTokenCache starts a gateway whose authentication decisions are never reused, so a
// revoked credential is refused at once (the default reuses successful decisions for 10s).
func startNoTokenCache(t *testing.T, opts gatewaytest.Options) *gatewaytest.Env {
	t.Helper()
	prev := opts.ConfigureAuthn
	opts.ConfigureAuthn = func(c *authnConfig) {
		c.CacheTTL = 0
		if prev != nil {
			prev(c)
		}
	}
	return gatewaytest.Start(t, opts)
}

// requestToken asks for a token of a service account.
func requestToken(t *testing.T, e *gatewaytest.Env, sa string, body any) map[string]any {
	t.Helper()
	return must(t, do(t, e, "POST", saPath+"/"+sa+"/token", body), http.StatusCreated)
}

// whoami is the user a client is, by SelfSubjectReview.
func whoami(t *testing.T, e *gatewaytest.Env, c *http.Client) map[string]any {
	t.Helper()
	r := must(t, call(t, c, e, "POST", ssrPath, `{}`), http.StatusCreated)
	return path(r, "status.userInfo").(map[string]any)
}

// claims decodes a JWT's payload (without checking it: the gateway did).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The TokenRequest API (serviceaccounts/token) and service account tokens used as bearer tokens:
// the identity upstream gives them, audiences, lifetime rules, binding to a pod, and refusal once
// the account or the pod is gone or replaced.
func TestServiceAccountTokens(t *testing.T) {
	e := startNoTokenCache(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", saPath, `{"metadata":{"name":"robot"}}`), http.StatusCreated)
	// Discovery advertises the subresource with its own kind.
	res := must(t, do(t, e, "GET", "/api/v1", nil), http.StatusOK)
	found := false
	for _, r := range res["resources"].([]any) {
		m := r.(map[string]any)
		if m["name"] == "serviceaccounts/token" {
			found = m["kind"] == "TokenRequest" && m["group"] == "authentication.platform.io" && m["version"] == "v1"
		}
	}
	if !found {
		t.Error("serviceaccounts/token is not in discovery as a TokenRequest")
	}

	tr := requestToken(t, e, "robot", `{"spec":{}}`)
	token, _ := path(tr, "status.token").(string)
	if tr["kind"] != "TokenRequest" || path(tr, "metadata.name") != "robot" || token == "" {
		t.Fatalf("token request: %v", tr)
	}
	exp, err := time.Parse(time.RFC3339, path(tr, "status.expirationTimestamp").(string))
	if err != nil || exp.Sub(time.Now()) < 59*time.Minute || exp.Sub(time.Now()) > 61*time.Minute {
		t.Errorf("default lifetime: expires %v", path(tr, "status.expirationTimestamp"))
	}
	c := claims(t, token)
	if c["iss"] != e.ServiceAccountIssuer || c["sub"] != "system:serviceaccount:default:robot" {
		t.Errorf("claims: %v", c)
	}
	who := whoami(t, e, e.Bearer(token))
	groups := who["groups"].([]any)
	if who["username"] != "system:serviceaccount:default:robot" || len(groups) != 3 || groups[0] != "system:serviceaccounts" ||
		groups[1] != "system:serviceaccounts:default" || groups[2] != "system:authenticated" || who["uid"] == "" {
		t.Errorf("service account identity: %v", who)
	}

	// Lifetime and body rules, as upstream validates them.
	do(t, e, "POST", saPath+"/robot/token", `{"spec":{"expirationSeconds":599}}`).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "POST", saPath+"/robot/token", `{"metadata":{"name":"other"},"spec":{}}`).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "POST", saPath+"/nobody/token", `{"spec":{}}`).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "GET", saPath+"/robot/token", nil).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	dry := must(t, do(t, e, "POST", saPath+"/robot/token?dryRun=All", `{"spec":{}}`), http.StatusCreated)
	if path(dry, "status.token") != nil && path(dry, "status.token") != "" {
		t.Error("a dry run issued a token")
	}

	// Audiences: a token for another audience is not good for the API server.
	other := path(requestToken(t, e, "robot", `{"spec":{"audiences":["vault"]}}`), "status.token").(string)
	call(t, e.Bearer(other), e, "POST", ssrPath, `{}`).status(t, http.StatusUnauthorized, "Unauthorized")

	// Bound to a pod: valid while the pod is, refused once it is gone.
	must(t, do(t, e, "POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"runner"},"spec":{"serviceAccountName":"robot","containers":[{"name":"c","image":"busybox"}]}}`), http.StatusCreated)
	pod := must(t, do(t, e, "GET", "/api/v1/namespaces/default/pods/runner", nil), http.StatusOK)
	bound := path(requestToken(t, e, "robot", map[string]any{"spec": map[string]any{"boundObjectRef": map[string]any{
		"kind": "Pod", "apiVersion": "v1", "name": "runner", "uid": path(pod, "metadata.uid")}}}), "status.token").(string)
	who = whoami(t, e, e.Bearer(bound))
	extra := who["extra"].(map[string]any)
	if v, _ := extra["authentication.platform.io/pod-name"].([]any); len(v) != 1 || v[0] != "runner" {
		t.Errorf("pod-bound extras: %v", extra)
	}
	do(t, e, "POST", saPath+"/robot/token", map[string]any{"spec": map[string]any{"boundObjectRef": map[string]any{
		"kind": "Pod", "apiVersion": "v1", "name": "runner", "uid": "not-the-uid"}}}).status(t, http.StatusConflict, "Conflict")
	must(t, do(t, e, "POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"other-sa"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`), http.StatusCreated)
	msg := do(t, e, "POST", saPath+"/robot/token", `{"spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"other-sa"}}}`).status(t, http.StatusBadRequest, "BadRequest")
	if !strings.Contains(msg, "cannot bind token for serviceaccount") {
		t.Errorf("pod of another account: %q", msg)
	}
	must(t, do(t, e, "DELETE", "/api/v1/namespaces/default/pods/runner", nil), http.StatusOK)
	call(t, e.Bearer(bound), e, "POST", ssrPath, `{}`).status(t, http.StatusUnauthorized, "Unauthorized")

	// The account replaced (same name, new uid): its old tokens are refused.
	must(t, do(t, e, "DELETE", saPath+"/robot", nil), http.StatusOK)
	call(t, e.Bearer(token), e, "POST", ssrPath, `{}`).status(t, http.StatusUnauthorized, "Unauthorized")
	must(t, do(t, e, "POST", saPath, `{"metadata":{"name":"robot"}}`), http.StatusCreated)
	call(t, e.Bearer(token), e, "POST", ssrPath, `{}`).status(t, http.StatusUnauthorized, "Unauthorized")
}

// TokenReview (v1): the authentication service's answer for any token, with the reason when it
// is refused. v1beta1 serves SelfSubjectReview only, as upstream 1.33 (which stopped serving
// v1beta1 TokenReview in 1.22): its discovery does not list tokenreviews and a POST is 404.
func TestTokenReview(t *testing.T) {
	e := startNoTokenCache(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", saPath, `{"metadata":{"name":"robot"}}`), http.StatusCreated)
	token := path(requestToken(t, e, "robot", `{"spec":{"audiences":["api","vault"]}}`), "status.token").(string)
	p := "/apis/authentication.platform.io/v1/tokenreviews"
	r := must(t, do(t, e, "POST", p, map[string]any{"spec": map[string]any{"token": token, "audiences": []string{"vault"}}}), http.StatusCreated)
	if path(r, "status.authenticated") != true || path(r, "status.user.username") != "system:serviceaccount:default:robot" {
		t.Errorf("v1 review: %v", r["status"])
	}
	if auds, _ := path(r, "status.audiences").([]any); len(auds) != 1 || auds[0] != "vault" {
		t.Errorf("v1 audiences: %v", path(r, "status.audiences"))
	}
	bad := must(t, do(t, e, "POST", p, `{"spec":{"token":"abc.def.ghi"}}`), http.StatusCreated)
	if path(bad, "status.authenticated") == true || path(bad, "status.error") == nil {
		t.Errorf("v1 bad token: %v", bad["status"])
	}
	do(t, e, "POST", p, `{"spec":{}}`).status(t, http.StatusBadRequest, "BadRequest")

	disc := must(t, do(t, e, "GET", "/apis/authentication.platform.io/v1beta1", nil), http.StatusOK)
	served := map[string]bool{}
	resources, _ := disc["resources"].([]any)
	for _, res := range resources {
		if m, ok := res.(map[string]any); ok {
			served[m["name"].(string)] = true
		}
	}
	if !served["selfsubjectreviews"] || served["tokenreviews"] {
		t.Errorf("v1beta1 discovery lists %v, want selfsubjectreviews and no tokenreviews", served)
	}
	do(t, e, "POST", "/apis/authentication.platform.io/v1beta1/tokenreviews", map[string]any{"spec": map[string]any{"token": token}}).
		status(t, http.StatusNotFound, "NotFound")
	must(t, do(t, e, "POST", "/apis/authentication.platform.io/v1beta1/selfsubjectreviews", `{}`), http.StatusCreated)
}

// Bootstrap tokens: a Secret of the bootstrap type in the system namespace, the 6+16 format, its
// expiry and usages; bad tokens of every shape are 401, never anonymous and never a 500.
func TestBootstrapAndBadTokens(t *testing.T) {
	e := startNoTokenCache(t, gatewaytest.Options{ConfigureAuthn: func(c *authnConfig) { c.AnonymousAuth = true }})
	secret := map[string]any{"metadata": map[string]any{"name": "bootstrap-token-abcdef", "namespace": "platform-system"},
		"type": "bootstrap.platform.io/token",
		"stringData": map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true",
			"auth-extra-groups": "system:bootstrappers:workers", "expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
	must(t, do(t, e, "POST", "/api/v1/namespaces/platform-system/secrets", secret), http.StatusCreated)
	who := whoami(t, e, e.Bearer("abcdef.0123456789abcdef"))
	if who["username"] != "system:bootstrap:abcdef" || len(who["groups"].([]any)) != 3 {
		t.Errorf("bootstrap identity: %v", who)
	}
	for name, tok := range map[string]string{
		"wrong secret":      "abcdef.0123456789abcdee",
		"unknown id":        "zzzzzz.0123456789abcdef",
		"truncated jwt":     "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0",
		"alg none":          base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://platform.test","sub":"system:serviceaccount:default:x"}`)) + ".",
		"garbage":           "%%%",
		"oversized (64KiB)": strings.Repeat("a", 64<<10),
	} {
		r := call(t, e.Bearer(tok), e, "POST", ssrPath, `{}`)
		if r.code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401: %s", name, r.code, r.body)
		}
	}
	// Without credentials the request is anonymous (and the default policy lets it read /version).
	must(t, call(t, e.Anonymous(), e, "GET", "/version", nil), http.StatusOK)
}

// The decision cache: a successful token decision is reused for the time the authentication
// service allows (upstream's 10 seconds), so a steady client pays no hop; refusals are not cached.
func TestAuthenticationCache(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeAlwaysAllow} }})
	must(t, do(t, e, "POST", saPath, `{"metadata":{"name":"robot"}}`), http.StatusCreated)
	token := path(requestToken(t, e, "robot", `{"spec":{}}`), "status.token").(string)
	for i := 0; i < 5; i++ {
		whoami(t, e, e.Bearer(token))
	}
	metrics := string(do(t, e, "GET", "/metrics", nil).body)
	if !strings.Contains(metrics, `gateway_authentication_cache_total{result="hit"}`) {
		t.Errorf("no cache hits counted:\n%s", grep(metrics, "gateway_authentication_cache_total"))
	}
	// Within the cache bound a deleted account's token still works, as upstream; past it, not.
	must(t, do(t, e, "DELETE", saPath+"/robot", nil), http.StatusOK)
	whoami(t, e, e.Bearer(token))
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Service account issuer discovery: service accounts (the default policy's
// system:service-account-issuer-discovery) read the discovery document and the key set, and the
// set verifies the tokens the TokenRequest API issues.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	e := startRBACNoCache(t)
	must(t, do(t, e, "POST", saPath, `{"metadata":{"name":"robot"}}`), http.StatusCreated)
	token := path(requestToken(t, e, "robot", `{"spec":{}}`), "status.token").(string)
	sa := e.Bearer(token)
	doc := must(t, call(t, sa, e, "GET", "/.well-known/openid-configuration", nil), http.StatusOK)
	if doc["issuer"] != e.ServiceAccountIssuer || doc["jwks_uri"] != e.ServiceAccountIssuer+"/openid/v1/jwks" {
		t.Errorf("discovery document: %v", doc)
	}
	r := call(t, sa, e, "GET", "/openid/v1/jwks", nil)
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("jwks: %d %s", r.code, r.header.Get("Content-Type"))
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks: %v %s", err, r.body)
	}
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := parsed.Claims(set.Keys[0].Key, &claims); err != nil || claims["sub"] != "system:serviceaccount:default:robot" {
		t.Errorf("the published key does not verify the token: %v %v", claims, err)
	}
	// Users outside system:serviceaccounts are not granted it.
	call(t, e.Client("jane"), e, "GET", "/openid/v1/jwks", nil).status(t, http.StatusForbidden, "Forbidden")
}

func startRBACNoCache(t *testing.T) *gatewaytest.Env {
	t.Helper()
	return startNoTokenCache(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeNode, authz.ModeRBAC} }})
}
