package server

import (
	"net/http"
	"strconv"
	"strings"

	"platform.io/services/gateway/request"
)

// inflightLimiter bounds the requests served at once, as upstream's --max-requests-inflight and
// --max-mutating-requests-inflight do: beyond the bound a request is answered 429 at once (with
// Retry-After), so an overload sheds work instead of queueing until everything times out.
// Watches are long-running and not counted; neither are health checks.
type inflightLimiter struct {
	readOnly, mutating chan struct{}
}

func newInflightLimiter(readOnly, mutating int) *inflightLimiter {
	l := &inflightLimiter{}
	if readOnly > 0 {
		l.readOnly = make(chan struct{}, readOnly)
	}
	if mutating > 0 {
		l.mutating = make(chan struct{}, mutating)
	}
	return l
}

// tooManyRequests is the Status body of a 429.
const tooManyRequests = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`

func (l *inflightLimiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sem := l.readOnly
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			sem = l.mutating
		}
		if sem == nil || longRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Length", strconv.Itoa(len(tooManyRequests)))
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(tooManyRequests))
		}
	})
}

// longRunning tells watches, upgrades and health checks apart from the requests the limits count.
func longRunning(r *http.Request) bool {
	p := r.URL.Path
	if strings.HasPrefix(p, "/livez") || strings.HasPrefix(p, "/readyz") || strings.HasPrefix(p, "/healthz") {
		return true
	}
	info, ok := request.InfoFrom(r.Context())
	if !ok {
		info = (*request.Resolver)(nil).Resolve(r)
	}
	return info.LongRunning(r)
}
