package service

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the garbage collector's target (GOGC) for Platform's processes when the
// GOGC variable does not set one: a collection starts when the heap has grown by four times the
// live heap, not by once the live heap, Go's default.
//
// The services' live heaps are small (tens of MB) and their requests allocate a lot per byte kept,
// so with Go's default they collect several times a second and the collector's marking was 8–10%
// of the all-in-one's CPU serving reads (docs/benchmarks.md). Four times the growth between
// collections cuts that work about 2.5 times, for a heap that peaks at about five times the live
// heap instead of twice. Where memory is limited (a container's cgroup limit), TuneGC also sets a
// soft memory limit below it, so that the collector works harder near the limit instead of the
// process being killed.
const DefaultGCPercent = 400

// memoryLimitShare is the share of the cgroup's memory limit given to the Go runtime as its
// soft limit (the rest is for memory the runtime does not count, such as mapped files and
// thread stacks).
const memoryLimitShare = 0.9

// cgroupMemoryMax is cgroup v2's memory limit of the process's own cgroup (the container's).
var cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// TuneGC sets the process's garbage collector from its environment: DefaultGCPercent unless GOGC
// is set, and unless GOMEMLIMIT is set, a soft memory limit of 90% of the cgroup's memory.max
// when there is one. It returns the GC percent and memory limit in force (math.MaxInt64: none).
// Call it first in main.
func TuneGC() (percent int, limit int64) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	if os.Getenv("GOMEMLIMIT") == "" {
		if max, ok := readMemoryMax(cgroupMemoryMax); ok {
			debug.SetMemoryLimit(int64(float64(max) * memoryLimitShare))
		}
	}
	return percent, debug.SetMemoryLimit(-1)
}

// readMemoryMax reads a cgroup v2 memory.max file: a byte count, or "max" for no limit.
func readMemoryMax(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v == math.MaxInt64 {
		return 0, false
	}
	return v, true
}
