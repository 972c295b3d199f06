package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// auditPolicy records config maps of namespace "full" with bodies both ways, those of "trimmed"
// too but without managed fields, secrets with the request body only, and everything else but
// health at Metadata; RequestReceived is omitted except for watches' rule.
func auditPolicy() string {
	return `apiVersion: ` + naming.Group("audit.k8s.io") + `/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*"]
- level: RequestResponse
  namespaces: ["full"]
  resources: [{group: "", resources: ["configmaps"]}]
- level: RequestResponse
  namespaces: ["trimmed"]
  resources: [{group: "", resources: ["configmaps"]}]
  omitManagedFields: true
- level: Request
  resources: [{group: "", resources: ["secrets"]}]
- level: Metadata
`
}

// readEvents reads the audit log's events.
func readEvents(t *testing.T, path string) []audit.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev audit.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("an audit line is not an Event: %v\n%s", err, sc.Text())
		}
		out = append(out, ev)
	}
	return out
}

// eventsOf waits (bounded) until the log holds an event at stage last for the request whose
// Audit-Id is id, and returns the request's events in order.
func eventsOf(t *testing.T, path, id string, last audit.Stage) []audit.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var mine []audit.Event
		done := false
		for _, ev := range readEvents(t, path) {
			if string(ev.AuditID) == id {
				mine = append(mine, ev)
				done = done || ev.Stage == last
			}
		}
		if done {
			return mine
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for audit id %s after 10s; events %+v", last, id, mine)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func do(t *testing.T, c *http.Client, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// The audit log (issue 14): levels record what upstream's record (Metadata: no bodies; Request:
// the request body; RequestResponse: both), stages are omitted as the policy says, watches get
// ResponseStarted, failures carry the Status answered, impersonation and authorization
// decisions are recorded, health is left out, and every event carries the response's Audit-Id.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy()), 0o600); err != nil {
		t.Fatal(err)
	}
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.Audit = audit.Options{PolicyFile: policy, LogPath: logPath, Format: "json"}
	}})
	for _, ns := range []string{"full", "trimmed", "meta"} {
		if resp, body := do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`); resp.StatusCode != 201 {
			t.Fatalf("namespace %s: %d %s", ns, resp.StatusCode, body)
		}
	}
	cm := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"v"}}`
	}

	// RequestResponse: both bodies, managed fields kept; authorization recorded.
	resp, _ := do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces/full/configmaps?fieldManager=audit-test", cm("a"))
	evs := eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)
	if len(evs) != 1 {
		t.Fatalf("RequestReceived is omitted by the policy: events %+v", evs)
	}
	ev := evs[0]
	authz := naming.Group("authorization.k8s.io")
	if ev.Level != audit.LevelRequestResponse || ev.Verb != "create" || ev.User.Username != "admin" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != 201 ||
		ev.ObjectRef == nil || *ev.ObjectRef != (audit.ObjectReference{Resource: "configmaps", Namespace: "full", APIVersion: "v1"}) ||
		ev.Annotations[authz+"/decision"] != "allow" || ev.APIVersion != naming.Group("audit.k8s.io")+"/v1" || ev.Kind != "Event" ||
		!strings.HasPrefix(ev.RequestURI, "/api/v1/namespaces/full/configmaps?") || len(ev.SourceIPs) == 0 || ev.RequestReceivedTimestamp.IsZero() ||
		ev.StageTimestamp.Before(&ev.RequestReceivedTimestamp) {
		t.Errorf("RequestResponse event: %+v", ev)
	}
	if !bytes.Contains(ev.RequestObject, []byte(`"k":"v"`)) || !bytes.Contains(ev.ResponseObject, []byte(`"uid"`)) || !bytes.Contains(ev.ResponseObject, []byte("managedFields")) {
		t.Errorf("RequestResponse bodies: request %s, response %s", ev.RequestObject, ev.ResponseObject)
	}

	// omitManagedFields on the rule.
	resp, _ = do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces/trimmed/configmaps?fieldManager=audit-test", cm("b"))
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if len(ev.ResponseObject) == 0 || bytes.Contains(ev.ResponseObject, []byte("managedFields")) {
		t.Errorf("omitManagedFields: response %s", ev.ResponseObject)
	}

	// Request: the request body only.
	resp, _ = do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces/meta/secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"password":"x"}}`)
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if ev.Level != audit.LevelRequest || !bytes.Contains(ev.RequestObject, []byte("password")) || ev.ResponseObject != nil {
		t.Errorf("Request event: level %s, request %s, response %s", ev.Level, ev.RequestObject, ev.ResponseObject)
	}

	// Metadata: no bodies; a failure carries the Status answered.
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/meta/configmaps/missing", "")
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if ev.Level != audit.LevelMetadata || ev.RequestObject != nil || ev.ResponseObject != nil || ev.ResponseStatus == nil ||
		ev.ResponseStatus.Code != 404 || ev.ResponseStatus.Reason != "NotFound" || !strings.Contains(ev.ResponseStatus.Message, `"missing" not found`) {
		t.Errorf("Metadata failure event: %+v status %+v", ev, ev.ResponseStatus)
	}

	// Impersonation: the caller as user, the identity as impersonatedUser.
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/meta/configmaps", "", "Impersonate-User", "jane", "Impersonate-Group", "team")
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if ev.User.Username != "admin" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != "jane" || ev.Verb != "list" {
		t.Errorf("impersonation: user %+v impersonated %+v verb %s", ev.User, ev.ImpersonatedUser, ev.Verb)
	}

	// Unauthenticated: recorded with no user and 401.
	resp, _ = do(t, e.Bearer("not-a-token"), "GET", e.URL+"/api/v1/namespaces", "")
	ev = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)[0]
	if ev.User.Username != "" || ev.ResponseStatus.Code != 401 {
		t.Errorf("unauthenticated: %+v status %+v", ev.User, ev.ResponseStatus)
	}

	// A watch: ResponseStarted when it starts answering, ResponseComplete when it ends.
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/meta/configmaps?watch=true&timeoutSeconds=1", "")
	evs = eventsOf(t, logPath, resp.Header.Get("Audit-Id"), audit.StageResponseComplete)
	if len(evs) != 2 || evs[0].Stage != audit.StageResponseStarted || evs[1].Stage != audit.StageResponseComplete || evs[0].Verb != "watch" {
		t.Errorf("watch stages: %+v", evs)
	}

	// Health is None: nothing recorded.
	resp, _ = do(t, e.Admin, "GET", e.URL+"/healthz", "")
	id := resp.Header.Get("Audit-Id")
	marker, _ := do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/meta", "")
	eventsOf(t, logPath, marker.Header.Get("Audit-Id"), audit.StageResponseComplete)
	for _, ev := range readEvents(t, logPath) {
		if string(ev.AuditID) == id {
			t.Errorf("a health check was recorded: %+v", ev)
		}
	}
	body, err := metricsText(e)
	if err != nil || !strings.Contains(body, `apiserver_audit_event_total{level="RequestResponse"}`) {
		t.Errorf("audit metrics: %v\n%.400s", err, body)
	}
}

func metricsText(e *gatewaytest.Env) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/metrics", nil)
	resp, err := e.Admin.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(data), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(data), err
}

// The audit flags are checked at start, each error naming its flag.
func TestAuditFlags(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Policy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts audit.Options
		want string
	}{
		{audit.Options{PolicyFile: bad, LogPath: "-", Format: "json"}, "--audit-policy-file: "},
		{audit.Options{PolicyFile: bad, Format: "json"}, "--audit-policy-file needs --audit-log-path"},
		{audit.Options{LogPath: "-", Format: "json"}, "--audit-log-path needs --audit-policy-file"},
		{audit.Options{Format: "legacy"}, `--audit-log-format "legacy"`},
		{audit.Options{Format: "json", MaxAge: -1}, "must not be negative"},
	} {
		cfg := server.DefaultConfig()
		cfg.Audit = c.opts
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
}
