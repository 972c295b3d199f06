package requestheader_test

import (
	"context"
	stdx509 "crypto/x509"
	"net/http"
	"testing"
	"time"

	"platform.io/libs/pki"
	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/requestheader"
)

// BenchmarkAuthenticate measures one decision on a proxied request: cold (the proxy chain is
// verified: a one-entry cache and two alternating proxies) and warm (a cache hit), with a user,
// two groups and two extras.
func BenchmarkAuthenticate(b *testing.B) {
	proxyCA, err := pki.NewCA("front proxy CA", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	var proxies []*stdx509.Certificate
	for _, cn := range []string{"front-proxy-a", "front-proxy-b"} {
		c := clientCert(b, proxyCA, cn)
		leaf, err := stdx509.ParseCertificate(c.Certificate[0])
		if err != nil {
			b.Fatal(err)
		}
		proxies = append(proxies, leaf)
	}
	header := http.Header{
		"X-Remote-User":              {"alice"},
		"X-Remote-Group":             {"dev", "ops"},
		"X-Remote-Extra-Scopes":      {"read"},
		"X-Remote-Extra-Acme.com%2F": {"x"},
	}
	for _, bc := range []struct {
		name      string
		cacheSize int
		proxies   []*stdx509.Certificate
	}{
		{"cold", 1, proxies},
		{"warm", 0, proxies[:1]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rh, err := requestheader.New(requestheader.Config{
				ClientCAFile: writeCA(b, proxyCA), AllowedNames: []string{"front-proxy-a", "front-proxy-b"},
				UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"},
				ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}, CacheSize: bc.cacheSize,
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &authenticator.Request{PeerCertificates: []*stdx509.Certificate{bc.proxies[i%len(bc.proxies)]}, Header: header}
				if _, err := rh.Authenticate(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
