package service

import (
	"runtime"
	"testing"
)

func TestSyncProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	if got := SyncProcs(""); got != n+1 {
		t.Errorf("GOMAXPROCS unset: %d Ps, want %d (one more than the runtime's %d)", got, n+1, n)
	}
	if got := SyncProcs("3"); got != n {
		t.Errorf("GOMAXPROCS=3: %d Ps, want the runtime's own %d (it read the variable)", got, n)
	}
}
