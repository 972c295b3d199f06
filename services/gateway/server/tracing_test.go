package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"platform.io/libs/telemetry"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// syncBuffer is a log destination shared by the in-process services' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every API response names its trace (traceresponse, even a refused request's, and also
// without an exporter: the ids exist for correlation), the audit event records the trace id,
// and the debug request line carries it.
func TestTraceResponseHeaderAuditAndLog(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	shutdown, err := telemetry.Setup(context.Background(), "gateway-test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy()), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	e := gatewaytest.Start(t, gatewaytest.Options{
		Log: telemetry.NewLogger(&logs, slog.LevelDebug),
		Configure: func(c *server.Config) {
			c.Audit = audit.Options{PolicyFile: policy, LogPath: logPath, Format: "json"}
		},
	})
	header := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-00$`)

	resp, body := do(t, e.Admin, "POST", e.URL+"/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"traced"}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	m := header.FindStringSubmatch(resp.Header.Get(server.TraceResponseHeader))
	if m == nil {
		t.Fatalf("traceresponse %q", resp.Header.Get(server.TraceResponseHeader))
	}
	traceID, auditID := m[1], resp.Header.Get("Audit-Id")
	ev := eventsOf(t, logPath, auditID, audit.StageResponseComplete)[0]
	if got := ev.Annotations[server.TraceIDAnnotation()]; got != traceID {
		t.Errorf("audit annotation %s = %q, want %q (annotations %v)", server.TraceIDAnnotation(), got, traceID, ev.Annotations)
	}
	found := false
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["audit_id"] != auditID {
			continue
		}
		if rec["trace_id"] != traceID {
			t.Errorf("a log line of the request without its trace id %s: %s", traceID, line)
		}
		if rec["msg"] == "request" {
			found = true
			if rec["route"] != "/api/v1/namespaces/{namespace}/configmaps" || rec["code"] != float64(201) || rec["method"] != "POST" {
				t.Errorf("request line: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no request line with audit_id %s:\n%s", auditID, logs.String())
	}

	// A refused request names its trace too, and a caller's trace is continued.
	resp, _ = do(t, e.Admin, "GET", e.URL+"/api/v1/namespaces/default/configmaps/missing", "",
		"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
	if m := header.FindStringSubmatch(resp.Header.Get(server.TraceResponseHeader)); resp.StatusCode != 404 || m == nil || m[1] != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("404 with a traceparent: %d, traceresponse %q", resp.StatusCode, resp.Header.Get(server.TraceResponseHeader))
	}
}
