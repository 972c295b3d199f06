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
			b = appendConfigMap(b, fmt.Sprintf("cm-%d", i), "", "tricky", `a \"quoted\" }], {[ value\\`)
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

func TestAppendConfigMap(t *testing.T) {
	var cm struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	body := appendConfigMap(nil, "cm-1", "42", "sent", "123", "seq", "7")
	if err := json.Unmarshal(body, &cm); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "cm-1" || cm.Metadata.ResourceVersion != "42" || cm.Data["sent"] != "123" || cm.Data["seq"] != "7" {
		t.Errorf("decoded %+v", cm)
	}
	var plain struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(appendConfigMap(nil, "x", ""), &plain); err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range plain.Data {
		size += len(k) + len(v)
	}
	if size < 250 || size > 350 {
		t.Errorf("data holds %d bytes, want about 300", size)
	}
}
