package serviceaccount

import (
	"crypto"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// FuzzVerify feeds arbitrary strings to the JWT parsing a bearer token goes through: never a
// panic, ErrNotJWT only for what UnverifiedIssuer does not recognize either (so routing never
// sends a non-JWT to verification), and any accepted token has the issuer routing read.
func FuzzVerify(f *testing.F) {
	testKeys(f)
	iss, err := NewIssuer(testIssuer, ecKeys["ES256"])
	if err != nil {
		f.Fatal(err)
	}
	v, err := NewVerifier([]crypto.PublicKey{iss.PublicKey(), &rsaKey.PublicKey})
	if err != nil {
		f.Fatal(err)
	}
	bound, _, err := iss.IssueBound(BoundRequest{
		Namespace: "ns", Name: "sa", UID: "u", Audiences: []string{"a"}, Expiration: time.Hour,
		BoundObject: &BoundObject{Kind: KindPod, Name: "p", UID: "pu"}, Node: &Ref{Name: "n"},
	})
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(bound, ".")
	for _, seed := range []string{
		bound,
		bound[:len(bound)/2],
		parts[0] + "." + parts[1] + ".",
		b64(`{"alg":"none"}`) + "." + parts[1] + ".",
		b64(`{"alg":"HS256"}`) + "." + parts[1] + "." + parts[2],
		b64(`{"alg":"ES256","kid":"x"}`) + "." + b64(`{"iss":5}`) + "." + parts[2],
		signRaw(f, jose.RS256, rsaKey, map[string]any{"iss": testIssuer, "aud": []any{"a", 1}}),
		signRaw(f, jose.RS256, rsaKey, map[string]any{"iss": "x", "exp": 1.5}),
		"abcdef.0123456789abcdef",
		"{}",
		"",
		"..",
		"a.b.c",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		issuer, recognized := UnverifiedIssuer(token)
		c, err := v.Verify(token)
		if errors.Is(err, ErrNotJWT) && recognized {
			t.Fatalf("UnverifiedIssuer recognized=%v but Verify err=%v", recognized, err)
		}
		if err != nil {
			if c != nil {
				t.Fatal("claims with an error")
			}
			return
		}
		if !recognized || c.Issuer != issuer {
			t.Fatalf("verified issuer %q, routed as %q", c.Issuer, issuer)
		}
	})
}
