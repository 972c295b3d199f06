package server_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/services/certificates/server"
)

// Upstream's honored/dropped duration counters: a request whose expirationSeconds the signer
// issued is honored; one capped by --cluster-signing-duration or raised to the minimum lifetime
// is dropped; one that asked for nothing is not counted.
func TestRequestedDurationMetrics(t *testing.T) {
	e := newEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	e.start(t, func(c *server.Config) {
		c.MetricsBindAddress = addr
		c.Signing.Duration = 2 * time.Hour
	})
	for name, exp := range map[string]*int32{
		"hour":   ptr(3600),                                // honored (short: NotAfter not backdated)
		"long":   ptr(int32((90 * time.Minute).Seconds())), // honored
		"capped": ptr(int32((3 * time.Hour).Seconds())),    // dropped: the signer's maximum is 2h
		"tiny":   ptr(60),                                  // dropped: raised to the minimum lifetime
		"none":   nil,                                      // not counted
	} {
		e.create(t, name, csrSpec{signer: naming.SignerAPIServerClient, request: csrPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}),
			usages: clientUsages, exp: exp, conditions: approved})
	}
	want := []string{
		`apiserver_certificates_registry_csr_honored_duration_total{signerName="` + naming.SignerAPIServerClient + `"} 2`,
		`apiserver_certificates_registry_csr_dropped_duration_total{signerName="` + naming.SignerAPIServerClient + `"} 2`,
		`certificates_signer_requests_total{result="signed",signer="` + naming.SignerAPIServerClient + `"} 5`,
	}
	var body string
	waitFor(t, "the duration counters", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	})
}
