package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// --replicas=2 starts a second gateway on a storage replica of its own (one Redis) and spreads
// the clients over both gateways: both gateway and both storage processes work in every row.
func TestReplicas(t *testing.T) {
	for _, args := range [][]string{
		{"--start=allinone", "--replicas=2"},
		{"--server=https://127.0.0.1:6443", "--replicas=2"},
		{"--start=split", "--replicas=0"},
		{"--start=split", "--replicas=9"},
		{"--start=split", "--replicas=1,x"},
	} {
		if code, _ := runTool(t, args...); code != exitUsage {
			t.Errorf("apiload %q: exit %d, want %d", args, code, exitUsage)
		}
	}
	code, out := runTool(t, "--start=split", "--replicas=2", "--scenario=create,get", "--clients=4", "--duration=2s")
	wantRows(t, code, out, map[string][]int{"create": {4}, "get": {4}})
	if !strings.Contains(out, "2 gateways, each on a storage replica of its own") {
		t.Errorf("the header does not name the second gateway")
	}
	use := regexp.MustCompile(`\b(gateway|storage) ([0-9.]+)`)
	for _, sc := range []string{"create", "get"} {
		var note string
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, sc+" clients=4: CPU cores used: ") {
				note = line
			}
		}
		busy := map[string]int{}
		for _, m := range use.FindAllStringSubmatch(note, -1) {
			if c, _ := strconv.ParseFloat(m[2], 64); c > 0 {
				busy[m[1]]++
			}
		}
		if busy["gateway"] != 2 || busy["storage"] != 2 {
			t.Errorf("%s: want two busy gateway and storage processes in the CPU note %q", sc, note)
		}
	}
}
