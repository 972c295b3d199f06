package service

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// ProfilingHandler serves Go's runtime profiles under /debug/pprof/, as net/http/pprof does on
// the default mux (which this package never uses): the index and named profiles (heap,
// goroutine, block, mutex, allocs, ...), cmdline, a CPU profile, symbols and an execution trace.
func ProfilingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
		case "cmdline":
			pprof.Cmdline(w, r)
		case "profile":
			pprof.Profile(w, r)
		case "symbol":
			pprof.Symbol(w, r)
		case "trace":
			pprof.Trace(w, r)
		default:
			pprof.Index(w, r)
		}
	})
}
