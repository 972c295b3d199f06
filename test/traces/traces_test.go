// Package traces checks that one API request is one trace across the split stack's processes:
// the gateway and every service it calls export their spans over OTLP/gRPC to a receiver this
// test runs (a stand-in for Jaeger's, which is outside our control), parented into one tree; the
// response names the trace (traceresponse header), the audit event records it, and the gateway's
// log lines for the request carry it.
package traces

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stack.CleanupBuild()
	os.Exit(code)
}

// span is one exported span, flattened.
type span struct {
	service, name           string
	traceID, spanID, parent string
	kind                    tracepb.Span_SpanKind
	attrs                   map[string]string
}

// collector is an OTLP/gRPC trace receiver that keeps every span it is sent.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []span
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, span{
					service: service, name: sp.GetName(), kind: sp.GetKind(),
					traceID: fmt.Sprintf("%x", sp.GetTraceId()), spanID: fmt.Sprintf("%x", sp.GetSpanId()),
					parent: fmt.Sprintf("%x", sp.GetParentSpanId()), attrs: attrMap(sp.GetAttributes()),
				})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// trace returns the spans of one trace received so far.
func (c *collector) trace(id string) []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []span
	for _, s := range c.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		case v.GetIntValue() != 0:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

var traceResponse = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// A ConfigMap created by a user whom RBAC allows it (so the gateway asks authn, authz, admission
// and storage) is one trace: a span from each of the five processes, every service's server span
// a child of the gateway's client span, up to the gateway's server span named by its route.
func TestOneTracePerRequest(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// The processes inherit the environment: the standard variables are their whole
	// configuration. A short batch delay keeps the test quick; the wait below is bounded anyway.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_SDK_DISABLED", "false")

	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit."+naming.GroupSuffix+"/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	start := time.Now()
	s, err := stack.Start(stack.Options{Mode: stack.Split, Dir: dir,
		GatewayArgs: []string{"--log-level=debug", "--audit-policy-file", policy, "--audit-log-path", auditLog}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	t.Logf("stack ready in %v", time.Since(start).Round(time.Millisecond))

	admin, err := s.HTTPClient("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	// A namespace with a ResourceQuota: the quota plugin asks for every write there, so the
	// create goes through admission too (without any interested plugin the gateway skips it).
	ns := "traces"
	post(t, admin, s.URL+"/api/v1/namespaces", `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"`+ns+`"}}`, http.StatusCreated)
	post(t, admin, s.URL+"/api/v1/namespaces/"+ns+"/resourcequotas", `{"kind":"ResourceQuota","apiVersion":"v1","metadata":{"name":"configmaps"},
		"spec":{"hard":{"count/configmaps":"100"}}}`, http.StatusCreated)
	rbac := "/apis/rbac.authorization." + naming.GroupSuffix + "/v1/namespaces/" + ns + "/"
	post(t, admin, s.URL+rbac+"roles", `{"kind":"Role","apiVersion":"rbac.authorization.`+naming.GroupSuffix+`/v1","metadata":{"name":"trace-writer"},
		"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["create"]}]}`, http.StatusCreated)
	post(t, admin, s.URL+rbac+"rolebindings", `{"kind":"RoleBinding","apiVersion":"rbac.authorization.`+naming.GroupSuffix+`/v1","metadata":{"name":"trace-writers"},
		"roleRef":{"apiGroup":"rbac.authorization.`+naming.GroupSuffix+`","kind":"Role","name":"trace-writer"},
		"subjects":[{"apiGroup":"rbac.authorization.`+naming.GroupSuffix+`","kind":"Group","name":"trace-writers"}]}`, http.StatusCreated)
	cmURL := s.URL + "/api/v1/namespaces/" + ns + "/configmaps"

	// The quota reaches the admission service, and its interest the gateway, through watches:
	// until then the gateway skips admission. Wait for it with the traces themselves: once a
	// probe's root span has arrived, the gateway's earlier-ended client spans have too.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		resp := postResp(t, admin, cmURL, fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"probe-%d"}}`, i))
		m := traceResponse.FindStringSubmatch(resp.Header.Get("Traceresponse"))
		if resp.StatusCode != http.StatusCreated || m == nil {
			t.Fatalf("probe create: %d, traceresponse %q", resp.StatusCode, resp.Header.Get("Traceresponse"))
		}
		if asked, ok := askedAdmission(col, m[1], m[2], deadline); !ok {
			t.Fatalf("the probe's server span %s never arrived", m[2])
		} else if asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway never asked admission about a create in a namespace with a quota")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The binding reaches the authorization service through its watch: until it does, the
	// create is forbidden. Each attempt is a new user with a new certificate, so the request
	// that succeeds finds nothing in the gateway's authentication and authorization caches and
	// calls both services.
	var resp *http.Response
	var user string
	deadline = time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		user = fmt.Sprintf("trace-writer-%d", i)
		c, err := s.HTTPClient(user, "trace-writers")
		if err != nil {
			t.Fatal(err)
		}
		resp = postResp(t, c, cmURL,
			fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"traced-%d"},"data":{"k":"v"}}`, i))
		c.CloseIdleConnections()
		if resp.StatusCode == http.StatusCreated {
			break
		}
		if resp.StatusCode != http.StatusForbidden || time.Now().After(deadline) {
			t.Fatalf("create as %s: %d, want 201 (403 only until RBAC arrives)", user, resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := traceResponse.FindStringSubmatch(resp.Header.Get("Traceresponse"))
	if m == nil {
		t.Fatalf("traceresponse header %q, want 00-<trace-id>-<span-id>-<flags>", resp.Header.Get("Traceresponse"))
	}
	traceID, serverSpanID := m[1], m[2]
	auditID := resp.Header.Get("Audit-Id")
	t.Logf("request as %s: trace %s, audit id %s", user, traceID, auditID)

	// Wait (bounded) until the whole tree has arrived: spans are batched and exported by five
	// processes independently.
	gateway := naming.Product + "-gateway"
	services := map[string]string{
		naming.Product + "-authn":     "platform.authn.v1.Authentication/",
		naming.Product + "-authz":     "platform.authz.v1.Authorization/",
		naming.Product + "-admission": "platform.admission.v1.Admission/",
		naming.Product + "-storage":   "platform.storage.v1.Storage/",
	}
	var problems []string
	var spans []span
	exportDeadline := time.Now().Add(20 * time.Second)
	for {
		spans = col.trace(traceID)
		problems = checkTree(spans, gateway, serverSpanID, services)
		if len(problems) == 0 || time.Now().After(exportDeadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(problems) > 0 {
		t.Errorf("trace %s:\n  %s\nspans received:\n%s", traceID, strings.Join(problems, "\n  "), describe(spans))
	} else {
		t.Logf("trace %s (%d spans):\n%s", traceID, len(spans), describe(spans))
	}

	// The audit event of the request records the trace id.
	found := false
	for _, line := range lines(t, auditLog) {
		var ev struct {
			AuditID     string            `json:"auditID"`
			Stage       string            `json:"stage"`
			Annotations map[string]string `json:"annotations"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.AuditID != auditID {
			continue
		}
		found = true
		if got := ev.Annotations["trace."+naming.Domain+"/trace-id"]; got != traceID {
			t.Errorf("audit event %s (%s): trace annotation %q, want %q", auditID, ev.Stage, got, traceID)
		}
	}
	if !found {
		t.Errorf("no audit event with auditID %s in %s", auditID, auditLog)
	}

	// Every gateway log line of the request carries its trace; the debug request line exists.
	var requestLine bool
	for _, line := range strings.Split(s.Logs("gateway"), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["audit_id"] != auditID && rec["trace_id"] != traceID {
			continue
		}
		if rec["trace_id"] != traceID || rec["span_id"] == nil {
			t.Errorf("gateway log line of the request without its trace (want trace_id %s and a span_id): %s", traceID, line)
		}
		if rec["msg"] == "request" && rec["audit_id"] == auditID {
			requestLine = true
			if rec["route"] != "/api/v1/namespaces/{namespace}/configmaps" || rec["code"] != float64(201) {
				t.Errorf("request log line: %s", line)
			}
		}
	}
	if !requestLine {
		t.Errorf("no debug request line with audit_id %s in the gateway log", auditID)
	}
}

// askedAdmission waits (until deadline) for the gateway's server span of a trace and tells
// whether the gateway called the admission service in it.
func askedAdmission(col *collector, traceID, rootID string, deadline time.Time) (asked, arrived bool) {
	for {
		spans := col.trace(traceID)
		for _, s := range spans {
			if s.spanID == rootID {
				arrived = true
			}
		}
		if arrived {
			for _, s := range spans {
				if s.kind == tracepb.Span_SPAN_KIND_CLIENT && strings.HasPrefix(s.name, "platform.admission.v1.Admission/") {
					return true, true
				}
			}
			return false, true
		}
		if time.Now().After(deadline) {
			return false, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkTree lists what the spans of one trace lack: the gateway's server span (the id the
// traceresponse header names, the root, named by the route, with semconv's HTTP attributes),
// and for each service a gRPC server span of its API whose parent is a gateway client span and
// whose ancestors reach the gateway's server span.
func checkTree(spans []span, gateway, serverSpanID string, services map[string]string) []string {
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.spanID] = s
	}
	var problems []string
	root, ok := byID[serverSpanID]
	switch {
	case !ok:
		problems = append(problems, "no span "+serverSpanID+" (the traceresponse header's)")
	default:
		const want = "POST /api/v1/namespaces/{namespace}/configmaps"
		if root.service != gateway || root.kind != tracepb.Span_SPAN_KIND_SERVER || root.name != want || root.parent != "" {
			problems = append(problems, fmt.Sprintf("the header's span is %s %q (%s, parent %q), want the gateway's root server span %q", root.service, root.name, root.kind, root.parent, want))
		}
		if root.attrs["http.route"] != "/api/v1/namespaces/{namespace}/configmaps" || root.attrs["http.request.method"] != "POST" || root.attrs["http.response.status_code"] != "201" {
			problems = append(problems, fmt.Sprintf("gateway server span attributes %v", root.attrs))
		}
	}
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, svc := range names {
		prefix := services[svc]
		ok := false
		for _, s := range spans {
			if s.service != svc || s.kind != tracepb.Span_SPAN_KIND_SERVER || !strings.HasPrefix(s.name, prefix) {
				continue
			}
			if rpcSystem(s.attrs) != "grpc" || !strings.Contains(s.attrs["rpc.service"]+"/"+s.attrs["rpc.method"], strings.TrimSuffix(prefix, "/")) {
				problems = append(problems, fmt.Sprintf("%s span %q: rpc attributes %v", svc, s.name, s.attrs))
			}
			p, has := byID[s.parent]
			if !has || p.kind != tracepb.Span_SPAN_KIND_CLIENT {
				continue // its parent has not arrived yet, or is not a client span
			}
			if reaches(byID, s, serverSpanID) {
				ok = true
			}
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("no %s server span (%s...) under a client span reaching the gateway's server span", svc, prefix))
		}
	}
	return problems
}

// rpcSystem is the RPC system attribute under its current (rpc.system.name) or earlier
// (rpc.system) semconv key.
func rpcSystem(attrs map[string]string) string {
	if v := attrs["rpc.system.name"]; v != "" {
		return v
	}
	return attrs["rpc.system"]
}

// reaches tells whether s's parent chain ends at the span root.
func reaches(byID map[string]span, s span, root string) bool {
	for range len(byID) + 1 {
		if s.spanID == root {
			return true
		}
		p, ok := byID[s.parent]
		if !ok {
			return false
		}
		s = p
	}
	return false
}

// describe prints the spans as a tree.
func describe(spans []span) string {
	children := map[string][]span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.spanID] = true
	}
	for _, s := range spans {
		p := s.parent
		if !ids[p] {
			p = ""
		}
		children[p] = append(children[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range children[parent] {
			fmt.Fprintf(&b, "%s%s %s %q\n", strings.Repeat("  ", depth+1), s.service, strings.TrimPrefix(s.kind.String(), "SPAN_KIND_"), s.name)
			walk(s.spanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

func postResp(t *testing.T, c *http.Client, url, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp
}

func post(t *testing.T, c *http.Client, url, body string, want int) {
	t.Helper()
	if resp := postResp(t, c, url, body); resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d", url, resp.StatusCode, want)
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
