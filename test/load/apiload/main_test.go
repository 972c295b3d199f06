package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// tableRow is one parsed line of the result table.
type tableRow struct {
	scenario string
	clients  int
	rate     float64
	errors   int
}

// parseTable reads the rows of the table writeTable printed.
func parseTable(t *testing.T, out string) []tableRow {
	t.Helper()
	var rows []tableRow
	in := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 9 && f[0] == "scenario" && f[3] == "ops/s" {
			in = true
			continue
		}
		if !in || len(f) != 9 {
			in = false
			continue
		}
		var r tableRow
		r.scenario = f[0]
		if _, err := fmt.Sscan(f[1]+" "+f[3]+" "+f[8], &r.clients, &r.rate, &r.errors); err != nil {
			t.Fatalf("table row %q: %v", line, err)
		}
		rows = append(rows, r)
	}
	return rows
}

func runTool(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(args, &out, &errOut)
	t.Logf("apiload %s -> exit %d in %s\n%s%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out.String(), errOut.String())
	return code, out.String()
}

// wantRows checks that the run passed and reported each scenario at each client count with a
// positive rate and no errors.
func wantRows(t *testing.T, code int, out string, want map[string][]int) {
	t.Helper()
	if code != exitOK {
		t.Errorf("exit code %d, want %d", code, exitOK)
	}
	if strings.Contains(out, "FAIL:") || !strings.Contains(out, "\nPASS\n") {
		t.Errorf("the run reports failures or no PASS")
	}
	got := map[string]tableRow{}
	for _, r := range parseTable(t, out) {
		got[fmt.Sprintf("%s/%d", r.scenario, r.clients)] = r
	}
	for sc, counts := range want {
		for _, n := range counts {
			r, ok := got[fmt.Sprintf("%s/%d", sc, n)]
			switch {
			case !ok:
				t.Errorf("no row for %s with %d clients", sc, n)
			case r.rate <= 0 || r.errors != 0:
				t.Errorf("%s with %d clients: rate %v, %d errors; want a positive rate and no errors", sc, n, r.rate, r.errors)
			}
		}
	}
	if len(got) != len(parseTable(t, out)) {
		t.Errorf("duplicate rows")
	}
}

// TestAllScenariosAllInOne runs every scenario at two client counts against an all-in-one the
// tool starts and stops itself.
func TestAllScenariosAllInOne(t *testing.T) {
	code, out := runTool(t, "--start=allinone", "--scenario=all", "--clients=1,2", "--duration=1s", "--objects=200", "--watchers=5")
	wantRows(t, code, out, map[string][]int{
		"create": {1, 2}, "get": {1, 2}, "list": {1, 2}, "watch-write": {1}, "watch-deliver": {5},
	})
	if !strings.Contains(out, "over HTTP/2.0") {
		t.Errorf("the run did not use HTTP/2")
	}
	if !strings.Contains(out, "CPU cores used: ") {
		t.Errorf("no CPU notes")
	}
}

// TestRunningServer runs against a server the tool did not start: over HTTP/1.1 with a
// kubeconfig, then with --server and certificate files and --json; the run's namespaces are
// deleted afterwards.
func TestRunningServer(t *testing.T) {
	s, err := stack.Start(stack.Options{Mode: stack.AllInOne, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	code, out := runTool(t, "--kubeconfig="+s.Kubeconfig, "--http1", "--namespace=http1-run", "--scenario=get,list,watch",
		"--clients=3", "--duration=500ms", "--warmup=200ms", "--objects=50", "--watchers=4", "--rate=50")
	wantRows(t, code, out, map[string][]int{"get": {3}, "list": {3}, "watch-write": {1}, "watch-deliver": {4}})
	if !strings.Contains(out, "over HTTP/1.1") {
		t.Errorf("--http1 did not use HTTP/1.1")
	}

	dir := t.TempDir()
	cert, key, err := s.ClientCert("load-tester", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.crt": s.CAPEM, "client.crt": cert, "client.key": key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	code = run([]string{"--server=" + s.URL, "--ca-file=" + filepath.Join(dir, "ca.crt"), "--cert-file=" + filepath.Join(dir, "client.crt"),
		"--key-file=" + filepath.Join(dir, "client.key"), "--namespace=json-run", "--scenario=create", "--clients=2",
		"--duration=500ms", "--warmup=100ms", "--json"}, &stdout, &stderr)
	t.Logf("--json run: exit %d\n%s%s", code, stdout.String(), stderr.String())
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v", err)
	}
	if code != exitOK || !rep.Passed || len(rep.Results) != 1 || rep.Results[0].Scenario != "create" || rep.Results[0].OpsPerSec <= 0 {
		t.Errorf("--json run: exit %d, report %+v", code, rep)
	}

	// The floor scenarios, as a service account (whom the server lets GET /version), in no
	// namespace of their own.
	code, out = runTool(t, "--kubeconfig="+s.Kubeconfig, "--identity=serviceaccount", "--namespace=floor-run", "--scenario=version,null",
		"--clients=1", "--duration=300ms", "--warmup=0s")
	wantRows(t, code, out, map[string][]int{"version": {1}, "null": {1}})
	if rows := parseTable(t, out); len(rows) != 2 {
		t.Errorf("floor scenarios: %d rows, want 2", len(rows))
	}
	if !strings.Contains(out, "null: a do-nothing HTTPS server inside apiload, over HTTP/2.0") || !strings.Contains(out, "its CPU is part of apiload's") {
		t.Errorf("floor scenarios: no note on the null server")
	}

	// The run's namespaces are terminating or gone; the floor scenarios made none.
	client, err := s.HTTPClient("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"floor-run-version", "floor-run-null"} {
		resp, err := client.Get(s.URL + "/api/v1/namespaces/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("namespace %s: %s, want none", name, resp.Status)
		}
	}
	for _, ns := range []string{"http1-run-get", "http1-run-list", "http1-run-watch", "json-run-create", "floor-run-identity"} {
		resp, err := client.Get(s.URL + "/api/v1/namespaces/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Metadata struct {
				DeletionTimestamp string `json:"deletionTimestamp"`
			} `json:"metadata"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && got.Metadata.DeletionTimestamp == "" {
			t.Errorf("namespace %s: %d and not terminating after the run", ns, resp.StatusCode)
		}
	}
	// A namespace that exists already is not the tool's: the run refuses it.
	resp, err := client.Post(s.URL+"/api/v1/namespaces", "application/json", strings.NewReader(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"taken-get"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating namespace taken-get: %s", resp.Status)
	}
	if code, _ := runTool(t, "--kubeconfig="+s.Kubeconfig, "--namespace=taken", "--scenario=get", "--duration=100ms"); code != exitUsage {
		t.Errorf("a run in an existing namespace: exit %d, want %d", code, exitUsage)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--start=etcd"},
		{"--start=split", "--server=https://127.0.0.1:6443"},
		{"--start=allinone", "--kubeconfig=/dev/null"},
		{"--server=http://127.0.0.1:6443"},
		{"--server=127.0.0.1:6443"},
		{"--start=allinone", "--scenario=cas"},
		{"--start=allinone", "--scenario="},
		{"--start=allinone", "--clients=0"},
		{"--start=allinone", "--clients=1,x"},
		{"--start=allinone", "--duration=0s"},
		{"--start=allinone", "--warmup=-1s"},
		{"--start=allinone", "--objects=0"},
		{"--start=allinone", "--watchers=0"},
		{"--start=allinone", "--rate=0"},
		{"--start=allinone", "--namespace=Bad_Name"},
		{"--start=allinone", "--namespace=" + strings.Repeat("a", 51)},
		{"--start=allinone", "--kind=secret"},
		{"--start=allinone", "--kind=ConfigMap"},
		{"--start=allinone", "--kind="},
		{"--start=allinone", "--controllers=none"},
		{"--kubeconfig=/dev/null", "--controllers=off"},
		{"--start=allinone", "--watchers=10000", "--rate=10000", "--duration=1h"},
		{"--start=allinone", "--no-such-flag"},
		{"--start=allinone", "extra"},
		// Setup errors: nothing to load.
		{"--kubeconfig=/nonexistent/kubeconfig"},
		{"--server=https://127.0.0.1:1", "--ca-file=/nonexistent"},
		{"--server=https://127.0.0.1:1"},
	} {
		if code, _ := runTool(t, args...); code != exitUsage {
			t.Errorf("apiload %q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _ := runTool(t, "--help"); code != exitUsage {
		t.Errorf("--help: exit %d, want %d", code, exitUsage)
	}
}

// --kind chooses the kind (configmap by default); another value is a usage error; --help
// describes it.
func TestKindFlag(t *testing.T) {
	for args, want := range map[string]*objectKind{"": configMapKind, "--kind=configmap": configMapKind, "--kind=custom": customKind} {
		o, err := parseFlags(append([]string{"--start=split"}, strings.Fields(args)...), io.Discard)
		if err != nil || o.kind != want {
			t.Errorf("parseFlags(%q): kind %+v, %v; want %s", args, o, err, want.flag)
		}
	}
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"--start=split", "--kind=pod"}, &stderr); err == nil || !strings.Contains(err.Error(), `--kind "pod": want configmap or custom`) {
		t.Errorf("--kind=pod: %v", err)
	}
	if code := run([]string{"--start=split", "--kind=pod"}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--kind") {
		t.Errorf("--kind=pod: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if _, err := parseFlags([]string{"--help"}, &stderr); !errors.Is(err, flag.ErrHelp) ||
		!regexp.MustCompile(`-kind string\s+kind of the objects every scenario works on: configmap, or custom .*\(default "configmap"\)`).MatchString(stderr.String()) {
		t.Errorf("--help: %v; the usage does not describe --kind:\n%s", err, stderr.String())
	}
}

// TestCustomKind runs scenarios against the custom kind on a running server: the first run
// defines the kind and deletes the definition at the end; a second run reuses a definition that
// exists already and leaves it in place.
func TestCustomKind(t *testing.T) {
	s, err := stack.Start(stack.Options{Mode: stack.AllInOne, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	client, err := s.HTTPClient("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if g := discoverOn(t, s); g.apiextensions != naming.Group("apiextensions.k8s.io") {
		t.Fatalf("the server's apiextensions group is %s, want %s", g.apiextensions, naming.Group("apiextensions.k8s.io"))
	}
	crdURL := s.URL + crdsPath + "/" + customKind.crd
	// getCRD returns the definition's status code and whether it is being deleted.
	getCRD := func() (int, bool) {
		t.Helper()
		resp, err := client.Get(crdURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c crdObject
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return resp.StatusCode, c.Metadata.DeletionTimestamp != ""
	}

	code, out := runTool(t, "--kubeconfig="+s.Kubeconfig, "--kind=custom", "--namespace=custom-run", "--scenario=create,get,apply,watch",
		"--clients=2", "--duration=1s", "--warmup=200ms", "--watchers=4", "--rate=50")
	wantRows(t, code, out, map[string][]int{"create": {2}, "get": {2}, "apply": {2}, "watch-write": {1}, "watch-deliver": {4}})
	if !strings.Contains(out, "; kind LoadObject (apiload.example.com/v1, --kind=custom);") {
		t.Errorf("the header does not name the custom kind")
	}
	if code, deleting := getCRD(); code != http.StatusNotFound && !deleting {
		t.Errorf("the definition the run created: %d and not being deleted after the run", code)
	}
	// The definition goes once the server has deleted its objects.
	deadline := time.Now().Add(2 * time.Minute)
	for code, _ := getCRD(); code != http.StatusNotFound; code, _ = getCRD() {
		if time.Now().After(deadline) {
			t.Fatalf("the definition is still there (%d) two minutes after the run", code)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A definition that exists is reused, and stays.
	resp, err := client.Post(s.URL+crdsPath, "application/json", bytes.NewReader(customCRD()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating the definition: %s", resp.Status)
	}
	var stdout, stderr bytes.Buffer
	code = run([]string{"--kubeconfig=" + s.Kubeconfig, "--kind=custom", "--namespace=custom-reuse", "--scenario=patch,list", "--objects=20",
		"--clients=1", "--duration=500ms", "--warmup=100ms", "--json"}, &stdout, &stderr)
	t.Logf("--json run: exit %d\n%s%s", code, stdout.String(), stderr.String())
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v", err)
	}
	if code != exitOK || !rep.Passed || rep.Kind != "custom" || len(rep.Results) != 2 || rep.Results[0].Scenario != "patch" ||
		rep.Results[1].Scenario != "list" || rep.Results[0].OpsPerSec <= 0 || rep.Results[1].OpsPerSec <= 0 {
		t.Errorf("--json run: exit %d, report %+v", code, rep)
	}
	if !strings.Contains(stderr.String(), "reusing the CustomResourceDefinition "+customKind.crd) {
		t.Errorf("the run did not say it reused the definition")
	}
	if code, deleting := getCRD(); code != http.StatusOK || deleting {
		t.Errorf("the definition the run reused: %d, being deleted %v; want it left in place", code, deleting)
	}
}

// --identity: the scenarios run as a service account token or a non-admin user's certificate,
// allowed by a RoleBinding the tool creates; the custom kind works too. Admin-only setup is not
// affected, and a denied identity is reported, not measured.
func TestIdentities(t *testing.T) {
	for _, tc := range []struct{ start, identity, kind, webhook string }{
		{"allinone", "serviceaccount", "configmap", "noop"},
		{"split", "user", "custom", ""},
	} {
		code, out := runTool(t, "--start="+tc.start, "--identity="+tc.identity, "--kind="+tc.kind, "--webhook="+tc.webhook, "--scenario=create,get,patch,list",
			"--objects=20", "--clients=2", "--duration=500ms", "--warmup=100ms")
		wantRows(t, code, out, map[string][]int{"create": {2}, "get": {2}, "patch": {2}, "list": {2}})
		if !strings.Contains(out, "; as "+tc.identity) {
			t.Errorf("%s: the header does not name the identity:\n%s", tc.identity, out)
		}
	}
	for _, args := range [][]string{
		{"--start=split", "--identity=root"},
		{"--kubeconfig=/dev/null", "--identity=user"},
		{"--kubeconfig=/dev/null", "--authorization-mode=AlwaysAllow"},
	} {
		if code, _ := runTool(t, args...); code != exitUsage {
			t.Errorf("apiload %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
