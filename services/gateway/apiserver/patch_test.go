package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

const (
	jsonPatch      = "application/json-patch+json"
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
)

// PATCH with JSON patch, merge patch and strategic merge patch; the stored object changes only
// through a patch that applies, and a resourceVersion in the patch is a precondition.
func TestPatchTypes(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	cm := configMap("p", map[string]string{"a": "1", "b": "2"})
	cm["metadata"].(map[string]any)["labels"] = map[string]string{"keep": "yes"}
	created := must(t, do(t, e, "POST", cms, cm), http.StatusCreated)

	r := must(t, do(t, e, "PATCH", cms+"/p", `[{"op":"replace","path":"/data/a","value":"10"},{"op":"add","path":"/data/c","value":"3"}]`, "Content-Type", jsonPatch), http.StatusOK)
	if path(r, "data.a") != "10" || path(r, "data.c") != "3" || path(r, "metadata.resourceVersion") == path(created, "metadata.resourceVersion") {
		t.Errorf("JSON patch: %v", r)
	}
	r = must(t, do(t, e, "PATCH", cms+"/p", `{"data":{"b":null,"d":"4"},"metadata":{"labels":{"new":"x"}}}`, "Content-Type", mergePatch), http.StatusOK)
	if _, ok := r["data"].(map[string]any)["b"]; ok || path(r, "data.d") != "4" || path(r, "metadata.labels.keep") != "yes" || path(r, "metadata.labels.new") != "x" {
		t.Errorf("merge patch: %v", r)
	}
	// Strategic merge: containers merge by name instead of replacing the list.
	must(t, do(t, e, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("d")), http.StatusCreated)
	r = must(t, do(t, e, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
		`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}`, "Content-Type", strategicPatch), http.StatusOK)
	containers := path(r, "spec.template.spec.containers").([]any)
	if len(containers) != 2 || path(r, "metadata.generation") != float64(2) {
		t.Errorf("strategic merge: %d containers, generation %v", len(containers), path(r, "metadata.generation"))
	}
	// The same patch as a merge patch replaces the list.
	r = must(t, do(t, e, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
		`{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"busybox"}]}}}}`, "Content-Type", mergePatch), http.StatusOK)
	if n := len(path(r, "spec.template.spec.containers").([]any)); n != 1 {
		t.Errorf("merge patch of a list: %d containers", n)
	}

	// Preconditions and dry-run.
	cur := must(t, do(t, e, "GET", cms+"/p", nil), http.StatusOK)
	do(t, e, "PATCH", cms+"/p", `{"metadata":{"resourceVersion":"1"},"data":{"z":"z"}}`, "Content-Type", mergePatch).status(t, http.StatusConflict, "Conflict")
	must(t, do(t, e, "PATCH", cms+"/p", `{"metadata":{"resourceVersion":"`+path(cur, "metadata.resourceVersion").(string)+`"},"data":{"z":"z"}}`, "Content-Type", mergePatch), http.StatusOK)
	cur = must(t, do(t, e, "GET", cms+"/p", nil), http.StatusOK)
	dry := must(t, do(t, e, "PATCH", cms+"/p?dryRun=All", `{"data":{"dry":"run"}}`, "Content-Type", mergePatch), http.StatusOK)
	if path(dry, "data.dry") != "run" {
		t.Errorf("dry-run patch answer %v", dry["data"])
	}
	if after := must(t, do(t, e, "GET", cms+"/p", nil), http.StatusOK); path(after, "metadata.resourceVersion") != path(cur, "metadata.resourceVersion") {
		t.Error("a dry-run patch was stored")
	}
	// Status subresource: a patch there changes only status.
	r = must(t, do(t, e, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d/status",
		`{"status":{"replicas":3},"spec":{"replicas":9}}`, "Content-Type", mergePatch), http.StatusOK)
	if path(r, "status.replicas") != float64(3) || path(r, "spec.replicas") == float64(9) {
		t.Errorf("status patch: status %v spec.replicas %v", r["status"], path(r, "spec.replicas"))
	}
}

// Bad patches get a clear 4xx Status and leave the stored object untouched.
func TestPatchBadInput(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", cms, configMap("p", map[string]string{"a": "1"})), http.StatusCreated)
	before := must(t, do(t, e, "GET", cms+"/p", nil), http.StatusOK)
	cases := []struct {
		name, body, contentType string
		code                    int
		reason                  string
	}{
		{"malformed JSON patch", `[{"op":"replace"`, jsonPatch, 400, "BadRequest"},
		{"JSON patch that is not a list", `{"op":"add"}`, jsonPatch, 400, "BadRequest"},
		{"unknown op", `[{"op":"frobnicate","path":"/data/a"}]`, jsonPatch, 400, "BadRequest"},
		{"op without path", `[{"op":"add","value":"x"}]`, jsonPatch, 400, "BadRequest"},
		{"failing test op", `[{"op":"test","path":"/data/a","value":"2"},{"op":"replace","path":"/data/a","value":"3"}]`, jsonPatch, 422, "Invalid"},
		{"remove of a missing path", `[{"op":"remove","path":"/data/nothing"}]`, jsonPatch, 422, "Invalid"},
		{"malformed merge patch", `{"data":`, mergePatch, 400, "BadRequest"},
		{"wrong type after patching", `{"data":{"a":5}}`, mergePatch, 400, "BadRequest"},
		{"renaming", `{"metadata":{"name":"q"}}`, mergePatch, 400, "BadRequest"},
		{"changing the kind", `{"kind":"Secret"}`, mergePatch, 400, "BadRequest"},
		{"unsupported patch type", `{}`, "application/json", 415, "UnsupportedMediaType"},
		{"strict unknown field", `{"bogus":1}`, mergePatch, 400, "BadRequest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := cms + "/p"
			if strings.HasPrefix(c.name, "strict") {
				url += "?fieldValidation=Strict"
			}
			msg := do(t, e, "PATCH", url, c.body, "Content-Type", c.contentType).status(t, c.code, c.reason)
			if c.code == 415 && !strings.Contains(msg, jsonPatch) {
				t.Errorf("415 does not list the accepted types: %q", msg)
			}
		})
	}
	do(t, e, "PATCH", cms+"/missing", `{"data":{"a":"b"}}`, "Content-Type", mergePatch).status(t, http.StatusNotFound, "NotFound")
	after := must(t, do(t, e, "GET", cms+"/p", nil), http.StatusOK)
	if path(after, "metadata.resourceVersion") != path(before, "metadata.resourceVersion") || path(after, "data.a") != "1" {
		t.Errorf("a bad patch changed the object: %v", after)
	}
	// Warn (default): an unknown field in a patch is dropped with a warning.
	r := do(t, e, "PATCH", cms+"/p", `{"bogus":1}`, "Content-Type", mergePatch)
	must(t, r, http.StatusOK)
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], "bogus") {
		t.Errorf("warnings %q", w)
	}
}

// The scale subresource (autoscaling/v1 Scale over spec.replicas), read, replaced and patched as
// kubectl scale does; discovery names its kind.
func TestScaleSubresource(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const deps = "/apis/apps/v1/namespaces/default/deployments"
	must(t, do(t, e, "POST", deps, deployment("d")), http.StatusCreated)
	s := must(t, do(t, e, "GET", deps+"/d/scale", nil), http.StatusOK)
	if s["kind"] != "Scale" || s["apiVersion"] != "autoscaling/v1" || path(s, "spec.replicas") != float64(1) || path(s, "status.selector") != "app=d" {
		t.Fatalf("scale: %v", s)
	}
	s["spec"] = map[string]any{"replicas": 4}
	if got := must(t, do(t, e, "PUT", deps+"/d/scale", s), http.StatusOK); path(got, "spec.replicas") != float64(4) {
		t.Errorf("PUT scale: %v", got)
	}
	do(t, e, "PUT", deps+"/d/scale", s).status(t, http.StatusConflict, "Conflict") // stale resourceVersion
	// A Scale's uid is a precondition on its parent's, as upstream's.
	s = must(t, do(t, e, "GET", deps+"/d/scale", nil), http.StatusOK)
	s["metadata"].(map[string]any)["uid"] = "00000000-0000-0000-0000-000000000000"
	if msg := do(t, e, "PUT", deps+"/d/scale", s).status(t, http.StatusConflict, "Conflict"); !strings.Contains(msg, "Precondition failed: UID") {
		t.Errorf("PUT scale with another uid: %s", msg)
	}
	if got := must(t, do(t, e, "PATCH", deps+"/d/scale", `{"spec":{"replicas":6}}`, "Content-Type", mergePatch), http.StatusOK); path(got, "spec.replicas") != float64(6) {
		t.Errorf("PATCH scale: %v", got)
	}
	d := must(t, do(t, e, "GET", deps+"/d", nil), http.StatusOK)
	if path(d, "spec.replicas") != float64(6) || path(d, "metadata.generation") != float64(3) {
		t.Errorf("deployment after scaling: replicas %v generation %v", path(d, "spec.replicas"), path(d, "metadata.generation"))
	}
	do(t, e, "PATCH", deps+"/d/scale", `{"spec":{"replicas":-1}}`, "Content-Type", mergePatch).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "GET", cms+"/x/scale", nil).status(t, http.StatusNotFound, "NotFound")
	apps := must(t, do(t, e, "GET", "/apis/apps/v1", nil), http.StatusOK)
	if sc := find(apps["resources"].([]any), "name", "deployments/scale"); sc == nil || sc["kind"] != "Scale" || sc["group"] != "autoscaling" || sc["version"] != "v1" {
		t.Errorf("discovery of deployments/scale: %v", sc)
	}
}
