package compose

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	watchtools "k8s.io/client-go/tools/watch"
)

// Bounds of the fault test: how long a dependency stays down, how long the stack may take to
// recover, the client timeout that separates an answer from a hang.
const (
	faultDown       = 8 * time.Second
	faultRecover    = 90 * time.Second
	clientTimeout   = 10 * time.Second
	writerTimeout   = 30 * time.Second
	writersN        = 4
	maxWritesPerGor = 2000
)

// TestComposeFaults kills and restarts dependencies of the gateway while clients write, on a
// compose project of its own: the Redis container, a storage container and an authz container,
// one after the other, each down for faultDown and then started again. Meanwhile client-go
// writers create and update ConfigMaps (admin), a RetryWatcher watches them from the
// namespace's initial resourceVersion, and a prober sends plain HTTP requests (bounded by
// clientTimeout) that need storage, Redis and an authorization decision the gateway has not
// cached (a new impersonated user each time). It checks:
//   - no acknowledged write is lost: every create or update that got a 2xx is readable at the end
//     with its value (or a later value the writer attempted);
//   - the watch resumes with no gap: it delivered an event for every acknowledged write, with the
//     write's resourceVersion and value, in increasing resourceVersion order;
//   - while a dependency is down the gateway answers 503, never 500 and never a hang (no request
//     outlives the client timeout), and the prober saw at least one 503 per fault;
//   - the stack recovers by itself once the container is back (the gateway is never restarted).
func TestComposeFaults(t *testing.T) {
	p := startProject(t, "platformfaults")
	admin := p.restConfig()
	gatewayBefore := containerState(t, p.container("gateway"))

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ns := "faults-" + randomSuffix(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The probers' group may list and create ConfigMaps in the namespace.
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "prober"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prober"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "prober"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "compose:probers"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pr := newProber(t, admin, ns)
	// The binding reaches the authorization service through its watch: wait until a probe passes.
	if !pr.waitHealthy(ctx, 60*time.Second) {
		t.Fatalf("the probes did not succeed within 60s before any fault: %s", pr.summary(""))
	}
	pr.reset() // the 403s until then are not the faults' business

	list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wa := startWatcher(ctx, t, admin, ns, list.ResourceVersion)
	defer wa.stop()

	// Writers: admin (no authorization call), client-go's own retries on 503 + Retry-After
	// (up to 10), each call bounded by writerTimeout, longer than an outage.
	wcfg := rest.CopyConfig(admin)
	wcfg.Timeout = writerTimeout
	wcfg.QPS, wcfg.Burst = 500, 500
	wkube, err := kubernetes.NewForConfig(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWriters := context.WithCancel(ctx)
	ledger := &ledger{objects: map[string]*written{}}
	var writers sync.WaitGroup
	for w := range writersN {
		writers.Add(1)
		go func() {
			defer writers.Done()
			runWriter(wctx, wkube.CoreV1().ConfigMaps(ns), w, ledger)
		}()
	}
	proberCtx, stopProber := context.WithCancel(ctx)
	var probing sync.WaitGroup
	probing.Add(1)
	go func() { defer probing.Done(); pr.run(proberCtx) }()

	time.Sleep(3 * time.Second)
	for _, target := range []string{"redis", "storage", "authz"} {
		id := p.container(target)
		start := time.Now()
		pr.phase(target, true)
		mustDocker(t, time.Minute, "kill", id)
		time.Sleep(faultDown)
		pr.phase(target, false)
		mustDocker(t, time.Minute, "start", id)
		healthy := waitContainerReady(t, id, faultRecover)
		recovered := pr.waitRecovered(ctx, target, faultRecover)
		t.Logf("%s: killed, down %v, started again; container ready after %v, the gateway answering 2xx again %v after the kill (%s)",
			target, faultDown, healthy.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), pr.summary(target))
		if !recovered {
			t.Errorf("%s: the gateway did not recover by itself within %v of the container's restart: %s", target, faultRecover, pr.summary(target))
		}
		if pr.count(target, http.StatusServiceUnavailable) == 0 {
			t.Errorf("%s: no 503 from the gateway while it was down: %s", target, pr.summary(target))
		}
		time.Sleep(3 * time.Second)
	}
	stopWriters()
	writers.Wait()
	stopProber()
	probing.Wait()

	// Every answer was 2xx or 503 (the prober) and no request hung.
	for _, f := range pr.failures() {
		t.Errorf("prober: %s", f)
	}
	acked, attempts := ledger.stats()
	t.Logf("writers: %d acknowledged writes of %d attempts; errors by kind: %v", acked, attempts, ledger.errorKinds())
	for _, f := range ledger.failures() {
		t.Errorf("writer: %s", f)
	}
	if acked < 50 {
		t.Errorf("only %d acknowledged writes: the load was too small to mean anything", acked)
	}

	// No acknowledged write lost.
	final, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the final list: %v", err)
	}
	stored := map[string]corev1.ConfigMap{}
	for _, cm := range final.Items {
		stored[cm.Name] = cm
	}
	lost := 0
	for name, o := range ledger.objects {
		cm, ok := stored[name]
		switch {
		case !ok && o.createAcked:
			lost++
			t.Errorf("lost: %s was created (201, resourceVersion %s) and is gone", name, o.createRV)
		case ok && !o.allowed(cm.Data["v"]):
			lost++
			t.Errorf("lost: %s holds %q; acknowledged %q, attempted after it %v", name, cm.Data["v"], o.lastAcked(), o.after)
		}
	}

	// The watch: every acknowledged write arrived, in resourceVersion order, with no gap.
	want := ledger.ackedWrites()
	if missing := wa.waitFor(want, 60*time.Second); len(missing) > 0 {
		show := missing
		if len(show) > 10 {
			show = show[:10]
		}
		t.Errorf("the watch missed %d of %d acknowledged writes (from %s on), such as %v; watch errors: %v", len(missing), len(want), list.ResourceVersion, show, wa.errors())
	}
	for _, f := range wa.orderFailures() {
		t.Errorf("watch: %s", f)
	}
	t.Logf("watch: %d events, %d re-watches by the RetryWatcher's source; %d objects checked, %d lost", wa.eventCount(), wa.watches.Load()-1, len(ledger.objects), lost)

	// The gateway recovered by itself: the same container, never restarted.
	if after := containerState(t, p.container("gateway")); after != gatewayBefore {
		t.Errorf("the gateway container was restarted: %s, then %s", gatewayBefore, after)
	}
}

// containerState is a container's start time and restart count.
func containerState(t *testing.T, id string) string {
	return strings.TrimSpace(mustDocker(t, 30*time.Second, "inspect", "-f", "{{.State.StartedAt}} restarts={{.RestartCount}}", id))
}

// waitContainerReady waits until the container runs and is healthy (if it has a health check).
func waitContainerReady(t *testing.T, id string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		out, _, _ := docker(30*time.Second, "inspect", "-f", "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", id)
		switch strings.TrimSpace(out) {
		case "running healthy", "running none":
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("container %s not ready %v after its start: %s", id, bound, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// --- writers and what they were told -------------------------------------------------------------

// written is what one writer did to one ConfigMap.
type written struct {
	createAcked bool
	createRV    string
	createValue string
	updateAcked bool
	updateRV    string
	updateValue string
	after       []string // values attempted after the last acknowledged one (their outcome unknown)
}

func (o *written) lastAcked() string {
	if o.updateAcked {
		return o.updateValue
	}
	return o.createValue
}

// allowed reports whether v may be the stored value: the last acknowledged one, or one attempted
// after it whose answer was an error (it may or may not have been applied).
func (o *written) allowed(v string) bool {
	if v == o.lastAcked() && (o.createAcked || o.updateAcked) {
		return true
	}
	for _, a := range o.after {
		if v == a {
			return true
		}
	}
	return false
}

type ackedWrite struct{ name, rv, value, typ string }

type ledger struct {
	mu       sync.Mutex
	objects  map[string]*written
	attempts int
	errs     map[string]int
	bad      []string
}

func (l *ledger) stats() (acked, attempts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.objects {
		if o.createAcked {
			acked++
		}
		if o.updateAcked {
			acked++
		}
	}
	return acked, l.attempts
}

func (l *ledger) ackedWrites() []ackedWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ackedWrite
	for name, o := range l.objects {
		if o.createAcked {
			out = append(out, ackedWrite{name, o.createRV, o.createValue, string(watch.Added)})
		}
		if o.updateAcked {
			out = append(out, ackedWrite{name, o.updateRV, o.updateValue, string(watch.Modified)})
		}
	}
	return out
}

// record notes a failed write: 503 (the dependency is down), 409 (a retried create or update
// whose first attempt may have been applied) and 504 are answers; a 500, another code or no
// answer within the client timeout are failures of the test.
func (l *ledger) record(op string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kind := "other"
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		kind = strconv.Itoa(int(status.Status().Code))
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") || strings.Contains(err.Error(), "deadline exceeded"):
		kind = "timeout"
	}
	if l.errs == nil {
		l.errs = map[string]int{}
	}
	l.errs[kind]++
	switch kind {
	case "503", "409":
	default:
		if len(l.bad) < 20 {
			l.bad = append(l.bad, fmt.Sprintf("%s: %s: %v", op, kind, err))
		}
	}
}

func (l *ledger) errorKinds() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.errs {
		out[k] = v
	}
	return out
}

func (l *ledger) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.bad...)
}

// runWriter creates ConfigMaps and updates each once, recording every answer.
func runWriter(ctx context.Context, cms interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
}, w int, l *ledger) {
	for i := 0; i < maxWritesPerGor && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("w%d-%d", w, i)
		o := &written{createValue: fmt.Sprintf("c-%d-%d", w, i), updateValue: fmt.Sprintf("u-%d-%d", w, i)}
		l.mu.Lock()
		l.objects[name] = o
		l.attempts++
		l.mu.Unlock()
		// The writes themselves are not cancelled by the end of the test: an answer is awaited.
		created, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": o.createValue}}, metav1.CreateOptions{})
		if err != nil {
			l.record("create "+name, err)
			l.mu.Lock()
			o.after = append(o.after, o.createValue)
			l.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		l.mu.Lock()
		o.createAcked, o.createRV = true, created.ResourceVersion
		l.attempts++
		l.mu.Unlock()
		created.Data["v"] = o.updateValue
		updated, err := cms.Update(context.Background(), created, metav1.UpdateOptions{})
		l.mu.Lock()
		if err != nil {
			o.after = append(o.after, o.updateValue)
		} else {
			o.updateAcked, o.updateRV = true, updated.ResourceVersion
		}
		l.mu.Unlock()
		if err != nil {
			l.record("update "+name, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- the watcher ---------------------------------------------------------------------------------

type seenEvent struct {
	typ, rv, value string
}

type watcher struct {
	rw      *watchtools.RetryWatcher
	watches atomic.Int64
	mu      sync.Mutex
	seen    map[string][]seenEvent
	order   []string // "name@rv" in arrival order
	errs    []string
	count   int
	done    chan struct{}
}

// watchSource opens the RetryWatcher's watches and counts them.
type watchSource struct {
	cms     func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	watches *atomic.Int64
}

func (s watchSource) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.watches.Add(1)
	return s.cms(ctx, opts)
}

func startWatcher(ctx context.Context, t *testing.T, admin *rest.Config, ns, rv string) *watcher {
	t.Helper()
	// No client timeout on the watch stream itself (the server ends it; the RetryWatcher
	// re-watches from the last resourceVersion).
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	wa := &watcher{seen: map[string][]seenEvent{}, done: make(chan struct{})}
	src := watchSource{watches: &wa.watches, cms: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return kube.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	}}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, src)
	if err != nil {
		t.Fatal(err)
	}
	wa.rw = rw
	go func() {
		defer close(wa.done)
		for ev := range rw.ResultChan() {
			wa.mu.Lock()
			switch ev.Type {
			case watch.Error:
				wa.errs = append(wa.errs, apierrors.FromObject(ev.Object).Error())
			default:
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
					wa.count++
					wa.seen[cm.Name] = append(wa.seen[cm.Name], seenEvent{string(ev.Type), cm.ResourceVersion, cm.Data["v"]})
					wa.order = append(wa.order, cm.Name+"@"+cm.ResourceVersion)
				}
			}
			wa.mu.Unlock()
		}
	}()
	return wa
}

func (wa *watcher) stop() { wa.rw.Stop(); <-wa.done }

func (wa *watcher) errors() []string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	return append([]string(nil), wa.errs...)
}

func (wa *watcher) eventCount() int {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	return wa.count
}

// missing returns the acknowledged writes the watch has not delivered (by name, resourceVersion,
// type and value).
func (wa *watcher) missing(want []ackedWrite) []string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var out []string
	for _, w := range want {
		found := false
		for _, e := range wa.seen[w.name] {
			if e.rv == w.rv {
				found = e.typ == w.typ && e.value == w.value
				break
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%s %s@%s=%s", w.typ, w.name, w.rv, w.value))
		}
	}
	sort.Strings(out)
	return out
}

// waitFor waits (bounded) until every write in want was delivered and returns those that were not.
func (wa *watcher) waitFor(want []ackedWrite, bound time.Duration) []string {
	deadline := time.Now().Add(bound)
	for {
		m := wa.missing(want)
		if len(m) == 0 || time.Now().After(deadline) {
			return m
		}
		select {
		case <-wa.done:
			return wa.missing(want)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// orderFailures: resourceVersions strictly increase along the watch (no event twice, none out of
// order); they are decimal revisions in Platform.
func (wa *watcher) orderFailures() []string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var out []string
	var last uint64
	for _, e := range wa.order {
		_, rv, _ := strings.Cut(e, "@")
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return append(out, fmt.Sprintf("resourceVersion %q of %s is not a decimal revision", rv, e))
		}
		if n <= last {
			out = append(out, fmt.Sprintf("%s after revision %d: not increasing", e, last))
			if len(out) >= 10 {
				return out
			}
		}
		last = n
	}
	return out
}

// --- the prober ----------------------------------------------------------------------------------

type probe struct {
	at      time.Time
	target  string // the dependency down or recovering, "" before the first fault
	down    bool
	op      string
	code    int // 0: no answer
	err     string
	latency time.Duration
}

// prober sends requests that need the gateway's dependencies: a consistent list (storage and
// Redis) and a create (storage, Redis, admission), each as a new impersonated user of the
// compose:probers group, so that the gateway asks the authorization service every time.
type prober struct {
	t      *testing.T
	client *http.Client
	host   string
	ns     string
	n      atomic.Int64
	mu     sync.Mutex
	target string
	down   bool
	probes []probe
}

func newProber(t *testing.T, admin *rest.Config, ns string) *prober {
	t.Helper()
	client, err := rest.HTTPClientFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = clientTimeout
	return &prober{t: t, client: client, host: admin.Host, ns: ns}
}

func (pr *prober) reset() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.probes = nil
}

func (pr *prober) phase(target string, down bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.target, pr.down = target, down
}

// once sends one list and one create and records both answers.
func (pr *prober) once(ctx context.Context) (ok bool) {
	ok = true
	for _, op := range []string{"list", "create"} {
		n := pr.n.Add(1)
		var req *http.Request
		var err error
		url := pr.host + "/api/v1/namespaces/" + pr.ns + "/configmaps"
		if op == "list" {
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, url+"?limit=1", nil)
		} else {
			body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe-%d"}}`, n)
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
			req.Header.Set("Content-Type", "application/json")
		}
		if err != nil {
			pr.t.Error(err)
			return false
		}
		req.Header.Set("Impersonate-User", fmt.Sprintf("prober-%d", n))
		req.Header.Set("Impersonate-Group", "compose:probers")
		pr.mu.Lock()
		p := probe{at: time.Now(), target: pr.target, down: pr.down, op: op}
		pr.mu.Unlock()
		resp, err := pr.client.Do(req)
		p.latency = time.Since(p.at)
		if err != nil {
			if ctx.Err() != nil {
				return false // the test ended it
			}
			p.err = err.Error()
		} else {
			p.code = resp.StatusCode
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			_ = resp.Body.Close()
			if p.code >= 300 {
				p.err = strings.TrimSpace(string(b))
			}
		}
		if p.code < 200 || p.code >= 300 {
			ok = false
		}
		pr.mu.Lock()
		pr.probes = append(pr.probes, p)
		pr.mu.Unlock()
	}
	return ok
}

func (pr *prober) run(ctx context.Context) {
	for ctx.Err() == nil {
		pr.once(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (pr *prober) waitHealthy(ctx context.Context, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if pr.once(ctx) {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// waitRecovered waits until a list and a create made after now both succeed.
func (pr *prober) waitRecovered(ctx context.Context, target string, bound time.Duration) bool {
	since := time.Now()
	deadline := since.Add(bound)
	for time.Now().Before(deadline) {
		pr.mu.Lock()
		okList, okCreate := false, false
		for i := len(pr.probes) - 1; i >= 0 && pr.probes[i].at.After(since); i-- {
			p := pr.probes[i]
			if p.code >= 200 && p.code < 300 {
				okList = okList || p.op == "list"
				okCreate = okCreate || p.op == "create"
			}
		}
		pr.mu.Unlock()
		if okList && okCreate {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}

func (pr *prober) count(target string, code int) int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	n := 0
	for _, p := range pr.probes {
		if p.target == target && p.code == code {
			n++
		}
	}
	return n
}

// summary counts the answers of the probes made while target was down or recovering.
func (pr *prober) summary(target string) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	codes := map[string]int{}
	var slowest time.Duration
	for _, p := range pr.probes {
		if p.target != target {
			continue
		}
		k := p.op + ":" + strconv.Itoa(p.code)
		if p.code == 0 {
			k = p.op + ":no-answer"
		}
		codes[k]++
		slowest = max(slowest, p.latency)
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, codes[k])
	}
	fmt.Fprintf(&b, "slowest %v", slowest.Round(time.Millisecond))
	return b.String()
}

// failures: every probe answered 2xx or 503, within the client timeout.
func (pr *prober) failures() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []string
	for _, p := range pr.probes {
		if (p.code >= 200 && p.code < 300) || p.code == http.StatusServiceUnavailable {
			continue
		}
		what := "no answer (a hang or a refused connection)"
		if p.code != 0 {
			what = "answered " + strconv.Itoa(p.code)
		}
		out = append(out, fmt.Sprintf("%s during %q (down %v) %s after %v: %s", p.op, p.target, p.down, what, p.latency.Round(time.Millisecond), p.err))
		if len(out) >= 20 {
			break
		}
	}
	return out
}
