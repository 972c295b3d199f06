package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// getSetSize is how many objects the get, patch and apply scenarios work on round-robin.
	getSetSize = 100
	// maxOpsPerClient bounds every client loop by count as well as by time.
	maxOpsPerClient = 100_000_000
	// fixtureWorkers create the scenarios' fixtures concurrently.
	fixtureWorkers = 16
)

// runner runs the chosen scenarios, each in a namespace of its own that it creates, and
// collects the table rows, notes and failures.
type runner struct {
	o   *options
	api *apiClient // the administrator: setup and cleanup
	// load is the identity the scenarios' requests are made as (r.api for --identity=admin);
	// subject is its RBAC subject (nil for admin).
	load    *apiClient
	subject map[string]any
	// loads are the load identity's clients of every gateway (--replicas): worker w uses
	// loads[w.id % len(loads)]; empty means r.load alone.
	loads    []*apiClient
	nsPrefix string
	progress io.Writer
	meterCPU bool // note the CPU the tool and the processes it started used in each run
	// profiles are the processes whose CPU profiles --profile-dir collects in each run.
	profiles []profileTarget

	rows     []*outcome
	notes    []string
	failures []string
	created  []string // namespaces to delete at the end
	// webhook is the no-op webhook of --webhook=noop.
	webhook *noopWebhook
	// definedCRD: the run created the custom kind's definition, which it deletes at the end.
	definedCRD bool
}

// loadFor is the client worker w sends its requests with: with several gateways (--replicas)
// the workers are spread over them round-robin.
func (r *runner) loadFor(w *worker) *apiClient {
	if len(r.loads) == 0 {
		return r.load
	}
	return r.loads[w.id%len(r.loads)]
}

func (r *runner) failf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// objectMeta is the part of an object or list answer the tool reads.
type objectMeta struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

func resourceVersionOf(body []byte) (string, error) {
	var m objectMeta
	if err := json.Unmarshal(body, &m); err != nil {
		return "", err
	}
	if m.Metadata.ResourceVersion == "" {
		return "", errors.New("the answer has no metadata.resourceVersion")
	}
	return m.Metadata.ResourceVersion, nil
}

// createObjects creates the objects prefix-00000 ... in ns, concurrently, and returns their
// paths.
func (r *runner) createObjects(ctx context.Context, ns, prefix string, n int) ([]string, error) {
	coll := r.o.kind.collectionPath(ns)
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%s-%05d", coll, prefix, i)
	}
	var next atomic.Int64
	errs := make([]error, fixtureWorkers)
	var wg sync.WaitGroup
	for w := range fixtureWorkers {
		wg.Go(func() {
			var buf bytes.Buffer
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				body := r.o.kind.appendObject(nil, fmt.Sprintf("%s-%05d", prefix, i), "")
				if err := r.api.do(ctx, http.MethodPost, coll, body, http.StatusCreated, &buf); err != nil {
					errs[w] = fmt.Errorf("creating the fixture: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return paths, ctx.Err()
}

// worker is one client's reusable state.
type worker struct {
	id   int
	buf  bytes.Buffer
	body []byte
}

// operation is one request of a scenario: the worker's i-th.
type operation func(ctx context.Context, w *worker, i int) error

// clientTally is what one client measured.
type clientTally struct {
	lat      latencies
	ops      uint64
	errors   uint64
	firstErr error
}

// drive runs op in n concurrent clients for the warm-up and then the measured window. An
// operation counts (rate and latency) when it completes inside the window; an error counts
// wherever it happens, warm-up included.
func (r *runner) drive(ctx context.Context, scenario string, n int, op operation) error {
	start := time.Now()
	from := start.Add(r.o.warmup)
	stop := from.Add(r.o.duration)
	cpuNoteCh := r.meterWindow(ctx, from, stop)
	profileNoteCh := r.profileWindow(ctx, scenario, n, from, stop)
	tallies := make([]*clientTally, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			t := &clientTally{}
			tallies[c] = t
			w := &worker{id: c}
			for i := range maxOpsPerClient {
				t0 := time.Now()
				if !t0.Before(stop) || ctx.Err() != nil {
					return
				}
				err := op(ctx, w, i)
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					t.errors++
					if t.firstErr == nil {
						t.firstErr = err
					}
					time.Sleep(10 * time.Millisecond) // do not spin on a failing server
					continue
				}
				if !t1.Before(from) && t1.Before(stop) {
					t.ops++
					t.lat.record(t1.Sub(t0))
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	row := &outcome{scenario: scenario, clients: n, window: r.o.duration}
	var firstErr error
	for _, t := range tallies {
		row.ops += t.ops
		row.errors += t.errors
		row.lat.merge(&t.lat)
		if firstErr == nil {
			firstErr = t.firstErr
		}
	}
	r.addRow(row)
	if row.errors > 0 {
		r.failf("%s clients=%d: %d requests failed; first: %v", scenario, n, row.errors, firstErr)
	}
	for _, ch := range []<-chan string{cpuNoteCh, profileNoteCh} {
		if note := <-ch; note != "" {
			r.notes = append(r.notes, fmt.Sprintf("%s clients=%d: %s", scenario, n, note))
		}
	}
	return nil
}

func (r *runner) addRow(row *outcome) {
	r.rows = append(r.rows, row)
	fmt.Fprintf(r.progress, "apiload: %s clients=%d: %d ops, %.1f/s, p50 %.2fms, p99 %.2fms, %d errors\n",
		row.scenario, row.clients, row.ops, row.rate(), ms(row.lat.quantile(0.5)), ms(row.lat.quantile(0.99)), row.errors)
}

// meterWindow samples the CPU use at from and at stop (when metering) and sends a note about
// it, or "", on the channel it returns.
func (r *runner) meterWindow(ctx context.Context, from, stop time.Time) <-chan string {
	ch := make(chan string, 1)
	if !r.meterCPU {
		ch <- ""
		return ch
	}
	go func() {
		if !sleepUntil(ctx, from) {
			ch <- ""
			return
		}
		a := sampleCPU(r.o.meter...)
		if !sleepUntil(ctx, stop) {
			ch <- ""
			return
		}
		ch <- cpuNote(a, sampleCPU(r.o.meter...))
	}()
	return ch
}

// sleepUntil waits for t and reports whether ctx was still alive then.
func sleepUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// run defines the custom kind if it is the one measured, then runs every chosen scenario. A
// setup error (the kind could not be defined, the namespace or a fixture could not be created,
// watches could not be established) ends the run; what the scenarios found wrong is in
// r.failures.
func (r *runner) run(ctx context.Context) error {
	if err := r.defineKind(ctx); err != nil {
		return err
	}
	if r.o.webhook == "noop" {
		if err := r.registerWebhook(ctx); err != nil {
			return err
		}
	}
	for _, sc := range r.o.scenarios {
		// The floor scenarios need no namespace.
		ns := r.nsPrefix + "-" + sc
		if !slices.Contains(floorScenarios, sc) {
			if err := r.api.createNamespace(ctx, ns); err != nil {
				return err
			}
			r.created = append(r.created, ns)
			if err := r.grant(ctx, ns); err != nil {
				return err
			}
		}
		var err error
		switch sc {
		case scenarioVersion:
			err = r.runVersion(ctx)
		case scenarioNull:
			err = r.runNull(ctx)
		case "create":
			err = r.runCreate(ctx, ns)
		case "get":
			err = r.runGet(ctx, ns)
		case "patch", "apply":
			err = r.runPatch(ctx, ns, sc)
		case "list":
			err = r.runList(ctx, ns)
		case "watch":
			err = r.runWatch(ctx, ns)
		case scenarioCollect:
			err = r.runCollect(ctx, ns)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	return nil
}

// cleanup deletes the namespaces the run created, then the custom kind's definition if the run
// created it (the server deletes their content).
func (r *runner) cleanup(ctx context.Context) error {
	var errs []error
	if r.webhook != nil {
		if err := r.webhook.unregister(ctx, r.api); err != nil {
			errs = append(errs, err)
		}
		r.webhook.close()
	}
	for _, ns := range r.created {
		if err := r.api.delete(ctx, namespacePath(ns)); err != nil {
			errs = append(errs, err)
		}
	}
	if r.definedCRD {
		if err := r.api.delete(ctx, crdsPath+"/"+r.o.kind.crd); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(r.progress, "apiload: deleted the CustomResourceDefinition %s\n", r.o.kind.crd)
		}
	}
	return errors.Join(errs...)
}

// registerWebhook starts and registers the no-op webhook for the scenarios' namespaces, probing
// it in a namespace of its own.
func (r *runner) registerWebhook(ctx context.Context) error {
	h, err := startNoopWebhook()
	if err != nil {
		return err
	}
	r.webhook = h
	probe := r.nsPrefix + "-webhook"
	if err := r.api.createNamespace(ctx, probe); err != nil {
		return err
	}
	r.created = append(r.created, probe)
	var namespaces []string
	for _, sc := range r.o.scenarios {
		namespaces = append(namespaces, r.nsPrefix+"-"+sc)
	}
	return h.register(ctx, r.api, r.o.kind, r.nsPrefix, namespaces, probe)
}

// runCreate: every client creates objects of unique names as fast as it can.
func (r *runner) runCreate(ctx context.Context, ns string) error {
	path := r.o.kind.collectionPath(ns)
	for _, n := range r.o.clients {
		err := r.drive(ctx, "create", n, func(ctx context.Context, w *worker, i int) error {
			w.body = r.o.kind.appendObject(w.body[:0], fmt.Sprintf("c%d-w%d-%d", n, w.id, i), "")
			return r.loadFor(w).do(ctx, http.MethodPost, path, w.body, http.StatusCreated, &w.buf)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runGet: every client reads a set of getSetSize objects round-robin, each from its own
// starting point.
func (r *runner) runGet(ctx context.Context, ns string) error {
	paths, err := r.createObjects(ctx, ns, "get", getSetSize)
	if err != nil {
		return err
	}
	for _, n := range r.o.clients {
		err := r.drive(ctx, "get", n, func(ctx context.Context, w *worker, i int) error {
			return r.loadFor(w).do(ctx, http.MethodGet, paths[(w.id*getSetSize/n+i)%len(paths)], nil, http.StatusOK, &w.buf)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runPatch: every client changes a set of getSetSize objects round-robin, with a merge patch
// ("patch") or a server-side apply of the whole object by one field manager ("apply").
func (r *runner) runPatch(ctx context.Context, ns, scenario string) error {
	paths, err := r.createObjects(ctx, ns, scenario, getSetSize)
	if err != nil {
		return err
	}
	contentType := "application/merge-patch+json"
	if scenario == "apply" {
		contentType = "application/apply-patch+yaml"
	}
	for _, n := range r.o.clients {
		err := r.drive(ctx, scenario, n, func(ctx context.Context, w *worker, i int) error {
			p := paths[(w.id*getSetSize/n+i)%len(paths)]
			if scenario == "apply" {
				name := p[strings.LastIndex(p, "/")+1:]
				w.body = fmt.Appendf(w.body[:0], `{"apiVersion":%q,"kind":%q,"metadata":{"name":%q},"data":{"key":"value","counter":"%d-%d"}}`,
					r.o.kind.apiVersion, r.o.kind.kind, name, w.id, i)
				p += "?fieldManager=apiload&force=true"
			} else {
				w.body = fmt.Appendf(w.body[:0], `{"data":{"counter":"%d-%d"}}`, w.id, i)
			}
			return r.loadFor(w).doAs(ctx, http.MethodPatch, p, contentType, w.body, http.StatusOK, &w.buf)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runList: every client lists the namespace's --objects objects, unpaged, and checks none is
// missing (controllers may add objects of their own, as the root CA publisher adds its ConfigMap
// to every namespace).
func (r *runner) runList(ctx context.Context, ns string) error {
	if _, err := r.createObjects(ctx, ns, "list", r.o.objects); err != nil {
		return err
	}
	path := r.o.kind.collectionPath(ns)
	want := r.o.objects
	for _, n := range r.o.clients {
		err := r.drive(ctx, "list", n, func(ctx context.Context, w *worker, _ int) error {
			if err := r.loadFor(w).do(ctx, http.MethodGet, path, nil, http.StatusOK, &w.buf); err != nil {
				return err
			}
			got, err := countListItems(w.buf.Bytes())
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			if got < want {
				return fmt.Errorf("list returned %d items, want at least %d", got, want)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// watchStream is one watch and the MODIFIED events it received, in arrival order.
type watchStream struct {
	revs     []int64 // resourceVersions
	sent     []int64 // send times the writer put in the data (Unix nanoseconds)
	recv     []int64 // arrival times (Unix nanoseconds)
	last     atomic.Int64
	done     atomic.Bool // the reading goroutine has returned
	others   int         // events of other types
	overflow bool
	err      error // why the watch ended, if it ended before the tool ended it
}

// watchEvent is the part of a watch event the tool reads. An ERROR event's object is a Status.
type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Data struct {
			Sent string `json:"sent"`
		} `json:"data"`
		Message string `json:"message"`
	} `json:"object"`
}

// watchedName is the object the watch scenario's writer updates.
const watchedName = "watched"

// startWatch opens a watch of ns from resourceVersion rv and reads it in a goroutine (counted
// by wg) until ctx ends, at most capacity events.
func (r *runner) startWatch(ctx context.Context, ns, rv string, capacity int, wg *sync.WaitGroup) (*watchStream, error) {
	q := url.Values{}
	q.Set("watch", "true")
	q.Set("resourceVersion", rv)
	// Longer than the run: the server must not end the watch.
	q.Set("timeoutSeconds", strconv.Itoa(int((r.o.warmup + r.o.duration + r.o.drain + 5*time.Minute).Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.api.base+r.o.kind.collectionPath(ns)+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.api.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("watch: %s: %s", resp.Status, msg)
	}
	s := &watchStream{}
	s.last.Store(-1)
	wg.Go(func() {
		defer s.done.Store(true)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for range capacity + 1 {
			var ev watchEvent
			if err := dec.Decode(&ev); err != nil {
				if ctx.Err() == nil {
					if errors.Is(err, io.EOF) {
						err = errors.New("the server ended the watch")
					}
					s.err = err
				}
				return
			}
			now := time.Now().UnixNano()
			if ev.Type != "ERROR" && ev.Object.Metadata.Name != watchedName {
				// Another writer's object in the namespace (the root CA publisher's ConfigMap).
				continue
			}
			switch ev.Type {
			case "MODIFIED":
				if len(s.revs) == capacity {
					s.overflow = true
					return
				}
				rev, err1 := strconv.ParseInt(ev.Object.Metadata.ResourceVersion, 10, 64)
				sent, err2 := strconv.ParseInt(ev.Object.Data.Sent, 10, 64)
				if err1 != nil || err2 != nil {
					s.err = fmt.Errorf("event with resourceVersion %q and sent %q", ev.Object.Metadata.ResourceVersion, ev.Object.Data.Sent)
					return
				}
				s.revs = append(s.revs, rev)
				s.sent = append(s.sent, sent)
				s.recv = append(s.recv, now)
				s.last.Store(rev)
			case "ERROR":
				s.err = fmt.Errorf("ERROR event: %s", ev.Object.Message)
				return
			default:
				s.others++
			}
		}
		s.overflow = true
	})
	return s, nil
}

// waitAll waits until every stream has received resourceVersion rev or ended, for at most
// timeout, and reports whether none was left waiting.
func waitAll(streams []*watchStream, rev int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !slices.ContainsFunc(streams, func(s *watchStream) bool { return s.last.Load() < rev && !s.done.Load() }) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ack is a write the server acknowledged: its resourceVersion and send time (Unix ns).
type ack struct {
	rev  int64
	sent int64
}

// watchWriter updates one object with compare-and-swap on the resourceVersion it last got,
// carrying its send time in the data.
type watchWriter struct {
	api  *apiClient
	kind *objectKind
	path string
	name string
	rv   string
	seq  int
	buf  bytes.Buffer
	body []byte
}

func (w *watchWriter) write(ctx context.Context) (ack, error) {
	w.seq++
	sent := time.Now().UnixNano()
	w.body = w.kind.appendObject(w.body[:0], w.name, w.rv, "sent", strconv.FormatInt(sent, 10), "seq", strconv.Itoa(w.seq))
	if err := w.api.do(ctx, http.MethodPut, w.path, w.body, http.StatusOK, &w.buf); err != nil {
		// The write may have happened anyway: learn the current resourceVersion.
		if gerr := w.api.do(ctx, http.MethodGet, w.path, nil, http.StatusOK, &w.buf); gerr == nil {
			if rv, rerr := resourceVersionOf(w.buf.Bytes()); rerr == nil {
				w.rv = rv
			}
		}
		return ack{}, err
	}
	rv, err := resourceVersionOf(w.buf.Bytes())
	if err != nil {
		return ack{}, fmt.Errorf("update answer: %w", err)
	}
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return ack{}, fmt.Errorf("update answer: resourceVersion %q", rv)
	}
	w.rv = rv
	return ack{rev: rev, sent: sent}, nil
}

// runWatch: --watchers watches of the namespace from a list's resourceVersion, over the shared
// transport; one writer updates an object at --rate. It runs once, whatever --clients says.
func (r *runner) runWatch(ctx context.Context, ns string) error {
	coll := r.o.kind.collectionPath(ns)
	w := &watchWriter{api: r.api, kind: r.o.kind, path: coll + "/" + watchedName, name: watchedName}
	body := w.kind.appendObject(nil, w.name, "", "sent", "0", "seq", "0")
	if err := r.api.do(ctx, http.MethodPost, coll, body, http.StatusCreated, &w.buf); err != nil {
		return err
	}
	var err error
	if w.rv, err = resourceVersionOf(w.buf.Bytes()); err != nil {
		return err
	}
	if err := r.api.do(ctx, http.MethodGet, coll, nil, http.StatusOK, &w.buf); err != nil {
		return err
	}
	listRV, err := resourceVersionOf(w.buf.Bytes())
	if err != nil {
		return err
	}

	capacity := int(r.o.rate*(r.o.warmup+r.o.duration).Seconds()*1.5) + 1024
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	streams := make([]*watchStream, r.o.watchers)
	for i := range streams {
		if streams[i], err = r.startWatch(wctx, ns, listRV, capacity, &wg); err != nil {
			return fmt.Errorf("watch %d of %d: %w", i+1, len(streams), err)
		}
	}

	// A first write every watch must deliver proves them all established.
	first, err := w.write(ctx)
	if err != nil {
		return fmt.Errorf("first write: %w", err)
	}
	if !waitAll(streams, first.rev, time.Minute) {
		return errors.New("not every watch delivered the first write within a minute")
	}
	acks := []ack{first}

	start := time.Now()
	from := start.Add(r.o.warmup)
	stop := from.Add(r.o.duration)
	cpuNoteCh := r.meterWindow(ctx, from, stop)
	writes := &outcome{scenario: "watch-write", clients: 1, window: r.o.duration}
	interval := time.Duration(float64(time.Second) / r.o.rate)
	var firstErr error
	for i := range maxOpsPerClient {
		next := start.Add(time.Duration(i) * interval)
		if !next.Before(stop) || !sleepUntil(ctx, next) {
			break
		}
		t0 := time.Now()
		a, err := w.write(ctx)
		t1 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			writes.errors++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		acks = append(acks, a)
		if !t1.Before(from) && t1.Before(stop) {
			writes.ops++
			writes.lat.record(t1.Sub(t0))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	last := acks[len(acks)-1].rev
	if !waitAll(streams, last, r.o.drain) {
		r.notes = append(r.notes, fmt.Sprintf("watch: not every watch delivered resourceVersion %d within --drain=%s", last, r.o.drain))
	}
	cancel()
	wg.Wait()

	r.addRow(writes)
	if writes.errors > 0 {
		r.failf("watch: %d of the writer's updates failed; first: %v", writes.errors, firstErr)
	}
	v := verifyWatch(streams, acks, from.UnixNano())
	deliver := &outcome{scenario: "watch-deliver", clients: len(streams), ops: v.timed, window: r.o.duration, lat: v.lat}
	r.addRow(deliver)
	r.notes = append(r.notes, fmt.Sprintf("watch: %d watches × %d acknowledged writes: %d events checked; lost %d, duplicated %d, reordered %d, unexpected %d; "+
		"watch-deliver is the delay from the writer's send time to arrival, for writes sent after the warm-up",
		len(streams), len(acks), v.matched, v.lost, v.duplicated, v.reordered, v.unexpected))
	r.failures = append(r.failures, v.failures...)
	if note := <-cpuNoteCh; note != "" {
		r.notes = append(r.notes, "watch: "+note)
	}
	return nil
}

// watchVerdict is what verifyWatch found.
type watchVerdict struct {
	lat                                     latencies // delivery delays of the timed writes
	timed, matched                          uint64
	lost, duplicated, reordered, unexpected uint64
	corrupt, ended, others, overflowed      uint64
	failures                                []string
}

// verifyWatch checks that every stream delivered every acknowledged write exactly once, in
// increasing resourceVersion order, carrying the send time it was written with; and measures the
// delivery delay of the writes sent at or after timedFrom (Unix ns).
func verifyWatch(streams []*watchStream, acks []ack, timedFrom int64) *watchVerdict {
	v := &watchVerdict{}
	byRev := make(map[int64]ack, len(acks))
	for _, a := range acks {
		byRev[a.rev] = a
	}
	var firstEnd error
	for _, s := range streams {
		var prev int64 = -1
		var matched uint64
		for j, rev := range s.revs {
			switch {
			case rev == prev:
				v.duplicated++
				continue
			case rev < prev:
				v.reordered++
				continue
			}
			prev = rev
			a, ok := byRev[rev]
			if !ok {
				v.unexpected++
				continue
			}
			matched++
			if s.sent[j] != a.sent {
				v.corrupt++
				continue
			}
			if a.sent >= timedFrom {
				v.timed++
				v.lat.record(time.Duration(s.recv[j] - a.sent))
			}
		}
		v.matched += matched
		v.lost += uint64(len(byRev)) - matched
		if s.err != nil {
			v.ended++
			if firstEnd == nil {
				firstEnd = s.err
			}
		}
		v.others += uint64(s.others)
		if s.overflow {
			v.overflowed++
		}
	}
	if v.lost+v.duplicated+v.reordered+v.unexpected > 0 {
		v.failures = append(v.failures, fmt.Sprintf("watch: events lost %d, duplicated %d, reordered %d, unexpected %d (over %d watches)",
			v.lost, v.duplicated, v.reordered, v.unexpected, len(streams)))
	}
	if v.corrupt > 0 {
		v.failures = append(v.failures, fmt.Sprintf("watch: %d events carried other data than their write", v.corrupt))
	}
	if v.ended > 0 {
		v.failures = append(v.failures, fmt.Sprintf("watch: %d watches ended early; first: %v", v.ended, firstEnd))
	}
	if v.others > 0 {
		v.failures = append(v.failures, fmt.Sprintf("watch: %d events other than MODIFIED", v.others))
	}
	if v.overflowed > 0 {
		v.failures = append(v.failures, fmt.Sprintf("watch: %d watches received more events than were written", v.overflowed))
	}
	return v
}
