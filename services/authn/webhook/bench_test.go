package webhook_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/webhook"
)

// BenchmarkAuthenticate measures one decision on a bearer token: cold (a new token each time: one
// TokenReview over a kept-alive mutual-TLS connection to a real HTTPS webhook on loopback) and
// warm (a cache hit).
func BenchmarkAuthenticate(b *testing.B) {
	rs := newReviewServer(b)
	a := newAuthenticator(b, webhook.Config{ConfigFile: rs.kubeconfig(b, nil), Version: webhook.VersionV1, CacheTTL: time.Hour, APIAudiences: []string{"api"}})
	ctx := context.Background()
	next := 0 // tokens never repeat across the benchmark's rounds
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			next++
			if _, err := a.Authenticate(ctx, &authenticator.Request{Token: "good-" + strconv.Itoa(next)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		if _, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := a.Authenticate(ctx, &authenticator.Request{Token: "good"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
