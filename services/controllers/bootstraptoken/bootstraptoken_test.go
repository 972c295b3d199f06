package bootstraptoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

// Upstream's published vectors for jws.ComputeDetachedSignature (cluster-bootstrap), which keys
// the HMAC with the token secret: with that key the signatures are byte for byte upstream's, so
// the header, its key order and the encoding are the same.
func TestDetachedFormatMatchesUpstream(t *testing.T) {
	const content = "Hello from the other side. I must have called a thousand times."
	cases := []struct{ name, content, id, secret, want string }{
		{"upstream vector", content, "joshua", "my voice is my passcode", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8"},
		{"upstream vector: empty content", "", "joshua", "my voice is my passcode", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk"},
		{"upstream vector: empty secret", content, "joshua", "", "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8"},
	}
	for _, tc := range cases {
		if got := detachedHS256(tc.content, tc.id, []byte(tc.secret)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
	// The spec's key is the full token: same header, another MAC.
	if got, upstream := DetachedSignature(content, "joshua", "my voice is my passcode"), cases[0].want; got == upstream || got[:41] != upstream[:41] {
		t.Errorf("full-token signature %s vs secret-keyed %s", got, upstream)
	}
}

// Spec rule: a verifier puts base64url(payload) without padding between the dots and checks
// HS256 with the full token as the key; the header names HS256 and the token id.
func TestDetachedSignatureVerifies(t *testing.T) {
	content, id, secret := "apiVersion: v1\nkind: Config\n", "abcdef", "0123456789abcdef"
	sig := DetachedSignature(content, id, secret)
	header, mac, ok := strings.Cut(sig, "..")
	if !ok {
		t.Fatalf("not a detached JWS: %s", sig)
	}
	enc := base64.RawURLEncoding
	raw, err := enc.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]string
	if err := json.Unmarshal(raw, &h); err != nil || h["alg"] != "HS256" || h["kid"] != id || len(h) != 2 {
		t.Fatalf("header = %s (%v)", raw, err)
	}
	m := hmac.New(sha256.New, []byte(id+"."+secret))
	m.Write([]byte(header + "." + enc.EncodeToString([]byte(content))))
	if want := enc.EncodeToString(m.Sum(nil)); mac != want {
		t.Fatalf("signature %s does not verify (want %s)", mac, want)
	}
	if DetachedSignature(content+" ", id, secret) == sig || DetachedSignature(content, id, secret+"x") == sig {
		t.Fatal("the signature does not depend on the content and the token")
	}
}

func token(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: naming.SystemNamespace}, Type: corev1.SecretType(naming.SecretTypeBootstrapToken), Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestExpirationAndSigningTokens(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	signing := map[string]string{IDKey: "abcdef", SecretKey: "0123456789abcdef", UsageSigningKey: "true"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range signing {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name        string
		secret      *corev1.Secret
		ttl         time.Duration
		expired, ok bool
	}{
		{"spec: no expiration never expires", token("bootstrap-token-abcdef", signing), 0, false, true},
		{"spec: RFC 3339 expiration in the future", token("bootstrap-token-abcdef", with(map[string]string{ExpirationKey: "2025-06-01T13:00:00Z"})), time.Hour, false, true},
		{"spec: expiration passed", token("bootstrap-token-abcdef", with(map[string]string{ExpirationKey: "2025-06-01T11:59:59Z"})), 0, true, false},
		{"upstream: an unparseable expiration counts as expired", token("bootstrap-token-abcdef", with(map[string]string{ExpirationKey: "tomorrow"})), 0, true, false},
		{"spec: usage-bootstrap-signing must be \"true\"", token("bootstrap-token-abcdef", with(map[string]string{UsageSigningKey: "yes"})), 0, false, false},
		{"upstream: the name's id must be the token-id", token("bootstrap-token-zzzzzz", signing), 0, false, false},
		{"upstream: the name must be bootstrap-token-<6 chars>", token("bootstrap-token-ABCDEF", with(map[string]string{IDKey: "ABCDEF"})), 0, false, false},
		{"upstream: a token-secret is required", token("bootstrap-token-abcdef", with(map[string]string{SecretKey: ""})), 0, false, false},
		{"spec: only the system namespace's tokens", func() *corev1.Secret {
			s := token("bootstrap-token-abcdef", signing)
			s.Namespace = "default"
			return s
		}(), 0, false, false},
		{"spec: only the bootstrap token type", func() *corev1.Secret {
			s := token("bootstrap-token-abcdef", signing)
			s.Type = corev1.SecretTypeOpaque
			return s
		}(), 0, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ttl, expired := Expiration(tc.secret, now)
			if ttl != tc.ttl || expired != tc.expired {
				t.Errorf("Expiration = %v, %v; want %v, %v", ttl, expired, tc.ttl, tc.expired)
			}
			id, secret, ok := SigningToken(tc.secret, now)
			if ok != tc.ok || (ok && (id != "abcdef" || secret != "0123456789abcdef")) {
				t.Errorf("SigningToken = %q, %q, %v; want ok %v", id, secret, ok, tc.ok)
			}
		})
	}
}
