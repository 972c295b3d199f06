package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// auditLine is the part of an audit event the e2e test reads.
type auditLine struct {
	APIVersion string `json:"apiVersion"`
	Level      string `json:"level"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage   `json:"requestObject"`
	ResponseObject json.RawMessage   `json:"responseObject"`
	UserAgent      string            `json:"userAgent"`
	Annotations    map[string]string `json:"annotations"`
}

// The audit log of the all-in-one (`make run --audit-policy-file ... --audit-log-path ...`), seen
// through kubectl: per level, what upstream records.
func TestAuditLogAllInOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(`apiVersion: `+naming.Group("audit.k8s.io")+`/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
  namespaces: ["audit-full"]
- level: Request
  resources: [{group: "", resources: ["configmaps"]}]
  namespaces: ["audit-request"]
- level: None
  userGroups: ["system:masters"]
  verbs: ["get", "list", "watch"]
- level: Metadata
  resources: [{group: "", resources: ["configmaps", "namespaces"]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stack.Options{Mode: stack.AllInOne, GatewayArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath, "--audit-log-maxsize=10"}})
	k := newKubectl(t, s, "")
	for _, ns := range []string{"audit-full", "audit-request", "audit-meta"} {
		k.ok("", "create", "namespace", ns)
		k.ok("", "-n", ns, "create", "configmap", "cm", "--from-literal=secret-ish=value-"+ns)
		k.ok("", "-n", ns, "get", "configmap", "cm")
	}
	// The creates of each namespace, once written (the log is written as each request ends).
	var creates map[string]auditLine
	stack.Eventually(t, 10*time.Second, "the audit events of the three creates", func() error {
		creates = map[string]auditLine{}
		for _, ev := range readAuditLog(t, logPath) {
			// (The root CA publisher creates its ConfigMap in every namespace too.)
			if ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "configmaps" && strings.HasPrefix(ev.UserAgent, "kubectl") {
				creates[ev.ObjectRef.Namespace] = ev
			}
		}
		if len(creates) != 3 {
			return fmt.Errorf("creates recorded: %v", creates)
		}
		return nil
	})
	for ns, want := range map[string]struct {
		level         string
		request, resp bool
	}{"audit-full": {"RequestResponse", true, true}, "audit-request": {"Request", true, false}, "audit-meta": {"Metadata", false, false}} {
		ev := creates[ns]
		if ev.Level != want.level || ev.Stage != "ResponseComplete" || ev.User.Username != "admin" || ev.ResponseStatus == nil || ev.ResponseStatus.Code != 201 ||
			ev.APIVersion != naming.Group("audit.k8s.io")+"/v1" {
			t.Errorf("%s: %+v", ns, ev)
		}
		if got := strings.Contains(string(ev.RequestObject), "value-"+ns); got != want.request {
			t.Errorf("%s: request body recorded %v, want %v (%s)", ns, got, want.request, ev.RequestObject)
		}
		if got := strings.Contains(string(ev.ResponseObject), "value-"+ns); got != want.resp {
			t.Errorf("%s: response body recorded %v, want %v", ns, got, want.resp)
		}
	}
	// The admin's reads are None, but for the first rule (full): recorded with both bodies.
	for _, ev := range readAuditLog(t, logPath) {
		if ev.Verb == "get" && ev.ObjectRef != nil && ev.ObjectRef.Namespace == "audit-meta" {
			t.Errorf("a read the policy leaves out was recorded: %+v", ev)
		}
	}
}

func readAuditLog(t *testing.T, path string) []auditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditLine
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line: %v\n%s", err, sc.Text())
		}
		out = append(out, ev)
	}
	return out
}
