package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// verifyWatch fails lost, duplicated, reordered, unexpected and altered events, and watches that
// ended early; it times only the writes sent from the warm-up's end.
func TestVerifyWatch(t *testing.T) {
	acks := []ack{{rev: 10, sent: 100}, {rev: 12, sent: 200}, {rev: 13, sent: 300}}
	for _, tc := range []struct {
		name  string
		revs  []int64
		sent  []int64
		err   error
		fail  string
		timed uint64
	}{
		{"complete", []int64{10, 12, 13}, nil, nil, "", 2},
		{"lost", []int64{10, 13}, nil, nil, "lost 1, duplicated 0, reordered 0, unexpected 0", 1},
		{"duplicated", []int64{10, 12, 12, 13}, nil, nil, "lost 0, duplicated 1, reordered 0, unexpected 0", 2},
		{"reordered", []int64{10, 13, 12}, nil, nil, "lost 1, duplicated 0, reordered 1, unexpected 0", 1},
		{"unexpected", []int64{10, 11, 12, 13}, nil, nil, "lost 0, duplicated 0, reordered 0, unexpected 1", 2},
		{"altered", []int64{10, 12, 13}, []int64{100, 201, 300}, nil, "1 events carried other data", 1},
		{"ended", []int64{10, 12, 13}, nil, errors.New("boom"), "1 watches ended early; first: boom", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &watchStream{revs: tc.revs, err: tc.err}
			for i, r := range tc.revs {
				sent := map[int64]int64{10: 100, 11: 150, 12: 200, 13: 300}[r]
				if tc.sent != nil {
					sent = tc.sent[i]
				}
				s.sent = append(s.sent, sent)
				s.recv = append(s.recv, sent+int64(time.Millisecond))
			}
			v := verifyWatch([]*watchStream{s}, acks, 200)
			got := strings.Join(v.failures, "; ")
			if tc.fail == "" && got != "" || tc.fail != "" && !strings.Contains(got, tc.fail) {
				t.Errorf("failures %q, want one containing %q", got, tc.fail)
			}
			if v.timed != tc.timed || v.lat.n != tc.timed {
				t.Errorf("timed %d deliveries (%d latencies), want %d", v.timed, v.lat.n, tc.timed)
			}
			if v.lat.n > 0 && v.lat.max != time.Millisecond {
				t.Errorf("delivery max %v, want 1ms", v.lat.max)
			}
		})
	}
	// Two watches: a loss in either is counted.
	full := &watchStream{revs: []int64{10, 12, 13}, sent: []int64{100, 200, 300}, recv: []int64{1, 2, 3}}
	short := &watchStream{revs: []int64{10}, sent: []int64{100}, recv: []int64{1}}
	if v := verifyWatch([]*watchStream{full, short}, acks, 0); v.lost != 2 || v.matched != 4 {
		t.Errorf("lost %d, matched %d; want 2 and 4", v.lost, v.matched)
	}
}

func TestParseLists(t *testing.T) {
	if got, err := parseClients("1, 16,4"); err != nil || len(got) != 3 || got[0] != 1 || got[1] != 16 || got[2] != 4 {
		t.Errorf("parseClients = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "x", "-1", "10001"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("parseClients(%q) accepted", bad)
		}
	}
	if got, err := parseScenarios("list,all,create"); err != nil || strings.Join(got, ",") != "list,create,get,patch,apply,watch" {
		t.Errorf("parseScenarios = %v, %v", got, err)
	}
	for _, bad := range []string{"", "cas", "get,"} {
		if _, err := parseScenarios(bad); err == nil {
			t.Errorf("parseScenarios(%q) accepted", bad)
		}
	}
	for s, want := range map[string]*objectKind{"configmap": configMapKind, "custom": customKind} {
		if got, err := parseKind(s); err != nil || got != want {
			t.Errorf("parseKind(%q) = %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "ConfigMap", "configmaps", "secret", "custom,configmap"} {
		if _, err := parseKind(bad); err == nil || !strings.Contains(err.Error(), "want configmap or custom") {
			t.Errorf("parseKind(%q): %v", bad, err)
		}
	}
}

// The custom kind's definition is JSON that names the kind the scenarios send, and its schema
// makes data a granular map of strings (as a ConfigMap's), with no other list or map marker.
func TestCustomCRD(t *testing.T) {
	var crd struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Group string `json:"group"`
			Scope string `json:"scope"`
			Names struct {
				Plural string `json:"plural"`
				Kind   string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name    string `json:"name"`
				Served  bool   `json:"served"`
				Storage bool   `json:"storage"`
				Schema  struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	saved := groups
	t.Cleanup(func() { useGroups(saved) })
	useGroups(apiGroups{apiextensions: "apiextensions.example.io"})
	if err := json.Unmarshal(customCRD(), &crd); err != nil {
		t.Fatalf("the definition is not JSON: %v", err)
	}
	k := customKind
	sp := crd.Spec
	if crd.APIVersion != "apiextensions.example.io/v1" || crd.Kind != "CustomResourceDefinition" || crd.Metadata.Name != k.crd ||
		crd.Metadata.Name != sp.Names.Plural+"."+sp.Group || sp.Names.Plural != k.resource || sp.Names.Kind != k.kind ||
		sp.Group+"/v1" != k.apiVersion || sp.Scope != "Namespaced" || len(sp.Versions) != 1 || sp.Versions[0].Name != "v1" ||
		!sp.Versions[0].Served || !sp.Versions[0].Storage {
		t.Fatalf("definition %+v does not define %+v", crd, k)
	}
	if got, want := k.collectionPath("ns"), "/apis/apiload.example.com/v1/namespaces/ns/loadobjects"; got != want {
		t.Errorf("collection path %s, want %s", got, want)
	}
	schema, _ := json.Marshal(sp.Versions[0].Schema.OpenAPIV3Schema)
	const want = `{"properties":{"data":{"additionalProperties":{"type":"string"},"type":"object","x-kubernetes-map-type":"granular"}},"type":"object"}`
	if string(schema) != want {
		t.Errorf("schema %s, want %s", schema, want)
	}
}

// poll returns when the check is done or fails, and errPollTimeout when the time is up.
func TestPoll(t *testing.T) {
	ctx := t.Context()
	calls := 0
	if err := poll(ctx, time.Minute, func() (bool, error) { calls++; return calls == 3, nil }); err != nil || calls != 3 {
		t.Errorf("poll until the third check: %v after %d checks", err, calls)
	}
	boom := errors.New("boom")
	if err := poll(ctx, time.Minute, func() (bool, error) { return false, boom }); err != boom {
		t.Errorf("poll with a failing check: %v", err)
	}
	start := time.Now()
	if err := poll(ctx, 3*pollInterval, func() (bool, error) { return false, nil }); err != errPollTimeout || time.Since(start) < 3*pollInterval {
		t.Errorf("poll that never succeeds: %v after %s", err, time.Since(start))
	}
}
