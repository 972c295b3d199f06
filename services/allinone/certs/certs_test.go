package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
)

func options(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	return Options{Dir: filepath.Join(dir, "pki"), KubeconfigDir: filepath.Join(dir, "out"), Server: "https://127.0.0.1:16443",
		InternalServer: "https://gateway:6443", Hosts: []string{"api.example.test", "10.1.2.3", "", "gateway"}, Validity: 365 * 24 * time.Hour, RenewBefore: 30 * 24 * time.Hour}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCertificatePEM(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func TestEnsureCreatesThePKI(t *testing.T) {
	o := options(t)
	res, err := Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range res {
		if st != "created" {
			t.Errorf("%s: %s on an empty directory, want created", name, st)
		}
	}
	ca := readCert(t, filepath.Join(o.Dir, CACert))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	verify := func(file string, usage x509.ExtKeyUsage, host string) *x509.Certificate {
		t.Helper()
		c := readCert(t, filepath.Join(o.Dir, file))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host}); err != nil {
			t.Errorf("%s for %q: %v", file, host, err)
		}
		return c
	}
	for _, h := range []string{"localhost", "127.0.0.1", "gateway", "api.example.test", "10.1.2.3"} {
		verify(ServingCert, x509.ExtKeyUsageServerAuth, h)
	}
	for _, s := range Services {
		for _, h := range []string{s, "localhost", "127.0.0.1"} {
			verify(s+".crt", x509.ExtKeyUsageServerAuth, h)
		}
		verify(s+".crt", x509.ExtKeyUsageClientAuth, "")
	}
	admin := verify(AdminCert, x509.ExtKeyUsageClientAuth, "")
	if admin.Subject.CommonName != "admin" || !slices.Equal(admin.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin certificate subject %v, want CN admin O system:masters", admin.Subject)
	}
	cm := verify(ControllersCert, x509.ExtKeyUsageClientAuth, "")
	if cm.Subject.CommonName != naming.ControllerManagerUser {
		t.Errorf("controllers certificate CN %q, want %q", cm.Subject.CommonName, naming.ControllerManagerUser)
	}
	// Keys are private; the PKI directory is closed.
	for _, f := range []string{CAKey, ServingKey, AdminKey, ServiceAccountKey, "storage.key", ControllersKubeconfig} {
		fi, err := os.Stat(filepath.Join(o.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	// The kubeconfigs load with client-go and point where they should.
	for path, server := range map[string]string{filepath.Join(o.KubeconfigDir, AdminKubeconfig): o.Server, filepath.Join(o.Dir, ControllersKubeconfig): o.InternalServer} {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cfg.Host != server {
			t.Errorf("%s: server %q, want %q", path, cfg.Host, server)
		}
		if _, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData); err != nil {
			t.Errorf("%s: client credentials: %v", path, err)
		}
		if !bytes.Equal(cfg.CAData, mustRead(t, filepath.Join(o.Dir, CACert))) {
			t.Errorf("%s: CA data is not ca.crt", path)
		}
	}
	if !bytes.Equal(mustRead(t, filepath.Join(o.KubeconfigDir, CACert)), mustRead(t, filepath.Join(o.Dir, CACert))) {
		t.Error("the copy of ca.crt next to admin.kubeconfig differs")
	}
	if _, err := os.Stat(filepath.Join(o.KubeconfigDir, CAKey)); err == nil {
		t.Error("the CA key was copied next to admin.kubeconfig")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// snapshot reads every regular file under dirs.
func snapshot(t *testing.T, dirs ...string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files[filepath.Join(d, e.Name())] = mustRead(t, filepath.Join(d, e.Name()))
		}
	}
	return files
}

func TestEnsureKeepsValidFiles(t *testing.T) {
	o := options(t)
	if _, err := Ensure(o); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, o.Dir, o.KubeconfigDir)
	res, err := Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range res {
		if st != "kept" {
			t.Errorf("%s: %s on a second run, want kept", name, st)
		}
	}
	after := snapshot(t, o.Dir, o.KubeconfigDir)
	if len(after) != len(before) {
		t.Errorf("second run left %d files, first %d (temporary files left behind?)", len(after), len(before))
	}
	for path, data := range before {
		if !bytes.Equal(after[path], data) {
			t.Errorf("%s changed on a second run", path)
		}
	}
}

func TestEnsureRenewsWhatIsNoLongerValid(t *testing.T) {
	o := options(t)
	if _, err := Ensure(o); err != nil {
		t.Fatal(err)
	}
	caBefore := mustRead(t, filepath.Join(o.Dir, CACert))
	storageBefore := mustRead(t, filepath.Join(o.Dir, "storage.crt"))
	// A certificate of another CA, a key that does not match, a new host and a new server URL.
	other, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := other.IssuePeer("authn", []string{"authn", "localhost", "127.0.0.1"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(filepath.Join(o.Dir, "authn.crt"), filepath.Join(o.Dir, "authn.key"), c, k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "authz.key"), k, 0o600); err != nil {
		t.Fatal(err)
	}
	o.Hosts = append(o.Hosts, "new.example.test")
	o.Server = "https://127.0.0.1:26443"
	res, err := Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"authn.crt": "renewed", "authz.crt": "renewed", ServingCert: "renewed", AdminKubeconfig: "renewed", CACert: "kept", "storage.crt": "kept", AdminCert: "kept"} {
		if res[name] != want {
			t.Errorf("%s: %s, want %s", name, res[name], want)
		}
	}
	if !bytes.Equal(mustRead(t, filepath.Join(o.Dir, CACert)), caBefore) || !bytes.Equal(mustRead(t, filepath.Join(o.Dir, "storage.crt")), storageBefore) {
		t.Error("valid files were replaced")
	}
	serving := readCert(t, filepath.Join(o.Dir, ServingCert))
	if !slices.Contains(serving.DNSNames, "new.example.test") {
		t.Errorf("serving certificate names %v lack the new host", serving.DNSNames)
	}
	if !strings.Contains(string(mustRead(t, filepath.Join(o.KubeconfigDir, AdminKubeconfig))), "https://127.0.0.1:26443") {
		t.Error("admin.kubeconfig does not name the new server")
	}
	// A certificate of the right CA about to expire is renewed.
	ca, err := pki.LoadCA(filepath.Join(o.Dir, CACert), filepath.Join(o.Dir, CAKey))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err = ca.IssuePeer("storage", []string{"storage", "localhost", "127.0.0.1"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(filepath.Join(o.Dir, "storage.crt"), filepath.Join(o.Dir, "storage.key"), c, k); err != nil {
		t.Fatal(err)
	}
	res, err = Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	if res["storage.crt"] != "renewed" || res[CACert] != "kept" {
		t.Errorf("a certificate with a day left: storage.crt %s, ca.crt %s; want renewed, kept", res["storage.crt"], res[CACert])
	}
	if left := time.Until(readCert(t, filepath.Join(o.Dir, "storage.crt")).NotAfter); left < o.Validity-time.Hour {
		t.Errorf("renewed certificate has %v left, want about %v", left, o.Validity)
	}
}

func TestEnsureRefusesHalfACA(t *testing.T) {
	o := options(t)
	if _, err := Ensure(o); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(o.Dir, CAKey)); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(o); err == nil {
		t.Fatal("a CA certificate without its key was replaced silently")
	}
}

func TestMainFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"--dir", t.TempDir(), "--server", "http://127.0.0.1:6443"}, &out, &errOut); code != 2 {
		t.Errorf("plain http server: exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "--server") {
		t.Errorf("the error does not name --server: %s", errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"--dir", t.TempDir(), "--owner", "nobody"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--owner") {
		t.Errorf("bad --owner: exit %d, %s", code, errOut.String())
	}
	dir := t.TempDir()
	out.Reset()
	if code := Main([]string{"--dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "created  ca.crt") || strings.Contains(out.String(), "PRIVATE KEY") {
		t.Errorf("output:\n%s", out.String())
	}
}

// --service-hosts adds names to one service's certificate (in Kubernetes, its Service's names),
// and a certificate that lacks a name asked for later is issued again.
func TestServiceHosts(t *testing.T) {
	o := options(t)
	if _, err := Ensure(o); err != nil {
		t.Fatal(err)
	}
	o.ServiceHosts = []string{"storage=rel-storage.ns.svc,rel-storage", "storage=10.0.0.7"}
	res, err := Ensure(o)
	if err != nil {
		t.Fatal(err)
	}
	if res["storage.crt"] != "renewed" || res["authn.crt"] != "kept" {
		t.Errorf("storage.crt %s, authn.crt %s; want renewed, kept", res["storage.crt"], res["authn.crt"])
	}
	c := readCert(t, filepath.Join(o.Dir, "storage.crt"))
	for _, h := range []string{"storage", "localhost", "rel-storage.ns.svc", "rel-storage"} {
		if err := c.VerifyHostname(h); err != nil {
			t.Errorf("storage.crt: %v", err)
		}
	}
	if err := c.VerifyHostname("10.0.0.7"); err != nil {
		t.Errorf("storage.crt: %v", err)
	}
	if err := readCert(t, filepath.Join(o.Dir, "authn.crt")).VerifyHostname("rel-storage.ns.svc"); err == nil {
		t.Error("authn.crt names the storage Service")
	}
	for _, bad := range []string{"nosuch=a", "storage", "storage=", "gateway-serving=x"} {
		o.ServiceHosts = []string{bad}
		if o.Validate() == nil {
			t.Errorf("--service-hosts %q accepted", bad)
		}
	}
	o.ServiceHosts = nil
	for _, bad := range []string{"noslash", "/name", "ns/", "a/b/c"} {
		o.Secret = bad
		if o.Validate() == nil {
			t.Errorf("--secret %q accepted", bad)
		}
	}
	o.Secret, o.AdminSecret = "ns/a", "ns/a"
	if o.Validate() == nil {
		t.Error("the same --secret and --admin-secret accepted")
	}
}
