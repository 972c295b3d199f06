package helm

import (
	"crypto/x509"
	"encoding/base64"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/pki"
)

// checkPKI checks what the hook wrote for a release in namespace ns: the storage and gateway
// certificates name their Services (the names the other pods dial), chain to the CA, and the
// admin kubeconfig points at the gateway's Service.
func checkPKI(t *testing.T, ns string, svc, admin map[string]string) {
	t.Helper()
	decode := func(m map[string]string, key string) []byte {
		b, err := base64.StdEncoding.DecodeString(m[key])
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", key, err)
		}
		return b
	}
	ca, err := pki.ParseCertificatePEM(decode(svc, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for file, host := range map[string]string{
		"storage.crt":         release + "-platform-storage." + ns + ".svc",
		"gateway-serving.crt": release + "-platform-gateway." + ns + ".svc",
		"authn.crt":           "127.0.0.1",
	} {
		c, err := pki.ParseCertificatePEM(decode(svc, file))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s for %s: %v", file, host, err)
		}
	}
	cm, err := pki.ParseCertificatePEM(decode(svc, "controllers-client.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Subject.CommonName != "system:platform-controller-manager" {
		t.Errorf("controllers-client.crt: CN %q", cm.Subject.CommonName)
	}
	cfg, err := clientcmd.Load(decode(admin, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		if want := "https://" + release + "-platform-gateway." + ns + ".svc:6443"; cl.Server != want {
			t.Errorf("admin.kubeconfig: server %s, want %s", cl.Server, want)
		}
	}
}
