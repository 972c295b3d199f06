package service

import "runtime"

// SyncProcs returns the GOMAXPROCS for a process whose writes wait in fdatasync (the all-in-one,
// and the storage service on the embedded backend): one more than the runtime's default (the
// CPUs it may use), unless the GOMAXPROCS variable sets it (env is its value, "" if unset).
//
// The embedded store acknowledges a write only after fdatasync, which blocks the committing
// goroutine in a system call for 0.2–2 ms, and a goroutine in a system call keeps its P: the
// runtime gives the P to other goroutines only when sysmon notices a long call, which it rarely
// does within a sync (a runtime trace of 16 clients creating ConfigMaps: 6,103 fdatasyncs in 3 s,
// 405 Ps handed off in all; the syncs held a P for 23% of the time of 2 Ps, 27% when the disk
// was busy).
// With GOMAXPROCS equal to the CPUs, the request work therefore ran on one P during every
// sync, and the process used about 1.4 of 2 CPUs while requests waited to be scheduled. The
// extra P runs that work while a sync sleeps; when none does, the runtime's preemption and the
// kernel share the CPUs among the Ps as usual. Setting it stops the runtime's own updates of
// GOMAXPROCS to a changed CPU limit (a restart picks up the new limit).
func SyncProcs(env string) int {
	if env != "" {
		return runtime.GOMAXPROCS(0)
	}
	return runtime.GOMAXPROCS(0) + 1
}
