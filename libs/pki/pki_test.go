package pki

import (
	"bytes"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("platform-test-ca", time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE block in %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("ParseCertificate: %v", err)
	}
	return cert
}

func (ca *CA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %v, want %v", filepath.Base(path), got, want)
	}
}

func TestNewCA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid {
		t.Errorf("IsCA=%v BasicConstraintsValid=%v, want both true", c.IsCA, c.BasicConstraintsValid)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; c.KeyUsage != want {
		t.Errorf("KeyUsage = %v, want %v", c.KeyUsage, want)
	}
	if c.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("PublicKeyAlgorithm = %v, want ECDSA", c.PublicKeyAlgorithm)
	}
	if c.Subject.CommonName != "platform-test-ca" {
		t.Errorf("CN = %q", c.Subject.CommonName)
	}
	if !c.NotBefore.Before(before.Add(-50 * time.Second)) {
		t.Errorf("NotBefore %v is not about a minute before %v", c.NotBefore, before)
	}
	if c.SerialNumber.BitLen() < 64 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial has %d bits, want a random 128-bit number", c.SerialNumber.BitLen())
	}
	if !bytes.Equal(parseCert(t, ca.CertPEM).Raw, c.Raw) {
		t.Error("CertPEM does not encode Cert")
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.pool()}); err != nil {
		t.Errorf("CA does not verify against itself: %v", err)
	}
	if _, err := NewCA("", time.Hour); err == nil {
		t.Error("NewCA with empty name: want error")
	}
	if _, err := NewCA("x", 0); err == nil {
		t.Error("NewCA with zero validity: want error")
	}
}

func TestIssueClient(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueClient("alice", []string{"system:masters", "dev"}, time.Hour)
	if err != nil {
		t.Fatalf("IssueClient: %v", err)
	}
	cert := parseCert(t, certPEM)
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:     ca.pool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		t.Errorf("client cert does not verify for client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:     ca.pool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err == nil {
		t.Error("client cert verifies for server auth")
	}
	if cert.Subject.CommonName != "alice" {
		t.Errorf("CN = %q, want alice", cert.Subject.CommonName)
	}
	// DER sorts the values of a multi-valued RDN, so compare the groups as a set.
	gotGroups := slices.Sorted(slices.Values(cert.Subject.Organization))
	if want := []string{"dev", "system:masters"}; !slices.Equal(gotGroups, want) {
		t.Errorf("O = %q, want %q", gotGroups, want)
	}
	if cert.IsCA {
		t.Error("client cert is a CA")
	}
	if !bytes.Equal(cert.AuthorityKeyId, ca.Cert.SubjectKeyId) || len(cert.AuthorityKeyId) == 0 {
		t.Error("AuthorityKeyId does not name the CA")
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("cert and key do not pair: %v", err)
	}
	if _, _, err := ca.IssueClient("", nil, time.Hour); err == nil {
		t.Error("IssueClient with empty user: want error")
	}
}

func TestIssueServing(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueServing("apiserver", []string{"127.0.0.1", "::1", "localhost", "api.platform.svc"}, time.Hour)
	if err != nil {
		t.Fatalf("IssueServing: %v", err)
	}
	cert := parseCert(t, certPEM)
	if want := []string{"localhost", "api.platform.svc"}; !slices.Equal(cert.DNSNames, want) {
		t.Errorf("DNSNames = %q, want %q", cert.DNSNames, want)
	}
	if len(cert.IPAddresses) != 2 {
		t.Errorf("IPAddresses = %v, want 127.0.0.1 and ::1", cert.IPAddresses)
	}
	if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ExtKeyUsage = %v, want server auth only", cert.ExtKeyUsage)
	}
	for _, name := range []string{"127.0.0.1", "::1", "localhost", "api.platform.svc"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool(), DNSName: name}); err != nil {
			t.Errorf("serving cert does not verify for %s: %v", name, err)
		}
	}
	for _, name := range []string{"example.com", "10.0.0.1", "other.platform.svc"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool(), DNSName: name}); err == nil {
			t.Errorf("serving cert verifies for %s", name)
		}
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("cert and key do not pair: %v", err)
	}
	other := newTestCA(t)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: other.pool(), DNSName: "localhost"}); err == nil {
		t.Error("serving cert verifies against a different CA")
	}
}

func TestIssuePeer(t *testing.T) {
	ca := newTestCA(t)
	certPEM, _, err := ca.IssuePeer("storage", []string{"storage.platform.svc", "10.1.2.3"}, time.Hour)
	if err != nil {
		t.Fatalf("IssuePeer: %v", err)
	}
	cert := parseCert(t, certPEM)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{
			Roots:     ca.pool(),
			DNSName:   "storage.platform.svc",
			KeyUsages: []x509.ExtKeyUsage{usage},
		}); err != nil {
			t.Errorf("peer cert does not verify for usage %v: %v", usage, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool(), DNSName: "10.1.2.3"}); err != nil {
		t.Errorf("peer cert does not verify for its IP: %v", err)
	}
}

func TestSerialsAreUniqueAndNotBeforeIsSkewed(t *testing.T) {
	ca := newTestCA(t)
	seen := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for range 5 {
		now := time.Now()
		certPEM, _, err := ca.IssueClient("bob", nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert := parseCert(t, certPEM)
		s := cert.SerialNumber.String()
		if seen[s] {
			t.Fatalf("serial %s issued twice", s)
		}
		seen[s] = true
		if d := now.Sub(cert.NotBefore); d < 59*time.Second || d > 2*time.Minute {
			t.Errorf("NotBefore is %v before now, want about a minute", d)
		}
		if d := cert.NotAfter.Sub(now); d < 59*time.Minute || d > 61*time.Minute {
			t.Errorf("NotAfter is %v after now, want the validity (1h)", d)
		}
	}
}

func TestWriteAndLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certFile := filepath.Join(dir, "nested", "pki", "ca.crt")
	keyFile := filepath.Join(dir, "nested", "pki", "ca.key")
	if err := ca.Write(certFile, keyFile); err != nil {
		t.Fatalf("Write: %v", err)
	}
	checkMode(t, keyFile, 0o600)
	checkMode(t, filepath.Join(dir, "nested"), 0o700)
	checkMode(t, filepath.Join(dir, "nested", "pki"), 0o700)
	loaded, err := LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if !loaded.Cert.Equal(ca.Cert) || !bytes.Equal(loaded.CertPEM, ca.CertPEM) {
		t.Error("loaded CA certificate differs")
	}
	// The loaded key signs certificates that verify against the original CA.
	certPEM, _, err := loaded.IssueClient("carol", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCert(t, certPEM).Verify(x509.VerifyOptions{
		Roots:     ca.pool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		t.Errorf("cert from loaded CA does not verify: %v", err)
	}

	// A key that does not belong to the certificate is refused.
	other := newTestCA(t)
	otherKey := filepath.Join(dir, "other.key")
	if err := other.Write(filepath.Join(dir, "other.crt"), otherKey); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(certFile, otherKey); err == nil {
		t.Error("LoadCA with mismatched key: want error")
	}
	// A leaf certificate is not a CA.
	leafPEM, leafKey, err := ca.IssueClient("dave", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leafCert, leafKeyFile := filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")
	if err := WritePair(leafCert, leafKeyFile, leafPEM, leafKey); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(leafCert, leafKeyFile); err == nil {
		t.Error("LoadCA of a leaf certificate: want error")
	}
	if _, err := LoadCA(filepath.Join(dir, "missing.crt"), keyFile); err == nil {
		t.Error("LoadCA of a missing file: want error")
	}
}

func TestWritePairModes(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueServing("apiserver", []string{"localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(dir, "tls", "tls.crt")
	keyFile := filepath.Join(dir, "tls", "tls.key")
	// A key file that already exists with loose permissions is replaced by a 0600 one.
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WritePair(certFile, keyFile, certPEM, keyPEM); err != nil {
		t.Fatalf("WritePair: %v", err)
	}
	checkMode(t, keyFile, 0o600)
	checkMode(t, certFile, 0o644)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Errorf("written pair does not load: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(keyFile))
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want 2 (no temporary files left)", len(entries))
	}
}

func TestEnsureCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca1, created, err := EnsureCA(dir, "platform-ca")
	if err != nil {
		t.Fatalf("first EnsureCA: %v", err)
	}
	if !created {
		t.Error("first EnsureCA: created = false, want true")
	}
	checkMode(t, filepath.Join(dir, "ca.key"), 0o600)
	ca2, created, err := EnsureCA(dir, "platform-ca")
	if err != nil {
		t.Fatalf("second EnsureCA: %v", err)
	}
	if created {
		t.Error("second EnsureCA: created = true, want false")
	}
	if !ca1.Cert.Equal(ca2.Cert) {
		t.Error("second EnsureCA returned a different CA")
	}
	if !publicKeysEqual(ca1.Key.Public(), ca2.Key.Public()) {
		t.Error("second EnsureCA returned a different key")
	}
	if ca1.Cert.Subject.CommonName != "platform-ca" {
		t.Errorf("CN = %q", ca1.Cert.Subject.CommonName)
	}
	if d := time.Until(ca1.Cert.NotAfter); d < 9*365*24*time.Hour {
		t.Errorf("CA valid for only %v", d)
	}

	// Only one of the two files present: an error, and the file is left alone.
	if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureCA(dir, "platform-ca"); err == nil {
		t.Error("EnsureCA with ca.key missing: want error")
	}
	data, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !bytes.Equal(data, ca1.CertPEM) {
		t.Error("EnsureCA changed ca.crt")
	}
}

func TestWriteKubeconfig(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM, err := ca.IssueClient("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kube", "admin.kubeconfig")
	k := Kubeconfig{
		ClusterName: "platform",
		ContextName: "admin@platform",
		UserName:    "admin",
		Server:      "https://127.0.0.1:6443",
		CAPEM:       ca.CertPEM,
		CertPEM:     certPEM,
		KeyPEM:      keyPEM,
		Namespace:   "default",
	}
	if err := WriteKubeconfig(path, k); err != nil {
		t.Fatalf("WriteKubeconfig: %v", err)
	}
	checkMode(t, path, 0o600)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("kubeconfig does not parse: %v\n%s", err, data)
	}
	get := func(v any, keys ...any) any {
		t.Helper()
		for _, k := range keys {
			switch k := k.(type) {
			case string:
				mm, ok := v.(map[string]any)
				if !ok {
					t.Fatalf("want a map at %q in\n%s", k, data)
				}
				v = mm[k]
			case int:
				l, ok := v.([]any)
				if !ok || len(l) <= k {
					t.Fatalf("want a list of more than %d at %v in\n%s", k, keys, data)
				}
				v = l[k]
			}
		}
		return v
	}
	decode := func(v any) []byte {
		t.Helper()
		s, _ := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("not base64: %q: %v", s, err)
		}
		return b
	}
	checks := map[string][2]any{
		"apiVersion":      {get(m, "apiVersion"), "v1"},
		"kind":            {get(m, "kind"), "Config"},
		"current-context": {get(m, "current-context"), "admin@platform"},
		"cluster name":    {get(m, "clusters", 0, "name"), "platform"},
		"server":          {get(m, "clusters", 0, "cluster", "server"), "https://127.0.0.1:6443"},
		"user name":       {get(m, "users", 0, "name"), "admin"},
		"context name":    {get(m, "contexts", 0, "name"), "admin@platform"},
		"context cluster": {get(m, "contexts", 0, "context", "cluster"), "platform"},
		"context user":    {get(m, "contexts", 0, "context", "user"), "admin"},
		"namespace":       {get(m, "contexts", 0, "context", "namespace"), "default"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	for _, key := range []string{"clusters", "users", "contexts"} {
		if l, _ := get(m, key).([]any); len(l) != 1 {
			t.Errorf("%s has %d entries, want 1", key, len(l))
		}
	}
	if got := decode(get(m, "clusters", 0, "cluster", "certificate-authority-data")); !bytes.Equal(got, ca.CertPEM) {
		t.Error("certificate-authority-data does not round-trip")
	}
	if got := decode(get(m, "users", 0, "user", "client-certificate-data")); !bytes.Equal(got, certPEM) {
		t.Error("client-certificate-data does not round-trip")
	}
	if got := decode(get(m, "users", 0, "user", "client-key-data")); !bytes.Equal(got, keyPEM) {
		t.Error("client-key-data does not round-trip")
	}
}

func TestWriteKubeconfigDefaultsAndErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(path, Kubeconfig{ClusterName: "c", UserName: "u", Server: "https://localhost:6443"}); err != nil {
		t.Fatalf("WriteKubeconfig: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["current-context"] != "u@c" {
		t.Errorf("current-context = %v, want u@c", m["current-context"])
	}
	if strings.Contains(string(data), "namespace") || strings.Contains(string(data), "-data") {
		t.Errorf("empty fields were written:\n%s", data)
	}
	for name, k := range map[string]Kubeconfig{
		"no server":   {ClusterName: "c", UserName: "u"},
		"no cluster":  {UserName: "u", Server: "https://x"},
		"no user":     {ClusterName: "c", Server: "https://x"},
		"cert no key": {ClusterName: "c", UserName: "u", Server: "https://x", CertPEM: []byte("x")},
	} {
		if err := WriteKubeconfig(filepath.Join(dir, "bad"), k); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
}

// TestMutualTLS runs a real TLS server with an issued serving certificate that requires client
// certificates from the CA, and checks that the server sees the client's CN and O.
func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey, err := ca.IssueServing("apiserver", []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.IssueClient("alice", []string{"admins"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvPair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		io.WriteString(w, c.Subject.CommonName+"/"+strings.Join(c.Subject.Organization, ","))
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{srvPair},
		ClientCAs:    ca.pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below is expected
	srv.StartTLS()
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:      ca.pool(),
		Certificates: []tls.Certificate{cliPair},
	}}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("mTLS request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "alice/admins" {
		t.Errorf("server saw %q, want alice/admins", body)
	}
	client.CloseIdleConnections()

	// Without a client certificate the handshake fails.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}}
	if resp, err := anon.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Error("request without a client certificate succeeded")
	}
	anon.CloseIdleConnections()
}

func TestSigningKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sa.key")
	if err := EnsureSigningKey(path); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	key, err := parseKeyPEM(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := key.(*rsa.PrivateKey); !ok {
		t.Errorf("key is %T, want RSA", key)
	}
	// An existing key is kept: tokens signed before a restart stay valid.
	if err := EnsureSigningKey(path); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if string(first) != string(second) {
		t.Error("EnsureSigningKey replaced an existing key")
	}
}
