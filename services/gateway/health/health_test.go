package health

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"
)

// fakeClock is a settable clock for the livez grace period.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer is a log sink that the race detector accepts being read by the test goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	h     *Health
	srv   *httptest.Server
	clock *fakeClock
	logs  *syncBuffer
}

// newFixture serves a Health on a real HTTP server behind a mux router whose 404 answer is
// recognisable, as the gateway's is.
func newFixture(t *testing.T, opts Options, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	logs := &syncBuffer{}
	if opts.Start.IsZero() {
		opts.Start = clock.Now()
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	h := New(opts)
	h.now = clock.Now
	r := mux.NewRouter()
	r.UseEncodedPath()
	h.Install(r)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "router not found", http.StatusNotFound)
	})
	var handler http.Handler = r
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &fixture{h: h, srv: srv, clock: clock, logs: logs}
}

func (f *fixture) do(t *testing.T, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	code, _, body := f.do(t, http.MethodGet, path)
	return code, body
}

func (f *fixture) expect(t *testing.T, path string, wantCode int, wantBody string) {
	t.Helper()
	code, body := f.get(t, path)
	if code != wantCode || body != wantBody {
		t.Errorf("GET %s = %d %q\nwant %d %q", path, code, body, wantCode, wantBody)
	}
}

func failing(name, reason string) Check {
	return Check{Name: name, Run: func(*http.Request) error { return errors.New(reason) }}
}

func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

func TestAllPassing(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddHealthz(Ping(), Log())
	f.h.AddLivez(Ping(), Log())
	f.h.AddReadyz(Ping(), Log())
	for _, ep := range []string{"healthz", "livez", "readyz"} {
		code, hdr, body := f.do(t, http.MethodGet, "/"+ep)
		if code != http.StatusOK || body != "ok" {
			t.Errorf("/%s = %d %q, want 200 ok", ep, code, body)
		}
		if got := hdr.Get("Content-Type"); got != "text/plain; charset=utf-8" {
			t.Errorf("/%s Content-Type = %q", ep, got)
		}
		if got := hdr.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("/%s X-Content-Type-Options = %q", ep, got)
		}
	}
}

func TestVerbose(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddHealthz(Ping(), Log())
	f.h.AddLivez(Ping(), Log())
	f.h.AddReadyz(Ping(), Log(), Check{Name: "storage", Run: func(*http.Request) error { return nil }})
	// Any value of verbose, even an empty or false one, asks for the list.
	for _, q := range []string{"?verbose", "?verbose=", "?verbose=1", "?verbose=false"} {
		f.expect(t, "/livez"+q, 200, lines("[+]ping ok", "[+]log ok", "livez check passed"))
		f.expect(t, "/healthz"+q, 200, lines("[+]ping ok", "[+]log ok", "healthz check passed"))
		// readyz lists its shutdown check last.
		f.expect(t, "/readyz"+q, 200, lines("[+]ping ok", "[+]log ok", "[+]storage ok", "[+]shutdown ok", "readyz check passed"))
	}
}

func TestFailureWithholdsReasonAndLogsIt(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddLivez(Ping(), failing("storage", "dial tcp: connection refused"), Log())
	want := lines("[+]ping ok", "[-]storage failed: reason withheld", "[+]log ok", "livez check failed")
	// The answer to a failure always lists every check, verbose or not.
	f.expect(t, "/livez", 500, want)
	f.expect(t, "/livez?verbose", 500, want)
	code, hdr, _ := f.do(t, http.MethodGet, "/livez")
	if code != 500 || hdr.Get("Content-Type") != "text/plain; charset=utf-8" || hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("failure answer %d with headers %v", code, hdr)
	}
	logs := f.logs.String()
	for _, s := range []string{"check=storage", "connection refused", "endpoint=livez"} {
		if !strings.Contains(logs, s) {
			t.Errorf("log lacks %q:\n%s", s, logs)
		}
	}
	// Other endpoints have their own check lists.
	f.expect(t, "/healthz", 200, "ok")
	f.expect(t, "/readyz", 200, "ok")
}

func TestExclude(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddReadyz(Ping(), failing("storage", "down"), Log())

	f.expect(t, "/readyz?exclude=storage", 200, "ok")
	f.expect(t, "/readyz?exclude=storage&verbose", 200,
		lines("[+]ping ok", "[+]storage excluded: ok", "[+]log ok", "[+]shutdown ok", "readyz check passed"))
	f.expect(t, "/readyz?verbose&exclude=storage&exclude=ping", 200,
		lines("[+]ping excluded: ok", "[+]storage excluded: ok", "[+]log ok", "[+]shutdown ok", "readyz check passed"))

	// Excluding a name that is no check still succeeds, with a warning in the verbose list.
	f.expect(t, "/readyz?exclude=storage&exclude=nosuch", 200, "ok")
	f.expect(t, "/readyz?exclude=storage&exclude=nosuch&verbose", 200,
		lines("[+]ping ok", "[+]storage excluded: ok", "[+]log ok", "[+]shutdown ok",
			`warn: some health checks cannot be excluded: no matches for "nosuch"`, "readyz check passed"))
	f.expect(t, "/readyz?exclude=storage&exclude=zz&exclude=aa&verbose", 200,
		lines("[+]ping ok", "[+]storage excluded: ok", "[+]log ok", "[+]shutdown ok",
			`warn: some health checks cannot be excluded: no matches for "aa","zz"`, "readyz check passed"))

	// The warning also appears in a failure's list.
	f.expect(t, "/readyz?exclude=nosuch", 500,
		lines("[+]ping ok", "[-]storage failed: reason withheld", "[+]log ok", "[+]shutdown ok",
			`warn: some health checks cannot be excluded: no matches for "nosuch"`, "readyz check failed"))

	// An excluded check is not run at all.
	ran := make(chan struct{}, 1)
	f.h.AddLivez(Check{Name: "counted", Run: func(*http.Request) error { ran <- struct{}{}; return nil }})
	f.expect(t, "/livez?exclude=counted", 200, "ok")
	select {
	case <-ran:
		t.Error("excluded check ran")
	default:
	}
}

func TestSingleCheck(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddLivez(Ping(), failing("storage", "backend unreachable"))
	f.h.AddReadyz(Ping())
	f.h.AddHealthz(Log())
	done := f.h.AddPostStartHook("bootstrap-namespaces")

	f.expect(t, "/livez/ping", 200, "ok")
	f.expect(t, "/readyz/ping", 200, "ok")
	f.expect(t, "/healthz/log", 200, "ok")
	f.expect(t, "/readyz/shutdown", 200, "ok")
	// A failing single check answers 500 with its reason, as upstream's per-check handler does.
	f.expect(t, "/livez/storage", 500, "internal server error: backend unreachable\n")
	// Check names may contain slashes.
	f.expect(t, "/readyz/poststarthook/bootstrap-namespaces", 500, "internal server error: not finished\n")
	done()
	f.expect(t, "/readyz/poststarthook/bootstrap-namespaces", 200, "ok")
	// Only the named check runs: /livez as a whole fails, /livez/ping does not.
	f.expect(t, "/livez/ping?verbose", 200, "ok")

	// A name that is no check of that endpoint is the router's 404.
	for _, path := range []string{"/livez/nosuch", "/livez/shutdown", "/readyz/storage", "/healthz/ping", "/livez/", "/readyz/poststarthook"} {
		f.expect(t, path, 404, "router not found\n")
	}
}

func TestSingleCheckNotFoundWithoutRouterHandler(t *testing.T) {
	h := New(Options{})
	r := mux.NewRouter()
	h.Install(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/livez/nosuch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
}

func TestPostStartHookLivezGracePeriod(t *testing.T) {
	f := newFixture(t, Options{LivezGracePeriod: time.Minute}, nil)
	f.h.AddHealthz(Ping())
	f.h.AddLivez(Ping())
	f.h.AddReadyz(Ping())
	done := f.h.AddPostStartHook("start-controllers")

	// Inside the grace period livez passes; readyz and healthz fail.
	f.expect(t, "/livez", 200, "ok")
	f.expect(t, "/livez?verbose", 200, lines("[+]ping ok", "[+]poststarthook/start-controllers ok", "livez check passed"))
	f.expect(t, "/livez/poststarthook/start-controllers", 200, "ok")
	f.expect(t, "/readyz", 500, lines("[+]ping ok", "[-]poststarthook/start-controllers failed: reason withheld", "[+]shutdown ok", "readyz check failed"))
	f.expect(t, "/healthz", 500, lines("[+]ping ok", "[-]poststarthook/start-controllers failed: reason withheld", "healthz check failed"))

	f.clock.Step(59 * time.Second)
	f.expect(t, "/livez", 200, "ok")
	f.expect(t, "/readyz", 500, lines("[+]ping ok", "[-]poststarthook/start-controllers failed: reason withheld", "[+]shutdown ok", "readyz check failed"))

	// After it, the unfinished hook fails livez too.
	f.clock.Step(2 * time.Second)
	f.expect(t, "/livez", 500, lines("[+]ping ok", "[-]poststarthook/start-controllers failed: reason withheld", "livez check failed"))
	f.expect(t, "/livez/poststarthook/start-controllers", 500, "internal server error: not finished\n")
	f.expect(t, "/readyz", 500, lines("[+]ping ok", "[-]poststarthook/start-controllers failed: reason withheld", "[+]shutdown ok", "readyz check failed"))

	// Once done, every endpoint passes; calling done again is harmless.
	done()
	done()
	f.expect(t, "/livez", 200, "ok")
	f.expect(t, "/readyz", 200, "ok")
	f.expect(t, "/healthz", 200, "ok")
	f.expect(t, "/readyz?verbose", 200, lines("[+]ping ok", "[+]poststarthook/start-controllers ok", "[+]shutdown ok", "readyz check passed"))
}

func TestPostStartHookWithoutGracePeriod(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	done := f.h.AddPostStartHook("bootstrap")
	f.expect(t, "/livez", 500, lines("[-]poststarthook/bootstrap failed: reason withheld", "livez check failed"))
	done()
	f.expect(t, "/livez", 200, "ok")
}

// TestLivezGracePeriodRealClock runs the grace period on the real clock, from Options.Start.
func TestLivezGracePeriodRealClock(t *testing.T) {
	h := New(Options{LivezGracePeriod: 300 * time.Millisecond, Start: time.Now()})
	r := mux.NewRouter()
	h.Install(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	h.AddPostStartHook("slow")
	status := func(path string) int {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/livez"); got != 200 {
		t.Errorf("inside grace: /livez %d, want 200", got)
	}
	if got := status("/readyz"); got != 500 {
		t.Errorf("inside grace: /readyz %d, want 500", got)
	}
	time.Sleep(400 * time.Millisecond)
	if got := status("/livez"); got != 500 {
		t.Errorf("after grace: /livez %d, want 500", got)
	}
}

func TestShutdown(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddHealthz(Ping())
	f.h.AddLivez(Ping())
	f.h.AddReadyz(Ping())
	f.expect(t, "/readyz", 200, "ok")

	f.h.ShutdownInitiated()
	f.expect(t, "/readyz", 500, lines("[+]ping ok", "[-]shutdown failed: reason withheld", "readyz check failed"))
	f.expect(t, "/readyz/shutdown", 500, "internal server error: process is shutting down\n")
	f.expect(t, "/livez", 200, "ok")
	f.expect(t, "/healthz", 200, "ok")
	f.expect(t, "/livez?verbose", 200, lines("[+]ping ok", "livez check passed"))
	// It stays failed.
	f.h.ShutdownInitiated()
	f.expect(t, "/readyz?verbose", 500, lines("[+]ping ok", "[-]shutdown failed: reason withheld", "readyz check failed"))
	// Like any check, it can be excluded.
	f.expect(t, "/readyz?exclude=shutdown", 200, "ok")
}

func TestHead(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddLivez(Ping())
	f.h.AddReadyz(failing("storage", "down"))
	for path, want := range map[string]int{
		"/livez":          200,
		"/healthz":        200,
		"/readyz":         500,
		"/livez/ping":     200,
		"/readyz/storage": 500,
		"/livez/nosuch":   404,
	} {
		code, hdr, body := f.do(t, http.MethodHead, path)
		if code != want || body != "" {
			t.Errorf("HEAD %s = %d %q, want %d and no body", path, code, body, want)
		}
		if want != 404 && hdr.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("HEAD %s Content-Type = %q", path, hdr.Get("Content-Type"))
		}
	}
	// Other methods are not served.
	code, _, _ := f.do(t, http.MethodPost, "/livez")
	if code != http.StatusMethodNotAllowed {
		t.Errorf("POST /livez = %d, want 405", code)
	}
}

func TestChecksRunConcurrently(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	// Each check waits for the other to start: only a concurrent run passes both.
	var started sync.WaitGroup
	started.Add(2)
	barrier := func(name string) Check {
		return Check{Name: name, Run: func(r *http.Request) error {
			started.Done()
			ch := make(chan struct{})
			go func() { started.Wait(); close(ch) }()
			select {
			case <-ch:
				return nil
			case <-time.After(5 * time.Second):
				return errors.New("the other check never started")
			}
		}}
	}
	f.h.AddLivez(barrier("a"), barrier("b"))
	f.expect(t, "/livez?verbose", 200, lines("[+]a ok", "[+]b ok", "livez check passed"))
}

func TestCheckTimeoutFromRequestContext(t *testing.T) {
	// A request deadline, as a timeout filter in front of the health handler would set.
	withDeadline := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 200*time.Millisecond)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	f := newFixture(t, Options{}, withDeadline)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	sawDeadline := make(chan bool, 1)
	f.h.AddReadyz(
		Ping(),
		// Honours its context: fails when the deadline passes.
		Check{Name: "storage", Run: func(r *http.Request) error {
			_, ok := r.Context().Deadline()
			sawDeadline <- ok
			<-r.Context().Done()
			return r.Context().Err()
		}},
		// Ignores its context: the answer does not wait for it.
		Check{Name: "stuck", Run: func(*http.Request) error { <-release; return nil }},
	)
	start := time.Now()
	f.expect(t, "/readyz", 500, lines("[+]ping ok", "[-]storage failed: reason withheld",
		"[-]stuck failed: reason withheld", "[+]shutdown ok", "readyz check failed"))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answer took %v; the request deadline was 200ms", d)
	}
	if !<-sawDeadline {
		t.Error("check's request context has no deadline")
	}
	if logs := f.logs.String(); !strings.Contains(logs, "check=stuck") || !strings.Contains(logs, "deadline exceeded") {
		t.Errorf("log lacks the stuck check's timeout:\n%s", logs)
	}
}

func TestLogCheck(t *testing.T) {
	var mu sync.Mutex
	var logErr error
	f := newFixture(t, Options{LogHealthy: func() error {
		mu.Lock()
		defer mu.Unlock()
		return logErr
	}}, nil)
	f.h.AddLivez(Ping(), Log())
	f.expect(t, "/livez/log", 200, "ok")
	mu.Lock()
	logErr = errors.New("write /var/log/platform.log: no space left on device")
	mu.Unlock()
	f.expect(t, "/livez", 500, lines("[+]ping ok", "[-]log failed: reason withheld", "livez check failed"))

	// Without LogHealthy the log check passes.
	g := newFixture(t, Options{}, nil)
	g.h.AddLivez(Log())
	g.expect(t, "/livez?verbose", 200, lines("[+]log ok", "livez check passed"))
	// Outside a Health handler it passes too.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if err := Log().Run(req); err != nil {
		t.Errorf("Log outside a handler: %v", err)
	}
	if err := Ping().Run(req); err != nil || Ping().Name != "ping" || Log().Name != "log" {
		t.Errorf("Ping/Log: %q %q %v", Ping().Name, Log().Name, err)
	}
}

func TestPanickingCheckFails(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.h.AddLivez(Ping(), Check{Name: "buggy", Run: func(*http.Request) error { panic("boom") }})
	f.expect(t, "/livez", 500, lines("[+]ping ok", "[-]buggy failed: reason withheld", "livez check failed"))
	f.expect(t, "/livez/buggy", 500, "internal server error: check panicked: boom\n")
}

func TestChecksAddedAfterInstall(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.expect(t, "/livez?verbose", 200, lines("livez check passed"))
	f.h.AddLivez(Ping())
	f.expect(t, "/livez?verbose", 200, lines("[+]ping ok", "livez check passed"))
}

func TestInvalidChecksPanic(t *testing.T) {
	h := New(Options{})
	h.AddReadyz(Ping())
	h.AddPostStartHook("hook")
	for name, add := range map[string]func(){
		"duplicate":          func() { h.AddReadyz(Ping()) },
		"shutdown is taken":  func() { h.AddReadyz(Check{Name: "shutdown", Run: Ping().Run}) },
		"no name":            func() { h.AddLivez(Check{Run: Ping().Run}) },
		"no run":             func() { h.AddHealthz(Check{Name: "x"}) },
		"duplicate hook":     func() { h.AddPostStartHook("hook") },
		"hook name as check": func() { h.AddLivez(Check{Name: "poststarthook/hook", Run: Ping().Run}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			add()
		}()
	}
	// "shutdown" is only reserved on readyz.
	h.AddLivez(Check{Name: "shutdown", Run: Ping().Run})
}
