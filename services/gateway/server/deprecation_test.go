package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// Spec "Deprecation signals": a request to a deprecated resource (v1 Endpoints, deprecated in
// 1.33) gets upstream's Warning header, the audit annotation and the gauge with its labels;
// other resources get none of them.
func TestDeprecationSignals(t *testing.T) {
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte("apiVersion: "+naming.Group("audit.k8s.io")+"/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules: [{level: Metadata}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.Audit = audit.Options{PolicyFile: policy, LogPath: logPath, Format: "json"}
	}})
	want := `299 - "v1 Endpoints is deprecated in v1.33+; use ` + naming.Group("discovery.k8s.io") + `/v1 EndpointSlice"`
	resp, body := do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces/default/endpoints", `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"ep"}}`)
	if resp.StatusCode != http.StatusCreated || !contains(resp.Header.Values("Warning"), want) {
		t.Fatalf("create endpoints: %d %s, Warning %q, want %q", resp.StatusCode, body, resp.Header.Values("Warning"), want)
	}
	ev := eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if ev.Annotations[naming.GroupSuffix+"/deprecated"] != "true" {
		t.Errorf("audit annotations: %v", ev.Annotations)
	}
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/default/endpoints?watch=true&timeoutSeconds=1", "")
	if !contains(resp.Header.Values("Warning"), want) {
		t.Errorf("watch endpoints: Warning %q", resp.Header.Values("Warning"))
	}
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/default/configmaps", "")
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if len(resp.Header.Values("Warning")) != 0 || ev.Annotations[naming.GroupSuffix+"/deprecated"] != "" {
		t.Errorf("a resource that is not deprecated: Warning %q, annotations %v", resp.Header.Values("Warning"), ev.Annotations)
	}
	metrics, err := metricsText(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `apiserver_requested_deprecated_apis{group="",removed_release="",resource="endpoints",subresource="",version="v1"} 1`) ||
		strings.Contains(metrics, `apiserver_requested_deprecated_apis{group="",removed_release="",resource="configmaps"`) {
		t.Errorf("gauge:\n%s", grepLines(metrics, "apiserver_requested_deprecated_apis"))
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
