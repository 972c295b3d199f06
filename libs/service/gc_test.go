package service

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain is also the child side of TestTuneGC: with TUNEGC_CHILD set the test binary runs
// TuneGC in a fresh process (the GC settings are the process's, read from the environment at
// start), prints what it set and exits, running no test.
func TestMain(m *testing.M) {
	if os.Getenv("TUNEGC_CHILD") != "" {
		cgroupMemoryMax = os.Getenv("TUNEGC_MEMORY_MAX")
		percent, limit := TuneGC()
		fmt.Printf("RESULT percent=%d limit=%d\n", percent, limit)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTuneGC(t *testing.T) {
	dir := t.TempDir()
	gib := float64(1 << 30)
	gib9 := int64(gib * 0.9)
	limited := filepath.Join(dir, "limited")
	unlimited := filepath.Join(dir, "unlimited")
	if err := os.WriteFile(limited, []byte("1073741824\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unlimited, []byte("max\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		env       []string
		memoryMax string
		want      string
	}{
		{"defaults", nil, filepath.Join(dir, "absent"), fmt.Sprintf("percent=%d limit=%d", DefaultGCPercent, int64(math.MaxInt64))},
		{"GOGC set", []string{"GOGC=150"}, unlimited, fmt.Sprintf("percent=150 limit=%d", int64(math.MaxInt64))},
		{"GOGC=off", []string{"GOGC=off"}, unlimited, fmt.Sprintf("percent=-1 limit=%d", int64(math.MaxInt64))},
		{"cgroup limit", nil, limited, fmt.Sprintf("percent=%d limit=%d", DefaultGCPercent, gib9)},
		{"GOMEMLIMIT set", []string{"GOMEMLIMIT=200MiB"}, limited, fmt.Sprintf("percent=%d limit=%d", DefaultGCPercent, int64(200<<20))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(withoutGCVars(os.Environ()), "TUNEGC_CHILD=1", "TUNEGC_MEMORY_MAX="+tc.memoryMax)
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), "RESULT "+tc.want+"\n") {
				t.Errorf("want %q in:\n%s", tc.want, out)
			}
		})
	}
}

func withoutGCVars(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return out
}
