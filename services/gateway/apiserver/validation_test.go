package apiserver_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

// Spec "Field validation": unknown and duplicate fields per level; wrong types and missing
// required fields are 400 at every level.
func TestFieldValidation(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME","unknownMeta":1},"data":{"a":"b"},"data":{"c":"d"},"bogus":true}`
	withName := func(n string) string { return strings.Replace(body, "NAME", n, 1) }

	// Warn (default): stored, one Warning header per field.
	r := do(t, e, "POST", cms, withName("warn"))
	must(t, r, http.StatusCreated)
	warnings := r.header.Values("Warning")
	if len(warnings) != 3 {
		t.Fatalf("Warn: %d Warning headers, want 3 (unknown metadata.unknownMeta, unknown bogus, duplicate data): %q", len(warnings), warnings)
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w, `299 - "`) {
			t.Errorf("Warning header %q is not a 299 warning", w)
		}
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{`unknown field \"bogus\"`, `unknown field \"metadata.unknownMeta\"`, `duplicate field \"data\"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q lack %s", warnings, want)
		}
	}
	// Ignore: stored, silent.
	r = do(t, e, "POST", cms+"?fieldValidation=Ignore", withName("ignore"))
	must(t, r, http.StatusCreated)
	if len(r.header.Values("Warning")) != 0 {
		t.Errorf("Ignore sent warnings: %q", r.header.Values("Warning"))
	}
	// Strict: 400 listing every field, nothing stored.
	msg := do(t, e, "POST", cms+"?fieldValidation=Strict", withName("strict")).status(t, http.StatusBadRequest, "BadRequest")
	for _, want := range []string{`unknown field "bogus"`, `unknown field "metadata.unknownMeta"`, `duplicate field "data"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Strict message %q lacks %s", msg, want)
		}
	}
	do(t, e, "GET", cms+"/strict", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "POST", cms+"?fieldValidation=Bogus", withName("x")).status(t, http.StatusBadRequest, "BadRequest")

	// YAML duplicates are caught too.
	yml := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: b\ndata:\n  c: d\n"
	r = do(t, e, "POST", cms+"?fieldValidation=Strict", yml, "Content-Type", "application/yaml")
	r.status(t, http.StatusBadRequest, "BadRequest")

	for _, level := range []string{"Ignore", "Warn", "Strict"} {
		// A wrong type is an error at every level.
		msg := do(t, e, "POST", cms+"?fieldValidation="+level, `{"metadata":{"name":"t"},"data":{"a":1}}`).status(t, http.StatusBadRequest, "BadRequest")
		if !strings.Contains(msg, "data") {
			t.Errorf("%s: type error message %q does not name the field", level, msg)
		}
		do(t, e, "POST", cms+"?fieldValidation="+level, `{"metadata":{"name":"t"},"data":[]}`).status(t, http.StatusBadRequest, "BadRequest")
		// A pod without containers misses a required field.
		msg = do(t, e, "POST", "/api/v1/namespaces/default/pods?fieldValidation="+level,
			`{"metadata":{"name":"p"},"spec":{"containers":[{"image":"x"}]}}`).status(t, http.StatusBadRequest, "BadRequest")
		if !strings.Contains(msg, "spec.containers[0].name") || !strings.Contains(msg, "Required value") {
			t.Errorf("%s: required-field message %q", level, msg)
		}
	}
	do(t, e, "POST", "/apis/rbac.authorization.platform.io/v1/clusterroles", `{"metadata":{"name":"no-rules"}}`) // rules are optional
	must(t, do(t, e, "GET", "/apis/rbac.authorization.platform.io/v1/clusterroles/no-rules", nil), http.StatusOK)
}

// Spec "Bad input": malformed bodies, oversized bodies, unknown kinds and versions, mismatched
// names and namespaces, bad selectors: a clear Status, nothing stored, the server stays up.
func TestBadInput(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	cases := []struct {
		name, method, path, body, contentType string
		code                                  int
		reason                                string
	}{
		{"malformed JSON", "POST", cms, `{"metadata":`, "application/json", 400, "BadRequest"},
		{"not an object", "POST", cms, `[1,2]`, "application/json", 400, "BadRequest"},
		{"malformed YAML", "POST", cms, "metadata: [\n", "application/yaml", 400, "BadRequest"},
		{"garbage protobuf", "POST", cms, "\x6b\x38\x73\x00\xff\xff\xff", "application/vnd.platform.protobuf", 400, "BadRequest"},
		{"protobuf without prefix", "POST", cms, "\x0a\x02hi", "application/vnd.platform.protobuf", 400, "BadRequest"},
		{"empty body", "POST", cms, "", "application/json", 400, "BadRequest"},
		{"unsupported body type", "POST", cms, `{}`, "text/plain", 415, "UnsupportedMediaType"},
		{"wrong kind", "POST", cms, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}}`, "application/json", 400, "BadRequest"},
		{"wrong version", "POST", cms, `{"kind":"ConfigMap","apiVersion":"v2","metadata":{"name":"x"}}`, "application/json", 400, "BadRequest"},
		{"unknown resource", "GET", "/api/v1/namespaces/default/nothings", "", "", 404, "NotFound"},
		{"unknown version", "GET", "/apis/apps/v9/deployments", "", "", 404, "NotFound"},
		{"unknown group", "GET", "/apis/nosuch.io/v1/things", "", "", 404, "NotFound"},
		{"unknown subresource", "GET", cms + "/x/nothing", "", "", 404, "NotFound"},
		{"name mismatch", "PUT", cms + "/a", `{"metadata":{"name":"b"}}`, "application/json", 400, "BadRequest"},
		{"namespace mismatch", "POST", cms, `{"metadata":{"name":"b","namespace":"other"}}`, "application/json", 400, "BadRequest"},
		{"bad label selector", "GET", cms + "?labelSelector=a%3D%3D%3Db", "", "", 400, "BadRequest"},
		{"bad field selector", "GET", cms + "?fieldSelector=spec.nothing%3Dx", "", "", 400, "BadRequest"},
		{"bad limit", "GET", cms + "?limit=-1", "", "", 400, "BadRequest"},
		{"bad dryRun", "POST", cms + "?dryRun=Some", `{"metadata":{"name":"b"}}`, "application/json", 400, "BadRequest"},
		{"POST to an item", "POST", cms + "/a", `{"metadata":{"name":"a"}}`, "application/json", 405, "MethodNotAllowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			if c.contentType != "" {
				headers = []string{"Content-Type", c.contentType}
			}
			var body any
			if c.body != "" || c.method == "POST" {
				body = c.body
			}
			do(t, e, c.method, c.path, body, headers...).status(t, c.code, c.reason)
		})
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	do(t, e, "POST", cms, append(append([]byte(`{"metadata":{"name":"big"},"data":{"a":"`), big...), `"}}`...)).status(t, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
	list := must(t, do(t, e, "GET", cms, nil), http.StatusOK)
	if n := len(list["items"].([]any)); n != 0 {
		t.Errorf("bad input stored %d objects: %v", n, list["items"])
	}
	must(t, do(t, e, "GET", "/api/v1/namespaces", nil), http.StatusOK)
}

// Spec "Event resource, group events.platform.io/v1": type Normal or Warning; action, reason,
// reportingController, reportingInstance required on create; deprecated fields not allowed.
func TestEventsV1Rules(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const events = "/apis/events.platform.io/v1/namespaces/default/events"
	good := `{"metadata":{"name":"e1"},"eventTime":"2026-01-01T00:00:00.000000Z","type":"Normal","action":"Started","reason":"Started","reportingController":"platform.io/test","reportingInstance":"test-1","regarding":{"kind":"Pod","name":"p"}}`
	must(t, do(t, e, "POST", events, good), http.StatusCreated)
	msg := do(t, e, "POST", events, `{"metadata":{"name":"e2"},"eventTime":"2026-01-01T00:00:00.000000Z","type":"Info","deprecatedCount":3}`).status(t, http.StatusUnprocessableEntity, "Invalid")
	for _, want := range []string{"type", "action", "reason", "reportingController", "reportingInstance", "deprecatedCount"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %s", msg, want)
		}
	}
	do(t, e, "GET", events+"/e2", nil).status(t, http.StatusNotFound, "NotFound")
}

// Issue 5 "Bad input": a CRD with a non-structural schema, an invalid name or a second storage
// version is a 422 listing each cause, and nothing is stored; a valid one is stored.
func TestCRDValidation(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const crds = "/apis/apiextensions.platform.io/v1/customresourcedefinitions"
	good := `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"widgets.example.com"},
	  "spec":{"group":"example.com","scope":"Namespaced",
	    "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
	    "versions":[{"name":"v1","served":true,"storage":true,
	      "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}}`
	created := must(t, do(t, e, "POST", crds, good), http.StatusCreated)
	if path(created, "spec.conversion.strategy") != "None" {
		t.Errorf("CRD defaults not applied: %v", path(created, "spec.conversion"))
	}
	if mf, _ := path(created, "metadata.managedFields").([]any); len(mf) != 1 {
		t.Errorf("CRD managedFields (deduced schema): %v", path(created, "metadata.managedFields"))
	}
	bad := strings.NewReplacer(
		`"name":"widgets.example.com"`, `"name":"gadgets.example.com"`,
		`"plural":"widgets"`, `"plural":"gadgets"`,
		`"scope":"Namespaced",`, ``,
		`{"size":{"type":"integer"}}`, `{"size":{"description":"no type"}}`,
		`"storage":true,`, `"storage":true,"deprecated":false,`,
	).Replace(good)
	bad = strings.Replace(bad, `]}}`, `,{"name":"v2","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`, 1)
	msg := do(t, e, "POST", crds, bad).status(t, http.StatusUnprocessableEntity, "Invalid")
	for _, want := range []string{"spec.scope", "must have exactly one version marked as storage version", "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type"} {
		if !strings.Contains(msg, want) {
			t.Errorf("422 message does not report %q:\n%s", want, msg)
		}
	}
	do(t, e, "GET", crds+"/gadgets.example.com", nil).status(t, http.StatusNotFound, "NotFound")
}
