package apiserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	authnserver "platform.io/services/authn/server"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
	storageserver "platform.io/services/storage/server"
)

// response is an answer of the gateway, read whole.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// obj decodes the body as a JSON object.
func (r response) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r.body)
	}
	return m
}

// status checks the answer is a Status with the code and reason, and returns its message.
func (r response) status(t *testing.T, code int, reason string) string {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %d, want %d: %s", r.code, code, r.body)
	}
	m := r.obj(t)
	if m["kind"] != "Status" || m["apiVersion"] != "v1" || m["status"] != "Failure" || int(m["code"].(float64)) != code {
		t.Fatalf("not a Failure Status with code %d: %s", code, r.body)
	}
	if reason != "" && m["reason"] != reason {
		t.Fatalf("reason %v, want %s: %s", m["reason"], reason, r.body)
	}
	msg, _ := m["message"].(string)
	return msg
}

// call sends one request with the client; headers alternate name, value.
func call(t *testing.T, c *http.Client, e *gatewaytest.Env, method, path string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

// do calls as the admin.
func do(t *testing.T, e *gatewaytest.Env, method, path string, body any, headers ...string) response {
	t.Helper()
	return call(t, e.Admin, e, method, path, body, headers...)
}

// must checks the code and returns the decoded body.
func must(t *testing.T, r response, code int) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %d, want %d: %s", r.code, code, r.body)
	}
	return r.obj(t)
}

// path reads a nested field of a decoded object ("metadata.name").
func path(m map[string]any, p string) any {
	var cur any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func configMap(name string, data map[string]string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data}
}

type gatewayConfig = server.Config
type storageConfig = storageserver.Config

type authnConfig = authnserver.Config
