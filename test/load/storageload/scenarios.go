package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
)

// load runs one scenario in the namespace ns.
type load struct {
	o       *options
	clients []*storage.Client
	ns      string

	mu      sync.Mutex
	created []string // names of the objects created, for the cleanup
}

type result struct {
	rows     []row
	notes    []string
	failures []string
}

func (r *result) failf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// object is one object of the working set and the revision its owner last wrote.
type object struct {
	name   string
	uid    string
	labels map[string]string
	rv     int64
	seq    int64
}

const valueFiller = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"load","namespace":"load",` +
	`"labels":{"app":"load","tier":"backend"},"annotations":{"note":"storage load test object"}},` +
	`"data":{"key":"lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor"}}`

// value is a value of --value-bytes bytes: the sequence number and the send time (Unix
// nanoseconds), 8 bytes each, big-endian, then filler that looks like a serialized object.
func (l *load) value(seq int64, sent time.Time) []byte {
	v := make([]byte, 16, l.o.valueBytes)
	binary.BigEndian.PutUint64(v[0:8], uint64(seq))
	binary.BigEndian.PutUint64(v[8:16], uint64(sent.UnixNano()))
	for len(v) < l.o.valueBytes {
		v = append(v, valueFiller[:min(len(valueFiller), l.o.valueBytes-len(v))]...)
	}
	return v
}

func labelsFor(i int) map[string]string {
	return map[string]string{
		"app":                    "load",
		"tier":                   []string{"frontend", "backend", "cache"}[i%3],
		"shard":                  strconv.Itoa(i % 16),
		"platform.io/load-owner": "storageload",
	}
}

func (l *load) client(i int) *storage.Client { return l.clients[i%len(l.clients)] }

// createObjects creates n objects in the run's namespace with up to 16 concurrent writers.
func (l *load) createObjects(ctx context.Context, n int) ([]*object, error) {
	objs := make([]*object, n)
	for i := range objs {
		objs[i] = &object{name: fmt.Sprintf("obj-%06d", i), uid: fmt.Sprintf("uid-%s-%06d", l.ns, i), labels: labelsFor(i)}
	}
	workers := min(16, n)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				o := objs[i]
				resp, err := l.client(w).Create(ctx, &storagev1.CreateRequest{Type: loadType, Object: &storagev1.Object{
					Namespace: l.ns, Name: o.name, Uid: o.uid, Labels: o.labels, Value: l.value(0, time.Now())}})
				if err != nil {
					errs[w] = fmt.Errorf("create %s: %w", o.name, err)
					return
				}
				o.rv = resp.GetObject().GetResourceVersion()
				l.mu.Lock()
				l.created = append(l.created, o.name)
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return objs, errors.Join(errs...)
}

// cleanup deletes the objects the run created.
func (l *load) cleanup(ctx context.Context) error {
	l.mu.Lock()
	names := slices.Clone(l.created)
	l.mu.Unlock()
	workers := min(16, len(names))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(names); i += workers {
				_, err := l.client(w).Delete(ctx, &storagev1.DeleteRequest{Type: loadType, Namespace: l.ns, Name: names[i]})
				if err != nil && !storage.IsNotFound(err) {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ack is one acknowledged write: its revision, when it was sent and when its answer arrived
// (Unix nanoseconds).
type ack struct {
	rev         int64
	sent, acked int64
}

type writerStats struct {
	lat       hist
	count     uint64
	errors    uint64
	conflicts uint64
	acks      []ack
	firstErr  error
}

// casWriter updates objs in turn, each with compare-and-swap on the revision it last got, until
// stop (and at most maxOpsPerWorker times), one write every interval if interval > 0.
func (l *load) casWriter(ctx context.Context, c *storage.Client, objs []*object, stop time.Time, interval time.Duration, recordAcks bool) *writerStats {
	s := &writerStats{}
	start := time.Now()
	for i := range maxOpsPerWorker {
		if interval > 0 {
			next := start.Add(time.Duration(i) * interval)
			if !next.Before(stop) {
				break
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		if !time.Now().Before(stop) || ctx.Err() != nil {
			break
		}
		o := objs[i%len(objs)]
		o.seq++
		sent := time.Now()
		resp, err := c.Update(ctx, &storagev1.UpdateRequest{Type: loadType,
			Object:        &storagev1.Object{Namespace: l.ns, Name: o.name, Uid: o.uid, Labels: o.labels, Value: l.value(o.seq, sent)},
			Preconditions: &storagev1.Preconditions{ResourceVersion: o.rv}})
		now := time.Now()
		s.lat.add(now.Sub(sent))
		switch {
		case err == nil:
			s.count++
			o.rv = resp.GetObject().GetResourceVersion()
			if recordAcks {
				s.acks = append(s.acks, ack{rev: o.rv, sent: sent.UnixNano(), acked: now.UnixNano()})
			}
		case storage.IsConflict(err):
			s.conflicts++
			if got, gerr := c.Get(ctx, &storagev1.GetRequest{Type: loadType, Namespace: l.ns, Name: o.name}); gerr == nil {
				o.rv = got.GetObject().GetResourceVersion()
			}
		default:
			s.errors++
			if s.firstErr == nil {
				s.firstErr = err
			}
			if ctx.Err() != nil {
				return s
			}
			time.Sleep(10 * time.Millisecond) // do not spin on a failing service
		}
	}
	return s
}

// runWriters runs n CAS writers, writer w owning objs[w], objs[w+n], ..., with a total rate
// (0: unthrottled), until stop.
func (l *load) runWriters(ctx context.Context, objs []*object, n int, rate float64, stop time.Time, recordAcks bool) []*writerStats {
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(n) / rate)
	}
	stats := make([]*writerStats, n)
	var wg sync.WaitGroup
	for w := range n {
		var own []*object
		for i := w; i < len(objs); i += n {
			own = append(own, objs[i])
		}
		wg.Go(func() { stats[w] = l.casWriter(ctx, l.client(w), own, stop, interval, recordAcks) })
	}
	wg.Wait()
	return stats
}

// writerResults adds the writers' row, and fails the run on conflicts and errors.
func writerResults(res *result, stats []*writerStats, elapsed time.Duration) {
	r := row{op: "update", elapsed: elapsed, lat: &hist{}}
	var conflicts uint64
	var firstErr error
	for _, s := range stats {
		r.count += s.count
		r.errors += s.errors
		conflicts += s.conflicts
		r.lat.merge(&s.lat)
		if firstErr == nil {
			firstErr = s.firstErr
		}
	}
	res.rows = append(res.rows, r)
	res.notes = append(res.notes, fmt.Sprintf("cas: %d writers, %d writes, %d conflicts, %d errors", len(stats), r.count, conflicts, r.errors))
	if conflicts > 0 {
		res.failf("%d compare-and-swap conflicts among writers that each own their objects", conflicts)
	}
	if r.errors > 0 {
		res.failf("%d writes failed; first: %v", r.errors, firstErr)
	}
}

type listStats struct {
	lat      hist
	count    uint64
	errors   uint64
	bytes    int
	firstErr error
}

// lister lists the run's namespace, unpaged and consistent (resourceVersion unset), one list at a
// time until stop, and checks that every list has want items.
func (l *load) lister(ctx context.Context, c *storage.Client, want int, stop time.Time) *listStats {
	s := &listStats{}
	for range maxOpsPerWorker {
		if !time.Now().Before(stop) || ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		resp, err := c.List(ctx, &storagev1.ListRequest{Type: loadType, Namespace: l.ns})
		s.lat.add(time.Since(t0))
		if err == nil && len(resp.GetItems()) != want {
			err = fmt.Errorf("list returned %d items, want %d", len(resp.GetItems()), want)
		}
		if err != nil {
			s.errors++
			if s.firstErr == nil {
				s.firstErr = err
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.count++
	}
	return s
}

func listResults(res *result, s *listStats, elapsed time.Duration) {
	res.rows = append(res.rows, row{op: "list", count: s.count, errors: s.errors, elapsed: elapsed, lat: &s.lat})
	if s.errors > 0 {
		res.failf("%d lists failed; first: %v", s.errors, s.firstErr)
	}
}

// watcher is one watch of the run's namespace and what it received: each event's revision and
// arrival time (Unix nanoseconds), in arrival order.
type watcher struct {
	revs     []int64
	recv     []int64
	last     atomic.Int64
	others   int
	overflow bool
	err      error
}

type watchGroup struct {
	ws     []*watcher
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startWatchers starts n watches of the namespace from revision from, spread over the
// connections. Each records at most capacity events.
func (l *load) startWatchers(ctx context.Context, n int, from int64, capacity int) (*watchGroup, error) {
	wctx, cancel := context.WithCancel(ctx)
	g := &watchGroup{cancel: cancel}
	for i := range n {
		w := &watcher{revs: make([]int64, 0, min(capacity, 4096)), recv: make([]int64, 0, min(capacity, 4096))}
		g.ws = append(g.ws, w)
		stream, err := l.client(i).Watch(wctx, &storagev1.WatchRequest{Type: loadType, Namespace: l.ns, ResourceVersion: strconv.FormatInt(from, 10)})
		if err != nil {
			g.stop()
			return nil, fmt.Errorf("watch %d: %w", i, err)
		}
		g.wg.Go(func() {
			// Bounded by count (capacity events, each batch at least one) and by wctx.
			for range capacity + 1 {
				evs, err := stream.Recv()
				if err != nil {
					if wctx.Err() == nil {
						w.err = err
					}
					return
				}
				now := time.Now().UnixNano()
				for _, ev := range evs {
					if ev.GetType() != storagev1.EventType_MODIFIED {
						w.others++
						continue
					}
					if len(w.revs) == capacity {
						w.overflow = true
						return
					}
					w.revs = append(w.revs, ev.GetResourceVersion())
					w.recv = append(w.recv, now)
					w.last.Store(ev.GetResourceVersion())
				}
			}
			w.overflow = true
		})
	}
	return g, nil
}

func (g *watchGroup) stop() {
	g.cancel()
	g.wg.Wait()
}

// waitAll waits until every watcher has received revision rev, for at most timeout.
func (g *watchGroup) waitAll(rev int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !slices.ContainsFunc(g.ws, func(w *watcher) bool { return w.last.Load() < rev }) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// verify checks that every watcher received exactly the acknowledged revisions, each once and in
// increasing order, and adds the delivery latency rows (from the send time, and from the
// acknowledgement). warm is the warm-up write's revision: verified, but not timed.
func verifyWatchers(res *result, g *watchGroup, acks []ack, warm int64, elapsed time.Duration) {
	byRev := make(map[int64]ack, len(acks))
	for _, a := range acks {
		byRev[a.rev] = a
	}
	fromSend, fromAck := &hist{}, &hist{}
	var delivered, lost, reordered, duplicated, unexpected, ended, others, overflowed uint64
	var firstErr error
	for _, w := range g.ws {
		var prev int64
		var matched int
		for j, r := range w.revs {
			switch {
			case r == prev:
				duplicated++
				continue
			case r < prev:
				reordered++
				continue
			}
			prev = r
			a, ok := byRev[r]
			if !ok {
				unexpected++
				continue
			}
			matched++
			if r == warm {
				continue
			}
			delivered++
			fromSend.add(time.Duration(w.recv[j] - a.sent))
			fromAck.add(time.Duration(max(0, w.recv[j]-a.acked)))
		}
		lost += uint64(len(byRev) - matched)
		if w.err != nil {
			ended++
			if firstErr == nil {
				firstErr = w.err
			}
		}
		others += uint64(w.others)
		if w.overflow {
			overflowed++
		}
	}
	res.rows = append(res.rows,
		row{op: "deliver", count: delivered, elapsed: elapsed, lat: fromSend},
		row{op: "deliver-ack", count: delivered, elapsed: elapsed, lat: fromAck})
	res.notes = append(res.notes,
		"deliver: latency from the send time carried in the value to arrival at a watcher; deliver-ack: from the write's acknowledgement (0 if the event came first)",
		fmt.Sprintf("watch: %d watchers × %d writes (and a warm-up write): delivered %d of %d; lost %d, reordered %d, duplicated %d, unexpected %d",
			len(g.ws), len(byRev)-1, delivered, uint64(len(g.ws))*uint64(len(byRev)-1), lost, reordered, duplicated, unexpected))
	if lost+reordered+duplicated+unexpected > 0 {
		res.failf("watch events lost %d, reordered %d, duplicated %d, unexpected %d", lost, reordered, duplicated, unexpected)
	}
	if ended > 0 {
		res.failf("%d watches ended early; first: %v", ended, firstErr)
	}
	if others > 0 {
		res.failf("watchers received %d events other than MODIFIED", others)
	}
	if overflowed > 0 {
		res.failf("%d watchers received more events than were written", overflowed)
	}
}

func (l *load) run(ctx context.Context) (*result, error) {
	switch l.o.scenario {
	case "cas":
		return l.runCAS(ctx)
	case "list":
		return l.runList(ctx)
	case "watch":
		return l.runWatch(ctx)
	default:
		return l.runMixed(ctx)
	}
}

func (l *load) runCAS(ctx context.Context) (*result, error) {
	if l.o.objects < l.o.writers {
		return nil, fmt.Errorf("--objects (%d) must be at least --writers (%d): every writer owns its objects", l.o.objects, l.o.writers)
	}
	objs, err := l.createObjects(ctx, l.o.objects)
	if err != nil {
		return nil, err
	}
	res := &result{}
	start := time.Now()
	stats := l.runWriters(ctx, objs, l.o.writers, l.o.rate, start.Add(l.o.duration), false)
	writerResults(res, stats, time.Since(start))
	return res, nil
}

func (l *load) runList(ctx context.Context) (*result, error) {
	if _, err := l.createObjects(ctx, l.o.objects); err != nil {
		return nil, err
	}
	res := &result{}
	start := time.Now()
	s := l.lister(ctx, l.client(0), l.o.objects, start.Add(l.o.duration))
	listResults(res, s, time.Since(start))
	return res, nil
}

// watchSetup starts the watchers from the current revision and proves them established with a
// warm-up write of objs[0] that every one of them must receive. It returns the warm-up's ack.
func (l *load) watchSetup(ctx context.Context, objs []*object, expected float64) (*watchGroup, ack, error) {
	capacity := int(expected*1.5) + 1024
	if mem := float64(l.o.watchers) * float64(capacity) * 16; mem > 4<<30 {
		return nil, ack{}, fmt.Errorf("%d watchers × %d events would take %.1f GiB to verify: lower --watchers, --rate or --duration", l.o.watchers, capacity, mem/(1<<30))
	}
	rev, err := l.client(0).Revision(ctx, &storagev1.RevisionRequest{Type: loadType})
	if err != nil {
		return nil, ack{}, err
	}
	g, err := l.startWatchers(ctx, l.o.watchers, rev.GetCurrent(), capacity)
	if err != nil {
		return nil, ack{}, err
	}
	ws := l.casWriter(ctx, l.client(0), objs[:1], time.Now().Add(time.Minute), time.Hour, true) // one write
	if len(ws.acks) != 1 {
		g.stop()
		return nil, ack{}, fmt.Errorf("warm-up write: %v", ws.firstErr)
	}
	if !g.waitAll(ws.acks[0].rev, time.Minute) {
		g.stop()
		return nil, ack{}, errors.New("not every watcher received the warm-up write within a minute")
	}
	return g, ws.acks[0], nil
}

func (l *load) runWatch(ctx context.Context) (*result, error) {
	objs, err := l.createObjects(ctx, 1)
	if err != nil {
		return nil, err
	}
	g, warm, err := l.watchSetup(ctx, objs, l.o.rate*l.o.duration.Seconds())
	if err != nil {
		return nil, err
	}
	defer g.stop()
	res := &result{}
	start := time.Now()
	stats := l.runWriters(ctx, objs, 1, l.o.rate, start.Add(l.o.duration), true)
	elapsed := time.Since(start)
	writerResults(res, stats, elapsed)
	acks := append([]ack{warm}, stats[0].acks...)
	last := acks[len(acks)-1].rev
	if !g.waitAll(last, l.o.drain) {
		res.notes = append(res.notes, fmt.Sprintf("not every watcher caught up with revision %d within --drain=%s", last, l.o.drain))
	}
	g.stop()
	verifyWatchers(res, g, acks, warm.rev, elapsed)
	return res, nil
}

func (l *load) runMixed(ctx context.Context) (*result, error) {
	objs, err := l.createObjects(ctx, l.o.objects)
	if err != nil {
		return nil, err
	}
	res := &result{}
	expected := l.o.rate * l.o.duration.Seconds()
	if l.o.rate == 0 {
		expected = 20000 * l.o.duration.Seconds()
	}
	var g *watchGroup
	var warm ack
	if l.o.watchers > 0 {
		if g, warm, err = l.watchSetup(ctx, objs, expected); err != nil {
			return nil, err
		}
		defer g.stop()
	}
	start := time.Now()
	stop := start.Add(l.o.duration)
	var ls *listStats
	var wg sync.WaitGroup
	wg.Go(func() { ls = l.lister(ctx, l.client(l.o.writers), l.o.objects, stop) })
	stats := l.runWriters(ctx, objs, l.o.writers, l.o.rate, stop, g != nil)
	wg.Wait()
	elapsed := time.Since(start)
	writerResults(res, stats, elapsed)
	listResults(res, ls, elapsed)
	if g != nil {
		acks := []ack{warm}
		for _, s := range stats {
			acks = append(acks, s.acks...)
		}
		last := slices.MaxFunc(acks, func(a, b ack) int { return int(a.rev - b.rev) }).rev
		if !g.waitAll(last, l.o.drain) {
			res.notes = append(res.notes, fmt.Sprintf("not every watcher caught up with revision %d within --drain=%s", last, l.o.drain))
		}
		g.stop()
		verifyWatchers(res, g, acks, warm.rev, elapsed)
	}
	return res, nil
}
