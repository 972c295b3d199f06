package serviceaccount

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

const testIssuer = "https://issuer.example"

func signers(t testing.TB) map[string]crypto.Signer {
	testKeys(t)
	return map[string]crypto.Signer{"RS256": rsaKey, "ES256": ecKeys["ES256"], "ES384": ecKeys["ES384"], "ES512": ecKeys["ES512"]}
}

func newIssuer(t testing.TB, key crypto.Signer) *Issuer {
	t.Helper()
	i, err := NewIssuer(testIssuer, key)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func newVerifier(t testing.TB, keys ...crypto.PublicKey) *Verifier {
	t.Helper()
	v, err := NewVerifier(keys)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// decodePart decodes the header (0) or payload (1) of a compact JWS into a map.
func decodePart(t testing.TB, token string, i int) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[i])
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// Upstream's bound token: RS256 or ES256/384/512 by key, kid of the public key, iss, sub, aud,
// iat = nbf, exp = iat + lifetime, a random jti, and the private claim with the account and the
// bound object (a pod's node included).
func TestIssueBoundRoundTrip(t *testing.T) {
	for alg, key := range signers(t) {
		t.Run(alg, func(t *testing.T) {
			iss := newIssuer(t, key)
			iat := time.Unix(1_700_000_000, 0)
			token, exp, err := iss.IssueBound(BoundRequest{
				Namespace: "ns", Name: "builder", UID: "sa-uid",
				Audiences:   []string{"api", "vault"},
				Expiration:  time.Hour,
				BoundObject: &BoundObject{Kind: KindPod, Name: "pod-1", UID: "pod-uid"},
				Node:        &Ref{Name: "node-a", UID: "node-uid"},
				WarnAfter:   10 * time.Minute,
				IssuedAt:    iat,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !exp.Equal(iat.Add(time.Hour)) {
				t.Fatalf("exp = %v, want %v", exp, iat.Add(time.Hour))
			}
			h := decodePart(t, token, 0)
			if h["alg"] != alg || h["kid"] != iss.KeyID() || iss.Algorithm() != alg {
				t.Fatalf("header = %v, want alg %s kid %s", h, alg, iss.KeyID())
			}
			if _, ok := h["typ"]; ok {
				t.Fatalf("header has typ (upstream sets none): %v", h)
			}
			p := decodePart(t, token, 1)
			priv, ok := p[naming.ServiceAccountClaimsKey].(map[string]any)
			if !ok {
				t.Fatalf("payload lacks the %s claim: %v", naming.ServiceAccountClaimsKey, p)
			}
			wantPriv := map[string]any{
				"namespace":      "ns",
				"serviceaccount": map[string]any{"name": "builder", "uid": "sa-uid"},
				"pod":            map[string]any{"name": "pod-1", "uid": "pod-uid"},
				"node":           map[string]any{"name": "node-a", "uid": "node-uid"},
				"warnafter":      float64(iat.Add(10 * time.Minute).Unix()),
			}
			if b1, b2 := mustJSON(t, priv), mustJSON(t, wantPriv); b1 != b2 {
				t.Fatalf("private claim = %s, want %s", b1, b2)
			}

			c, err := newVerifier(t, key.Public()).Verify(token)
			if err != nil {
				t.Fatal(err)
			}
			if c.Issuer != testIssuer || c.Subject != "system:serviceaccount:ns:builder" ||
				!slices.Equal(c.Audience, []string{"api", "vault"}) ||
				!c.IssuedAt.Equal(iat) || !c.NotBefore.Equal(iat) || !c.Expiry.Equal(iat.Add(time.Hour)) {
				t.Fatalf("claims = %+v", c)
			}
			if !uuidV4.MatchString(c.ID) {
				t.Fatalf("jti %q is not a random UUID", c.ID)
			}
			b := c.ServiceAccount
			if b == nil || b.Namespace != "ns" || b.ServiceAccount != (Ref{"builder", "sa-uid"}) ||
				b.Pod == nil || *b.Pod != (Ref{"pod-1", "pod-uid"}) || b.Node == nil || *b.Node != (Ref{"node-a", "node-uid"}) ||
				b.Secret != nil || !b.WarnAfter.Equal(iat.Add(10*time.Minute)) {
				t.Fatalf("bound claims = %+v", b)
			}
			if c.Legacy != nil {
				t.Fatalf("a bound token has legacy claims: %+v", c.Legacy)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIssueBoundObjects(t *testing.T) {
	iss := newIssuer(t, signers(t)["ES256"])
	v := newVerifier(t, iss.PublicKey())
	base := BoundRequest{Namespace: "ns", Name: "sa", UID: "u", Audiences: []string{"a"}, Expiration: time.Hour}

	for _, tc := range []struct {
		kind  string
		check func(*BoundClaims) bool
	}{
		{KindSecret, func(b *BoundClaims) bool {
			return b.Secret != nil && *b.Secret == (Ref{"obj", "obj-uid"}) && b.Pod == nil && b.Node == nil
		}},
		{KindNode, func(b *BoundClaims) bool {
			return b.Node != nil && *b.Node == (Ref{"obj", "obj-uid"}) && b.Pod == nil && b.Secret == nil
		}},
	} {
		req := base
		req.BoundObject = &BoundObject{Kind: tc.kind, Name: "obj", UID: "obj-uid"}
		tok, _, err := iss.IssueBound(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		c, err := v.Verify(tok)
		if err != nil || !tc.check(c.ServiceAccount) {
			t.Fatalf("%s: claims %+v, %v", tc.kind, c.ServiceAccount, err)
		}
		if !c.ServiceAccount.WarnAfter.IsZero() {
			t.Fatalf("%s: warnafter set without being asked", tc.kind)
		}
	}

	// Unbound, no audiences: neither claim appears.
	req := base
	req.Audiences = nil
	tok, _, err := iss.IssueBound(req)
	if err != nil {
		t.Fatal(err)
	}
	p := decodePart(t, tok, 1)
	if _, ok := p["aud"]; ok {
		t.Fatalf("aud present: %v", p)
	}
	priv := p[naming.ServiceAccountClaimsKey].(map[string]any)
	for _, k := range []string{"pod", "secret", "node", "warnafter"} {
		if _, ok := priv[k]; ok {
			t.Fatalf("%s present in an unbound token: %v", k, priv)
		}
	}

	// Two tokens never share a jti.
	t1, _, _ := iss.IssueBound(base)
	t2, _, _ := iss.IssueBound(base)
	if decodePart(t, t1, 1)["jti"] == decodePart(t, t2, 1)["jti"] {
		t.Fatal("two tokens share a jti")
	}
}

func TestIssueBoundRefusesBadRequests(t *testing.T) {
	iss := newIssuer(t, signers(t)["ES256"])
	ok := BoundRequest{Namespace: "ns", Name: "sa", UID: "u", Expiration: time.Hour}
	cases := map[string]func(*BoundRequest){
		"no uid":       func(r *BoundRequest) { r.UID = "" },
		"no namespace": func(r *BoundRequest) { r.Namespace = "" },
		"no lifetime":  func(r *BoundRequest) { r.Expiration = 0 },
		"node with a secret": func(r *BoundRequest) {
			r.BoundObject = &BoundObject{Kind: KindSecret, Name: "s", UID: "1"}
			r.Node = &Ref{Name: "n"}
		},
		"node without an object": func(r *BoundRequest) { r.Node = &Ref{Name: "n"} },
		"unknown kind":           func(r *BoundRequest) { r.BoundObject = &BoundObject{Kind: "ConfigMap", Name: "c", UID: "1"} },
		"bound object, no uid":   func(r *BoundRequest) { r.BoundObject = &BoundObject{Kind: KindPod, Name: "p"} },
	}
	for name, mutate := range cases {
		req := ok
		mutate(&req)
		if _, _, err := iss.IssueBound(req); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
	if _, err := NewIssuer("", rsaKey); err == nil {
		t.Error("an issuer without a URL was created")
	}
}

// Upstream's legacy (Secret-based) token: iss kubernetes/serviceaccount (ours from naming), sub,
// the four legacy claims, nothing else: no aud, no exp, no iat, no jti.
func TestIssueLegacy(t *testing.T) {
	iss := newIssuer(t, signers(t)["RS256"])
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder-token-x"}}
	tok, err := iss.IssueLegacy(sa, secret)
	if err != nil {
		t.Fatal(err)
	}
	p := decodePart(t, tok, 1)
	want := map[string]any{
		"iss": naming.LegacyServiceAccountIssuer,
		"sub": "system:serviceaccount:ns:builder",
		naming.LegacyServiceAccountClaimPrefix + "namespace":            "ns",
		naming.LegacyServiceAccountClaimPrefix + "secret.name":          "builder-token-x",
		naming.LegacyServiceAccountClaimPrefix + "service-account.name": "builder",
		naming.LegacyServiceAccountClaimPrefix + "service-account.uid":  "sa-uid",
	}
	if mustJSON(t, p) != mustJSON(t, want) {
		t.Fatalf("payload = %v, want %v", p, want)
	}
	c, err := newVerifier(t, &rsaKey.PublicKey).Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != naming.LegacyServiceAccountIssuer || c.Legacy == nil || *c.Legacy != (LegacyClaims{"ns", "builder-token-x", "builder", "sa-uid"}) || c.ServiceAccount != nil {
		t.Fatalf("claims = %+v legacy %+v", c, c.Legacy)
	}
	if err := c.ValidateTime(time.Now().Add(100 * 365 * 24 * time.Hour)); err != nil {
		t.Fatalf("a legacy token expired: %v", err)
	}

	other := secret.DeepCopy()
	other.Namespace = "elsewhere"
	if _, err := iss.IssueLegacy(sa, other); err == nil {
		t.Error("a token was issued for a secret of another namespace")
	}
	noUID := sa.DeepCopy()
	noUID.UID = ""
	if _, err := iss.IssueLegacy(noUID, secret); err == nil {
		t.Error("a token was issued for an account without uid")
	}
	if _, err := iss.IssueLegacy(nil, secret); err == nil {
		t.Error("a token was issued without an account")
	}
}

// ValidateTime is go-jose's check with upstream's one-minute leeway.
func TestValidateTime(t *testing.T) {
	iss := newIssuer(t, signers(t)["ES256"])
	v := newVerifier(t, iss.PublicKey())
	iat := time.Unix(1_800_000_000, 0)
	tok, _, err := iss.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: 10 * time.Minute, IssuedAt: iat})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		now  time.Time
		want error
	}{
		{"at issue", iat, nil},
		{"just before exp", iat.Add(10 * time.Minute), nil},
		{"exp passed, within the leeway", iat.Add(10*time.Minute + 59*time.Second), nil},
		{"exp passed beyond the leeway", iat.Add(10*time.Minute + 61*time.Second), ErrExpired},
		{"nbf ahead, within the leeway", iat.Add(-59 * time.Second), nil},
		{"nbf ahead beyond the leeway", iat.Add(-61 * time.Second), ErrNotValidYet},
	}
	for _, tc := range cases {
		if err := c.ValidateTime(tc.now); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// iat in the future with nbf absent: "issued in the future".
	tok = signRaw(t, jose.ES256, ecKeys["ES256"], map[string]any{"iss": testIssuer, "iat": iat.Unix()})
	if c, err = v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if err := c.ValidateTime(iat.Add(-2 * time.Minute)); !errors.Is(err, ErrIssuedInTheFuture) {
		t.Errorf("iat ahead: err = %v", err)
	}
}

// signRaw signs any payload with any go-jose algorithm (including ones the verifier must refuse).
func signRaw(t testing.TB, alg jose.SignatureAlgorithm, key any, payload map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(payload).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// Every refusal the brief lists for the signature check, and every string that is no JWT at all:
// an error or ErrNotJWT, never a panic, never claims.
func TestVerifyRefusals(t *testing.T) {
	testKeys(t)
	iss := newIssuer(t, rsaKey)
	v := newVerifier(t, &rsaKey.PublicKey, &ecKeys["ES256"].PublicKey)
	good, _, err := iss.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(good); err != nil {
		t.Fatalf("the good token: %v", err)
	}
	parts := strings.Split(good, ".")
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	claims := map[string]any{"iss": testIssuer, "sub": "system:serviceaccount:n:s"}
	otherIssuer := newIssuer(t, rsaKey2)
	foreign, _, _ := otherIssuer.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: time.Hour})
	fParts := strings.Split(foreign, ".")

	refused := map[string]string{
		"payload replaced (bad signature)":  parts[0] + "." + b64(`{"iss":"`+testIssuer+`","sub":"system:serviceaccount:n:admin"}`) + "." + parts[2],
		"signature truncated":               parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4],
		"signature empty":                   parts[0] + "." + parts[1] + ".",
		"signed by an unknown key, its kid": foreign,
		"signed by an unknown key, our kid": parts[0] + "." + fParts[1] + "." + fParts[2],
		"signed by an unknown key, no kid":  signRaw(t, jose.RS256, rsaKey2, claims),
		"alg none":                          b64(`{"alg":"none"}`) + "." + parts[1] + ".",
		"alg none, signature kept":          b64(`{"alg":"none","kid":"`+iss.KeyID()+`"}`) + "." + parts[1] + "." + parts[2],
		"HS256 keyed with our public key":   signRaw(t, jose.HS256, pubDER, claims),
		"HS256 keyed with the PEM":          signRaw(t, jose.HS256, pemBlock("PUBLIC KEY", pubDER), claims),
		"no alg":                            b64(`{"kid":"x"}`) + "." + parts[1] + "." + parts[2],
		"huge alg":                          b64(`{"alg":"`+strings.Repeat("A", 100000)+`"}`) + "." + parts[1] + "." + parts[2],
		"header not JSON":                   b64(`{"alg":`) + "." + parts[1] + "." + parts[2],
		"signature not base64url":           parts[0] + "." + parts[1] + ".!!!",
		"aud of the wrong type":             signRaw(t, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, "aud": 42}),
		"exp of the wrong type":             signRaw(t, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, "exp": "tomorrow"}),
		"exp beyond any date":               signRaw(t, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, "exp": 1e300}),
		"private claim of the wrong type":   signRaw(t, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, naming.ServiceAccountClaimsKey: "x"}),
		"legacy claim of the wrong type":    signRaw(t, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, naming.LegacyServiceAccountClaimPrefix + "namespace": 1}),
	}
	// Every asymmetric algorithm upstream accepts verifies with the same key.
	for _, alg := range []jose.SignatureAlgorithm{jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512} {
		if c, err := v.Verify(signRaw(t, alg, rsaKey, claims)); err != nil || c.Issuer != testIssuer {
			t.Errorf("%s: %v, %v", alg, c, err)
		}
	}
	for name, tok := range refused {
		t.Run(name, func(t *testing.T) {
			c, err := v.Verify(tok)
			if err == nil || c != nil {
				t.Fatalf("accepted: %+v", c)
			}
			if errors.Is(err, ErrNotJWT) {
				t.Fatalf("a JWS was called not a JWT: %v", err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("message of %d bytes", len(err.Error()))
			}
		})
	}

	notJWT := map[string]string{
		"empty":                   "",
		"opaque token":            "abcdef.0123456789abcdef",
		"two parts":               parts[0] + "." + parts[1],
		"four parts":              good + ".x",
		"JSON serialization":      `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`,
		"payload not an object":   parts[0] + "." + b64(`"just a string"`) + "." + parts[2],
		"payload not base64url":   parts[0] + ".***." + parts[2],
		"header not base64url":    "***." + parts[1] + "." + parts[2],
		"oversized garbage 1 MiB": strings.Repeat("a", 1<<20),
		"oversized dots 1 MiB":    strings.Repeat(".", 1<<20),
	}
	for name, tok := range notJWT {
		t.Run(name, func(t *testing.T) {
			if c, err := v.Verify(tok); !errors.Is(err, ErrNotJWT) || c != nil {
				t.Fatalf("Verify = %+v, %v; want ErrNotJWT", c, err)
			}
			if _, ok := UnverifiedIssuer(tok); ok {
				t.Fatalf("UnverifiedIssuer accepted it")
			}
		})
	}

	// A 1 MiB token that is a well-formed JWS: refused, quickly.
	big := parts[0] + "." + b64(`{"iss":"`+testIssuer+`","pad":"`+strings.Repeat("x", 1<<20)+`"}`) + "." + parts[2]
	start := time.Now()
	if _, err := v.Verify(big); err == nil || errors.Is(err, ErrNotJWT) {
		t.Fatalf("oversized JWS: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("oversized JWS took %v", d)
	}

	// Every prefix of a good token: never accepted, never a panic.
	for i := 0; i < len(good); i++ {
		if c, err := v.Verify(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes accepted: %+v", i, c)
		}
	}
}

// A token with a kid is checked against that key only; without one, against every key (so tokens
// of an issuer that sets none still verify), as upstream.
func TestVerifyKeySelection(t *testing.T) {
	testKeys(t)
	v := newVerifier(t, &ecKeys["ES256"].PublicKey, rsaKey2, &rsaKey.PublicKey) // a private key counts as its public half
	claims := map[string]any{"iss": testIssuer}
	if _, err := v.Verify(signRaw(t, jose.RS256, rsaKey, claims)); err != nil {
		t.Fatalf("no kid, third key: %v", err)
	}
	if _, err := v.Verify(signRaw(t, jose.RS256, rsaKey2, claims)); err != nil {
		t.Fatalf("no kid, private key given: %v", err)
	}
	_, err := v.Verify(signRaw(t, jose.RS256, &jose.JSONWebKey{Key: rsaKey, KeyID: "other-kid"}, claims))
	if err == nil || err.Error() != "invalid signature, no keys found" {
		t.Fatalf("unknown kid: %v", err)
	}
	kid2, _ := KeyID(&rsaKey2.PublicKey)
	if _, err := v.Verify(signRaw(t, jose.RS256, &jose.JSONWebKey{Key: rsaKey, KeyID: kid2}, claims)); err == nil {
		t.Fatal("a kid naming another key verified")
	}
	if _, err := NewVerifier(nil); err == nil {
		t.Fatal("a verifier without keys")
	}
}

func TestUnverifiedIssuer(t *testing.T) {
	iss := newIssuer(t, signers(t)["ES384"])
	tok, _, _ := iss.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: time.Hour})
	if got, ok := UnverifiedIssuer(tok); !ok || got != testIssuer {
		t.Fatalf("UnverifiedIssuer = %q, %v", got, ok)
	}
	if got, ok := UnverifiedIssuer(b64(`{}`) + "." + b64(`{"sub":"x"}`) + "."); !ok || got != "" {
		t.Fatalf("no iss: %q %v", got, ok)
	}
	if _, ok := UnverifiedIssuer(b64(`{}`) + "." + b64(`{"iss":5}`) + "."); ok {
		t.Fatal("a numeric iss was read")
	}
}

func TestSplitUserName(t *testing.T) {
	cases := []struct {
		in       string
		ns, name string
		ok       bool
	}{
		{"system:serviceaccount:ns:name", "ns", "name", true},
		{"system:serviceaccount:ns:name.with.dots", "ns", "name.with.dots", true},
		{"system:serviceaccount:ns", "", "", false},
		{"system:serviceaccount:ns:a:b", "", "", false},
		{"system:serviceaccount::name", "", "", false},
		{"system:serviceaccount:ns:", "", "", false},
		{"system:serviceaccount:Bad:name", "", "", false},
		{"system:serviceaccount:ns.dotted:name", "", "", false},
		{"system:serviceaccounts:ns:name", "", "", false},
		{"alice", "", "", false},
	}
	for _, tc := range cases {
		ns, name, ok := SplitUserName(tc.in)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("SplitUserName(%q) = %q, %q, %v", tc.in, ns, name, ok)
		}
	}
	if UserName("a", "b") != "system:serviceaccount:a:b" || !slices.Equal(Groups("a"), []string{"system:serviceaccounts", "system:serviceaccounts:a"}) {
		t.Fatal("user name or groups differ from upstream's")
	}
}

// Issuing and verifying from many goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	iss := newIssuer(t, signers(t)["ES256"])
	v := newVerifier(t, iss.PublicKey())
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				tok, _, err := iss.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: time.Hour})
				if err == nil {
					_, err = v.Verify(tok)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// The key set of issuer discovery: every verification key with its id, for signatures, with the
// algorithm of its type; a client of the set verifies our tokens with it.
func TestJWKS(t *testing.T) {
	testKeys(t)
	ecKey := ecKeys["ES256"]
	v := newVerifier(t, &rsaKey.PublicKey, &ecKey.PublicKey)
	data, err := v.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if len(set.Keys) != 2 || set.Keys[0].Algorithm != "RS256" || set.Keys[1].Algorithm != "ES256" || set.Keys[0].Use != "sig" {
		t.Fatalf("key set: %s", data)
	}
	iss := newIssuer(t, rsaKey)
	if set.Keys[0].KeyID != iss.KeyID() {
		t.Errorf("kid %q, the issuer signs with %q", set.Keys[0].KeyID, iss.KeyID())
	}
	tok, _, err := iss.IssueBound(BoundRequest{Namespace: "n", Name: "s", UID: "u", Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := parsed.Claims(set.Keys[0].Key, &claims); err != nil || claims["sub"] != "system:serviceaccount:n:s" {
		t.Errorf("verifying with the published key: %v %v", claims, err)
	}
}
