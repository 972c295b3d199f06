package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// newCSR is a PEM certificate request with a fresh key (returned PEM-encoded too).
func newCSR(t *testing.T, cn string, orgs []string, dnsNames ...string) (csrPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dnsNames}, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// csrManifest is a CertificateSigningRequest for kubectl.
func csrManifest(name, signer string, request []byte, usages []string, expirationSeconds int) string {
	exp := ""
	if expirationSeconds > 0 {
		exp = fmt.Sprintf("\n  expirationSeconds: %d", expirationSeconds)
	}
	return fmt.Sprintf(`apiVersion: certificates.%s/v1
kind: CertificateSigningRequest
metadata: {name: %s}
spec:
  signerName: %s
  request: %s
  usages: [%s]%s
`, naming.GroupSuffix, name, signer, base64.StdEncoding.EncodeToString(request), `"`+strings.Join(usages, `", "`)+`"`, exp)
}

// csrState is what a test reads of a stored request.
type csrState struct {
	Spec struct {
		Username string `json:"username"`
	} `json:"spec"`
	Status struct {
		Certificate string `json:"certificate"`
		Conditions  []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

func (c csrState) condition(typ string) (reason string, ok bool) {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ && cond.Status == "True" {
			return cond.Reason, true
		}
	}
	return "", false
}

func getCSR(t *testing.T, k *kubectlRunner, name string) csrState {
	t.Helper()
	var c csrState
	if err := json.Unmarshal([]byte(k.ok("", "get", "csr", name, "-o", "json")), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// issued waits for the request's certificate and returns it parsed.
func issued(t *testing.T, k *kubectlRunner, name string) *x509.Certificate {
	t.Helper()
	var cert *x509.Certificate
	stack.Eventually(t, 30*time.Second, "the certificate of "+name, func() error {
		c := getCSR(t, k, name)
		if c.Status.Certificate == "" {
			return fmt.Errorf("no certificate yet; conditions %+v", c.Status.Conditions)
		}
		der, err := base64.StdEncoding.DecodeString(c.Status.Certificate)
		if err != nil {
			return err
		}
		block, _ := pem.Decode(der)
		if block == nil {
			return errors.New("status.certificate is not PEM")
		}
		cert, err = x509.ParseCertificate(block.Bytes)
		return err
	})
	return cert
}

// decide adds an Approved or Denied condition through the approval subresource as admin. In the
// kubernetes naming profile it runs `kubectl certificate approve` or `deny`; those commands insist
// on upstream's certificates.k8s.io types, so in the platform profile (certificates.platform.io)
// the test writes the condition through the dynamic client, as kubectl's command would.
func decide(t *testing.T, s *stack.Stack, k *kubectlRunner, name, typ string) {
	t.Helper()
	if naming.ProfileName() == naming.KubernetesProfile {
		verb := map[string]string{"Approved": "approve", "Denied": "deny"}[typ]
		if out := k.ok("", "certificate", verb, name); strings.TrimSpace(out) != "certificatesigningrequest.certificates.k8s.io/"+name+" "+strings.ToLower(typ) {
			t.Errorf("kubectl certificate %s: %q", verb, out)
		}
		return
	}
	res := dynamicClient(t, s).Resource(schema.GroupVersionResource{Group: "certificates." + naming.GroupSuffix, Version: "v1", Resource: "certificatesigningrequests"})
	ctx := ctxFor(t, 10*time.Second)
	obj, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	conditions = append(conditions, map[string]any{"type": typ, "status": "True", "reason": "E2E", "message": "decided by the test"})
	if err := unstructured.SetNestedSlice(obj.Object, conditions, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}, "approval"); err != nil {
		t.Fatalf("%s %s: %v", typ, name, err)
	}
}

// verify checks a certificate against the cluster CA for one extended key usage.
func verify(t *testing.T, s *stack.Stack, cert *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("certificate %s does not verify against the cluster CA for %v: %v", cert.Subject, usage, err)
	}
}

// certKubeconfig writes a kubeconfig that authenticates with a client certificate.
func certKubeconfig(t *testing.T, s *stack.Stack, certPEM, keyPEM []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["platform"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CAPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "platform", AuthInfo: "user"}
	cfg.CurrentContext = "ctx"
	path := filepath.Join(t.TempDir(), "cert.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// Issue 13 with kubectl: a client certificate requested, approved through the approval
// subresource, signed by the certificates service and used to log in; a denied request and one that
// breaks its signer's rules never get a certificate; `kubectl get csr` shows upstream's columns.
func TestCertificateSigningWithKubectl(t *testing.T) {
	s := useShared(t)
	k := newKubectl(t, s, "")
	suffix := strings.ToLower(utilrand.String(5))

	// The API server client signer: any subject, client auth, the requested lifetime.
	alice := "alice-" + suffix
	request, key := newCSR(t, alice, []string{"dev"})
	k.ok(csrManifest(alice, naming.SignerAPIServerClient, request, []string{"client auth"}, 3600), "apply", "-f", "-")
	t.Cleanup(func() { k.run("", "delete", "csr", alice) })
	if c := getCSR(t, k, alice); c.Spec.Username == "" || c.Status.Certificate != "" {
		t.Fatalf("new request: requestor %q, certificate %q", c.Spec.Username, c.Status.Certificate)
	}
	decide(t, s, k, alice, "Approved")
	cert := issued(t, k, alice)
	verify(t, s, cert, x509.ExtKeyUsageClientAuth)
	if life := cert.NotAfter.Sub(time.Now()); life > time.Hour+time.Minute || life < 50*time.Minute {
		t.Errorf("lifetime %v left, want about the requested hour", life)
	}
	if got := whoamiName(t, kubectlWith(t, s, certKubeconfig(t, s, certPEM(cert), key), "")); got != alice {
		t.Errorf("whoami with the issued certificate: %q", got)
	}
	out := k.ok("", "get", "csr", alice)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if !slices.Equal(header, []string{"NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"}) ||
		!strings.Contains(out, "Approved,Issued") || !strings.Contains(out, "60m") {
		t.Errorf("kubectl get csr:\n%s", out)
	}

	// Denied: never signed. Breaking the kubelet serving signer's rules: Failed with a reason.
	denied := "denied-" + suffix
	request, _ = newCSR(t, denied, nil)
	k.ok(csrManifest(denied, naming.SignerAPIServerClient, request, []string{"client auth"}, 0), "apply", "-f", "-")
	t.Cleanup(func() { k.run("", "delete", "csr", denied) })
	decide(t, s, k, denied, "Denied")
	bad := "bad-serving-" + suffix
	request, _ = newCSR(t, "bob", nil, "bob.example.com")
	k.ok(csrManifest(bad, naming.SignerKubeletServing, request, []string{"digital signature", "server auth"}, 0), "apply", "-f", "-")
	t.Cleanup(func() { k.run("", "delete", "csr", bad) })
	decide(t, s, k, bad, "Approved")
	stack.Eventually(t, 30*time.Second, "the failed condition", func() error {
		c := getCSR(t, k, bad)
		if reason, ok := c.condition("Failed"); !ok || reason != "SignerValidationFailure" {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		if c.Status.Certificate != "" {
			return errors.New("a certificate for a request breaking its signer's rules")
		}
		return nil
	})
	if c := getCSR(t, k, denied); c.Status.Certificate != "" {
		t.Errorf("a denied request got a certificate")
	}
}

// The TLS bootstrap flow of a node: a bootstrap token identity requests a node client
// certificate, the csrapproving controller approves it (the bootstrappers are bound to the
// nodeclient role, as kubeadm binds them), the certificates service signs it, and the certificate
// authenticates as system:node:<name> in system:nodes.
func TestNodeTLSBootstrap(t *testing.T) {
	nodeTLSBootstrap(t, useShared(t))
}

// The same flow on the all-in-one (`make run`), whose certificates service signs with the
// cluster CA of its data directory.
func TestNodeTLSBootstrapAllInOne(t *testing.T) {
	t.Parallel()
	nodeTLSBootstrap(t, startStack(t, stack.Options{Mode: stack.AllInOne}))
}

func nodeTLSBootstrap(t *testing.T, s *stack.Stack) {
	k := newKubectl(t, s, "")
	id, secret := strings.ToLower(utilrand.String(6)), strings.ToLower(utilrand.String(16))
	group := "system:bootstrappers:tls-" + id
	k.ok(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-%s, namespace: %s}
type: %s
stringData:
  token-id: %s
  token-secret: %s
  usage-bootstrap-authentication: "true"
  auth-extra-groups: %s
`, id, naming.SystemNamespace, naming.SecretTypeBootstrapToken, id, secret, group), "apply", "-f", "-")
	t.Cleanup(func() { k.run("", "-n", naming.SystemNamespace, "delete", "secret", "bootstrap-token-"+id) })
	for _, role := range []string{"system:node-bootstrapper", "system:certificates." + naming.GroupSuffix + ":certificatesigningrequests:nodeclient"} {
		name := "tls-" + id + "-" + strings.ReplaceAll(role[strings.LastIndex(role, ":")+1:], ".", "-")
		k.ok("", "create", "clusterrolebinding", name, "--clusterrole="+role, "--group="+group)
		t.Cleanup(func() { k.run("", "delete", "clusterrolebinding", name) })
	}
	boot := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, id+"."+secret), "")
	node := "system:node:n-" + id
	request, key := newCSR(t, node, []string{"system:nodes"})
	name := "node-csr-" + id
	stack.Eventually(t, 10*time.Second, "the bootstrap identity's bindings to be enforced", func() error {
		_, errOut, code := boot.run(csrManifest(name, naming.SignerAPIServerClientKubelet, request,
			[]string{"digital signature", "client auth"}, 0), "create", "-f", "-")
		if code != 0 {
			return errors.New(errOut)
		}
		return nil
	})
	t.Cleanup(func() { k.run("", "delete", "csr", name) })
	cert := issued(t, k, name)
	c := getCSR(t, k, name)
	if reason, ok := c.condition("Approved"); !ok || reason != "AutoApproved" || c.Spec.Username != "system:bootstrap:"+id {
		t.Errorf("approval %q %v by requestor %q", reason, ok, c.Spec.Username)
	}
	verify(t, s, cert, x509.ExtKeyUsageClientAuth)
	nodeCtl := kubectlWith(t, s, certKubeconfig(t, s, certPEM(cert), key), "")
	if got := whoamiName(t, nodeCtl); got != node {
		t.Errorf("whoami with the node certificate: %q", got)
	}
	if groups := nodeCtl.ok("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"); !strings.Contains(groups, "system:nodes") {
		t.Errorf("node groups: %s", groups)
	}
}
