package oidc_test

import (
	"testing"
	"time"

	"platform.io/libs/oidctest"
	"platform.io/services/authn/oidc"
)

// BenchmarkAuthenticate measures one decision on an ID token (the method has no decision cache:
// every call verifies the signature and the claims; the keys are in memory).
func BenchmarkAuthenticate(b *testing.B) {
	for _, alg := range []string{oidctest.RS256, oidctest.ES256} {
		b.Run(alg, func(b *testing.B) {
			iss := startIssuer(b, oidctest.Options{Algorithm: alg})
			a := newAuthenticator(b, iss, oidc.Config{GroupsClaim: "groups", SigningAlgs: []string{alg}}, true)
			tok := iss.Token(with(iss.Claims(clientID, "alice", time.Hour), map[string]any{"groups": []string{"dev", "ops"}}))
			fetches := iss.JWKSFetches()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := authn(a, tok); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if iss.JWKSFetches() != fetches {
				b.Fatal("the provider was contacted during the benchmark")
			}
		})
	}
	b.Run("not-mine", func(b *testing.B) {
		iss := startIssuer(b, oidctest.Options{})
		other := startIssuer(b, oidctest.Options{})
		a := newAuthenticator(b, iss, oidc.Config{}, true)
		tok := other.Token(other.Claims(clientID, "alice", time.Hour))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, _ = authn(a, tok)
		}
	})
}
