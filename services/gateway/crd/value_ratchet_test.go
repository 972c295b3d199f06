package crd

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestRatchet(t *testing.T) {
	var schema apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"spec":{"type":"object","required":["size"],"properties":{
	  "size":{"type":"integer","maximum":5},"name":{"type":"string","maxLength":3},
	  "ports":{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer","maximum":100}}}}}}}}`), &schema); err != nil {
		t.Fatal(err)
	}
	decode := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Stored under a laxer schema: size 9, a long name, a big port.
	old := decode(`{"spec":{"size":9,"name":"toolong","ports":[{"port":80},{"port":500}]}}`)
	for _, tc := range []struct {
		name, obj string
		want      []string
	}{
		{"unchanged violations are kept quiet", `{"spec":{"size":9,"name":"toolong","ports":[{"port":80},{"port":500}]}}`, nil},
		{"an unrelated change passes", `{"spec":{"size":9,"name":"toolong","ports":[{"port":81},{"port":500}]}}`, nil},
		{"a changed invalid value is reported", `{"spec":{"size":10,"name":"toolong","ports":[{"port":80},{"port":500}]}}`, []string{"spec.size"}},
		{"a new invalid item is reported", `{"spec":{"size":9,"name":"toolong","ports":[{"port":80},{"port":500},{"port":600}]}}`, []string{"spec.ports[2].port"}},
		{"removing a required field is reported", `{"spec":{"name":"toolong"}}`, []string{"spec.size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(tc.obj)
			errs := Ratchet(ValidateValue(&schema, obj), obj, old)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want at %v", errs, tc.want)
			}
			for i, e := range errs {
				if e.Field != tc.want[i] {
					t.Errorf("error %d at %s, want %s", i, e.Field, tc.want[i])
				}
			}
		})
	}
	if errs := Ratchet(ValidateValue(&schema, old), old, nil); len(errs) != 3 {
		t.Errorf("create (no old object) must keep every error: %v", errs)
	}
	for in, want := range map[string]string{"a.b[3].c[key]": "a b 3 c key", "spec": "spec", "x[0][1]": "x 0 1"} {
		got := splitFieldPath(in)
		if s := strings.Join(got, " "); s != want {
			t.Errorf("splitFieldPath(%q) = %q, want %q", in, s, want)
		}
	}
}
