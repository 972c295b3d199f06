package service

import (
	"testing"
	"unsafe"
)

// stackDepthProbe recurses n frames of about 1 KiB each, so that the goroutine's stack must hold
// n KiB more than at the call.
//
//go:noinline
func stackDepthProbe(n int) byte {
	var pad [1000]byte
	if n == 0 {
		return pad[n]
	}
	return stackDepthProbe(n-1) + pad[n%len(pad)]
}

// stackMoved tells whether running depth KiB deep (after GrowStack when grow) moved the
// goroutine's stack: the runtime grows a stack by copying it elsewhere, so the address of a local
// variable changes.
func stackMoved(grow, deep bool, depth int) bool {
	moved := make(chan bool)
	go func() {
		if grow {
			GrowStack(deep)
		}
		var marker byte
		before := uintptr(unsafe.Pointer(&marker))
		stackDepthProbe(depth)
		moved <- uintptr(unsafe.Pointer(&marker)) != before
	}()
	return <-moved
}

// TestGrowStack: after GrowStack, running as deep as the size it promises does not grow the
// stack again, while a fresh goroutine without it does (so the check can fail).
func TestGrowStack(t *testing.T) {
	for _, tc := range []struct {
		deep  bool
		depth int // KiB of frames the goroutine then uses
	}{{false, 10}, {true, 24}} {
		if stackMoved(true, tc.deep, tc.depth) {
			t.Errorf("deep=%v: the stack grew again within %d KiB after GrowStack", tc.deep, tc.depth)
		}
		if !stackMoved(false, tc.deep, tc.depth) {
			t.Errorf("deep=%v: a fresh goroutine ran %d KiB deep without growing its stack; the probe proves nothing", tc.deep, tc.depth)
		}
	}
}
