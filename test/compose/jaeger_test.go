//go:build jaeger

// The trace of one request, fetched from Jaeger in the compose stack (`make up TRACING=1`). Behind
// the jaeger build tag so that it runs as its own step of `make test`, with a timeout that holds
// building the Jaeger image from source on a machine with cold Go caches (docs/operations.md,
// "Compose", measured times and the decision):
//
//	go test -tags jaeger -count=1 -run TestComposeJaeger ./test/compose/
package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"platform.io/test/stack"
)

// TestComposeJaeger starts the stack with the tracing profile (every service exporting to the
// Jaeger container), creates a ConfigMap as a service account that RBAC allows it, in a namespace
// with a ResourceQuota (so the gateway asks authn, authz, admission and storage), takes the trace
// id from the response's traceresponse header and fetches that trace from Jaeger's query API on
// the published port: it must hold spans of each of the five services.
func TestComposeJaeger(t *testing.T) {
	composeCommand(t)
	buildImages(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	mk := exec.CommandContext(ctx, "make", "images", "TRACING=1", "IMAGES=jaeger", "VERSION="+imageTag)
	mk.Dir = stack.RepoRoot()
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make images TRACING=1 IMAGES=jaeger: %v\n%s", err, out)
	}
	t.Logf("the Jaeger image: %v\n%s", time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(out)))

	uiPort := freePort(t)
	p := startProject(t, "platformjaeger", "COMPOSE_PROFILES=tracing", "PLATFORM_OTLP_ENDPOINT=http://jaeger:4317", "JAEGER_UI_PORT="+strconv.Itoa(uiPort))
	admin := p.restConfig()
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ns := "traces-" + randomSuffix(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "writer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("100")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "writer", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The RBAC grant reaches the authorization service through its watch: retry until 201. Each
	// attempt has a token of its own: the gateway keeps a token's authentication for a while, so
	// a retry with the same token would have no authentication span.
	var traceID string
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; traceID == ""; i++ {
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "writer", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sa := rest.AnonymousClientConfig(admin)
		sa.BearerToken = tr.Status.Token
		client, err := rest.HTTPClientFor(sa)
		if err != nil {
			t.Fatal(err)
		}
		client.Timeout = 30 * time.Second
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"traced-%d"}}`, i)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sa.Host+"/api/v1/namespaces/"+ns+"/configmaps", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			parts := strings.Split(resp.Header.Get("traceresponse"), "-")
			if len(parts) != 4 || parts[3] != "01" {
				t.Fatalf("traceresponse %q: want 00-<trace id>-<span id>-01 (sampled)", resp.Header.Get("traceresponse"))
			}
			traceID = parts[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a ConfigMap as the service account: %s after 30s", resp.Status)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Jaeger has it after the services' batch export (5 s by default).
	want := []string{"platform-gateway", "platform-authn", "platform-authz", "platform-admission", "platform-storage"}
	var got map[string]int
	deadline = time.Now().Add(60 * time.Second)
	for {
		got = jaegerTrace(t, ctx, uiPort, traceID)
		missing := 0
		for _, s := range want {
			if got[s] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace %s in Jaeger after 60s has spans of %v; want each of %v", traceID, got, want)
		}
		time.Sleep(time.Second)
	}
	services := make([]string, 0, len(got))
	for s, n := range got {
		services = append(services, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(services)
	t.Logf("trace %s from Jaeger: spans by service %v", traceID, services)
}

// jaegerTrace fetches a trace from Jaeger's query API and counts its spans by service name.
func jaegerTrace(t *testing.T, ctx context.Context, port int, id string) map[string]int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/api/traces/"+id, nil)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Logf("Jaeger's query API: %v", err)
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		return nil // 404 until the spans arrive
	}
	var doc struct {
		Data []struct {
			Spans []struct {
				ProcessID string `json:"processID"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("Jaeger's answer: %v: %.300s", err, body)
	}
	out := map[string]int{}
	for _, tr := range doc.Data {
		for _, s := range tr.Spans {
			out[tr.Processes[s.ProcessID].ServiceName]++
		}
	}
	return out
}
