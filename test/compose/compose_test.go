// Package compose checks the container deployment end to end: it builds the images (`make
// images`), starts compose.yaml under a project name and host port of its own (so it runs beside
// other tests and a developer's `make up`), waits until every container is healthy, and drives
// the stack through the published gateway port with kubectl and client-go: create, list and watch
// ConfigMaps, a service account token, an RBAC denial; then mutual TLS between the services (a
// peer without a certificate of the service CA is refused) and a second `up` that keeps the PKI.
// `docker compose down -v` removes everything at the end.
//
// It needs a Docker engine and Compose (v2 `docker compose` or v1 `docker-compose`); without
// them it fails, it does not skip. kubectl is used when it is installed; the client-go checks run
// either way.
package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"platform.io/libs/pki"
)

func TestCompose(t *testing.T) {
	p := startProject(t, "platformtest")
	kubeconfig := p.kubeconfig()
	caBefore, err := os.ReadFile(filepath.Join(p.outDir, "ca.crt"))
	if err != nil {
		t.Fatalf("the certs init container wrote no ca.crt next to the kubeconfig: %v", err)
	}
	kubeconfigBefore, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.restConfig()

	start := time.Now()
	t.Run("images", func(t *testing.T) { checkImages(t) })
	t.Run("kubectl", func(t *testing.T) { checkKubectl(t, kubeconfig) })
	t.Run("client-go", func(t *testing.T) { checkClientGo(t, cfg) })
	t.Run("admission-webhook", func(t *testing.T) { checkWebhook(t, p, cfg) })
	t.Run("mutual-tls", func(t *testing.T) { checkMutualTLS(t, p) })
	t.Logf("checks through the stack: %v", time.Since(start).Round(100*time.Millisecond))

	// A second `up` reruns the certs container, which keeps the valid PKI: same CA, and the
	// running services (whose certificates did not change) stay ready.
	start = time.Now()
	p.up()
	// admin.kubeconfig embeds the CA and the admin certificate: unchanged means both were kept.
	for path, before := range map[string][]byte{filepath.Join(p.outDir, "ca.crt"): caBefore, kubeconfig: kubeconfigBefore} {
		if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
			t.Errorf("a second up changed %s (%v): the PKI was not kept", filepath.Base(path), err)
		}
	}
	t.Logf("second compose up: %v", time.Since(start).Round(100*time.Millisecond))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("after the second up: %v", err)
	}
}

// checkImages: every Platform image runs as the numeric non-root user.
func checkImages(t *testing.T) {
	for _, name := range []string{"storage", "authn", "authz", "admission", "certificates", "controllers", "gateway", "platform"} {
		out, code, err := docker(30*time.Second, "image", "inspect", "-f", "{{.Config.User}}", "platform/"+name+":"+imageTag)
		if err != nil || code != 0 {
			t.Errorf("platform/%s:%s: exit %d, %v: %s", name, imageTag, code, err, out)
			continue
		}
		if got := strings.TrimSpace(out); got != "65532:65532" {
			t.Errorf("platform/%s runs as %q, want 65532:65532", name, got)
		}
	}
}

func checkKubectl(t *testing.T, kubeconfig string) {
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl is not installed: only the client-go checks run")
		return
	}
	cacheDir := t.TempDir()
	kubectl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cacheDir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := kubectl("get", "ns"); !strings.Contains(out, "default") || !strings.Contains(out, "Active") {
		t.Errorf("kubectl get ns:\n%s", out)
	}
	ns := "compose-kubectl-" + randomSuffix(t)
	kubectl("create", "namespace", ns)
	kubectl("-n", ns, "create", "configmap", "greeting", "--from-literal=hello=world")
	if out := kubectl("-n", ns, "get", "configmap", "greeting", "-o", "jsonpath={.data.hello}"); out != "world" {
		t.Errorf("kubectl get configmap: %q, want world", out)
	}
	kubectl("delete", "namespace", ns, "--wait=false")
}

func checkClientGo(t *testing.T, cfg *rest.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := "compose-" + randomSuffix(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	cms := kube.CoreV1().ConfigMaps(ns)
	sel := metav1.ListOptions{LabelSelector: "test=compose"}

	// Create and list.
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"test": "compose"}}, Data: map[string]string{"i": strconv.Itoa(i)}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", cm.Name, err)
		}
	}
	list, err := cms.List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("listed %d ConfigMaps, want 3", len(list.Items))
	}

	// Watch from the list's resourceVersion: a later create and update arrive, in order.
	opts := sel
	opts.ResourceVersion = list.ResourceVersion
	w, err := cms.Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-new", Labels: map[string]string{"test": "compose"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm0, err := cms.Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm0.Data["i"] = "changed"
	if _, err := cms.Update(ctx, cm0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED cm-new", "MODIFIED cm-0"}
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %v", got)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			got = append(got, string(ev.Type)+" "+ev.Object.(*corev1.ConfigMap).Name)
		case <-timeout:
			t.Fatalf("watch events after 30s: %v, want %v", got, want)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("watch events %v, want %v", got, want)
	}

	// A service account token (TokenRequest) authenticates as the account, which RBAC gives no
	// rights here: 403 Forbidden naming the user.
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	if tr.Status.Token == "" {
		t.Fatal("TokenRequest returned no token")
	}
	robotCfg := rest.AnonymousClientConfig(cfg)
	robotCfg.BearerToken = tr.Status.Token
	robot, err := kubernetes.NewForConfig(robotCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = robot.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	user := "system:serviceaccount:" + ns + ":robot"
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the token's user listed ConfigMaps without a grant: %v, want 403 Forbidden", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != 403 || !strings.Contains(status.Status().Message, `User "`+user+`" cannot list resource "configmaps"`) {
		t.Errorf("denial: %v, want code 403 naming %s", err, user)
	}
	// A token that is not one is refused as unauthenticated, not as forbidden.
	badCfg := rest.AnonymousClientConfig(cfg)
	badCfg.BearerToken = tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"
	bad, err := kubernetes.NewForConfig(badCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("a tampered token: %v, want 401 Unauthorized", err)
	}
}

// checkMutualTLS probes every gRPC service from inside the stack's network: with the service's
// own certificate it answers; without a client certificate, or with one of another CA, the
// handshake is refused. Then a real service started with client certificates of another CA (a
// second gateway, which calls storage, authn, authz and admission) is refused by each of them,
// and the gateway itself authenticates nobody with such a certificate.
func checkMutualTLS(t *testing.T, p *project) {
	foreign := t.TempDir()
	ca, err := pki.NewCA("not-the-service-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.IssuePeer("storage", []string{"storage", "localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(filepath.Join(foreign, "peer.crt"), filepath.Join(foreign, "peer.key"), c, k); err != nil {
		t.Fatal(err)
	}
	network, volume := p.name+"_platform", p.name+"_pki"
	probe := func(svc string, port int, args ...string) (string, int) {
		t.Helper()
		run := append([]string{"run", "--rm", "--network", network, "--user", "0:0", "-v", volume + ":/pki:ro", "-v", foreign + ":/foreign:ro",
			"--entrypoint", "/usr/local/bin/" + svc, "platform/" + svc + ":" + imageTag,
			"--health-probe=grpc://" + svc + ":" + strconv.Itoa(port), "--ca-file=/pki/ca.crt", "--timeout=5s"}, args...)
		out, code, err := docker(time.Minute, run...)
		if err != nil {
			t.Fatalf("docker run: %v", err)
		}
		return out, code
	}
	for svc, port := range grpcServices {
		if out, code := probe(svc, port, "--cert-file=/pki/"+svc+".crt", "--key-file=/pki/"+svc+".key"); code != 0 {
			t.Errorf("%s with its own certificate, across the network: exit %d: %s", svc, code, out)
		}
		if out, code := probe(svc, port); code != 1 {
			t.Errorf("%s without a client certificate: exit %d, want 1 (refused): %s", svc, code, out)
		}
		if out, code := probe(svc, port, "--cert-file=/foreign/peer.crt", "--key-file=/foreign/peer.key"); code != 1 {
			t.Errorf("%s with a certificate of another CA: exit %d, want 1 (refused): %s", svc, code, out)
		}
	}

	// The gateway's HTTPS port: a client certificate of another CA is refused in the handshake
	// (or, were it accepted there, would authenticate nobody: 401).
	out, code, err := docker(time.Minute, "run", "--rm", "--network", network, "--user", "0:0", "-v", volume+":/pki:ro", "-v", foreign+":/foreign:ro",
		"--entrypoint", "/usr/local/bin/gateway", "platform/gateway:"+imageTag, "--health-probe=https://gateway:6443/api/v1/namespaces",
		"--ca-file=/pki/ca.crt", "--cert-file=/foreign/peer.crt", "--key-file=/foreign/peer.key", "--timeout=5s")
	if err != nil || code != 1 || !(strings.Contains(out, "401") || strings.Contains(out, "tls: unknown certificate authority") || strings.Contains(out, "tls: bad certificate")) {
		t.Errorf("the gateway with a client certificate of another CA: exit %d, %v: %s; want a TLS refusal or 401 Unauthorized", code, err, out)
	}

	// A second gateway whose client certificates come from another CA: storage, authn, authz and
	// admission each refuse it, so its readiness checks of them fail with a TLS refusal.
	gc, gk, err := ca.IssuePeer("gateway", []string{"gateway", "localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(filepath.Join(foreign, "gateway.crt"), filepath.Join(foreign, "gateway.key"), gc, gk); err != nil {
		t.Fatal(err)
	}
	impostor := p.name + "-impostor"
	// At debug level: the authorization and admission streams report an outage once, at warn, and
	// their retries as debug lines (see marks below).
	args := []string{"run", "-d", "--name", impostor, "--network", network, "--user", "0:0", "-v", volume + ":/pki:ro", "-v", foreign + ":/foreign:ro",
		"platform/gateway:" + imageTag, "--log-level=debug", "--bind-address=0.0.0.0", "--secure-port=6443",
		"--tls-cert-file=/pki/gateway-serving.crt", "--tls-private-key-file=/pki/gateway-serving.key", "--client-ca-file=/pki/ca.crt"}
	for svc, flag := range map[string]string{"storage:7001": "storage", "authn:7002": "authn", "authz:7003": "authz", "admission:7004": "admission"} {
		args = append(args, "--"+flag+"-address="+svc, "--"+flag+"-ca-file=/pki/ca.crt", "--"+flag+"-cert-file=/foreign/gateway.crt", "--"+flag+"-key-file=/foreign/gateway.key")
	}
	mustDocker(t, time.Minute, args...)
	defer func() { _, _, _ = docker(time.Minute, "rm", "-f", impostor) }()
	// It is never ready: its /readyz, authorized like every path, fails at the authentication
	// service's refusal, and its log shows each service refusing it in the handshake: the
	// authentication of the probe's request, the default namespaces it tries to store, and the
	// authorization and admission streams it follows.
	readyz := func() (string, int, error) {
		return docker(time.Minute, "exec", impostor, "/usr/local/bin/gateway", "--health-probe=https://127.0.0.1:6443/readyz?verbose",
			"--ca-file=/pki/ca.crt", "--cert-file=/pki/gateway.crt", "--key-file=/pki/gateway.key", "--timeout=10s")
	}
	// A log line that shows the service refusing the impostor contains "tls:" (the alert the
	// service sent, such as "remote error: tls: unknown certificate authority") and one of these.
	// The storage and authentication calls are retried and logged at warn each time; the
	// authorization and admission streams log their outage once at warn and then each retry at
	// debug. With TLS 1.3 the client's side of the handshake completes before the service checks
	// the client certificate, so an attempt may instead fail writing to the closed connection
	// ("broken pipe", "connection reset by peer"): such a line shows no refusal, and the check
	// waits for an attempt that read the service's alert.
	marks := map[string][]string{
		"storage":        {`"msg":"creating the initial namespaces"`},
		"authentication": {`"service":"authentication"`},
		"authorization":  {`"service":"authorization"`, `"msg":"policy generation stream ended"`},
		"admission":      {`"service":"admission"`, `"msg":"admission interest stream ended"`},
	}
	checks := map[string]string{"storage": "", "authentication": "", "authorization": "", "admission": ""}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, code, err := readyz(); err != nil || code == 0 {
			t.Errorf("the readiness of a gateway with client certificates of another CA: exit %d, %v: %s; want not ready", code, err, out)
		}
		logs, _, _ := docker(30*time.Second, "logs", impostor)
		for _, line := range strings.Split(logs, "\n") {
			for check, ms := range marks {
				for _, mark := range ms {
					if checks[check] == "" && strings.Contains(line, mark) && strings.Contains(line, "tls:") {
						checks[check] = line
					}
				}
			}
		}
		var missing []string
		for check, line := range checks {
			if line == "" {
				missing = append(missing, check)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a gateway with client certificates of another CA: no TLS refusal from %v within 60s; its log:\n%s", missing, logs)
			break
		}
		time.Sleep(time.Second)
	}
	for check, line := range checks {
		if line != "" {
			t.Logf("%s refuses the impostor: %s", check, line)
		}
	}
	out, code, err = readyz()
	if err != nil || code != 1 {
		t.Errorf("the readiness of a gateway with client certificates of another CA: exit %d, %v: %s; want 1 (not ready)", code, err, out)
	} else {
		t.Logf("its /readyz: %s", strings.TrimSpace(out))
	}
}
