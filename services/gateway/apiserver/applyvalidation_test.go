package apiserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

// noxuCRD is a cluster-scoped kind with the schema of upstream's field validation conformance
// tests: a closed spec (foo, cronSpec, ports as a map list) and, in version v2, a spec that
// keeps unknown fields with an embedded resource (template) inside.
const noxuCRD = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"noxus.mygroup.example.com"},
  "spec":{"group":"mygroup.example.com","scope":"Cluster",
    "names":{"plural":"noxus","singular":"nonenglishnoxu","kind":"WishIHadChosenNoxu"},
    "versions":[
      {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","properties":{
          "foo":{"type":"string"},
          "cronSpec":{"type":"string"},
          "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["containerPort","protocol"],
            "items":{"type":"object","required":["containerPort","protocol"],"properties":{
              "containerPort":{"type":"integer","format":"int32"},"name":{"type":"string"},"protocol":{"type":"string"}}}}}}}}}},
      {"name":"v2","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{
          "foo":{"type":"string"},
          "template":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{
            "metadata":{"type":"object","properties":{"name":{"type":"string"}}},
            "spec":{"type":"object"}}}}}}}}}]}}`

// warnings are the texts of a response's Warning headers.
func warnings(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	for _, h := range r.header.Values("Warning") {
		text, ok := strings.CutPrefix(h, "299 - ")
		if !ok {
			t.Fatalf("Warning header %q", h)
		}
		s, err := strconv.Unquote(text)
		if err != nil {
			t.Fatalf("Warning header %q: %v", h, err)
		}
		out = append(out, s)
	}
	return out
}

// Server-side apply's field validation, as upstream's apply patcher (and its conformance tests
// "should create/apply an invalid CR with extra properties", "should detect unknown metadata
// fields in both the root and embedded object of a CR", "should detect duplicates in a CR when
// preserving unknown fields"): a field the schema does not declare, at the root, in spec, in
// metadata or in an embedded resource's metadata, is the field manager's error naming its full
// path, at every fieldValidation level; keys set twice are refused by Strict (naming their
// line), warned about line by line by Warn (the default), ignored by Ignore.
func TestApplyFieldValidationCustomResource(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	establish(t, e, noxuCRD, "/apis/mygroup.example.com/v1", "noxus")
	const v1, v2 = "/apis/mygroup.example.com/v1/noxus", "/apis/mygroup.example.com/v2/noxus"
	apply := func(coll, name, query, body string) response {
		return do(t, e, "PATCH", coll+"/"+name+"?fieldManager=field_validation_mgr"+query, body, "Content-Type", applyType)
	}
	valid := "apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata:\n  name: %s\nspec:\n  foo: foo1\n  cronSpec: \"* * * * */5\"\n  ports:\n  - name: x\n    containerPort: 80\n    protocol: TCP\n"
	for _, c := range []struct{ name, coll, body, want string }{
		{"root", v1, "apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata:\n  name: root\nunknownField: unknown\nspec:\n  foo: foo1\n",
			"failed to create typed patch object (/root; mygroup.example.com/v1, Kind=WishIHadChosenNoxu): .unknownField: field not declared in schema"},
		{"spec", v1, "apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata:\n  name: spec\nspec:\n  foo: foo1\n  extra: 1\n",
			".spec.extra: field not declared in schema"},
		{"nested", v1, "apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata:\n  name: nested\nspec:\n  ports:\n  - containerPort: 80\n    protocol: TCP\n    hostPort: 1\n",
			`.spec.ports[containerPort=80,protocol="TCP"].hostPort: field not declared in schema`},
		{"meta", v1, "apiVersion: mygroup.example.com/v1\nkind: WishIHadChosenNoxu\nmetadata:\n  name: meta\n  unknownMeta: unknown\nspec:\n  foo: foo1\n",
			".metadata.unknownMeta: field not declared in schema"},
		{"submeta", v2, "apiVersion: mygroup.example.com/v2\nkind: WishIHadChosenNoxu\nmetadata:\n  name: submeta\nspec:\n  template:\n    apiVersion: foo/v1\n    kind: Sub\n    metadata:\n      unknownSubMeta: unknown\n      name: subobject\n  foo: foo1\n",
			".spec.template.metadata.unknownSubMeta: field not declared in schema"},
	} {
		for _, q := range []string{"&fieldValidation=Strict", "&fieldValidation=Warn", "", "&fieldValidation=Ignore"} {
			msg := apply(c.coll, c.name, q, c.body).status(t, http.StatusBadRequest, "BadRequest")
			if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "failed to create typed patch object (/"+c.name+"; mygroup.example.com/") {
				t.Errorf("%s%s: %q, want it to name %q", c.name, q, msg, c.want)
			}
		}
		do(t, e, "GET", v1+"/"+c.name, nil).status(t, http.StatusNotFound, "NotFound")
	}
	// A valid CR applies (upstream's "should create/apply a valid CR for CRD with validation
	// schema"), under Strict.
	must(t, apply(v1, "mytest", "&fieldValidation=Strict", strings.ReplaceAll(valid, "%s", "mytest")), http.StatusCreated)

	// Keys set twice (under x-kubernetes-preserve-unknown-fields, where unknown fields are
	// kept): the body of upstream's conformance test, line 9 repeating foo.
	dup := "\napiVersion: mygroup.example.com/v2\nkind: WishIHadChosenNoxu\nmetadata:\n  name: %s\nspec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n  cronSpec: \"* * * * */5\"\n"
	body := func(name string) string { return strings.ReplaceAll(dup, "%s", name) }
	msg := apply(v2, "dup", "&fieldValidation=Strict", body("dup")).status(t, http.StatusBadRequest, "BadRequest")
	if want := "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 9: key \"foo\" already set in map"; msg != want {
		t.Errorf("strict duplicate: %q, want %q", msg, want)
	}
	do(t, e, "GET", v2+"/dup", nil).status(t, http.StatusNotFound, "NotFound")
	for q, want := range map[string][]string{
		"&fieldValidation=Warn":   {`line 9: key "foo" already set in map`},
		"":                        {`line 9: key "foo" already set in map`},
		"&fieldValidation=Ignore": nil,
	} {
		name := "dup" + strings.ToLower(strings.TrimPrefix(q, "&fieldValidation="))
		r := apply(v2, name, q, body(name))
		obj := must(t, r, http.StatusCreated)
		if got := warnings(t, r); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("duplicate%s: warnings %q, want %q", q, got, want)
		}
		if path(obj, "spec.foo") != "foo2" || path(obj, "spec.unknown") != "uk1" {
			t.Errorf("duplicate%s: spec %v", q, obj["spec"])
		}
	}
}

// Built-in kinds as upstream: unknown fields of an applied Deployment, in spec and in metadata,
// are the field manager's error at every level (create and update keep the decoder's strict
// decoding error, upstream's conformance "should detect unknown and duplicate fields of a typed
// object"); duplicate keys of an apply body and of a YAML create are one warning per line.
func TestApplyFieldValidationBuiltin(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const deps = "/apis/apps/v1/namespaces/default/deployments"
	dep := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: my-dep\n  namespace: default\n  labels: {app: nginx}%s\nspec:\n  %s\n  selector:\n    matchLabels: {app: nginx}\n  template:\n    metadata:\n      labels: {app: nginx}\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:latest\n"
	for _, c := range []struct{ meta, spec, want string }{
		{"", "unknownField: foo", "failed to create typed patch object (default/my-dep; apps/v1, Kind=Deployment): .spec.unknownField: field not declared in schema"},
		{"\n  unknownMeta: foo", "replicas: 2", "failed to create typed patch object (default/my-dep; apps/v1, Kind=Deployment): .metadata.unknownMeta: field not declared in schema"},
	} {
		body := strings.Replace(strings.Replace(dep, "%s", c.meta, 1), "%s", c.spec, 1)
		for _, q := range []string{"&fieldValidation=Strict", ""} {
			msg := do(t, e, "PATCH", deps+"/my-dep?fieldManager=mgr"+q, body, "Content-Type", applyType).status(t, http.StatusBadRequest, "BadRequest")
			if msg != c.want {
				t.Errorf("apply%s: %q, want %q", q, msg, c.want)
			}
		}
	}
	// Create keeps the strict decoder's message, as upstream.
	msg := do(t, e, "POST", deps+"?fieldValidation=Strict", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"my-dep","labels":{"app":"nginx"}},
		"spec":{"unknownField":"foo","replicas":2,"replicas":3,"selector":{"matchLabels":{"app":"nginx"}},
		"template":{"metadata":{"labels":{"app":"nginx"}},"spec":{"containers":[{"name":"nginx","image":"nginx:latest"}]}}}}`).status(t, http.StatusBadRequest, "BadRequest")
	if !strings.Contains(msg, `strict decoding error: unknown field "spec.unknownField", duplicate field "spec.replicas"`) {
		t.Errorf("strict create: %q", msg)
	}

	// Duplicate keys: an apply body (JSON, read as YAML, as upstream) and a YAML create.
	applyBody := "{\n\"apiVersion\": \"v1\",\n\"kind\": \"ConfigMap\",\n\"metadata\": {\"name\": \"dups\"},\n\"data\": {\n\"a\": \"1\",\n\"a\": \"2\",\n\"b\": \"1\",\n\"b\": \"2\"\n}\n}"
	msg = do(t, e, "PATCH", cms+"/dups?fieldManager=mgr&fieldValidation=Strict", applyBody, "Content-Type", applyType).status(t, http.StatusBadRequest, "BadRequest")
	if want := "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map\n  line 9: key \"b\" already set in map"; msg != want {
		t.Errorf("strict apply with duplicates: %q, want %q", msg, want)
	}
	r := do(t, e, "PATCH", cms+"/dups?fieldManager=mgr", applyBody, "Content-Type", applyType)
	must(t, r, http.StatusCreated)
	if got, want := warnings(t, r), []string{`line 7: key "a" already set in map`, `line 9: key "b" already set in map`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("apply warnings %q, want %q", got, want)
	}
	r = do(t, e, "POST", cms, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yamldups\ndata:\n  a: \"1\"\n  a: \"2\"\n  unknown: x\nbogus: 1\n", "Content-Type", "application/yaml")
	must(t, r, http.StatusCreated)
	if got, want := warnings(t, r), []string{`line 7: key "a" already set in map`, `unknown field "bogus"`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("YAML create warnings %q, want %q", got, want)
	}
}
