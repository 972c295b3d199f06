package serviceaccount

import (
	"errors"
	"strings"
	"testing"
	"time"

	sa "platform.io/libs/serviceaccount"
	"platform.io/services/authn/authenticator"
)

// FuzzAuthenticate feeds arbitrary bearer tokens to the method: never a panic, never an undecided
// answer (the store works), and anything accepted is the one account tokens were issued for.
func FuzzAuthenticate(f *testing.F) {
	e := newEnv(f, nil)
	bound := e.issue(f, tokenRequest(podRef, podsNode))
	legacy := e.legacyToken(f)
	old, _, err := e.old.IssueBound(sa.BoundRequest{Namespace: ns, Name: saName, UID: saUID, Audiences: []string{issuer}, Expiration: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		bound, legacy, old,
		bound[:len(bound)-10],
		strings.Replace(bound, ".", "..", 1),
		"abcdef.0123456789abcdef",
		"eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIn0.",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		resp, err := e.authenticate(token)
		if authenticator.IsUnavailable(err) {
			t.Fatalf("undecided: %v", err)
		}
		if err != nil {
			if resp != nil {
				t.Fatal("a response with an error")
			}
			if !errors.Is(err, authenticator.ErrNotMine) && len(err.Error()) > 1024 {
				t.Fatalf("a message of %d bytes", len(err.Error()))
			}
			return
		}
		if resp.User.Name != "system:serviceaccount:team-a:builder" || resp.User.UID != saUID {
			t.Fatalf("accepted as %+v", resp.User)
		}
	})
}

// BenchmarkAuthenticateServiceAccount is the cost of one cold (uncached) decision: parse, verify
// the signature, check claims and read the objects (from memory here; the service adds its storage
// reads).
func BenchmarkAuthenticateServiceAccount(b *testing.B) {
	e := newEnv(b, nil)
	old, _, err := e.old.IssueBound(sa.BoundRequest{Namespace: ns, Name: saName, UID: saUID, Audiences: []string{issuer}, Expiration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, token string }{
		{"bound-pod-RS256", e.issue(b, tokenRequest(podRef, podsNode))},
		{"bound-ES256", old},
		{"legacy-RS256", e.legacyToken(b)},
		{"not-mine", "abcdef.0123456789abcdef"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.authenticate(bc.token); err != nil && bc.name != "not-mine" {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIssueBound is the cost of signing one TokenRequest token.
func BenchmarkIssueBound(b *testing.B) {
	e := newEnv(b, nil)
	req := tokenRequest(podRef, podsNode)
	b.ReportAllocs()
	for b.Loop() {
		e.issue(b, req)
	}
}
