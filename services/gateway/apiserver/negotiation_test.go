package apiserver_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"platform.io/services/gateway/gatewaytest"
)

var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// Spec "Content negotiation": JSON default, YAML, Table (both meta groups), Protobuf envelope
// for responses and bodies, fallback lists, 406, pretty.
func TestContentNegotiation(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", cms, configMap("a", map[string]string{"x": "1", "y": "2"})), http.StatusCreated)

	r := do(t, e, "GET", cms+"/a", nil)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("default Content-Type %q", ct)
	}
	r = do(t, e, "GET", cms+"/a", nil, "Accept", "application/yaml")
	var y map[string]any
	if err := yaml.Unmarshal(r.body, &y); err != nil || r.header.Get("Content-Type") != "application/yaml" || path(y, "metadata.name") != "a" {
		t.Errorf("YAML: %v %q %s", err, r.header.Get("Content-Type"), r.body)
	}
	if r = do(t, e, "GET", cms+"/a?pretty=true", nil); !bytes.Contains(r.body, []byte("\n  \"")) {
		t.Errorf("pretty output is not indented: %s", r.body)
	}

	// Table in meta.platform.io, and in meta.k8s.io for kubectl; default columns for kinds
	// without their own would be Name and Created At; ConfigMap has kubectl's columns.
	for _, g := range []string{"meta.platform.io", "meta.k8s.io"} {
		r = do(t, e, "GET", cms, nil, "Accept", "application/json;as=Table;g="+g+";v=v1")
		tbl := must(t, r, http.StatusOK)
		if tbl["kind"] != "Table" || tbl["apiVersion"] != g+"/v1" {
			t.Fatalf("Table in %s: %s", g, r.body)
		}
		cols := tbl["columnDefinitions"].([]any)
		if first := cols[0].(map[string]any); first["name"] != "Name" || first["type"] != "string" {
			t.Errorf("first column %v", first)
		}
		rows := tbl["rows"].([]any)
		if len(rows) != 1 || len(rows[0].(map[string]any)["cells"].([]any)) != len(cols) {
			t.Errorf("rows %v", rows)
		}
		if obj := rows[0].(map[string]any)["object"].(map[string]any); obj["kind"] != "PartialObjectMetadata" || path(obj, "metadata.name") != "a" {
			t.Errorf("row object %v", obj)
		}
		if path(tbl, "metadata.resourceVersion") == "" {
			t.Errorf("Table list has no resourceVersion")
		}
	}
	// A kind without its own printer gets Name and Created At.
	must(t, do(t, e, "POST", "/apis/coordination.platform.io/v1/namespaces/default/leases", `{"metadata":{"name":"l"}}`), http.StatusCreated)

	// Protobuf: the envelope prefix, then Unknown{typeMeta, raw}.
	r = do(t, e, "GET", cms+"/a", nil, "Accept", "application/vnd.platform.protobuf")
	if r.code != 200 || !bytes.HasPrefix(r.body, protobufPrefix) || r.header.Get("Content-Type") != "application/vnd.platform.protobuf" {
		t.Fatalf("protobuf get: %d %q %x", r.code, r.header.Get("Content-Type"), r.body[:min(len(r.body), 16)])
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(r.body[4:]); err != nil || unk.Kind != "ConfigMap" || unk.APIVersion != "v1" {
		t.Fatalf("envelope: %v %+v", err, unk.TypeMeta)
	}
	var cm corev1.ConfigMap
	if err := cm.Unmarshal(unk.Raw); err != nil || cm.Name != "a" || cm.Data["y"] != "2" || cm.ResourceVersion == "" {
		t.Fatalf("protobuf object: %v %+v", err, cm.ObjectMeta)
	}
	r = do(t, e, "GET", cms, nil, "Accept", "application/vnd.platform.protobuf")
	if err := unk.Unmarshal(r.body[4:]); err != nil || unk.Kind != "ConfigMapList" {
		t.Fatalf("protobuf list envelope: %v %+v", err, unk.TypeMeta)
	}
	var list corev1.ConfigMapList
	if err := list.Unmarshal(unk.Raw); err != nil || len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("protobuf list: %v %+v", err, list.ListMeta)
	}
	// A Protobuf body.
	body := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"k": "v"}}
	raw, _ := body.Marshal()
	env, _ := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}).Marshal()
	r = do(t, e, "POST", cms, append(append([]byte{}, protobufPrefix...), env...), "Content-Type", "application/vnd.platform.protobuf")
	if got := must(t, r, http.StatusCreated); path(got, "data.k") != "v" {
		t.Errorf("protobuf body stored %v", got)
	}

	// Fallback lists: the first supported wins; nothing supported is 406.
	r = do(t, e, "GET", cms+"/a", nil, "Accept", "application/json;as=Table;g=other.io;v=v1, application/json")
	if got := must(t, r, http.StatusOK); got["kind"] != "ConfigMap" {
		t.Errorf("fallback: %v", got["kind"])
	}
	msg := do(t, e, "GET", cms+"/a", nil, "Accept", "text/html").status(t, http.StatusNotAcceptable, "NotAcceptable")
	if !strings.Contains(msg, "application/json") {
		t.Errorf("406 message %q", msg)
	}
	do(t, e, "GET", cms+"/a", nil, "Accept", "application/json;as=PartialObjectMetadata;g=other.io;v=v1").status(t, http.StatusNotAcceptable, "NotAcceptable")
}

// Spec: "When a resource type has no custom Table definition, the default Table has two columns:
// Name (type string) and Created At (type date)".
func TestDefaultTable(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const url = "/apis/admissionregistration.platform.io/v1/validatingadmissionpolicybindings"
	created := must(t, do(t, e, "POST", url, `{"metadata":{"name":"b"},"spec":{"policyName":"p","validationActions":["Deny"]}}`), http.StatusCreated)
	tbl := must(t, do(t, e, "GET", url+"/b", nil, "Accept", "application/json;as=Table;g=meta.platform.io;v=v1"), http.StatusOK)
	cols := tbl["columnDefinitions"].([]any)
	if len(cols) != 2 {
		t.Fatalf("columns %v", cols)
	}
	if c := cols[0].(map[string]any); c["name"] != "Name" || c["type"] != "string" {
		t.Errorf("column 0: %v", c)
	}
	if c := cols[1].(map[string]any); c["name"] != "Created At" || c["type"] != "date" {
		t.Errorf("column 1: %v", c)
	}
	cells := tbl["rows"].([]any)[0].(map[string]any)["cells"].([]any)
	if cells[0] != "b" || cells[1] != path(created, "metadata.creationTimestamp") {
		t.Errorf("cells %v", cells)
	}
}

// kubectl's typed clients (kubectl create configmap, create namespace) send and request
// upstream's Protobuf media type; it is read and answered as an alias, in the type the client named.
func TestUpstreamProtobufAlias(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const upstream = "application/vnd.kubernetes.protobuf"
	body := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Data: map[string]string{"a": "1"}}
	raw, _ := body.Marshal()
	env, _ := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw}).Marshal()
	r := do(t, e, "POST", cms, append(append([]byte{}, protobufPrefix...), env...), "Content-Type", upstream, "Accept", upstream+", application/json")
	if r.code != http.StatusCreated || r.header.Get("Content-Type") != upstream || !bytes.HasPrefix(r.body, protobufPrefix) {
		t.Fatalf("create over upstream protobuf: %d %q", r.code, r.header.Get("Content-Type"))
	}
	var unk runtime.Unknown
	var cm corev1.ConfigMap
	if err := unk.Unmarshal(r.body[4:]); err != nil || cm.Unmarshal(unk.Raw) != nil || cm.Data["a"] != "1" || cm.UID == "" {
		t.Fatalf("answer: %v %+v", err, cm.ObjectMeta)
	}
}

// Errors are written as upstream's ErrorNegotiated writes them: the Status in the first
// representation of Accept that the endpoint serves, so a typed client asking for Protobuf reads
// its errors in Protobuf; JSON when none is, and for paths that are not a resource's.
func TestErrorsNegotiated(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const upstream = "application/vnd.kubernetes.protobuf"
	for _, mt := range []string{upstream, "application/vnd.platform.protobuf"} {
		r := do(t, e, "GET", cms+"/missing", nil, "Accept", mt+", application/json")
		if r.code != http.StatusNotFound || r.header.Get("Content-Type") != mt || !bytes.HasPrefix(r.body, protobufPrefix) {
			t.Fatalf("404 for %s: %d %q %q", mt, r.code, r.header.Get("Content-Type"), r.body)
		}
		var unk runtime.Unknown
		var st metav1.Status
		if err := unk.Unmarshal(r.body[4:]); err != nil || unk.Kind != "Status" || unk.APIVersion != "v1" || st.Unmarshal(unk.Raw) != nil {
			t.Fatalf("protobuf Status: %v %+v", err, unk.TypeMeta)
		}
		if st.Reason != metav1.StatusReasonNotFound || st.Code != 404 || st.Details == nil || st.Details.Name != "missing" {
			t.Errorf("protobuf Status %+v", st)
		}
	}
	r := do(t, e, "GET", cms+"/missing", nil, "Accept", "application/yaml")
	var y map[string]any
	if err := yaml.Unmarshal(r.body, &y); err != nil || r.code != 404 || r.header.Get("Content-Type") != "application/yaml" || y["reason"] != "NotFound" {
		t.Errorf("YAML 404: %v %d %q %s", err, r.code, r.header.Get("Content-Type"), r.body)
	}
	for name, tc := range map[string]struct{ path, accept string }{
		"kubectl's Table":       {cms + "/missing", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
		"JSON first":            {cms + "/missing", "application/json, " + upstream},
		"nothing a Status has":  {cms + "/missing", "text/html"},
		"not a resource's path": {"/apis/nope.example.com/v1", upstream},
	} {
		r := do(t, e, "GET", tc.path, nil, "Accept", tc.accept)
		if r.code < 400 || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %q", name, r.code, r.header.Get("Content-Type"))
			continue
		}
		if st := r.obj(t); st["kind"] != "Status" {
			t.Errorf("%s: %s", name, r.body)
		}
	}
}
