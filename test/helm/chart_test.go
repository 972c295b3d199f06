package helm

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// release is the release name the tests render and install.
const release = "rel"

// render is `helm template` of the chart with one values file (and extra helm flags) for
// namespace ns.
func render(t *testing.T, ns, valuesFile string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", ns, "-f", valuesFile}, extra...)
	return parseManifests(t, runHelm(t, args...))
}

// kinds counts objects by kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.GetKind()]++
	}
	return m
}

func TestLint(t *testing.T) {
	requireSetup(t)
	for _, name := range sortedKeys(valuesFiles(t)) {
		t.Run(name, func(t *testing.T) {
			out := runHelm(t, "lint", "--strict", chartDir, "--namespace", "platform", "-f", valuesFiles(t)[name])
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
	// The values schema rejects what the chart does not know (lint can fail).
	for _, bad := range [][]string{
		{"--set", "gateway.replicaz=2"},
		{"--set", "redis.mode=sentinel"},
		{"--set", "redis.mode=external"},
		{"--set", "pki.mode=existingSecret"},
		{"--set", "namingProfile=upstream"},
		{"--set", "gateway.requestTimeout=soon"},
		{"--set", "storage.extraArgs[0]=history-retention=1m"},
	} {
		if out, err := helmOutput(append([]string{"lint", "--strict", chartDir}, bad...)...); err == nil {
			t.Errorf("helm lint %v passed:\n%s", bad, out)
		}
	}
}

// TestTemplateDryRun renders the chart with every values file and sends every object to the
// Platform API server as a server-side dry run with strict field validation: the server's own
// validation and admission judge each Deployment, StatefulSet, Service, NetworkPolicy,
// PodDisruptionBudget, Job, RBAC object and (through CustomResourceDefinitions of
// testdata/cert-manager-crds.yaml) each cert-manager Certificate and Issuer.
func TestTemplateDryRun(t *testing.T) {
	requireSetup(t)
	c := newClient(t)
	const ns = "helm-dry-run"
	c.createNamespace(t, ns)
	ctx := context.Background()

	// The server's validation is real: an unknown field and an invalid value are refused.
	objs := render(t, ns, valuesFiles(t)["default-values"])
	var gw *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == release+"-platform-gateway" {
			gw = o
		}
	}
	if gw == nil {
		t.Fatal("no gateway Deployment rendered")
	}
	for what, mutate := range map[string]func(*unstructured.Unstructured){
		"an unknown field": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "x", "spec", "template", "spec", "bogusField")
		},
		"a string where an integer belongs": func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "two", "spec", "replicas")
		},
		"an unknown container field": func(o *unstructured.Unstructured) {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			containers[0].(map[string]any)["readinesProbe"] = map[string]any{}
			_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
		},
	} {
		bad := gw.DeepCopy()
		mutate(bad)
		r, err := c.resource(bad, ns)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err == nil {
			t.Errorf("a Deployment with %s passed the dry run", what)
		}
	}

	files := valuesFiles(t)
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			objs := render(t, ns, files[name])
			got := kinds(objs)
			want := map[string]int{"Deployment": 4, "Service": 2, "ConfigMap": 1, "ServiceAccount": 1}
			if values := readValues(t, files[name]); strings.Contains(values, "mode: certManager") {
				// One per file pair the pods mount, the admin's and the service account key's;
				// with the bootstrapped CA also the CA's (and its two Issuers).
				want["Certificate"] = 11
				if !strings.Contains(values, "issuerRef: {name") {
					want["Certificate"], want["Issuer"] = 12, 2
				}
			} else if !strings.Contains(values, "mode: existingSecret") {
				want["Job"], want["Role"], want["RoleBinding"], want["ServiceAccount"] = 1, 1, 1, 2
			}
			if !strings.Contains(readValues(t, files[name]), "mode: external") && !strings.Contains(readValues(t, files[name]), "mode: cluster") {
				want["StatefulSet"], want["Service"] = 1, 3
			}
			for kind, n := range want {
				if got[kind] != n {
					t.Errorf("%d %s objects rendered, want %d (all: %v)", got[kind], kind, n, got)
				}
			}
			if got["NetworkPolicy"] < 4 || got["PodDisruptionBudget"] != 4 {
				t.Errorf("NetworkPolicies %d, PodDisruptionBudgets %d; want 4 or more, 4", got["NetworkPolicy"], got["PodDisruptionBudget"])
			}
			for _, o := range objs {
				r, err := c.resource(o, ns)
				if err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
					continue
				}
				opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
				if o.GetKind() == "ServiceAccount" {
					// Created for real, as helm creates ServiceAccounts before anything else:
					// the ServiceAccount admission plugin refuses a Pod (the `helm test` pod)
					// whose account does not exist.
					opts.DryRun = nil
					if _, err := r.Create(ctx, o, opts); err != nil && !apierrors.IsAlreadyExists(err) {
						t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
					}
					continue
				}
				if _, err := r.Create(ctx, o, opts); err != nil {
					t.Errorf("%s %s: the dry run refused it: %v", o.GetKind(), o.GetName(), err)
				}
			}
			// A dry run stores nothing.
			if r, err := c.resource(gw, ns); err == nil {
				if _, err := r.Get(ctx, gw.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("after the dry runs, getting the gateway Deployment: %v, want NotFound", err)
				}
			}
			t.Logf("%d objects accepted: %v", len(objs), got)
		})
	}
}

func readValues(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// pkiFile is a path under /pki in a flag or a probe.
var pkiFile = regexp.MustCompile(`/pki/([A-Za-z0-9._-]+)`)

// TestServiceFlags runs each binary with the flags the chart gives its container and --help
// at the end: the binary's own flag parser accepts them (an unknown flag or a value of the
// wrong type exits 2). It also checks that each container's probes run the container's own
// binary and that every /pki file a container names is in its pod's PKI volume.
func TestServiceFlags(t *testing.T) {
	requireSetup(t)
	files := valuesFiles(t)
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			checked := 0
			for _, o := range render(t, "platform", files[name]) {
				podSpec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
				if !ok {
					continue
				}
				mounted := pkiVolumeFiles(podSpec)
				containers, _, _ := unstructured.NestedSlice(podSpec, "containers")
				for _, c := range containers {
					c := c.(map[string]any)
					image, _ := c["image"].(string)
					service, ok := strings.CutPrefix(strings.Split(image, ":")[0], "platform/")
					if !ok {
						continue // redis
					}
					bin := service
					if service == "platform" {
						bin = "allinone"
					}
					args, _, _ := unstructured.NestedStringSlice(c, "args")
					if len(args) > 0 && strings.HasPrefix(args[0], "--health-probe=https://") {
						// A probe (the `helm test` pod): run it against the Platform's gateway.
						checkProbe(t, o.GetName(), filepath.Join(bins, bin), args)
					} else {
						cmd := exec.Command(filepath.Join(bins, bin), append(args, "--help")...)
						if out, err := cmd.CombinedOutput(); err != nil {
							t.Errorf("%s %s: %s refuses the chart's flags %q: %v\n%s", o.GetKind(), o.GetName(), bin, args, err, lastLines(string(out), 5))
						}
					}
					checked++
					refs := strings.Join(args, " ")
					for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
						command, _, _ := unstructured.NestedStringSlice(c, probe, "exec", "command")
						if len(command) > 0 && command[0] != "/usr/local/bin/"+service {
							t.Errorf("%s %s: the %s runs %s, not the container's binary", o.GetName(), c["name"], probe, command[0])
						}
						refs += " " + strings.Join(command, " ")
					}
					for _, m := range pkiFile.FindAllStringSubmatch(refs, -1) {
						if service != "platform" && !mounted[m[1]] {
							t.Errorf("%s %s names /pki/%s, which its PKI volume does not hold (%v)", o.GetName(), c["name"], m[1], sortedKeys(mounted))
						}
					}
				}
			}
			if checked < 7 {
				t.Errorf("only %d containers checked", checked)
			}
		})
	}
}

// checkProbe runs a health probe the chart renders (binary --health-probe=https://<Service>/...
// --ca-file=/pki/ca.crt ...) against the running Platform instead: the same path and flags, the
// Platform's URL and CA. It must pass.
func checkProbe(t *testing.T, what, bin string, args []string) {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, platform.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(strings.TrimPrefix(args[0], "--health-probe="))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	probe := []string{"--health-probe=" + platform.URL + u.Path}
	for _, a := range args[1:] {
		probe = append(probe, strings.ReplaceAll(a, "/pki/ca.crt", caFile))
	}
	out, err := exec.Command(bin, probe...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("%s: the probe %q against the Platform: %v\n%s", what, probe, err, out)
	}
}

// pkiVolumeFiles are the paths of the pod's projected "pki" volume.
func pkiVolumeFiles(podSpec map[string]any) map[string]bool {
	files := map[string]bool{}
	volumes, _, _ := unstructured.NestedSlice(podSpec, "volumes")
	for _, v := range volumes {
		v := v.(map[string]any)
		if v["name"] != "pki" {
			continue
		}
		sources, _, _ := unstructured.NestedSlice(v, "projected", "sources")
		for _, s := range sources {
			items, _, _ := unstructured.NestedSlice(s.(map[string]any), "secret", "items")
			for _, it := range items {
				files[it.(map[string]any)["path"].(string)] = true
			}
		}
	}
	return files
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestInstall installs the chart into the running Platform as an operator would with the PKI
// made by the hook: the test runs the hook Job's `platform certs` command (the arguments the
// chart renders, against the Platform API) because nothing runs Jobs here, then `helm install
// --no-hooks`, reads every object of the release back through the API, upgrades and
// uninstalls. Then the cert-manager variant (the Certificates are stored; nothing issues them).
func TestInstall(t *testing.T) {
	requireSetup(t)
	c := newClient(t)
	ctx := context.Background()
	const ns = "helm-install"
	c.createNamespace(t, ns)
	values := valuesFiles(t)["default-values"]

	// The hook: `platform certs` with the Job's arguments, twice (the second keeps everything).
	objs := render(t, ns, values)
	secrets, _ := runPKIHook(t, c, ns, objs)
	pkiData := secrets[release+"-platform-pki"]
	for _, o := range objs {
		podSpec, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		if !ok || o.GetKind() == "Job" {
			continue
		}
		volumes, _, _ := unstructured.NestedSlice(podSpec, "volumes")
		for _, v := range volumes {
			sources, _, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources")
			for _, s := range sources {
				secret, _, _ := unstructured.NestedMap(s.(map[string]any), "secret")
				if secret == nil || secret["name"] != release+"-platform-pki" {
					continue
				}
				items, _, _ := unstructured.NestedSlice(secret, "items")
				for _, it := range items {
					if key := it.(map[string]any)["key"].(string); pkiData[key] == "" {
						t.Errorf("%s %s mounts %s, which the hook's Secret lacks", o.GetKind(), o.GetName(), key)
					}
				}
			}
		}
	}

	out := runHelm(t, "install", release, chartDir, "--namespace", ns, "-f", values, "--no-hooks", "--timeout", "2m")
	if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "admin.kubeconfig") {
		t.Errorf("helm install:\n%s", out)
	}
	manifest := parseManifests(t, runHelm(t, "get", "manifest", release, "--namespace", ns))
	if len(manifest) < 15 {
		t.Fatalf("the release has %d objects", len(manifest))
	}
	for _, o := range manifest {
		r, err := c.resource(o, ns)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s of the release: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		if got.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || got.GetAnnotations()["meta.helm.sh/release-name"] != release {
			t.Errorf("%s %s: labels %v, annotations %v", o.GetKind(), o.GetName(), got.GetLabels(), got.GetAnnotations())
		}
	}
	gw := get(t, c, ns, "apps/v1", "Deployment", release+"-platform-gateway")
	containers, _, _ := unstructured.NestedSlice(gw.Object, "spec", "template", "spec", "containers")
	var names []string
	for _, ct := range containers {
		names = append(names, ct.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"gateway", "authn", "authz", "admission"}) {
		t.Errorf("the gateway pod's containers: %v", names)
	}
	if n, _, _ := unstructured.NestedInt64(gw.Object, "spec", "replicas"); n != 2 {
		t.Errorf("gateway replicas %d, want 2", n)
	}

	// Upgrade: the stored Deployment follows the values.
	runHelm(t, "upgrade", release, chartDir, "--namespace", ns, "-f", values, "--no-hooks", "--set", "gateway.replicas=3", "--set", "storage.historyRetention=7m")
	gw = get(t, c, ns, "apps/v1", "Deployment", release+"-platform-gateway")
	if n, _, _ := unstructured.NestedInt64(gw.Object, "spec", "replicas"); n != 3 {
		t.Errorf("after the upgrade, gateway replicas %d, want 3", n)
	}
	st := get(t, c, ns, "apps/v1", "Deployment", release+"-platform-storage")
	stArgs := containerArgs(st, "storage")
	if !slices.Contains(stArgs, "--history-retention=7m") {
		t.Errorf("after the upgrade, storage args %v", stArgs)
	}
	if out := runHelm(t, "status", release, "--namespace", ns); !strings.Contains(out, "REVISION: 2") {
		t.Errorf("helm status:\n%s", out)
	}

	// Uninstall removes the release's objects; the hook's Secrets (made by the Job, not by Helm)
	// stay, so a reinstall keeps the CA.
	runHelm(t, "uninstall", release, "--namespace", ns, "--no-hooks", "--timeout", "2m")
	for _, o := range manifest {
		r, _ := c.resource(o, ns)
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := r.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s %s after helm uninstall: %v", o.GetKind(), o.GetName(), err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	get(t, c, ns, "v1", "Secret", release+"-platform-pki")

	// cert-manager: the Certificates and Issuers are stored and read back.
	runHelm(t, "install", "cm", chartDir, "--namespace", ns, "-f", valuesFiles(t)["cert-manager-values"], "--timeout", "2m")
	for _, name := range []string{"cm-platform-storage", "cm-platform-gateway-serving", "cm-platform-service-account-key", "cm-platform-ca"} {
		cert := get(t, c, ns, "cert-manager.io/v1", "Certificate", name)
		if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s == "" {
			t.Errorf("Certificate %s has no secretName", name)
		}
	}
	get(t, c, ns, "cert-manager.io/v1", "Issuer", "cm-platform-ca")
	runHelm(t, "uninstall", "cm", "--namespace", ns, "--timeout", "2m")
}

// get reads one object (failing the test when it cannot).
func get(t *testing.T, c *client, ns, apiVersion, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	r, err := c.resource(o, ns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return got
}

// containerArgs are the args of one container of a workload.
func containerArgs(o *unstructured.Unstructured, container string) []string {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, ct := range containers {
		ct := ct.(map[string]any)
		if ct["name"] == container {
			args, _, _ := unstructured.NestedStringSlice(ct, "args")
			return args
		}
	}
	return nil
}

// runPKIHook runs the rendered PKI Job's command (platform certs with the chart's arguments)
// against the Platform API, as the Job would in a cluster, twice, and returns the Secrets it
// wrote (name -> key -> value) and the directory of the first run (the files in pki/, the admin
// kubeconfig in out/). The second run must keep everything.
func runPKIHook(t *testing.T, c *client, ns string, objs []*unstructured.Unstructured) (map[string]map[string]string, string) {
	t.Helper()
	var job *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Job" && o.GetName() == release+"-platform-pki" {
			job = o
		}
	}
	if job == nil {
		t.Fatal("no PKI hook Job rendered")
	}
	if job.GetAnnotations()["helm.sh/hook"] != "pre-install,pre-upgrade" {
		t.Errorf("the PKI Job's hook annotation: %q", job.GetAnnotations()["helm.sh/hook"])
	}
	args := containerArgs(job, "certs")
	if len(args) == 0 || args[0] != "certs" {
		t.Fatalf("the PKI Job's args: %v", args)
	}
	profile := ""
	containers, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
	for _, e := range env {
		if e := e.(map[string]any); e["name"] == "PLATFORM_NAMING_PROFILE" {
			profile, _ = e["value"].(string)
		}
	}
	if profile == "" {
		t.Error("the PKI Job does not set PLATFORM_NAMING_PROFILE")
	}
	dir := t.TempDir()
	var hookArgs []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--dir="):
			a = "--dir=" + filepath.Join(dir, "pki")
		case strings.HasPrefix(a, "--kubeconfig-dir="):
			a = "--kubeconfig-dir=" + filepath.Join(dir, "out")
		}
		hookArgs = append(hookArgs, a)
	}
	hookArgs = append(hookArgs, "--kubeconfig="+platform.Kubeconfig)
	runCerts := func(work string) string {
		a := slices.Clone(hookArgs)
		for i := range a {
			a[i] = strings.Replace(a[i], dir, work, 1)
		}
		cmd := exec.Command(filepath.Join(bins, "allinone"), a...)
		cmd.Env = append(os.Environ(), "PLATFORM_NAMING_PROFILE="+profile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("platform %s: %v\n%s", strings.Join(a, " "), err, out)
		}
		return string(out)
	}
	first := runCerts(dir)
	for _, want := range []string{"created  ca.crt", "created  secret/" + ns + "/" + release + "-platform-pki", "created  secret/" + ns + "/" + release + "-platform-admin-kubeconfig"} {
		if !strings.Contains(first, want) {
			t.Errorf("first run: no %q in\n%s", want, first)
		}
	}
	secrets := map[string]map[string]string{}
	for _, name := range []string{release + "-platform-pki", release + "-platform-admin-kubeconfig"} {
		s := get(t, c, ns, "v1", "Secret", name)
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		secrets[name] = data
	}
	pki := secrets[release+"-platform-pki"]
	for _, f := range []string{"ca.crt", "ca.key", "sa.key", "gateway-serving.crt", "storage.key", "controllers-client.crt"} {
		if pki[f] == "" {
			t.Errorf("the PKI Secret lacks %s (has %v)", f, sortedKeys(pki))
		}
	}
	for _, f := range []string{"admin.crt", "admin.key", "admin.kubeconfig"} {
		if pki[f] != "" {
			t.Errorf("the services' PKI Secret holds the administrator's %s", f)
		}
		if secrets[release+"-platform-admin-kubeconfig"][f] == "" {
			t.Errorf("the admin Secret lacks %s", f)
		}
	}
	checkPKI(t, ns, pki, secrets[release+"-platform-admin-kubeconfig"])

	// A second run in a fresh directory (a new Job pod) restores from the Secrets and keeps
	// everything: the same CA, no Secret rewritten.
	second := runCerts(t.TempDir())
	if strings.Contains(second, "created") || strings.Contains(second, "renewed") || !strings.Contains(second, "kept     secret/"+ns+"/"+release+"-platform-pki") {
		t.Errorf("second run changed something:\n%s", second)
	}
	if again := get(t, c, ns, "v1", "Secret", release+"-platform-pki"); fmt.Sprint(again.Object["data"]) != fmt.Sprint(map[string]any(toAny(pki))) {
		t.Error("the second run changed the PKI Secret")
	}
	return secrets, dir
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
