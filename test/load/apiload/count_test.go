package main

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestCountListItems(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       int
		err        bool
	}{
		{"empty", `{"kind":"ConfigMapList","items":[]}`, 0, false},
		{"null", `{"kind":"ConfigMapList","items":null}`, 0, false},
		{"spaces", "{ \"items\" :\n [ {} ,\t{} ] }", 2, false},
		{"items last", `{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[{"a":1},{"b":[1,2,{"c":"]"}]},{}]}`, 3, false},
		{"items first", `{"items":[{"a":"}"},{"a":"{"}],"kind":"List"}`, 2, false},
		{"escaped quotes", `{"items":[{"a":"x\"]},{\"y"},{"b":"\\"},{"c":"\\\""}]}`, 3, false},
		{"nested items key", `{"metadata":{"items":[1,2,3,4]},"kind":"L","items":[{"items":[1,2]}]}`, 1, false},
		{"string value named items", `{"kind":"items","items":[1,2]}`, 2, false},
		{"scalars", `{"items":[1,"a,b",true,null]}`, 4, false},
		{"no items", `{"kind":"Status","code":500}`, 0, true},
		{"not an array", `{"items":{"a":1}}`, 0, true},
		{"truncated array", `{"items":[{"a":1},{"b":`, 0, true},
		{"truncated string", `{"items":["abc`, 0, true},
		{"unbalanced", `{"items":[{"a":1}}`, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := countListItems([]byte(tc.body))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("countListItems(%s) = %d, %v; want %d, error %v", tc.body, got, err, tc.want, tc.err)
			}
		})
	}
}

// The counter agrees with a full decode on lists shaped like the server's, whose items hold
// strings with brackets, braces, commas and escaped quotes.
func TestCountListItemsMatchesDecode(t *testing.T) {
	for _, n := range []int{0, 1, 2, 37, 2000} {
		b := []byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"123"},"items":[`)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = configMapKind.appendObject(b, fmt.Sprintf("cm-%d", i), "", "tricky", `a \"quoted\" }], {[ value\\`)
		}
		b = append(b, "]}"...)
		var full struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(b, &full); err != nil {
			t.Fatalf("n=%d: the test's list is not JSON: %v", n, err)
		}
		got, err := countListItems(b)
		if err != nil || got != len(full.Items) || got != n {
			t.Errorf("n=%d: countListItems = %d, %v; decode finds %d", n, got, err, len(full.Items))
		}
	}
}

// appendObject writes valid JSON of the kind's apiVersion and kind, with the same data for
// both kinds: four keys of about 300 bytes, and the extra pairs.
func TestAppendObject(t *testing.T) {
	for _, tc := range []struct {
		kind             *objectKind
		apiVersion, name string
	}{
		{configMapKind, "v1", "ConfigMap"},
		{customKind, "apiload.example.com/v1", "LoadObject"},
	} {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name            string            `json:"name"`
				ResourceVersion string            `json:"resourceVersion"`
				Labels          map[string]string `json:"labels"`
			} `json:"metadata"`
			Data map[string]string `json:"data"`
		}
		body := tc.kind.appendObject(nil, "obj-1", "42", "sent", "123", "seq", "7")
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if obj.APIVersion != tc.apiVersion || obj.Kind != tc.name || obj.Metadata.Name != "obj-1" || obj.Metadata.ResourceVersion != "42" ||
			obj.Metadata.Labels["app"] != "apiload" || obj.Data["sent"] != "123" || obj.Data["seq"] != "7" || len(obj.Data) != 6 {
			t.Errorf("--kind=%s: decoded %+v", tc.kind.flag, obj)
		}
		var plain struct {
			Metadata map[string]any    `json:"metadata"`
			Data     map[string]string `json:"data"`
		}
		if err := json.Unmarshal(tc.kind.appendObject(nil, "x", ""), &plain); err != nil {
			t.Fatal(err)
		}
		if _, ok := plain.Metadata["resourceVersion"]; ok {
			t.Errorf("--kind=%s: a create carries a resourceVersion", tc.kind.flag)
		}
		size := 0
		for k, v := range plain.Data {
			size += len(k) + len(v)
		}
		if size < 250 || size > 350 {
			t.Errorf("--kind=%s: data holds %d bytes, want about 300", tc.kind.flag, size)
		}
	}
}
