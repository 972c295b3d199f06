package x509_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/authn/authenticator"
	certauth "platform.io/services/authn/x509"
)

// outcome is what the test server answers: the method's decision on the request it received.
type outcome struct {
	User    *authenticator.User
	NotMine bool
	Err     string
}

// serve starts a real HTTPS server that requests (but does not verify) client certificates, as the
// gateway does, and answers each request with m's decision on its TLS peer certificates.
func serve(t testing.TB, m authenticator.Method) (url string, roots *stdx509.CertPool) {
	t.Helper()
	ca, err := pki.NewCA("serving CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("127.0.0.1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := m.Authenticate(r.Context(), &authenticator.Request{PeerCertificates: r.TLS.PeerCertificates, Header: r.Header})
		var o outcome
		switch {
		case errors.Is(err, authenticator.ErrNotMine):
			o.NotMine = true
		case err != nil:
			o.Err = err.Error()
		default:
			o.User = resp.User
		}
		_ = json.NewEncoder(w).Encode(o)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots = stdx509.NewCertPool()
	roots.AddCert(ca.Cert)
	return srv.URL, roots
}

// ask makes one request presenting chain (nil: no certificate) and returns the decision.
func ask(t testing.TB, url string, roots *stdx509.CertPool, chain *tls.Certificate, header http.Header) outcome {
	t.Helper()
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if chain != nil {
		conf.Certificates = []tls.Certificate{*chain}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o outcome
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

// authority is a CA (root or intermediate) that issues test certificates with any validity,
// subject and usage, which libs/pki deliberately does not.
type authority struct {
	cert *stdx509.Certificate
	key  crypto.Signer
}

func newRoot(t testing.TB, name string) authority {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return authority{cert: ca.Cert, key: ca.Key}
}

func writeCA(t testing.TB, cas ...authority) string {
	t.Helper()
	var pemData []byte
	for _, ca := range cas {
		pemData = append(pemData, pemCert(ca.cert.Raw)...)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, pemData, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// issued is a certificate and its key.
type issued struct {
	cert *stdx509.Certificate
	key  crypto.Signer
}

type certOpts struct {
	subject   pkix.Name
	notBefore time.Time
	notAfter  time.Time
	usages    []stdx509.ExtKeyUsage
	isCA      bool
}

func (a authority) issue(t testing.TB, o certOpts) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	if o.notBefore.IsZero() {
		o.notBefore = time.Now().Add(-time.Minute)
	}
	if o.notAfter.IsZero() {
		o.notAfter = time.Now().Add(time.Hour)
	}
	if o.usages == nil && !o.isCA {
		o.usages = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}
	}
	tmpl := &stdx509.Certificate{
		SerialNumber:          serial,
		Subject:               o.subject,
		NotBefore:             o.notBefore,
		NotAfter:              o.notAfter,
		KeyUsage:              stdx509.KeyUsageDigitalSignature,
		ExtKeyUsage:           o.usages,
		BasicConstraintsValid: true,
		IsCA:                  o.isCA,
	}
	if o.isCA {
		tmpl.KeyUsage = stdx509.KeyUsageCertSign
	}
	der, err := stdx509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := stdx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return issued{cert: cert, key: key}
}

// chain is what a TLS client presents: the leaf, then intermediates.
func chain(leaf issued, intermediates ...*stdx509.Certificate) *tls.Certificate {
	c := &tls.Certificate{Certificate: [][]byte{leaf.cert.Raw}, PrivateKey: leaf.key, Leaf: leaf.cert}
	for _, i := range intermediates {
		c.Certificate = append(c.Certificate, i.Raw)
	}
	return c
}

var uidOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}

func TestAuthenticate(t *testing.T) {
	root := newRoot(t, "client CA")
	other := newRoot(t, "untrusted CA")
	inter := root.issue(t, certOpts{subject: pkix.Name{CommonName: "intermediate CA"}, isCA: true})
	interCA := authority{cert: inter.cert, key: inter.key}

	a, err := certauth.New(certauth.Config{ClientCAFile: writeCA(t, root)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, roots := serve(t, a)

	alice := root.issue(t, certOpts{subject: pkix.Name{CommonName: "alice", Organization: []string{"dev", "ops"}}})
	credID := func(c *stdx509.Certificate) map[string][]string {
		sum := sha256.Sum256(c.Raw)
		return map[string][]string{naming.UserExtraKey("credential-id"): {"X509SHA256=" + hex.EncodeToString(sum[:])}}
	}
	withUID := root.issue(t, certOpts{subject: pkix.Name{CommonName: "bob", ExtraNames: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "uid-42"}}}})
	twoUIDs := root.issue(t, certOpts{subject: pkix.Name{CommonName: "carol", ExtraNames: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "a"}, {Type: uidOID, Value: "b"}}}})
	viaInter := interCA.issue(t, certOpts{subject: pkix.Name{CommonName: "dave", Organization: []string{"interns"}}})
	untrusted := other.issue(t, certOpts{subject: pkix.Name{CommonName: "mallory", Organization: []string{"system:masters"}}})
	expired := root.issue(t, certOpts{subject: pkix.Name{CommonName: "erin"}, notBefore: time.Now().Add(-2 * time.Hour), notAfter: time.Now().Add(-time.Hour)})
	serverOnly := root.issue(t, certOpts{subject: pkix.Name{CommonName: "frank"}, usages: []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}})
	noCN := root.issue(t, certOpts{subject: pkix.Name{Organization: []string{"nobody"}}})

	tests := []struct {
		name    string
		rule    string
		present *tls.Certificate
		want    *authenticator.User
		notMine bool
		errHas  []string
	}{
		{name: "trusted", rule: "CN is the user, O the groups, credential id X509SHA256 of the certificate",
			present: chain(alice), want: &authenticator.User{Name: "alice", Groups: []string{"dev", "ops"}, Extra: credID(alice.cert)}},
		{name: "uid attribute", rule: "1.33: subject attribute 1.3.6.1.4.1.57683.2 is the UID",
			present: chain(withUID), want: &authenticator.User{Name: "bob", UID: "uid-42", Extra: credID(withUID.cert)}},
		{name: "two uids", rule: "1.33: more than one UID attribute is an error",
			present: chain(twoUIDs), errHas: []string{"expected 1 UID, but found multiple"}},
		{name: "intermediate-signed", rule: "PeerCertificates[1:] are intermediates",
			present: chain(viaInter, inter.cert), want: &authenticator.User{Name: "dave", Groups: []string{"interns"}, Extra: credID(viaInter.cert)}},
		{name: "intermediate missing", rule: "without its intermediate the leaf does not chain",
			present: chain(viaInter), errHas: []string{"verifying certificate SN=", "certificate signed by unknown authority"}},
		{name: "untrusted", rule: "a certificate from another CA is refused with upstream's message",
			present: chain(untrusted), errHas: []string{"verifying certificate SN=" + untrusted.cert.SerialNumber.String() + ", SKID=", ", AKID=", "failed: x509: certificate signed by unknown authority"}},
		{name: "expired", rule: "an expired certificate is refused",
			present: chain(expired), errHas: []string{"verifying certificate SN=", "certificate has expired or is not yet valid"}},
		{name: "no client auth usage", rule: "the chain must be valid for client authentication",
			present: chain(serverOnly), errHas: []string{"incompatible key usage"}},
		{name: "no common name", rule: "an empty CN is not an identity: not this method's",
			present: chain(noCN), notMine: true},
		{name: "no certificate", rule: "no certificate: not this method's", notMine: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ask(t, url, roots, tc.present, nil)
			if tc.notMine != got.NotMine {
				t.Fatalf("%s: notMine = %v, want %v (%+v)", tc.rule, got.NotMine, tc.notMine, got)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(got.Err, s) {
					t.Errorf("%s: error %q does not contain %q", tc.rule, got.Err, s)
				}
			}
			if len(tc.errHas) > 0 && got.User != nil {
				t.Errorf("%s: refused certificate authenticated %+v", tc.rule, got.User)
			}
			if tc.want != nil {
				if got.Err != "" || got.User == nil {
					t.Fatalf("%s: not authenticated: %+v", tc.rule, got)
				}
				if !equalUser(got.User, tc.want) {
					t.Errorf("%s: user = %+v, want %+v", tc.rule, got.User, tc.want)
				}
			}
		})
	}
}

func equalUser(a, b *authenticator.User) bool {
	if a.Name != b.Name || a.UID != b.UID || !slices.Equal(a.Groups, b.Groups) || len(a.Extra) != len(b.Extra) {
		return false
	}
	for k, v := range a.Extra {
		if !slices.Equal(v, b.Extra[k]) {
			return false
		}
	}
	return true
}

// The identifier in refusals is upstream's: decimal serial, colon-separated upper-case hex ids.
func TestCertificateIdentifier(t *testing.T) {
	c := &stdx509.Certificate{SerialNumber: big.NewInt(4660), SubjectKeyId: []byte{0xab, 0x01}, AuthorityKeyId: []byte{0x0f}}
	if got, want := certauth.CertificateIdentifier(c), "SN=4660, SKID=AB:01, AKID=0F"; got != want {
		t.Errorf("identifier = %q, want %q", got, want)
	}
	if got, want := certauth.CertificateIdentifier(&stdx509.Certificate{}), "SN=<nil>, SKID=, AKID="; got != want {
		t.Errorf("identifier = %q, want %q", got, want)
	}
}

// Verification results are cached by the leaf: the second request with the same certificate is a
// hit, a refused one stays refused, and the intermediates a failure was computed with matter.
func TestVerifierCache(t *testing.T) {
	root := newRoot(t, "client CA")
	inter := root.issue(t, certOpts{subject: pkix.Name{CommonName: "intermediate CA"}, isCA: true})
	leaf := authority{cert: inter.cert, key: inter.key}.issue(t, certOpts{subject: pkix.Name{CommonName: "dave"}})
	v, err := certauth.NewVerifier(writeCA(t, root), 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify([]*stdx509.Certificate{leaf.cert}); err == nil {
		t.Fatal("leaf without its intermediate verified")
	}
	// The same leaf with its intermediate is a different question: not answered by the failure.
	if err := v.Verify([]*stdx509.Certificate{leaf.cert, inter.cert}); err != nil {
		t.Fatalf("leaf with intermediate: %v", err)
	}
	hits, misses := v.CacheStats()
	if hits != 0 || misses != 2 {
		t.Fatalf("after two distinct questions: hits %d misses %d, want 0 and 2", hits, misses)
	}
	for range 10 {
		if err := v.Verify([]*stdx509.Certificate{leaf.cert, inter.cert}); err != nil {
			t.Fatal(err)
		}
	}
	if hits, _ := v.CacheStats(); hits != 10 {
		t.Fatalf("hits = %d, want 10", hits)
	}
	// The cache is bounded: two other leaves push this one out (size 2).
	for _, cn := range []string{"x", "y"} {
		c := root.issue(t, certOpts{subject: pkix.Name{CommonName: cn}})
		if err := v.Verify([]*stdx509.Certificate{c.cert}); err != nil {
			t.Fatal(err)
		}
	}
	_, before := v.CacheStats()
	if err := v.Verify([]*stdx509.Certificate{leaf.cert, inter.cert}); err != nil {
		t.Fatal(err)
	}
	if _, after := v.CacheStats(); after != before+1 {
		t.Errorf("evicted entry answered from cache (misses %d -> %d)", before, after)
	}
}

// A changed CA bundle empties the cache: a certificate trusted before is refused once its CA is
// no longer in the file (the file is re-read at most every 5 seconds).
func TestVerifierCARotation(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the CA file to be re-read")
	}
	root := newRoot(t, "old CA")
	next := newRoot(t, "new CA")
	path := writeCA(t, root)
	v, err := certauth.NewVerifier(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf := root.issue(t, certOpts{subject: pkix.Name{CommonName: "alice"}})
	newLeaf := next.issue(t, certOpts{subject: pkix.Name{CommonName: "bob"}})
	if err := v.Verify([]*stdx509.Certificate{oldLeaf.cert}); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify([]*stdx509.Certificate{newLeaf.cert}); err == nil {
		t.Fatal("certificate of the new CA verified before the rotation")
	}
	if err := os.WriteFile(path, pemCert(next.cert.Raw), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		errOld := v.Verify([]*stdx509.Certificate{oldLeaf.cert})
		errNew := v.Verify([]*stdx509.Certificate{newLeaf.cert})
		if errOld != nil && errNew == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after rotating the CA file: old leaf err %v, new leaf err %v", errOld, errNew)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := certauth.New(certauth.Config{}, nil); err == nil || !strings.Contains(err.Error(), "--client-ca-file") {
		t.Errorf("no CA file: err %v, want one naming --client-ca-file", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	_ = os.WriteFile(empty, []byte("not a certificate"), 0o644)
	if _, err := certauth.New(certauth.Config{ClientCAFile: empty}, nil); err == nil {
		t.Error("a CA file without certificates was accepted")
	}
}

// Bad input never panics: missing, nil and unparsed certificates are not this method's or are
// refused; nil or empty intermediates are ignored.
func TestBadInput(t *testing.T) {
	root := newRoot(t, "client CA")
	a, err := certauth.New(certauth.Config{ClientCAFile: writeCA(t, root)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := root.issue(t, certOpts{subject: pkix.Name{CommonName: "a"}}).cert
	tests := []struct {
		name    string
		certs   []*stdx509.Certificate
		notMine bool
		ok      bool
	}{
		{name: "none", certs: nil, notMine: true},
		{name: "nil leaf", certs: []*stdx509.Certificate{nil}, notMine: true},
		{name: "unparsed leaf", certs: []*stdx509.Certificate{{}}},
		{name: "garbage leaf", certs: []*stdx509.Certificate{{Raw: []byte{1, 2, 3}}}},
		{name: "junk intermediates", certs: []*stdx509.Certificate{good, nil, {}}, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := a.Authenticate(context.Background(), &authenticator.Request{PeerCertificates: tc.certs})
			switch {
			case tc.notMine:
				if !errors.Is(err, authenticator.ErrNotMine) {
					t.Errorf("err = %v, want ErrNotMine", err)
				}
			case tc.ok:
				if err != nil || resp.User.Name != "a" {
					t.Errorf("resp %+v err %v, want user a", resp, err)
				}
			default:
				if err == nil || errors.Is(err, authenticator.ErrNotMine) {
					t.Errorf("err = %v, want a refusal", err)
				}
			}
		})
	}
}
