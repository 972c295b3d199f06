package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/test/stack"
)

// tokenKubeconfig writes a kubeconfig for the stack that authenticates with a bearer token.
func tokenKubeconfig(t *testing.T, s *stack.Stack, url, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["platform"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: s.CAPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "platform", AuthInfo: "user"}
	cfg.CurrentContext = "ctx"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectlWith is a kubectl runner for another kubeconfig.
func kubectlWith(t *testing.T, s *stack.Stack, kubeconfig, ns string) *kubectlRunner {
	t.Helper()
	k := newKubectl(t, s, ns)
	k.env = append(k.env, "KUBECONFIG="+kubeconfig)
	return k
}

// whoamiName is the user name kubectl auth whoami reports.
func whoamiName(t *testing.T, k *kubectlRunner, args ...string) string {
	t.Helper()
	return strings.TrimSpace(k.ok("", append([]string{"auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"}, args...)...))
}

// Issues 10 and 11 through kubectl: a service account token from `kubectl create token` used in a
// kubeconfig (`auth whoami`), RBAC written with kubectl's typed commands (`create role`,
// `create rolebinding`, `create clusterrole --aggregation-rule`, `auth reconcile`), `auth can-i`
// with --list and --as, impersonation with --as/--as-group.
func TestKubectlServiceAccountsAndRBAC(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-rbac-")
	k := newKubectl(t, s, ns)
	k.ok("", "create", "serviceaccount", "robot")
	token := strings.TrimSpace(k.ok("", "create", "token", "robot", "--duration=20m"))
	robot := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, token), ns)
	if got := whoamiName(t, robot); got != "system:serviceaccount:"+ns+":robot" {
		t.Fatalf("auth whoami with the token: %q", got)
	}
	if _, errOut, code := robot.run("", "get", "configmaps"); code == 0 || !strings.Contains(errOut, "Forbidden") {
		t.Fatalf("robot listed configmaps before any grant: exit %d, %s", code, errOut)
	}
	as := "--as=system:serviceaccount:" + ns + ":robot"
	if out, _, _ := k.run("", "auth", "can-i", "list", "configmaps", as); strings.TrimSpace(out) != "no" {
		t.Errorf("can-i before the grant: %q", out)
	}
	k.ok("", "create", "role", "cm-reader", "--verb=get,list,watch", "--resource=configmaps")
	k.ok("", "create", "rolebinding", "robot-reads", "--role=cm-reader", "--serviceaccount="+ns+":robot")
	stack.Eventually(t, 5*time.Second, "the binding to take effect", func() error {
		if _, errOut, code := robot.run("", "get", "configmaps"); code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		return nil
	})
	if out := k.ok("", "auth", "can-i", "list", "configmaps", as); strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i after the grant: %q", out)
	}
	if out, _, _ := k.run("", "auth", "can-i", "delete", "configmaps", as); strings.TrimSpace(out) != "no" {
		t.Errorf("can-i delete: %q", out)
	}
	list := robot.ok("", "auth", "can-i", "--list")
	if !strings.Contains(list, "configmaps") || !strings.Contains(list, "selfsubjectaccessreviews") {
		t.Errorf("auth can-i --list:\n%s", list)
	}

	// Impersonation: the admin acts as another user and group.
	if got := whoamiName(t, k, "--as=jane", "--as-group=devs"); got != "jane" {
		t.Errorf("whoami --as: %q", got)
	}
	groups := k.ok("", "auth", "whoami", "--as=jane", "--as-group=devs", "-o", "jsonpath={.status.userInfo.groups}")
	if !strings.Contains(groups, "devs") || !strings.Contains(groups, "system:authenticated") {
		t.Errorf("whoami --as-group: %s", groups)
	}
	if _, errOut, code := k.run("", "get", "configmaps", "--as=jane"); code == 0 || !strings.Contains(errOut, `User "jane" cannot list resource "configmaps"`) {
		t.Errorf("impersonated user without grants: exit %d, %s", code, errOut)
	}

	// An aggregated ClusterRole gathers the rules of the roles its selector matches.
	agg := "e2e-agg-" + utilrand.String(5)
	k.ok("", "create", "clusterrole", agg, "--aggregation-rule=e2e.platform.io/"+agg+"=true")
	part := agg + "-part"
	k.ok("", "create", "clusterrole", part, "--verb=get", "--resource=secrets")
	t.Cleanup(func() { k.run("", "delete", "clusterrole", agg, part) })
	k.ok("", "label", "clusterrole", part, "e2e.platform.io/"+agg+"=true")
	stack.Eventually(t, 10*time.Second, "the aggregated rules", func() error {
		out := k.ok("", "get", "clusterrole", agg, "-o", "jsonpath={.rules}")
		if !strings.Contains(out, "secrets") {
			return fmt.Errorf("rules: %s", out)
		}
		return nil
	})

	// auth reconcile with manifests written for upstream.
	manifest := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reconciled, namespace: %[1]s}
rules:
- {apiGroups: [""], resources: ["pods"], verbs: ["get"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reconciled, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reconciled}
subjects:
- {kind: ServiceAccount, name: robot, namespace: %[1]s}
`, ns)
	out := k.ok(manifest, "auth", "reconcile", "-f", "-")
	if !strings.Contains(out, "reconciled") {
		t.Errorf("auth reconcile: %s", out)
	}
	stack.Eventually(t, 5*time.Second, "the reconciled grant", func() error {
		if out, _, _ := k.run("", "auth", "can-i", "get", "pods", as); strings.TrimSpace(out) != "yes" {
			return fmt.Errorf("can-i get pods: %q", out)
		}
		return nil
	})
}

// A bootstrap token (a Secret of the bootstrap type in the system namespace, made with
// stringData as kubeadm documents) used in a kubeconfig.
func TestBootstrapTokenKubeconfig(t *testing.T) {
	s := useShared(t)
	k := newKubectl(t, s, "")
	id, secret := utilrand.String(6), utilrand.String(16)
	id, secret = strings.ToLower(id), strings.ToLower(secret)
	k.ok(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: bootstrap-token-%s, namespace: %s}
type: %s
stringData:
  token-id: %s
  token-secret: %s
  usage-bootstrap-authentication: "true"
  auth-extra-groups: system:bootstrappers:e2e
  expiration: %s
`, id, naming.SystemNamespace, naming.SecretTypeBootstrapToken, id, secret, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), "apply", "-f", "-")
	t.Cleanup(func() { k.run("", "-n", naming.SystemNamespace, "delete", "secret", "bootstrap-token-"+id) })
	boot := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, id+"."+secret), "")
	if got := whoamiName(t, boot); got != "system:bootstrap:"+id {
		t.Fatalf("whoami with a bootstrap token: %q", got)
	}
	groups := boot.ok("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}")
	if !strings.Contains(groups, "system:bootstrappers:e2e") {
		t.Errorf("bootstrap groups: %s", groups)
	}
	bad := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, id+".0000000000000000"), "")
	if _, errOut, code := bad.run("", "auth", "whoami"); code == 0 || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("a wrong bootstrap secret: exit %d, %s", code, errOut)
	}
}

// client-go's typed clientset with a pod-bound token (requested with the typed CreateToken, as a
// node agent does): the identity carries the pod, and the token stops working once the pod is
// gone (within the gateway's decision cache bound).
func TestClientGoBoundToken(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-bound-")
	admin, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Spec: corev1.PodSpec{
		ServiceAccountName: "worker", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "worker", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "job", UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	cfg := &rest.Config{Host: s.URL, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: s.CAPEM}, QPS: -1}
	worker, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ssr, err := worker.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview through the typed client: %v", err)
	}
	u := ssr.Status.UserInfo
	if u.Username != "system:serviceaccount:"+ns+":worker" || len(u.Extra[naming.UserExtraKey("pod-name")]) != 1 || u.Extra[naming.UserExtraKey("pod-uid")][0] != string(pod.UID) {
		t.Errorf("bound token identity: %+v", u)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, "job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 20*time.Second, "the token to stop working with its pod", func() error {
		_, err := worker.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("still accepted: %v", err)
	})
}

// RBAC changes are enforced within a second on every gateway replica.
func TestRBACOnTwoGateways(t *testing.T) {
	s := startStack(t, stack.Options{Mode: stack.Split})
	second, err := s.StartGatewayReplica()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := s.TLSConfig("rita")
	if err != nil {
		t.Fatal(err)
	}
	rita := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	get := func(url string) int {
		resp, err := rita.Get(url + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, url := range []string{s.URL, second} {
		if code := get(url); code != http.StatusForbidden {
			t.Fatalf("%s before the grant: %d", url, code)
		}
	}
	k := newKubectl(t, s, "default")
	k.ok("", "create", "role", "rita-cm", "--verb=list", "--resource=configmaps")
	start := time.Now()
	k.ok("", "create", "rolebinding", "rita-cm", "--role=rita-cm", "--user=rita")
	for _, url := range []string{s.URL, second} {
		for get(url) != http.StatusOK {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: the grant was not enforced within a second", url)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("enforced on both gateways %v after the write", time.Since(start))
	k.ok("", "delete", "rolebinding", "rita-cm")
	start = time.Now()
	for _, url := range []string{s.URL, second} {
		for get(url) != http.StatusForbidden {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: the revocation was not enforced within a second", url)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pool is a certificate pool with the stack's CA.
func pool(s *stack.Stack) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(s.CAPEM)
	return p
}

// decodeJSONBody decodes a request body into v.
func decodeJSONBody(t *testing.T, r *http.Request, v any) {
	t.Helper()
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		t.Errorf("decoding %s: %v", r.URL.Path, err)
	}
}

// tlsServer starts an HTTPS server on loopback with a CA of its own, as an external webhook
// service is, and returns its URL and that CA (PEM).
func tlsServer(t *testing.T, h http.Handler) (string, []byte) {
	t.Helper()
	ca, err := pki.NewCA("e2e-webhook-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("e2e-webhook", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + lis.Addr().String(), ca.CertPEM
}

// webhookKubeconfig writes the kubeconfig that names a webhook service (upstream's format for
// --authentication-token-webhook-config-file and --authorization-webhook-config-file).
func webhookKubeconfig(t *testing.T, server string, caPEM []byte) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "webhook.kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: hook, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: apiserver, user: {}}]
contexts: [{name: hook, context: {cluster: hook, user: apiserver}}]
current-context: hook
`, server, base64.StdEncoding.EncodeToString(caPEM)))
}

// listen opens a loopback listener closed at the end of the test.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
