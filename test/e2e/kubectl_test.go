package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// kubectlRunner runs kubectl against a stack with its admin kubeconfig and a discovery cache of
// the test's own.
type kubectlRunner struct {
	t    *testing.T
	bin  string
	env  []string
	ns   string
	vflg []string // --validate=false when the server has no OpenAPI
}

func newKubectl(t *testing.T, s *stack.Stack, ns string) *kubectlRunner {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH; the kubectl end-to-end test needs it")
	}
	env := append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "KUBECACHEDIR="+t.TempDir())
	return &kubectlRunner{t: t, bin: bin, env: env, ns: ns}
}

func (k *kubectlRunner) command(ctx context.Context, stdin string, args ...string) *exec.Cmd {
	if k.ns != "" {
		args = append([]string{"--namespace", k.ns}, args...)
	}
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = k.env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// run runs kubectl to the end (at most 30 s) and returns its output and exit code.
func (k *kubectlRunner) run(stdin string, args ...string) (stdout, stderr string, code int) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := k.command(ctx, stdin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		k.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// ok runs kubectl, requires exit code 0, and returns stdout.
func (k *kubectlRunner) ok(stdin string, args ...string) string {
	k.t.Helper()
	out, errs, code := k.run(stdin, args...)
	if code != 0 {
		k.t.Fatalf("kubectl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// background starts kubectl and delivers its stdout lines; it is killed at the end of the test.
type bgKubectl struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error
	mu    sync.Mutex
	all   []string
}

func (k *kubectlRunner) background(timeout time.Duration, args ...string) *bgKubectl {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := k.command(ctx, "", args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	b := &bgKubectl{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			b.mu.Lock()
			b.all = append(b.all, sc.Text())
			b.mu.Unlock()
			b.lines <- sc.Text()
		}
		close(b.lines)
		b.err = cmd.Wait()
		if b.err != nil && errb.Len() > 0 {
			b.err = errors.New(b.err.Error() + ": " + strings.TrimSpace(errb.String()))
		}
		close(b.done)
	}()
	k.t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// waitLine waits for a stdout line matching re.
func (b *bgKubectl) waitLine(t *testing.T, re string, timeout time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-b.lines:
			if !ok {
				<-b.done
				t.Fatalf("kubectl ended (%v) without a line matching %q; it printed %q", b.err, re, b.output())
			}
			if rx.MatchString(line) {
				return line
			}
		case <-deadline:
			t.Fatalf("no line matching %q in %v; kubectl printed %q", re, timeout, b.output())
		}
	}
}

func (b *bgKubectl) output() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.all...)
}

const kubectlManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: kc-settings
  labels:
    app: kc-web
data:
  color: blue
  greeting: hello world
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kc-web
  labels:
    app: kc-web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: kc-web
  template:
    metadata:
      labels:
        app: kc-web
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

func configMapYAML(name string, finalizers ...string) string {
	y := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	if len(finalizers) > 0 {
		y += "  finalizers: [" + strings.Join(finalizers, ", ") + "]\n"
	}
	return y + "data:\n  k: v\n"
}

// Spec 000 "What the service does" 6 and "Where a document says not shown, match what kubectl
// expects": kubectl works against the gateway: discovery (api-resources with short names, get
// all), printing (default columns, -o wide, -o yaml, watch output), create -f, replace, delete,
// wait --for=delete (a watch with a field selector), NotFound errors, and get --raw.
func TestKubectl(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-kubectl-")
	k := newKubectl(t, s, "")

	out := k.ok("", "get", "namespaces")
	for _, name := range []string{"default", naming.SystemNamespace, naming.PublicNamespace, ns} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+Active\s+\S+$`).MatchString(out) {
			t.Errorf("kubectl get namespaces lacks %s Active:\n%s", name, out)
		}
	}
	if !regexp.MustCompile(`^NAME\s+STATUS\s+AGE\n`).MatchString(out) {
		t.Errorf("kubectl get namespaces header:\n%s", out)
	}
	k.ns = ns

	// Client-side validation needs the OpenAPI documents; without /openapi/v3 kubectl create
	// fails unless told --validate=false.
	if raw, errs, code := k.run("", "get", "--raw", "/openapi/v3"); code != 0 {
		t.Logf("the server has no /openapi/v3 (%s); creating with --validate=false", strings.TrimSpace(errs))
		k.vflg = []string{"--validate=false"}
	} else if !strings.Contains(raw, `"paths"`) {
		t.Errorf("/openapi/v3 is not an OpenAPI discovery document: %.200s", raw)
	}

	out = k.ok(kubectlManifest, append([]string{"create", "-f", "-"}, k.vflg...)...)
	if !strings.Contains(out, "configmap/kc-settings created") || !strings.Contains(out, "deployment.apps/kc-web created") {
		t.Errorf("kubectl create -f:\n%s", out)
	}

	// kubectl's generators use client-go's typed clients, which send upstream's Protobuf.
	out = k.ok("", "create", "configmap", "kc-gen", "--from-literal=a=b")
	if strings.TrimSpace(out) != "configmap/kc-gen created" {
		t.Errorf("kubectl create configmap: %q", out)
	}
	if out := k.ok("", "get", "cm", "kc-gen", "-o", "jsonpath={.data.a}"); out != "b" {
		t.Errorf("kubectl get -o jsonpath: %q", out)
	}
	if k.vflg == nil {
		// Spec 000 "Field validation": kubectl's default --validate=strict is enforced by the
		// server (fieldValidation=Strict, 400); --validate=warn creates and prints the warning.
		bogus := configMapYAML("kc-bogus") + "bogus: 1\n"
		_, errs, code := k.run(bogus, "create", "-f", "-")
		if code != 1 || !strings.Contains(errs, `strict decoding error: unknown field "bogus"`) {
			t.Errorf("kubectl create of an unknown field: exit %d, stderr %q", code, errs)
		}
		out, errs, code = k.run(bogus, "create", "-f", "-", "--validate=warn")
		if code != 0 || !strings.Contains(errs, `Warning: unknown field "bogus"`) || !strings.Contains(out, "configmap/kc-bogus created") {
			t.Errorf("kubectl create --validate=warn of an unknown field: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		k.ok("", "delete", "cm", "kc-bogus")
	}

	out = k.ok("", "get", "cm", "kc-settings", "-o", "yaml")
	for _, want := range []string{"apiVersion: v1\n", "kind: ConfigMap\n", "  color: blue\n", "  greeting: hello world\n", "  name: kc-settings\n", "  namespace: " + ns + "\n", "  resourceVersion: ", "  uid: ", "    app: kc-web\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get cm -o yaml lacks %q:\n%s", want, out)
		}
	}

	out = k.ok("", "get", "cm")
	if !regexp.MustCompile(`(?m)^NAME\s+DATA\s+AGE$`).MatchString(out) || !regexp.MustCompile(`(?m)^kc-settings\s+2\s+\d+s$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^kc-gen\s+1\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get cm:\n%s", out)
	}
	out = k.ok("", "get", "deploy", "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR$`).MatchString(out) {
		t.Errorf("kubectl get deploy -o wide: columns:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^kc-web\s+0/2\s+0\s+0\s+\d+s\s+web\s+nginx:1\.27\s+app=kc-web$`).MatchString(out) {
		t.Errorf("kubectl get deploy -o wide: row:\n%s", out)
	}

	// kubectl get -w: the list, then a line for a ConfigMap created afterwards.
	w := k.background(20*time.Second, "get", "cm", "-w")
	w.waitLine(t, `^kc-settings\s+2\s+`, 10*time.Second)
	k.ok(configMapYAML("kc-late"), append([]string{"create", "-f", "-"}, k.vflg...)...)
	w.waitLine(t, `^kc-late\s+1\s+\d+s$`, 10*time.Second)

	out = k.ok("", "delete", "cm", "kc-settings")
	if strings.TrimSpace(out) != `configmap "kc-settings" deleted` {
		t.Errorf("kubectl delete: %q", out)
	}
	k.ok("", "wait", "--for=delete", "cm/kc-settings", "--timeout=10s")
	_, errs, code := k.run("", "get", "cm", "kc-settings")
	if code != 1 || !strings.Contains(errs, `Error from server (NotFound): configmaps "kc-settings" not found`) {
		t.Errorf("kubectl get of a deleted ConfigMap: exit %d, stderr %q", code, errs)
	}

	// kubectl wait --for=delete on an object a finalizer holds: it waits (a watch) until replace
	// removes the finalizer.
	k.ok(configMapYAML("kc-held", "e2e.platform.io/hold"), append([]string{"create", "-f", "-"}, k.vflg...)...)
	out = k.ok("", "delete", "cm", "kc-held", "--wait=false")
	if !strings.Contains(out, `configmap "kc-held" deleted`) {
		t.Errorf("kubectl delete --wait=false: %q", out)
	}
	if out := k.ok("", "get", "cm", "kc-held", "-o", "jsonpath={.metadata.deletionTimestamp}"); out == "" {
		t.Error("the held ConfigMap has no deletionTimestamp")
	}
	wait := k.background(20*time.Second, "wait", "--for=delete", "cm/kc-held", "--timeout=15s")
	select {
	case <-wait.done:
		t.Fatalf("kubectl wait ended (%v) while the object still exists: %q", wait.err, wait.output())
	case <-time.After(time.Second):
	}
	k.ok(configMapYAML("kc-held"), append([]string{"replace", "-f", "-"}, k.vflg...)...)
	wait.waitLine(t, `^configmap/kc-held condition met$`, 10*time.Second)
	<-wait.done
	if wait.err != nil {
		t.Errorf("kubectl wait --for=delete: %v", wait.err)
	}

	out = k.ok("", "api-resources")
	if !regexp.MustCompile(`(?m)^deployments\s+deploy\s+apps/v1\s+true\s+Deployment$`).MatchString(out) {
		t.Errorf("kubectl api-resources lacks deployments (deploy, apps/v1):\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^clusterroles\s+` + regexp.QuoteMeta(clusterRolesGVR.GroupVersion().String()) + `\s+false\s+ClusterRole$`).MatchString(out) {
		t.Errorf("kubectl api-resources lacks clusterroles of %s:\n%s", clusterRolesGVR.GroupVersion(), out)
	}

	out = k.ok("", "get", "all")
	if !regexp.MustCompile(`(?m)^deployment\.apps/kc-web\s+0/2\s+0\s+0\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get all:\n%s", out)
	}

	out = k.ok("", "get", "--raw", "/api/v1/namespaces/"+ns+"/configmaps")
	var list struct {
		Kind     string `json:"kind"`
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get --raw: %v: %s", err, out)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	if list.Kind != "ConfigMapList" || list.Metadata.ResourceVersion == "" || strings.Join(names, " ") != "kc-gen kc-late" {
		t.Errorf("kubectl get --raw configmaps: %s", out)
	}
}
