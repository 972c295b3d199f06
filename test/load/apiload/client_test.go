package main

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"platform.io/libs/pki"
)

// testAdmin is a test CA and an admin client certificate (system:masters) it issued.
func testAdmin(t *testing.T) (ca *pki.CA, certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := pki.NewCA("apiload-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = ca.IssueClient("admin", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca, certPEM, keyPEM
}

// readKubeconfig reads the files pki.WriteKubeconfig writes (inline data), and kubeconfigs that
// refer to files relative to their own directory, choosing the current context.
func TestReadKubeconfig(t *testing.T) {
	ca, cert, key := testAdmin(t)
	dir := t.TempDir()
	inline := filepath.Join(dir, "inline.kubeconfig")
	if err := pki.WriteKubeconfig(inline, pki.Kubeconfig{ClusterName: "c", UserName: "admin", Server: "https://127.0.0.1:6443",
		CAPEM: ca.CertPEM, CertPEM: cert, KeyPEM: key}); err != nil {
		t.Fatal(err)
	}
	cr, err := readKubeconfig(inline)
	if err != nil {
		t.Fatal(err)
	}
	if cr.server != "https://127.0.0.1:6443" || string(cr.caPEM) != string(ca.CertPEM) || string(cr.certPEM) != string(cert) || string(cr.keyPEM) != string(key) {
		t.Errorf("inline kubeconfig read as %+v", cr)
	}
	if _, err := cr.tlsConfig(); err != nil {
		t.Errorf("tlsConfig: %v", err)
	}

	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "admin.crt": cert, "admin.key": key} {
		if err := os.WriteFile(filepath.Join(sub, "pki", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refs := filepath.Join(sub, "refs.kubeconfig")
	if err := os.WriteFile(refs, []byte(`apiVersion: v1
kind: Config
current-context: second
clusters:
- name: one
  cluster: {server: "https://10.0.0.1:6443"}
- name: two
  cluster:
    server: https://127.0.0.2:7443
    certificate-authority: pki/ca.crt
users:
- name: nobody
  user: {}
- name: admin
  user:
    client-certificate: pki/admin.crt
    client-key: `+filepath.Join(sub, "pki", "admin.key")+`
contexts:
- name: first
  context: {cluster: one, user: nobody}
- name: second
  context: {cluster: two, user: admin}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cr, err = readKubeconfig(refs); err != nil {
		t.Fatal(err)
	}
	if cr.server != "https://127.0.0.2:7443" || string(cr.caPEM) != string(ca.CertPEM) || string(cr.certPEM) != string(cert) || string(cr.keyPEM) != string(key) {
		t.Errorf("file-referencing kubeconfig read as %+v", cr)
	}

	// Flags override the kubeconfig.
	o := &options{kubeconfig: refs, server: "https://localhost:1", certFile: filepath.Join(sub, "pki", "ca.crt")}
	if cr, err = loadCredentials(o); err != nil || cr.server != "https://localhost:1" || string(cr.certPEM) != string(ca.CertPEM) {
		t.Errorf("loadCredentials with overrides: %+v, %v", cr, err)
	}

	for name, body := range map[string]string{
		"no context":      "apiVersion: v1\nkind: Config\n",
		"missing context": "current-context: x\ncontexts: [{name: y, context: {cluster: a, user: b}}]\n",
		"missing cluster": "contexts: [{name: y, context: {cluster: a, user: b}}]\n",
		"not yaml":        "{{{",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readKubeconfig(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := (&credentials{server: "https://x", caPEM: ca.CertPEM}).tlsConfig(); err == nil {
		t.Error("tlsConfig without a client certificate: accepted")
	}
}

func TestCheckServerURL(t *testing.T) {
	for _, ok := range []string{"https://127.0.0.1:6443", "https://localhost:6443/", "https://[::1]:1"} {
		if err := checkServerURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "http://127.0.0.1:6443", "127.0.0.1:6443", "https://", "https://h:1/api", "https://h:1?x=1"} {
		if err := checkServerURL(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestCPUSample(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU accounting reads /proc (Linux)")
	}
	a := sampleCPU()
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	b := sampleCPU()
	b.at = a.at.Add(100 * time.Millisecond)
	note := cpuNote(a, b)
	if !strings.HasPrefix(note, "CPU cores used: apiload ") || !strings.Contains(note, " cores busy") {
		t.Errorf("note %q", note)
	}
	if name, _, _, ok := readProcStat("/proc/self/stat"); !ok || name == "" {
		t.Errorf("readProcStat(/proc/self/stat) = %q, %v", name, ok)
	}
}

// --meter adds running processes the tool did not start, by command name.
func TestCPUSampleMeters(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU accounting reads /proc (Linux)")
	}
	// A sleep that is not the test's child: its shell exits at once.
	if err := exec.Command("sh", "-c", "sleep 5 >/dev/null 2>&1 &").Run(); err != nil {
		t.Fatal(err)
	}
	named := func(s cpuSample) bool {
		for _, p := range s.ticks {
			if p.name == "sleep" {
				return true
			}
		}
		return false
	}
	if !named(sampleCPU("sle")) {
		t.Error("a process whose name starts with a --meter prefix is not sampled")
	}
	if named(sampleCPU()) {
		t.Error("a process that is neither the tool's child nor named is sampled")
	}
}

// The load's transport offers gzip as Go's transport and client-go do, unless --gzip=false, and
// reads a gzip-encoded answer as its identity encoding.
func TestTransportGzip(t *testing.T) {
	const body = `{"kind":"ConfigMapList","items":[]}`
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte(body))
			_ = zw.Close()
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, gz := range []bool{true, false} {
		tr := newTransport(tc, false, gz, 1)
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "gzip", false: ""}[gz]
		if ae := resp.Header.Get("X-Accept-Encoding"); ae != want || string(got) != body {
			t.Errorf("gzip=%v: the server saw Accept-Encoding %q (want %q); the body read %q", gz, ae, want, got)
		}
	}
}
