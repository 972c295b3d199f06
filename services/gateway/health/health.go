// Package health serves the API server's health endpoints, /healthz, /livez and /readyz, with
// the behaviour of kube-apiserver's:
//
//   - GET or HEAD /livez answers 200 "ok" when every check passes. With ?verbose (any value) the
//     body lists each check ("[+]name ok") and ends with "livez check passed".
//   - When a check fails the answer is 500 and the body always lists every check, failed ones as
//     "[-]name failed: reason withheld", and ends with "livez check failed". The reason is logged,
//     not shown, because these endpoints are open to unauthenticated clients.
//   - ?exclude=name (repeatable) skips a check ("[+]name excluded: ok"); excluding a name that is
//     no check adds the line `warn: some health checks cannot be excluded: no matches for "name"`.
//   - /livez/<name> runs that one check: 200 "ok", or 500 "internal server error: <reason>";
//     a name that is no check of the endpoint is 404.
//   - Post-start hooks (AddPostStartHook) are checks "poststarthook/<name>" on all three
//     endpoints that fail until the hook is done; during the livez grace period after start,
//     /livez counts unfinished hooks as passing.
//   - The readyz check "shutdown" fails once ShutdownInitiated is called, so load balancers stop
//     sending traffic while the server keeps serving for --shutdown-delay-duration.
//
// The checks of one request run concurrently; each gets the request with a context derived from
// the request's, and a check still running when that context ends counts as failed.
package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
)

// Check is one named health check.
type Check struct {
	// Name identifies the check in verbose output, in ?exclude= and in /livez/<name>.
	Name string
	// Run reports the check's state: nil when healthy. It should give up when r.Context() ends.
	Run func(r *http.Request) error
}

// Ping returns the check "ping", which always passes: the server answers HTTP.
func Ping() Check {
	return Check{Name: "ping", Run: func(*http.Request) error { return nil }}
}

// Log returns the check "log", which reports whether the process can write its log. It writes
// nothing itself: it passes unless the serving Health's Options.LogHealthy is set and returns an
// error.
func Log() Check {
	return Check{Name: "log", Run: func(r *http.Request) error {
		if h, ok := r.Context().Value(healthKey{}).(*Health); ok && h.opts.LogHealthy != nil {
			return h.opts.LogHealthy()
		}
		return nil
	}}
}

// Options configure a Health.
type Options struct {
	// LivezGracePeriod is how long after Start /livez counts unfinished post-start hooks as
	// passing (kube-apiserver's --livez-grace-period). /readyz and /healthz never do.
	LivezGracePeriod time.Duration
	// Start is when the server started; zero means the time New is called.
	Start time.Time
	// LogHealthy, when set, is what the Log check reports: an error if the process log could
	// not be written recently.
	LogHealthy func() error
	// Logger receives the reasons of failed checks; nil means slog.Default().
	Logger *slog.Logger
}

// Health holds the checks of the three health endpoints and serves them. Its methods are safe
// for concurrent use; checks may be added after Install.
type Health struct {
	opts     Options
	log      *slog.Logger
	now      func() time.Time // replaced by tests
	shutdown atomic.Bool
	// shutdownCheck is readyz's "shutdown", which fails once shutdown is set.
	shutdownCheck Check

	mu      sync.RWMutex
	healthz []Check
	livez   []Check
	readyz  []Check // "shutdown" is kept apart and always listed last
}

const (
	healthzName = "healthz"
	livezName   = "livez"
	readyzName  = "readyz"
)

// errNotFinished is what an unfinished post-start hook reports.
var errNotFinished = errors.New("not finished")

// errShuttingDown is what the shutdown check reports once shutdown has begun.
var errShuttingDown = errors.New("process is shutting down")

type healthKey struct{}

// New returns a Health whose only check is readyz's "shutdown", which passes until
// ShutdownInitiated.
func New(opts Options) *Health {
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Health{opts: opts, log: log, now: time.Now}
	h.shutdownCheck = Check{Name: "shutdown", Run: func(*http.Request) error {
		if h.shutdown.Load() {
			return errShuttingDown
		}
		return nil
	}}
	return h
}

// AddHealthz adds checks to /healthz, the legacy endpoint that combines liveness and readiness.
// It panics if a check has no name or Run, or its name is already taken on /healthz.
func (h *Health) AddHealthz(c ...Check) { h.add(healthzName, c...) }

// AddLivez adds checks to /livez, which tells whether the process should be restarted.
// It panics if a check has no name or Run, or its name is already taken on /livez.
func (h *Health) AddLivez(c ...Check) { h.add(livezName, c...) }

// AddReadyz adds checks to /readyz, which tells whether the server should be sent traffic.
// It panics if a check has no name or Run, or its name is already taken on /readyz (including
// "shutdown").
func (h *Health) AddReadyz(c ...Check) { h.add(readyzName, c...) }

func (h *Health) add(endpoint string, checks ...Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range checks {
		h.addLocked(endpoint, c)
	}
}

// addLocked appends c to endpoint's checks, panicking on a bad or duplicate check; h.mu must be
// held.
func (h *Health) addLocked(endpoint string, c Check) {
	if c.Name == "" || c.Run == nil {
		panic(fmt.Sprintf("health: %s check %q needs a name and a Run func", endpoint, c.Name))
	}
	if h.has(endpoint, c.Name) {
		panic(fmt.Sprintf("health: %s already has a check named %q", endpoint, c.Name))
	}
	list := h.list(endpoint)
	*list = append(*list, c)
}

// has reports whether endpoint has a check called name; h.mu must be held.
func (h *Health) has(endpoint, name string) bool {
	if endpoint == readyzName && name == h.shutdownCheck.Name {
		return true
	}
	return slices.ContainsFunc(*h.list(endpoint), func(c Check) bool { return c.Name == name })
}

// list returns the checks of endpoint; h.mu must be held.
func (h *Health) list(endpoint string) *[]Check {
	switch endpoint {
	case healthzName:
		return &h.healthz
	case livezName:
		return &h.livez
	default:
		return &h.readyz
	}
}

// checks returns a snapshot of the checks endpoint runs, in the order they are listed.
func (h *Health) checks(endpoint string) []Check {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := slices.Clone(*h.list(endpoint))
	if endpoint == readyzName {
		out = append(out, h.shutdownCheck)
	}
	return out
}

// AddPostStartHook registers the check "poststarthook/<name>" on /healthz, /livez and /readyz.
// It fails until done is called (calling done again does nothing); within the livez grace
// period after start, /livez counts it as passing. It panics if a hook of that name exists.
func (h *Health) AddPostStartHook(name string) (done func()) {
	var finished atomic.Bool
	hook := func(*http.Request) error {
		if finished.Load() {
			return nil
		}
		return errNotFinished
	}
	graced := func(r *http.Request) error {
		if h.now().Before(h.opts.Start.Add(h.opts.LivezGracePeriod)) {
			return nil
		}
		return hook(r)
	}
	checkName := "poststarthook/" + name
	h.mu.Lock()
	defer h.mu.Unlock()
	if name == "" || h.has(healthzName, checkName) || h.has(livezName, checkName) || h.has(readyzName, checkName) {
		panic(fmt.Sprintf("health: post-start hook %q is unnamed or exists already", name))
	}
	h.addLocked(healthzName, Check{Name: checkName, Run: hook})
	h.addLocked(livezName, Check{Name: checkName, Run: graced})
	h.addLocked(readyzName, Check{Name: checkName, Run: hook})
	return func() { finished.Store(true) }
}

// ShutdownInitiated makes the readyz check "shutdown" fail from now on. /livez and /healthz are
// unaffected.
func (h *Health) ShutdownInitiated() { h.shutdown.Store(true) }

// Install registers /healthz, /livez and /readyz and their per-check paths (/livez/<name>, ...)
// on r for GET and HEAD. A per-check path that names no check is answered by r.NotFoundHandler
// as it is when the request arrives (http.NotFound if unset).
func (h *Health) Install(r *mux.Router) {
	for _, ep := range []string{healthzName, livezName, readyzName} {
		r.Path("/"+ep).Methods(http.MethodGet, http.MethodHead).HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			h.serveAll(w, req, ep)
		})
		prefix := "/" + ep + "/"
		r.PathPrefix(prefix).Methods(http.MethodGet, http.MethodHead).HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			name := strings.TrimPrefix(req.URL.Path, prefix)
			if !h.serveOne(w, req, ep, name) {
				notFound := r.NotFoundHandler
				if notFound == nil {
					notFound = http.NotFoundHandler()
				}
				notFound.ServeHTTP(w, req)
			}
		})
	}
}

// serveAll runs every check of endpoint and writes the combined answer.
func (h *Health) serveAll(w http.ResponseWriter, r *http.Request, endpoint string) {
	query := r.URL.Query()
	_, verbose := query["verbose"]
	excluded := make(map[string]bool)
	for _, name := range query["exclude"] {
		excluded[name] = true
	}

	all := h.checks(endpoint)
	var run []Check
	for _, c := range all {
		if !excluded[c.Name] {
			run = append(run, c)
		}
	}
	errs := h.run(r, run)

	var out strings.Builder
	failed := false
	i := 0
	for _, c := range all {
		if excluded[c.Name] {
			delete(excluded, c.Name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		err := errs[i]
		i++
		if err != nil {
			failed = true
			h.log.Info("health check failed", "endpoint", endpoint, "check", c.Name, "error", err)
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
	}
	if len(excluded) > 0 {
		unmatched := make([]string, 0, len(excluded))
		for name := range excluded {
			unmatched = append(unmatched, strconv.Quote(name))
		}
		slices.Sort(unmatched)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(unmatched, ","))
	}

	switch {
	case failed:
		writeText(w, http.StatusInternalServerError, out.String()+endpoint+" check failed\n")
	case verbose:
		writeText(w, http.StatusOK, out.String()+endpoint+" check passed\n")
	default:
		writeText(w, http.StatusOK, "ok")
	}
}

// serveOne runs the check of endpoint called name and writes its answer; it reports false,
// writing nothing, when there is no such check.
func (h *Health) serveOne(w http.ResponseWriter, r *http.Request, endpoint, name string) bool {
	checks := h.checks(endpoint)
	i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == name })
	if i < 0 {
		return false
	}
	c := checks[i]
	if err := h.run(r, []Check{c})[0]; err != nil {
		h.log.Info("health check failed", "endpoint", endpoint, "check", c.Name, "error", err)
		writeText(w, http.StatusInternalServerError, fmt.Sprintf("internal server error: %v\n", err))
		return true
	}
	writeText(w, http.StatusOK, "ok")
	return true
}

// run runs checks concurrently and returns their results in order. It returns when all have
// finished or the request's context has ended; a check still running then has failed with the
// context's error.
func (h *Health) run(r *http.Request, checks []Check) []error {
	errs := make([]error, len(checks))
	if len(checks) == 0 {
		return errs
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), healthKey{}, h))
	defer cancel() // tells checks still running that nobody waits for them
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(checks)) // buffered: late checks never block
	for i, c := range checks {
		cr := r.WithContext(ctx)
		go func() { results <- result{i, runCheck(c, cr)} }()
	}
	finished := make([]bool, len(checks))
	for range checks {
		select {
		case res := <-results:
			errs[res.i], finished[res.i] = res.err, true
		case <-ctx.Done():
			for i := range checks {
				if !finished[i] {
					errs[i] = fmt.Errorf("check did not finish: %w", context.Cause(ctx))
				}
			}
			return errs
		}
	}
	return errs
}

// runCheck runs c, turning a panic into an error so that one bad check cannot crash the server.
func runCheck(c Check, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c.Run(r)
}

// writeText writes a plain-text answer as kube-apiserver's health endpoints do.
func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}
