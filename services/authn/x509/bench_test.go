package x509_test

import (
	"context"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"platform.io/services/authn/authenticator"
	certauth "platform.io/services/authn/x509"
)

// BenchmarkAuthenticate measures one decision on a client certificate: cold (the chain is
// verified: the cache holds one entry and two certificates alternate) and warm (a cache hit).
func BenchmarkAuthenticate(b *testing.B) {
	root := newRoot(b, "client CA")
	inter := root.issue(b, certOpts{subject: pkix.Name{CommonName: "intermediate CA"}, isCA: true})
	interCA := authority{cert: inter.cert, key: inter.key}
	for _, bc := range []struct {
		name      string
		cacheSize int
		chains    [][]*stdx509.Certificate
	}{
		{"cold/root-signed", 1, [][]*stdx509.Certificate{
			{root.issue(b, certOpts{subject: pkix.Name{CommonName: "a", Organization: []string{"g"}}}).cert},
			{root.issue(b, certOpts{subject: pkix.Name{CommonName: "b", Organization: []string{"g"}}}).cert},
		}},
		{"cold/intermediate-signed", 1, [][]*stdx509.Certificate{
			{interCA.issue(b, certOpts{subject: pkix.Name{CommonName: "a"}}).cert, inter.cert},
			{interCA.issue(b, certOpts{subject: pkix.Name{CommonName: "b"}}).cert, inter.cert},
		}},
		{"warm", 0, [][]*stdx509.Certificate{
			{root.issue(b, certOpts{subject: pkix.Name{CommonName: "a", Organization: []string{"g"}}}).cert},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := certauth.New(certauth.Config{ClientCAFile: writeCA(b, root), CacheSize: bc.cacheSize}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			reqs := make([]*authenticator.Request, len(bc.chains))
			for i, c := range bc.chains {
				reqs[i] = &authenticator.Request{PeerCertificates: c}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := a.Authenticate(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
