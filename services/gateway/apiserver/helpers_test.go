package apiserver_test

import (
	"encoding/json"
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
	code, header, data := e.Do(t, c, method, path, body, headers...)
	return response{code: code, header: header, body: data}
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
