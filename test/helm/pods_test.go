package helm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/redistest"
)

// TestPodsRun is the nearest this machine gets to the pods running: the default release's
// containers run as processes here, each with exactly the arguments, environment, PKI files
// (from the hook's `platform certs` run) and ConfigMap files the chart gives it, the only
// changes being where things are: /pki and /etc/platform become directories of the test, the
// fixed ports become free loopback ports, the Services' DNS names become those ports and the
// embedded Redis a redis-server of the test. Each container's readiness probe (its own binary
// for the gRPC services, /readyz for the gateway) must pass; then the hook's admin kubeconfig
// works against the gateway (authn, authz, admission and storage behind it over mutual TLS), the
// names are the release's naming profile, and the controllers (through the chart's kubeconfig
// and the hook's client certificate) give a new namespace its default ServiceAccount. One
// replica of each; no scheduler, kubelet, Service routing or NetworkPolicy is involved.
func TestPodsRun(t *testing.T) {
	requireSetup(t)
	c := newClient(t)
	const ns = "helm-pods"
	c.createNamespace(t, ns)
	objs := render(t, ns, valuesFiles(t)["default-values"])
	_, dir := runPKIHook(t, c, ns, objs)
	pkiDir, etcDir, logDir := filepath.Join(dir, "pki"), t.TempDir(), t.TempDir()
	redis := redistest.Start(t, redistest.Options{})

	port := map[string]string{}
	for _, name := range []string{"storage", "authn", "authz", "admission", "certificates", "controllers", "gateway"} {
		port[name] = freePort(t)
	}
	fn := release + "-platform"
	where := strings.NewReplacer(
		fn+"-storage."+ns+".svc:7001", "127.0.0.1:"+port["storage"],
		"0.0.0.0:7001", "127.0.0.1:"+port["storage"], "127.0.0.1:7001", "127.0.0.1:"+port["storage"],
		"127.0.0.1:7002", "127.0.0.1:"+port["authn"],
		"127.0.0.1:7003", "127.0.0.1:"+port["authz"],
		"127.0.0.1:7004", "127.0.0.1:"+port["admission"],
		"0.0.0.0:7005", "127.0.0.1:"+port["certificates"], "127.0.0.1:7005", "127.0.0.1:"+port["certificates"],
		"0.0.0.0:7006", "127.0.0.1:"+port["controllers"], "127.0.0.1:7006", "127.0.0.1:"+port["controllers"],
		"--bind-address=0.0.0.0", "--bind-address=127.0.0.1",
		"--secure-port=6443", "--secure-port="+port["gateway"],
		"redis://"+fn+"-redis."+ns+".svc:6379/0", redis.URL(),
		"https://"+fn+"-gateway."+ns+".svc:6443", "https://127.0.0.1:"+port["gateway"],
		"/pki/", pkiDir+"/",
		"/etc/platform/", etcDir+"/",
	)
	// The ConfigMap's files (the controllers' kubeconfig) where the pods mount them.
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == fn+"-config" {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for name, content := range data {
				if err := os.WriteFile(filepath.Join(etcDir, name), []byte(where.Replace(content)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	containers := map[string]map[string]any{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ct := range cs {
			ct := ct.(map[string]any)
			containers[ct["name"].(string)] = ct
		}
	}
	var started []string
	start := func(name string) {
		started = append(started, name)
		ct := containers[name]
		if ct == nil {
			t.Fatalf("no %s container rendered", name)
		}
		args, _, _ := unstructured.NestedStringSlice(ct, "args")
		env, vars := containerEnv(ct)
		for i := range args {
			args[i] = expandVars(where.Replace(args[i]), vars)
		}
		cmd := exec.Command(filepath.Join(bins, name), args...)
		cmd.Env = env
		logFile, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logFile.Close()
		})
	}
	ready := func(name string) {
		ct := containers[name]
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := probeOnce(ct, where, pkiDir, port["gateway"])
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				// Every started container's log: the cause is often a peer (a gateway that
				// cannot reach authorization fails the controllers' readiness).
				var logs strings.Builder
				for _, other := range started {
					log, _ := os.ReadFile(filepath.Join(logDir, other+".log"))
					fmt.Fprintf(&logs, "\n--- %s's log ---\n%s", other, lastLines(string(log), 20))
				}
				t.Fatalf("%s never became ready: %v%s", name, err, logs.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t0 := time.Now()
	start("storage")
	ready("storage")
	for _, name := range []string{"authz", "authn", "admission"} {
		start(name)
	}
	for _, name := range []string{"authz", "authn", "admission"} {
		ready(name)
	}
	start("gateway")
	ready("gateway")
	start("certificates")
	start("controllers")
	ready("certificates")
	ready("controllers")
	t.Logf("the release's 7 containers ready in %v", time.Since(t0).Round(time.Millisecond))

	// The hook's admin kubeconfig, pointed at where the gateway's Service would send it.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "out", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = where.Replace(cfg.Host)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces as the hook's admin: %v", err)
	}
	var names []string
	for _, n := range nss.Items {
		names = append(names, n.Name)
	}
	// The release runs the platform naming profile (the test process speaks kubernetes').
	if !strings.Contains(strings.Join(names, ","), "platform-system") {
		t.Errorf("namespaces %v: no platform-system", names)
	}
	created, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "through-the-chart"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(created.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ConfigMap: %v", err)
	}
	for {
		if _, err := cs.CoreV1().ServiceAccounts(created.Name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(logDir, "controllers.log"))
			t.Fatalf("the controllers gave the new namespace no default ServiceAccount\n--- their log ---\n%s", lastLines(string(log), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podIP is what the containers' status.podIP field references resolve to here.
const podIP = "127.0.0.1"

// containerEnv is this process's environment with the container's variables set (a value, or
// the pod IP for a status.podIP field reference, as the kubelet sets them), and those variables.
func containerEnv(ct map[string]any) ([]string, map[string]string) {
	env := os.Environ()
	vars := map[string]string{}
	list, _, _ := unstructured.NestedSlice(ct, "env")
	for _, v := range list {
		v := v.(map[string]any)
		name, _ := v["name"].(string)
		value, _ := v["value"].(string)
		if path, _, _ := unstructured.NestedString(v, "valueFrom", "fieldRef", "fieldPath"); path == "status.podIP" {
			value = podIP
		}
		vars[name] = value
		env = append(env, name+"="+value) // later entries win
	}
	return env, vars
}

// expandVars replaces $(NAME) references to the container's variables in an argument, as the
// kubelet does (references to unknown names stay as they are).
func expandVars(arg string, vars map[string]string) string {
	for name, value := range vars {
		arg = strings.ReplaceAll(arg, "$("+name+")", value)
	}
	return arg
}

// probeOnce runs a container's readiness probe once: its exec command (the service's own
// binary) or its HTTPS GET against the gateway, verified with the release's CA.
func probeOnce(ct map[string]any, where *strings.Replacer, pkiDir, gatewayPort string) error {
	if command, ok, _ := unstructured.NestedStringSlice(ct, "readinessProbe", "exec", "command"); ok {
		args := make([]string, len(command)-1)
		for i, a := range command[1:] {
			args[i] = where.Replace(a)
		}
		out, err := exec.Command(filepath.Join(bins, filepath.Base(command[0])), args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	path, ok, _ := unstructured.NestedString(ct, "readinessProbe", "httpGet", "path")
	if !ok {
		return fmt.Errorf("container %v has no readiness probe", ct["name"])
	}
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Get("https://127.0.0.1:" + gatewayPort + path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// freePort is a loopback port free now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
