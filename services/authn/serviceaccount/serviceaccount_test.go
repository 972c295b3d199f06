package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	sa "platform.io/libs/serviceaccount"
	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/authn/authenticator"
)

const (
	issuer    = "https://issuer.example"
	oldIssuer = "https://old-issuer.example"
	ns        = "team-a"
	saName    = "builder"
	saUID     = "sa-uid-1"
	podName   = "pod-1"
	podUID    = "pod-uid-1"
	secName   = "bound-secret"
	secUID    = "secret-uid-1"
	nodeName  = "node-a"
	nodeUID   = "node-uid-1"
)

// Keys are generated once per test binary (RSA generation is slow on a shared machine).
var (
	keysOnce   sync.Once
	signingKey *rsa.PrivateKey // signs for the first issuer
	oldKey     *ecdsa.PrivateKey
	strayKey   *rsa.PrivateKey // trusted by nobody
)

func generateKeys() {
	keysOnce.Do(func() {
		var err error
		if signingKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if strayKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if oldKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type env struct {
	auth    *Authenticator
	objects *memObjects
	clock   *clock
	// old signs tokens of the second issuer with a key only --service-account-key-file names.
	old *sa.Issuer
	// legacy signs legacy tokens with the signing key (as the token controller does).
	legacy *sa.Issuer
}

// newEnv starts the method as the service would: key files on disk, two issuers (the first
// signs), an account with a pod, a secret and a node to bind tokens to.
func newEnv(t testing.TB, mutate func(*Config)) *env {
	t.Helper()
	generateKeys()
	dir := t.TempDir()
	signingFile := writePEM(t, dir, "sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(signingKey))
	pubDER, err := x509.MarshalPKIXPublicKey(&signingKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	oldDER, err := x509.MarshalPKIXPublicKey(&oldKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{objects: newMemObjects(), clock: &clock{now: time.Now()}}
	cfg := Config{
		Issuers:        []string{issuer, oldIssuer},
		KeyFiles:       []string{writePEM(t, dir, "sa.pub", "PUBLIC KEY", pubDER), writePEM(t, dir, "old.pub", "PUBLIC KEY", oldDER)},
		SigningKeyFile: signingFile,
		Lookup:         true,
		Objects:        e.objects,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:            e.clock.Now,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.auth, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if e.old, err = sa.NewIssuer(oldIssuer, oldKey); err != nil {
		t.Fatal(err)
	}
	if e.legacy, err = sa.NewIssuer(issuer, signingKey); err != nil {
		t.Fatal(err)
	}
	e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID}})
	e.objects.put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName, UID: podUID}, Spec: corev1.PodSpec{ServiceAccountName: saName, NodeName: nodeName}})
	e.objects.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secName, UID: secUID}})
	e.objects.put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: nodeUID}})
	return e
}

func tokenRequest(bound *authnv1.ObjectReference, node *authnv1.ObjectReference, audiences ...string) *authnv1.IssueServiceAccountTokenRequest {
	return &authnv1.IssueServiceAccountTokenRequest{
		Namespace: ns, Name: saName, Uid: saUID, Audiences: audiences, ExpirationSeconds: 3600,
		BoundObject: bound, Node: node,
	}
}

var (
	podRef    = &authnv1.ObjectReference{Kind: "Pod", ApiVersion: "v1", Name: podName, Uid: podUID}
	secretRef = &authnv1.ObjectReference{Kind: "Secret", ApiVersion: "v1", Name: secName, Uid: secUID}
	nodeRef   = &authnv1.ObjectReference{Kind: "Node", ApiVersion: "v1", Name: nodeName, Uid: nodeUID}
	podsNode  = &authnv1.ObjectReference{Kind: "Node", ApiVersion: "v1", Name: nodeName, Uid: nodeUID}
)

func (e *env) issue(t testing.TB, req *authnv1.IssueServiceAccountTokenRequest) string {
	t.Helper()
	tok, _, err := e.auth.IssueBound(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (e *env) authenticate(token string, audiences ...string) (*authenticator.Response, error) {
	return e.auth.Authenticate(context.Background(), &authenticator.Request{Token: token, Audiences: audiences})
}

func jti(t testing.TB, token string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID string `json:"jti"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// The identity of a bound token is upstream's: user system:serviceaccount:<ns>:<name>, the
// account's uid, the two service account groups, and extras for the pod (name and uid together),
// the node (uid only with a name) and the credential id JTI=<jti>.
func TestBoundTokenIdentity(t *testing.T) {
	e := newEnv(t, nil)
	extra := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		for i := 0; i < len(kv); i += 2 {
			m[naming.UserExtraKey(kv[i])] = []string{kv[i+1]}
		}
		return m
	}
	cases := []struct {
		name  string
		req   *authnv1.IssueServiceAccountTokenRequest
		extra func(jti string) map[string][]string
	}{
		{"unbound", tokenRequest(nil, nil), func(j string) map[string][]string { return extra("credential-id", "JTI="+j) }},
		{"bound to a pod", tokenRequest(podRef, nil), func(j string) map[string][]string {
			return extra("credential-id", "JTI="+j, "pod-name", podName, "pod-uid", podUID)
		}},
		{"bound to a pod on a node", tokenRequest(podRef, podsNode), func(j string) map[string][]string {
			return extra("credential-id", "JTI="+j, "pod-name", podName, "pod-uid", podUID, "node-name", nodeName, "node-uid", nodeUID)
		}},
		{"bound to a pod on a node without object (name only)", tokenRequest(podRef, &authnv1.ObjectReference{Name: nodeName}), func(j string) map[string][]string {
			return extra("credential-id", "JTI="+j, "pod-name", podName, "pod-uid", podUID, "node-name", nodeName)
		}},
		{"bound to a secret", tokenRequest(secretRef, nil), func(j string) map[string][]string { return extra("credential-id", "JTI="+j) }},
		{"bound to a node", tokenRequest(nodeRef, nil), func(j string) map[string][]string {
			return extra("credential-id", "JTI="+j, "node-name", nodeName, "node-uid", nodeUID)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := e.issue(t, tc.req)
			resp, err := e.authenticate(tok)
			if err != nil {
				t.Fatal(err)
			}
			u := resp.User
			if u.Name != "system:serviceaccount:team-a:builder" || u.UID != saUID ||
				!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:team-a"}) {
				t.Fatalf("user = %+v", u)
			}
			if want := tc.extra(jti(t, tok)); !reflect.DeepEqual(u.Extra, want) {
				t.Fatalf("extra = %v, want %v", u.Extra, want)
			}
			if !slices.Equal(resp.Audiences, []string{issuer}) {
				t.Fatalf("audiences = %v, want the API audience %s", resp.Audiences, issuer)
			}
		})
	}
}

// Every configured issuer is accepted, not only the one that signs; audiences of the request are
// answered with the subset the token is valid for.
func TestBoundTokenIssuersAndAudiences(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.APIAudiences = []string{"api", "api-2"} })
	tok, _, err := e.old.IssueBound(sa.BoundRequest{Namespace: ns, Name: saName, UID: saUID, Audiences: []string{"api-2"}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.authenticate(tok)
	if err != nil {
		t.Fatalf("second issuer's token: %v", err)
	}
	if !slices.Equal(resp.Audiences, []string{"api-2"}) {
		t.Fatalf("audiences = %v", resp.Audiences)
	}

	multi := e.issue(t, tokenRequest(nil, nil, "vault", "api"))
	resp, err = e.authenticate(multi, "vault", "other", "api")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Audiences, []string{"vault", "api"}) {
		t.Fatalf("audiences = %v, want [vault api]", resp.Audiences)
	}
	// Without request audiences: the API audiences.
	if resp, err = e.authenticate(multi); err != nil || !slices.Equal(resp.Audiences, []string{"api"}) {
		t.Fatalf("default audiences: %v, %v", resp, err)
	}
	// The default audiences of an issued token are the API audiences.
	def := e.issue(t, tokenRequest(nil, nil))
	if resp, err = e.authenticate(def, "api-2"); err != nil || !slices.Equal(resp.Audiences, []string{"api-2"}) {
		t.Fatalf("defaulted token audiences: %v, %v", resp, err)
	}
}

// Each refusal of a bound token, with upstream's message; a token of another issuer or no JWT is
// not this method's.
func TestBoundTokenRefusals(t *testing.T) {
	past := func(d time.Duration) *metav1.Time { t := metav1.NewTime(time.Now().Add(-d)); return &t }
	cases := []struct {
		name      string
		token     func(e *env) string
		setup     func(e *env)
		audiences []string
		want      string // message; "" with notMine
		notMine   bool
	}{
		{name: "issuer not configured", notMine: true, token: func(e *env) string {
			i, _ := sa.NewIssuer("https://elsewhere.example", signingKey)
			tok, _, _ := i.IssueBound(sa.BoundRequest{Namespace: ns, Name: saName, UID: saUID, Expiration: time.Hour})
			return tok
		}},
		{name: "signed by an untrusted key", want: "go-jose/go-jose: error in cryptographic primitive", token: func(e *env) string {
			// No kid: every trusted key is tried, as upstream does for tokens without one.
			s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: strayKey}, nil)
			tok, _ := jwt.Signed(s).Claims(map[string]any{"iss": issuer, "sub": "system:serviceaccount:team-a:builder", "aud": issuer,
				naming.ServiceAccountClaimsKey: map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": saName, "uid": saUID}}}).Serialize()
			return tok
		}},
		{name: "signed by an untrusted key with its kid", want: "invalid signature, no keys found", token: func(e *env) string {
			i, _ := sa.NewIssuer(issuer, strayKey)
			tok, _, _ := i.IssueBound(sa.BoundRequest{Namespace: ns, Name: saName, UID: saUID, Expiration: time.Hour})
			return tok
		}},
		{name: "alg none", want: `token signature algorithm "none" is not accepted`, token: func(e *env) string {
			parts := strings.Split(e.issue(t, tokenRequest(nil, nil)), ".")
			return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."
		}},
		{name: "HS256 keyed with the public key", want: `token signature algorithm "HS256" is not accepted`, token: func(e *env) string {
			der, _ := x509.MarshalPKIXPublicKey(&signingKey.PublicKey)
			s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: der}, nil)
			tok, _ := jwt.Signed(s).Claims(map[string]any{"iss": issuer, "sub": "system:serviceaccount:team-a:builder", "aud": issuer,
				naming.ServiceAccountClaimsKey: map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": saName, "uid": saUID}}}).Serialize()
			return tok
		}},
		{name: "no account in the claims", want: `serviceaccounts "" not found`, token: func(e *env) string {
			s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: signingKey}, nil)
			tok, _ := jwt.Signed(s).Claims(map[string]any{"iss": issuer, "aud": issuer}).Serialize()
			return tok
		}, setup: func(e *env) { e.objects.setFail(errors.New("the store must not be read")) }},
		{name: "expired", want: "service account token has expired",
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) },
			setup: func(e *env) { e.clock.set(e.clock.Now().Add(time.Hour + 2*time.Minute)) }},
		{name: "not yet valid", want: "service account token is not valid yet",
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) },
			setup: func(e *env) { e.clock.set(e.clock.Now().Add(-2 * time.Minute)) }},
		{name: "wrong audience requested", audiences: []string{"vault"},
			want:  `token audiences ["https://issuer.example"] is invalid for the target audiences ["vault"]`,
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) }},
		{name: "token for another audience", want: `token audiences ["vault"] is invalid for the target audiences ["https://issuer.example"]`,
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil, "vault")) }},
		{name: "account missing", want: `serviceaccounts "builder" not found`,
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) },
			setup: func(e *env) { e.objects.remove("ServiceAccount", ns, saName) }},
		{name: "account replaced", want: "service account UID (sa-uid-2) does not match claim (sa-uid-1)",
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: "sa-uid-2"}})
			}},
		{name: "account deleted beyond the leeway", want: "service account team-a/builder has been deleted",
			token: func(e *env) string { return e.issue(t, tokenRequest(nil, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID, DeletionTimestamp: past(2 * time.Minute)}})
			}},
		{name: "pod gone", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(podRef, podsNode)) },
			setup: func(e *env) { e.objects.remove("Pod", ns, podName) }},
		{name: "pod replaced", want: "pod UID (pod-uid-2) does not match service account pod ref claim (pod-uid-1)",
			token: func(e *env) string { return e.issue(t, tokenRequest(podRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName, UID: "pod-uid-2"}})
			}},
		{name: "pod deleted beyond the leeway", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(podRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName, UID: podUID, DeletionTimestamp: past(5 * time.Minute)}})
			}},
		{name: "secret gone", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(secretRef, nil)) },
			setup: func(e *env) { e.objects.remove("Secret", ns, secName) }},
		{name: "secret replaced", want: "secret UID (secret-uid-2) does not match service account secret ref claim (secret-uid-1)",
			token: func(e *env) string { return e.issue(t, tokenRequest(secretRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secName, UID: "secret-uid-2"}})
			}},
		{name: "secret deleted beyond the leeway", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(secretRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secName, UID: secUID, DeletionTimestamp: past(time.Hour)}})
			}},
		{name: "node gone", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(nodeRef, nil)) },
			setup: func(e *env) { e.objects.remove("Node", "", nodeName) }},
		{name: "node replaced", want: "node UID (node-uid-2) does not match service account node ref claim (node-uid-1)",
			token: func(e *env) string { return e.issue(t, tokenRequest(nodeRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "node-uid-2"}})
			}},
		{name: "node deleted beyond the leeway", want: "service account token has been invalidated",
			token: func(e *env) string { return e.issue(t, tokenRequest(nodeRef, nil)) },
			setup: func(e *env) {
				e.objects.put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: nodeUID, DeletionTimestamp: past(2 * time.Minute)}})
			}},
		{name: "not a JWT", notMine: true, token: func(e *env) string { return "abcdef.0123456789abcdef" }},
		{name: "truncated", notMine: true, token: func(e *env) string {
			tok := e.issue(t, tokenRequest(nil, nil))
			return tok[:strings.LastIndex(tok, ".")]
		}},
		{name: "oversized JWT of our issuer (1 MiB)", want: "go-jose/go-jose: error in cryptographic primitive", token: func(e *env) string {
			enc := base64.RawURLEncoding.EncodeToString
			return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iss":"`+issuer+`","pad":"`+strings.Repeat("x", 1<<20)+`"}`)) + "." + enc(make([]byte, 256))
		}},
		{name: "oversized garbage (1 MiB)", notMine: true, token: func(e *env) string { return strings.Repeat("x", 1<<20) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := tc.token(e)
			if tc.setup != nil {
				tc.setup(e)
			}
			resp, err := e.authenticate(tok, tc.audiences...)
			if resp != nil {
				t.Fatalf("accepted as %+v", resp.User)
			}
			if tc.notMine {
				if !errors.Is(err, authenticator.ErrNotMine) {
					t.Fatalf("err = %v, want ErrNotMine", err)
				}
				return
			}
			if err == nil || errors.Is(err, authenticator.ErrNotMine) || authenticator.IsUnavailable(err) || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Objects being deleted back their tokens for the leeway (a minute), as upstream; a pod-bound
// token's node is information only (its absence does not matter).
func TestBoundTokenGraceAndPodNode(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.issue(t, tokenRequest(podRef, podsNode))
	recent := metav1.NewTime(e.clock.Now().Add(-30 * time.Second))
	e.objects.put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName, UID: podUID, DeletionTimestamp: &recent}})
	e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID, DeletionTimestamp: &recent}})
	e.objects.remove("Node", "", nodeName)
	resp, err := e.authenticate(tok)
	if err != nil {
		t.Fatalf("refused within the grace period: %v", err)
	}
	if resp.User.Extra[naming.UserExtraKey("node-name")][0] != nodeName {
		t.Fatalf("extra = %v", resp.User.Extra)
	}
	// Thirty more seconds and the deletions are older than the leeway.
	e.clock.set(e.clock.Now().Add(31 * time.Second))
	if _, err := e.authenticate(tok); err == nil || err.Error() != "service account team-a/builder has been deleted" {
		t.Fatalf("past the grace period: %v", err)
	}

	// Past exp, but within the leeway.
	e = newEnv(t, nil)
	tok = e.issue(t, tokenRequest(nil, nil))
	start := e.clock.Now()
	e.clock.set(start.Add(time.Hour + 30*time.Second))
	if _, err := e.authenticate(tok); err != nil {
		t.Fatalf("within the exp leeway: %v", err)
	}
	e.clock.set(start.Add(time.Hour + 62*time.Second))
	if _, err := e.authenticate(tok); err == nil || err.Error() != "service account token has expired" {
		t.Fatalf("past the exp leeway: %v", err)
	}
}

// A store that cannot answer makes the method undecided (503), never a refusal (401).
func TestUnavailableObjects(t *testing.T) {
	e := newEnv(t, nil)
	bound := e.issue(t, tokenRequest(podRef, nil))
	legacy := e.legacyToken(t)
	for _, fail := range []error{
		&authenticator.UnavailableError{Err: errors.New("storage: connection refused")},
		errors.New("decoding serviceaccounts: bad bytes"),
	} {
		e.objects.setFail(fail)
		for name, tok := range map[string]string{"bound": bound, "legacy": legacy} {
			_, err := e.authenticate(tok)
			if !authenticator.IsUnavailable(err) {
				t.Errorf("%s token, store failing with %v: err = %v, want an UnavailableError", name, fail, err)
			}
		}
	}
}

// legacyToken is a token as the token controller makes it: signed with the signing key, stored in
// a Secret of the service account token type that names the account.
func (e *env) legacyToken(t testing.TB) string {
	t.Helper()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder-token-abcde", UID: "legacy-secret-uid",
			Annotations: map[string]string{naming.ServiceAccountNameAnnotation: saName, naming.ServiceAccountUIDAnnotation: saUID}},
		Type: corev1.SecretType(naming.SecretTypeServiceAccountToken),
	}
	tok, err := e.legacy.IssueLegacy(account, secret)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(tok), "namespace": []byte(ns)}
	e.objects.put(secret)
	return tok
}

func TestLegacyToken(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.legacyToken(t)
	resp, err := e.authenticate(tok)
	if err != nil {
		t.Fatal(err)
	}
	u := resp.User
	if u.Name != "system:serviceaccount:team-a:builder" || u.UID != saUID || len(u.Extra) != 0 ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:team-a"}) {
		t.Fatalf("user = %+v", u)
	}
	if !slices.Equal(resp.Audiences, []string{issuer}) {
		t.Fatalf("audiences = %v", resp.Audiences)
	}
	// Legacy tokens never expire.
	e.clock.set(e.clock.Now().Add(10 * 365 * 24 * time.Hour))
	if _, err := e.authenticate(tok); err != nil {
		t.Fatalf("a legacy token expired: %v", err)
	}
}

// Each refusal of a legacy token (upstream's legacy validator, plus the Secret's type).
func TestLegacyTokenRefusals(t *testing.T) {
	const secret = "builder-token-abcde"
	edit := func(e *env, f func(*corev1.Secret)) {
		s, err := e.objects.Secret(context.Background(), ns, secret)
		if err != nil {
			panic(err)
		}
		f(s)
		e.objects.put(s)
	}
	now := metav1.Now()
	cases := []struct {
		name      string
		setup     func(e *env)
		audiences []string
		want      string
	}{
		{"secret gone", func(e *env) { e.objects.remove("Secret", ns, secret) }, nil, "Token has been invalidated"},
		{"secret being deleted", func(e *env) { edit(e, func(s *corev1.Secret) { s.DeletionTimestamp = &now }) }, nil, "Token has been invalidated"},
		{"secret of another type", func(e *env) { edit(e, func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }) }, nil, "Token has been invalidated"},
		{"secret holds another token", func(e *env) {
			edit(e, func(s *corev1.Secret) { s.Data[corev1.ServiceAccountTokenKey] = []byte("another") })
		}, nil, "Token does not match server's copy"},
		{"secret holds no token", func(e *env) { edit(e, func(s *corev1.Secret) { s.Data = nil }) }, nil, "Token does not match server's copy"},
		{"secret marked invalid", func(e *env) {
			edit(e, func(s *corev1.Secret) {
				s.Labels = map[string]string{naming.LegacyTokenInvalidSinceLabel: "2024-01-01"}
			})
		}, nil, "the token in secret team-a/builder-token-abcde for service account team-a/builder has been marked invalid. " +
			"Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '" +
			naming.LegacyTokenInvalidSinceLabel + "' label from the secret to temporarily allow use of this token"},
		{"account gone", func(e *env) { e.objects.remove("ServiceAccount", ns, saName) }, nil, `serviceaccounts "builder" not found`},
		{"account replaced", func(e *env) {
			e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: "sa-uid-2"}})
		}, nil, "ServiceAccount UID (sa-uid-2) does not match claim (sa-uid-1)"},
		{"account being deleted", func(e *env) {
			e.objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID, DeletionTimestamp: &now}})
		}, nil, "ServiceAccount team-a/builder has been deleted"},
		{"an audience other than the API's", func(e *env) {}, []string{"vault"},
			`token audiences ["https://issuer.example"] is invalid for the target audiences ["vault"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tok := e.legacyToken(t)
			tc.setup(e)
			resp, err := e.authenticate(tok, tc.audiences...)
			if resp != nil || err == nil || err.Error() != tc.want {
				t.Fatalf("Authenticate = %v, %v; want %q", resp, err, tc.want)
			}
		})
	}
}

// Forged legacy tokens: the claims must be complete and agree with the subject.
func TestLegacyTokenClaims(t *testing.T) {
	e := newEnv(t, nil)
	signed := func(claims map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: signingKey}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	p := naming.LegacyServiceAccountClaimPrefix
	full := func() map[string]any {
		return map[string]any{"iss": naming.LegacyServiceAccountIssuer, "sub": "system:serviceaccount:team-a:builder",
			p + "namespace": ns, p + "secret.name": "s", p + "service-account.name": saName, p + "service-account.uid": saUID}
	}
	cases := map[string]struct {
		mutate func(map[string]any)
		want   string
	}{
		"no sub":                    {func(m map[string]any) { delete(m, "sub") }, "sub claim is missing"},
		"no namespace":              {func(m map[string]any) { delete(m, p+"namespace") }, "namespace claim is missing"},
		"no secret name":            {func(m map[string]any) { delete(m, p+"secret.name") }, "secretName claim is missing"},
		"no account name":           {func(m map[string]any) { delete(m, p+"service-account.name") }, "serviceAccountName claim is missing"},
		"no account uid":            {func(m map[string]any) { delete(m, p+"service-account.uid") }, "serviceAccountUID claim is missing"},
		"sub of another account":    {func(m map[string]any) { m["sub"] = "system:serviceaccount:team-a:admin" }, "sub claim is invalid"},
		"sub of another namespace":  {func(m map[string]any) { m["sub"] = "system:serviceaccount:other:builder" }, "sub claim is invalid"},
		"sub not a service account": {func(m map[string]any) { m["sub"] = "admin" }, "sub claim is invalid"},
		"claims of a bound token only": {func(m map[string]any) {
			for k := range m {
				if strings.HasPrefix(k, p) {
					delete(m, k)
				}
			}
		}, "namespace claim is missing"},
	}
	for name, tc := range cases {
		c := full()
		tc.mutate(c)
		if _, err := e.authenticate(signed(c)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

// Without --service-account-lookup a legacy token stands on its signature alone (bound tokens are
// still looked up).
func TestLegacyTokenWithoutLookup(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Lookup = false })
	tok := e.legacyToken(t)
	bound := e.issue(t, tokenRequest(nil, nil))
	e.objects.remove("Secret", ns, "builder-token-abcde")
	e.objects.remove("ServiceAccount", ns, saName)
	if _, err := e.authenticate(tok); err != nil {
		t.Fatalf("legacy token without lookup: %v", err)
	}
	if _, err := e.authenticate(bound); err == nil {
		t.Fatal("a bound token of a deleted account was accepted without lookup")
	}
}

// The TokenRequest side: upstream's defaults (API audiences, one hour), the cap of
// --service-account-max-token-expiration, the bounds of expirationSeconds and the bindable kinds.
func TestIssueBound(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxTokenExpiration = 2 * time.Hour })
	now := e.clock.Now()
	ctx := context.Background()

	check := func(name string, req *authnv1.IssueServiceAccountTokenRequest, wantLifetime time.Duration, wantAud []string) {
		t.Helper()
		tok, exp, err := e.auth.IssueBound(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if exp.Unix() != now.Add(wantLifetime).Unix() {
			t.Errorf("%s: exp = %v, want now + %v", name, exp, wantLifetime)
		}
		v, _ := sa.NewVerifier([]crypto.PublicKey{&signingKey.PublicKey})
		c, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Issuer != issuer || !slices.Equal(c.Audience, wantAud) || c.Expiry.Unix() != exp.Unix() {
			t.Errorf("%s: claims iss %s aud %v exp %v", name, c.Issuer, c.Audience, c.Expiry)
		}
	}
	check("defaults", &authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName, Uid: saUID}, time.Hour, []string{issuer})
	check("capped", &authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName, Uid: saUID, ExpirationSeconds: 86400, Audiences: []string{"x"}}, 2*time.Hour, []string{"x"})
	check("minimum", &authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName, Uid: saUID, ExpirationSeconds: 600}, 10*time.Minute, []string{issuer})

	refusals := map[string]struct {
		req  *authnv1.IssueServiceAccountTokenRequest
		want string
	}{
		"below ten minutes": {&authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName, Uid: saUID, ExpirationSeconds: 599},
			"spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes"},
		"beyond 2^32 seconds": {&authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName, Uid: saUID, ExpirationSeconds: 1<<32 + 1},
			"spec.expirationSeconds: Invalid value: may not specify a duration larger than 2^32 seconds"},
		"a ConfigMap": {tokenRequest(&authnv1.ObjectReference{Kind: "ConfigMap", ApiVersion: "v1", Name: "c", Uid: "1"}, nil),
			"cannot bind token to object of type /v1, Kind=ConfigMap"},
		"a Pod of another group": {tokenRequest(&authnv1.ObjectReference{Kind: "Pod", ApiVersion: "example.com/v1", Name: "p", Uid: "1"}, nil),
			"cannot bind token to object of type example.com/v1, Kind=Pod"},
		"a node with a secret": {tokenRequest(secretRef, podsNode), "a node can only be named with a token bound to a Pod"},
		"a reference without kind": {tokenRequest(&authnv1.ObjectReference{Name: "p", Uid: "1"}, nil),
			"cannot bind token to object of type /, Kind="},
		"no account uid": {&authnv1.IssueServiceAccountTokenRequest{Namespace: ns, Name: saName}, "the service account's namespace, name and uid are required"},
	}
	for name, tc := range refusals {
		if _, _, err := e.auth.IssueBound(ctx, tc.req); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}

	verifyOnly := newEnv(t, func(c *Config) { c.SigningKeyFile = "" })
	if _, _, err := verifyOnly.auth.IssueBound(ctx, tokenRequest(nil, nil)); err == nil || !strings.Contains(err.Error(), "--service-account-signing-key-file") {
		t.Fatalf("issuing without a signing key: %v", err)
	}
}

// Upstream's flag rules, each error naming the flag.
func TestConfigValidation(t *testing.T) {
	generateKeys()
	dir := t.TempDir()
	keyFile := writePEM(t, dir, "sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(signingKey))
	pubOnly := func() string {
		der, _ := x509.MarshalPKIXPublicKey(&signingKey.PublicKey)
		return writePEM(t, dir, "sa.pub", "PUBLIC KEY", der)
	}()
	objects := newMemObjects()
	ok := Config{Issuers: []string{issuer}, SigningKeyFile: keyFile, Objects: objects}
	cases := map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no issuer":              {func(c *Config) { c.Issuers = nil }, "--service-account-issuer is required"},
		"empty issuer":           {func(c *Config) { c.Issuers = []string{""} }, "--service-account-issuer should not be an empty string"},
		"duplicate issuer":       {func(c *Config) { c.Issuers = []string{issuer, issuer} }, `--service-account-issuer "https://issuer.example" is already specified`},
		"issuer not a URL":       {func(c *Config) { c.Issuers = []string{"https://a b:x"} }, "contained a ':' but was not a valid URL"},
		"no keys":                {func(c *Config) { c.SigningKeyFile = "" }, "--service-account-key-file or --service-account-signing-key-file is required"},
		"max below an hour":      {func(c *Config) { c.MaxTokenExpiration = 30 * time.Minute }, "--service-account-max-token-expiration must be between 1 hour and 2^32 seconds"},
		"max beyond 2^32s":       {func(c *Config) { c.MaxTokenExpiration = (1<<32 + 1) * time.Second }, "--service-account-max-token-expiration must be between 1 hour and 2^32 seconds"},
		"no objects":             {func(c *Config) { c.Objects = nil }, "object reader"},
		"unreadable signing key": {func(c *Config) { c.SigningKeyFile = filepath.Join(dir, "missing") }, "--service-account-signing-key-file"},
		"public key as signing":  {func(c *Config) { c.SigningKeyFile = pubOnly }, "--service-account-signing-key-file"},
		"unreadable key file":    {func(c *Config) { c.KeyFiles = []string{filepath.Join(dir, "missing")} }, "--service-account-key-file"},
		"empty API audience":     {func(c *Config) { c.APIAudiences = []string{""} }, "--api-audiences"},
	}
	for name, tc := range cases {
		c := ok
		tc.mutate(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, tc.want)
		}
	}

	// Defaults: the signing key verifies, the API audience is the first issuer, an issuer that is
	// not a URL is allowed (upstream allows any string without ':').
	c := ok
	c.Issuers = []string{"platform", issuer}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.APIAudiences(), []string{"platform"}) {
		t.Fatalf("API audiences = %v", a.APIAudiences())
	}
	objects.put(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName, UID: saUID}})
	tok, _, err := a.IssueBound(context.Background(), tokenRequest(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), &authenticator.Request{Token: tok}); err != nil {
		t.Fatalf("the signing key does not verify by default: %v", err)
	}
	if a.Name() != "serviceaccount" {
		t.Fatalf("Name = %q", a.Name())
	}
}

// Many requests at once (run with -race).
func TestConcurrentAuthenticate(t *testing.T) {
	e := newEnv(t, nil)
	tokens := []string{e.issue(t, tokenRequest(podRef, podsNode)), e.legacyToken(t), e.issue(t, tokenRequest(nil, nil))}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if _, err := e.authenticate(tokens[(g+i)%len(tokens)]); err != nil {
					errs <- err
				}
				if i%5 == 0 {
					e.objects.put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", g), UID: types.UID("u")}})
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
