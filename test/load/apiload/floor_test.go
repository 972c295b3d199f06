package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// version and null are scenarios of their own, which all does not include.
func TestParseFloorScenarios(t *testing.T) {
	if got, err := parseScenarios("version,null"); err != nil || !slices.Equal(got, []string{"version", "null"}) {
		t.Errorf("parseScenarios(version,null) = %v, %v", got, err)
	}
	if got, err := parseScenarios("all"); err != nil || !slices.Equal(got, []string{"create", "get", "patch", "apply", "list", "watch"}) {
		t.Errorf("parseScenarios(all) = %v, %v; want the six resource scenarios", got, err)
	}
	if got, err := parseScenarios("null,all,version"); err != nil || strings.Join(got, ",") != "null,create,get,patch,apply,list,watch,version" {
		t.Errorf("parseScenarios(null,all,version) = %v, %v", got, err)
	}
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &stderr); !strings.Contains(stderr.String(), "version (GET /version) or null") {
		t.Errorf("--help: %v; the usage does not name the floor scenarios:\n%s", err, stderr.String())
	}
}

// The null server answers every GET with the fixed ConfigMap over HTTP/2 (HTTP/1.1 with
// --http1's transport), through the client the null scenario uses.
func TestNullServer(t *testing.T) {
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(nullBody, &cm); err != nil || cm.Kind != "ConfigMap" || len(cm.Data) != 4 {
		t.Errorf("nullBody is not a ConfigMap with four data keys: %+v, %v", cm, err)
	}
	if len(nullBody) < 600 || len(nullBody) > 1000 {
		t.Errorf("nullBody is %d bytes, want about a ConfigMap get answer's (904)", len(nullBody))
	}
	ns, err := startNullServer()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	for http1, wantProto := range map[bool]string{false: "HTTP/2.0", true: "HTTP/1.1"} {
		c, tr, err := ns.client(http1, 4)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.hc.Get(c.base + "/api/v1/namespaces/x/configmaps/y")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Proto != wantProto || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, nullBody) {
			t.Errorf("http1=%v: %s %s %q, body of %d bytes; want 200 over %s, application/json, nullBody", http1, resp.Status, resp.Proto,
				resp.Header.Get("Content-Type"), len(body), wantProto)
		}
		var buf bytes.Buffer
		if err := c.do(context.Background(), http.MethodGet, "/version", nil, http.StatusOK, &buf); err != nil || !bytes.Equal(buf.Bytes(), nullBody) {
			t.Errorf("http1=%v: do: %v, %d bytes", http1, err, buf.Len())
		}
		tr.CloseIdleConnections()
	}
}
