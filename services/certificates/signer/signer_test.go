package signer_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/certificates/signer"
)

const (
	clientAuth = certificatesv1.UsageClientAuth
	serverAuth = certificatesv1.UsageServerAuth
	digSig     = certificatesv1.UsageDigitalSignature
	keyEnc     = certificatesv1.UsageKeyEncipherment
)

type usages = []certificatesv1.KeyUsage

// request builds a parsed certificate request as ParseRequest returns it.
func request(t *testing.T, tmpl x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	req, err := signer.ParseRequest(requestPEM(t, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func requestPEM(t testing.TB, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func node(name string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func TestParseRequest(t *testing.T) {
	good := requestPEM(t, x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}})
	if req, err := signer.ParseRequest(good); err != nil || req.Subject.CommonName != "alice" {
		t.Fatalf("ParseRequest(good) = %v, %v", req, err)
	}
	block, _ := pem.Decode(good)
	tampered := append([]byte(nil), block.Bytes...)
	tampered[len(tampered)-1] ^= 0xff
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"not PEM":           {[]byte("hello"), "not PEM encoded"},
		"empty":             {nil, "not PEM encoded"},
		"a certificate":     {ca.CertPEM, `"CERTIFICATE"`},
		"garbage DER":       {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), "not a valid certificate request"},
		"bad signature":     {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "signature does not verify"},
		"huge garbage body": {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: make([]byte, 1<<20)}), "not a valid certificate request"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := signer.ParseRequest(tc.in)
			if err == nil || !signer.IsValidation(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseRequest = %v, want a validation error containing %q", err, tc.want)
			}
		})
	}
}

type restrictionCase struct {
	name   string
	req    x509.CertificateRequest
	usages usages
	// wantErr is a substring of the error; empty means accepted.
	wantErr string
}

func runRestriction(t *testing.T, signerName string, cases []restrictionCase) {
	t.Helper()
	r, ok := signer.RestrictionFor(signerName)
	if !ok {
		t.Fatalf("no restriction for %s", signerName)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := r(request(t, tc.req), tc.usages)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !signer.IsValidation(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want a validation error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestAPIServerClientRestrictions(t *testing.T) {
	anyone := x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice", Organization: []string{"dev", "ops"}},
		DNSNames: []string{"x.example.com"}, EmailAddresses: []string{"a@example.com"}}
	runRestriction(t, naming.SignerAPIServerClient, []restrictionCase{
		{"client auth alone", anyone, usages{clientAuth}, ""},
		{"every allowed usage", anyone, usages{digSig, keyEnc, clientAuth}, ""},
		{"a node subject too", x509.CertificateRequest{Subject: node("n1")}, usages{clientAuth, digSig}, ""},
		{"no usages", anyone, nil, `requires the usage "client auth"`},
		{"no client auth", anyone, usages{digSig, keyEnc}, `requires the usage "client auth"`},
		{"server auth", anyone, usages{clientAuth, serverAuth}, `usage "server auth" is not allowed`},
		{"signing", anyone, usages{clientAuth, certificatesv1.UsageSigning}, `usage "signing" is not allowed`},
		{"cert sign", anyone, usages{clientAuth, certificatesv1.UsageCertSign}, `usage "cert sign" is not allowed`},
		{"unknown usage", anyone, usages{clientAuth, "bogus"}, `usage "bogus" is not allowed`},
	})
}

func TestKubeletClientRestrictions(t *testing.T) {
	ok := x509.CertificateRequest{Subject: node("n1")}
	with := func(f func(*x509.CertificateRequest)) x509.CertificateRequest {
		r := ok
		f(&r)
		return r
	}
	runRestriction(t, naming.SignerAPIServerClientKubelet, []restrictionCase{
		{"all three usages", ok, usages{keyEnc, digSig, clientAuth}, ""},
		{"without key encipherment", ok, usages{digSig, clientAuth}, ""},
		{"a repeated usage counts once", ok, usages{digSig, clientAuth, clientAuth}, ""},
		{"no organization", with(func(r *x509.CertificateRequest) { r.Subject.Organization = nil }), usages{digSig, clientAuth}, "organization must be exactly [system:nodes]"},
		{"another organization", with(func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:masters"} }), usages{digSig, clientAuth}, "organization must be exactly"},
		{"an extra organization", with(func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:nodes", "system:masters"} }), usages{digSig, clientAuth}, "organization must be exactly"},
		{"DNS SAN", with(func(r *x509.CertificateRequest) { r.DNSNames = []string{"n1"} }), usages{digSig, clientAuth}, "DNS subject alternative names are not allowed"},
		{"email SAN", with(func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"n@example.com"} }), usages{digSig, clientAuth}, "email subject alternative names are not allowed"},
		{"IP SAN", with(func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} }), usages{digSig, clientAuth}, "IP subject alternative names are not allowed"},
		{"URI SAN", with(func(r *x509.CertificateRequest) { r.URIs = []*url.URL{mustURL("spiffe://x/y")} }), usages{digSig, clientAuth}, "URI subject alternative names are not allowed"},
		{"not a node name", with(func(r *x509.CertificateRequest) { r.Subject.CommonName = "alice" }), usages{digSig, clientAuth}, "common name must be system:node:<node name>"},
		{"an empty node name", with(func(r *x509.CertificateRequest) { r.Subject.CommonName = "system:node:" }), usages{digSig, clientAuth}, "common name must be"},
		{"no digital signature", ok, usages{keyEnc, clientAuth}, "do not match signer"},
		{"server auth", ok, usages{digSig, clientAuth, serverAuth}, "do not match signer"},
		{"client auth missing", ok, usages{digSig}, "do not match signer"},
		{"no usages", ok, nil, "do not match signer"},
	})
}

func TestKubeletServingRestrictions(t *testing.T) {
	ok := x509.CertificateRequest{Subject: node("n1"), DNSNames: []string{"n1.example.com"}}
	with := func(f func(*x509.CertificateRequest)) x509.CertificateRequest {
		r := ok
		f(&r)
		return r
	}
	runRestriction(t, naming.SignerKubeletServing, []restrictionCase{
		{"all three usages", ok, usages{keyEnc, digSig, serverAuth}, ""},
		{"without key encipherment", ok, usages{digSig, serverAuth}, ""},
		{"IP SAN only", with(func(r *x509.CertificateRequest) { r.DNSNames = nil; r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} }), usages{digSig, serverAuth}, ""},
		{"no SAN", with(func(r *x509.CertificateRequest) { r.DNSNames = nil }), usages{digSig, serverAuth}, "at least one DNS or IP subject alternative name"},
		{"email SAN", with(func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"n@example.com"} }), usages{digSig, serverAuth}, "email subject alternative names are not allowed"},
		{"URI SAN", with(func(r *x509.CertificateRequest) { r.URIs = []*url.URL{mustURL("spiffe://x/y")} }), usages{digSig, serverAuth}, "URI subject alternative names are not allowed"},
		{"no organization", with(func(r *x509.CertificateRequest) { r.Subject.Organization = nil }), usages{digSig, serverAuth}, "organization must be exactly"},
		{"two organizations", with(func(r *x509.CertificateRequest) { r.Subject.Organization = []string{"system:nodes", "x"} }), usages{digSig, serverAuth}, "organization must be exactly"},
		{"not a node name", with(func(r *x509.CertificateRequest) { r.Subject.CommonName = "web" }), usages{digSig, serverAuth}, "common name must be system:node:"},
		{"client auth", ok, usages{digSig, serverAuth, clientAuth}, "do not match signer"},
		{"server auth missing", ok, usages{digSig, keyEnc}, "do not match signer"},
		{"no digital signature", ok, usages{keyEnc, serverAuth}, "do not match signer"},
	})
}

func TestNamesAndUnknownSigners(t *testing.T) {
	want := []string{naming.SignerAPIServerClient, naming.SignerAPIServerClientKubelet, naming.SignerKubeletServing}
	got := signer.Names()
	if len(got) != 3 {
		t.Fatalf("Names() = %v", got)
	}
	for _, n := range want {
		if _, ok := signer.RestrictionFor(n); !ok {
			t.Errorf("no restriction for %s", n)
		}
	}
	for _, n := range []string{naming.SignerLegacyUnknown, "example.com/mine", "kubernetes.io/kube-apiserver-client"} {
		if _, ok := signer.RestrictionFor(n); ok {
			t.Errorf("%s is a built-in signer", n)
		}
		if _, err := signer.New(n, signer.Static{}, time.Hour); err == nil {
			t.Errorf("New(%s) succeeded", n)
		}
	}
}

func ptr(i int32) *int32 { return &i }

func TestLifetime(t *testing.T) {
	max := 24 * time.Hour
	for _, tc := range []struct {
		exp  *int32
		want time.Duration
	}{
		{nil, max},
		{ptr(3600), time.Hour},
		{ptr(int32(48 * 3600)), max},
		{ptr(600), 10 * time.Minute},
		{ptr(60), signer.MinLifetime},
	} {
		if got := signer.Lifetime(max, tc.exp); got != tc.want {
			t.Errorf("Lifetime(%v, %v) = %v, want %v", max, tc.exp, got, tc.want)
		}
	}
}

func TestValidity(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	far := now.Add(10 * 365 * 24 * time.Hour)
	// Short lifetimes end exactly after it; long ones are backdated at both ends.
	nb, na, err := signer.Validity(now, time.Hour, far)
	if err != nil || !nb.Equal(now.Add(-5*time.Minute)) || !na.Equal(now.Add(time.Hour)) {
		t.Errorf("short: %v %v %v", nb, na, err)
	}
	nb, na, err = signer.Validity(now, 8760*time.Hour, far)
	if err != nil || !nb.Equal(now.Add(-5*time.Minute)) || !na.Equal(now.Add(8760*time.Hour-5*time.Minute)) {
		t.Errorf("long: %v %v %v", nb, na, err)
	}
	// Never past the CA.
	caEnd := now.Add(2 * time.Hour)
	if _, na, err = signer.Validity(now, 8760*time.Hour, caEnd); err != nil || !na.Equal(caEnd) {
		t.Errorf("capped: %v %v", na, err)
	}
	// An expired CA signs nothing.
	if _, _, err = signer.Validity(now, time.Hour, now); err == nil || signer.IsValidation(err) {
		t.Errorf("expired CA: %v, want a retryable error", err)
	}
}

func TestUsages(t *testing.T) {
	ku, ext, err := signer.Usages(usages{serverAuth, digSig, keyEnc, clientAuth, serverAuth, certificatesv1.UsageSigning})
	if err != nil {
		t.Fatal(err)
	}
	if ku != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage %b", ku)
	}
	if len(ext) != 2 || ext[0] != x509.ExtKeyUsageServerAuth || ext[1] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ext key usages %v", ext)
	}
	if _, _, err := signer.Usages(usages{"bogus"}); !signer.IsValidation(err) {
		t.Errorf("unknown usage: %v", err)
	}
}

// Sign issues a certificate x509 verifies against the signer's CA for the requested usages, with
// the request's subject and SANs, a fresh 128-bit serial, no extension the request asked for,
// within the CA's lifetime.
func TestSign(t *testing.T) {
	ca, err := pki.NewCA("signer-ca", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signer.New(naming.SignerKubeletServing, signer.Static{CA: ca}, 8760*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != naming.SignerKubeletServing {
		t.Fatalf("Name() = %s", s.Name())
	}
	// The request asks for an extension (basic constraints CA:true) the certificate must not get.
	bc, _ := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{true})
	req := request(t, x509.CertificateRequest{Subject: node("n1"), DNSNames: []string{"n1.example.com"}, IPAddresses: []net.IP{net.ParseIP("10.1.2.3")},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: bc}}})
	u := usages{digSig, keyEnc, serverAuth}
	if err := s.Validate(req, u); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	certPEM, err := s.Sign(req, u, ptr(3600), now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n1.example.com", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err == nil {
		t.Error("a serving certificate verified for client auth")
	}
	if cert.IsCA || cert.Subject.CommonName != "system:node:n1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" ||
		len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) || cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("certificate %+v", cert)
	}
	if !cert.NotBefore.Equal(now.Add(-signer.Backdate)) || !cert.NotAfter.Equal(now.Add(time.Hour)) {
		t.Errorf("validity %v..%v, want %v..%v", cert.NotBefore, cert.NotAfter, now.Add(-signer.Backdate), now.Add(time.Hour))
	}
	if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", cert.SerialNumber)
	}
	if !cert.PublicKey.(*ecdsa.PublicKey).Equal(req.PublicKey) {
		t.Error("the certificate is not for the request's key")
	}
	// The default lifetime is capped by the CA's.
	certPEM, err = s.Sign(req, u, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if cert, _ = pki.ParseCertificatePEM(certPEM); !cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", cert.NotAfter, ca.Cert.NotAfter)
	}
	// Two certificates never share a serial.
	other, _ := s.Sign(req, u, nil, now)
	if c2, _ := pki.ParseCertificatePEM(other); c2.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("the same serial twice")
	}
}

// CAFiles reads a rotated CA for the next certificate and keeps the last good one while the files
// do not load.
func TestCAFilesRotation(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	first, _ := pki.NewCA("first", time.Hour)
	if err := first.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	src, err := signer.LoadCAFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if ca, _ := src.Current(); ca.Cert.Subject.CommonName != "first" {
		t.Fatalf("CA %s", ca.Cert.Subject.CommonName)
	}
	bump := func(path string, d time.Duration) {
		t.Helper()
		at := time.Now().Add(d)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := pki.NewCA("second", time.Hour)
	if err := second.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	bump(certFile, time.Minute)
	if ca, _ := src.Current(); ca.Cert.Subject.CommonName != "second" {
		t.Fatalf("after rotation: CA %s", ca.Cert.Subject.CommonName)
	}
	// A half-written rotation (the key of another CA) keeps the last good CA.
	third, _ := pki.NewCA("third", time.Hour)
	if err := os.WriteFile(certFile, third.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	bump(certFile, 2*time.Minute)
	if ca, err := src.Current(); err != nil || ca.Cert.Subject.CommonName != "second" {
		t.Fatalf("half rotation: CA %s, %v", ca.Cert.Subject.CommonName, err)
	}
	if _, err := signer.LoadCAFiles(filepath.Join(dir, "missing.crt"), keyFile); err == nil {
		t.Error("LoadCAFiles of a missing file succeeded")
	}
	if _, err := signer.LoadCAFiles(certFile, keyFile); err == nil {
		t.Error("LoadCAFiles of a mismatched pair succeeded")
	}
}

// BenchmarkParseValidateSign is the signing service's CPU per request: parse the PEM request
// (signature checked), the kubelet serving signer's rules, and issuing the certificate with the
// CA's key (pki's CA key type).
func BenchmarkParseValidateSign(b *testing.B) {
	ca, err := pki.NewCA("bench-ca", 48*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	s, err := signer.New(naming.SignerKubeletServing, signer.Static{CA: ca}, 8760*time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	data := requestPEM(b, x509.CertificateRequest{Subject: node("n1"), DNSNames: []string{"n1.example.com"}, IPAddresses: []net.IP{net.ParseIP("10.1.2.3")}})
	u := usages{digSig, keyEnc, serverAuth}
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		req, err := signer.ParseRequest(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Validate(req, u); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Sign(req, u, nil, now); err != nil {
			b.Fatal(err)
		}
	}
}
