package main

import (
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
}
