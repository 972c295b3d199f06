package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the CPU time used so far by this process and by each process it started (the
// stack's services, with --start), read from /proc. It is empty where there is no /proc.
type cpuSample struct {
	at    time.Time
	ticks map[int]procTicks
	// busy, irq and all are the whole machine's busy (irq included), interrupt (irq and
	// softirq: loopback networking) and total clock ticks, over all CPUs.
	busy, irq, all uint64
}

type procTicks struct {
	name  string
	ticks uint64 // user + system, in clock ticks
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// readProcStat parses /proc/<pid>/stat: the command name, the parent's pid and utime+stime.
func readProcStat(path string) (name string, ppid int, ticks uint64, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, false
	}
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	name = s[open+1 : closing]
	// After the name: state (field 3), ppid (4), ... utime (14), stime (15).
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return name, ppid, ut + st, true
}

// readMachineStat sums /proc/stat's first line: the busy ticks (all but idle and iowait), the
// interrupt ticks and all ticks of every CPU.
func readMachineStat() (busy, irq, all uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, 0, false
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		all += n
		if i != 3 && i != 4 {
			busy += n
		}
		if i == 5 || i == 6 {
			irq += n
		}
	}
	return busy, irq, all, true
}

// sampleCPU samples this process, the processes it started, and every process whose command
// name starts with one of also (--meter: a server the tool did not start, such as an upstream
// kube-apiserver and its etcd; the kernel keeps 15 bytes of a command name).
func sampleCPU(also ...string) cpuSample {
	s := cpuSample{at: time.Now(), ticks: map[int]procTicks{}}
	s.busy, s.irq, s.all, _ = readMachineStat()
	self := os.Getpid()
	if _, _, t, ok := readProcStat("/proc/self/stat"); ok {
		s.ticks[self] = procTicks{name: "apiload", ticks: t}
	} else {
		return s
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		name, ppid, t, ok := readProcStat(p)
		if !ok || ppid != self && !slices.ContainsFunc(also, func(prefix string) bool { return strings.HasPrefix(name, prefix) }) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			s.ticks[pid] = procTicks{name: name, ticks: t}
		}
	}
	return s
}

// cpuNote describes the cores each process used between two samples, busiest first, or ""
// when nothing was measured.
func cpuNote(a, b cpuSample) string {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 || len(a.ticks) == 0 {
		return ""
	}
	type use struct {
		name  string
		cores float64
	}
	var uses []use
	var total float64
	for pid, end := range b.ticks {
		start, ok := a.ticks[pid]
		if !ok {
			continue
		}
		c := float64(end.ticks-start.ticks) / clockTicks / wall
		total += c
		uses = append(uses, use{end.name, c})
	}
	slices.SortFunc(uses, func(x, y use) int {
		if x.cores != y.cores {
			if x.cores > y.cores {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("%s %.2f", u.name, u.cores))
	}
	note := fmt.Sprintf("CPU cores used: %s (total %.2f)", strings.Join(parts, ", "), total)
	if b.all > a.all {
		// Busy time the processes above do not account for is the kernel's (network softirqs)
		// or other processes': a disturbed measurement shows here.
		cores := func(ticks uint64) float64 { return float64(ticks) / float64(b.all-a.all) * float64(runtime.NumCPU()) }
		note += fmt.Sprintf("; machine %.2f of %d cores busy, %.2f of them in interrupts", cores(b.busy-a.busy), runtime.NumCPU(), cores(b.irq-a.irq))
	}
	return note
}
