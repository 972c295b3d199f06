package cache

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// typeCache holds one resource type: its multi-version index and its retained events, kept
// current by a single reader of the backend's log. Watchers read the event slice by revision
// (a cursor each) and wait on notify, so fan-out costs no per-watcher buffering or copying.
type typeCache struct {
	rt   *storagev1.ResourceType
	name string
	be   backend.Backend
	log  *slog.Logger

	mu        sync.RWMutex
	rev       int64 // every event up to rev is applied
	compacted int64
	ix        *index
	// events holds (compacted, rev]: events[i].Revision == compacted+1+i. Elements are never
	// replaced once appended, so readers may keep a sub-slice after unlocking.
	events []*logEvent
	// notify is closed (and replaced) whenever rev, compacted or generation changes.
	notify chan struct{}
	// last is the change at rev, kept (even once compacted) so that the reader can check the
	// backend still has it after a failure; nil if unknown.
	last *backend.Event
	// generation changes when the cache is rebuilt from a new snapshot; watches of an older
	// generation end so that their clients resume from their last revision.
	generation uint64
	watchers   int
	// revs coalesces consistent reads' Revision calls (nil: each read calls the backend).
	revs *revisionBatcher
}

func newTypeCache(rt *storagev1.ResourceType, be backend.Backend, log *slog.Logger) *typeCache {
	return &typeCache{rt: rt, name: backend.TypeName(rt), be: be, log: log, notify: make(chan struct{}), ix: newIndex()}
}

// load replaces the cache's contents with a fresh snapshot of the backend.
func (tc *typeCache) load(ctx context.Context) error {
	snap, err := tc.be.Snapshot(ctx, tc.rt)
	if err != nil {
		return err
	}
	ix := buildIndex(snap)
	tc.mu.Lock()
	tc.ix = ix
	tc.rev = snap.Revision
	tc.compacted = snap.Compacted
	tc.events = make([]*logEvent, len(snap.Events))
	for i := range snap.Events {
		tc.events[i] = &logEvent{Event: snap.Events[i]}
	}
	tc.last = nil
	if n := len(snap.Events); n > 0 && snap.Events[n-1].Revision == snap.Revision {
		tc.last = &snap.Events[n-1]
	}
	tc.generation++
	tc.broadcastLocked()
	tc.mu.Unlock()
	return nil
}

func (tc *typeCache) broadcastLocked() {
	close(tc.notify)
	tc.notify = make(chan struct{})
}

// run follows the backend's log until ctx ends: one reader per type, whatever the number of
// watchers.
//
// After any failure to read, the reader does not trust the log until it has checked that the
// backend still holds the history the cache has applied: Redis that lost writes (a crash with
// appendfsync everysec, a restore from an older file) and took new ones may already be past the
// cache's revision, with different changes under the same revisions. A history that diverged is
// reloaded from a snapshot and the type's watches end.
func (tc *typeCache) run(ctx context.Context, readBatch int) {
	backoff := 50 * time.Millisecond
	verified := true
	for ctx.Err() == nil {
		var err error
		if !verified {
			if err = tc.verify(ctx); err == nil {
				verified = true
			}
		}
		var evs []backend.Event
		var after int64
		if err == nil {
			tc.mu.RLock()
			after = tc.rev
			tc.mu.RUnlock()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			evs, err = tc.be.Read(rctx, tc.rt, after, readBatch)
			cancel()
			if err == nil && len(evs) > 0 && evs[0].Revision != after+1 {
				err = backend.ErrCompacted
			}
		}
		switch {
		case err == nil:
			backoff = 50 * time.Millisecond
			if len(evs) > 0 {
				tc.apply(evs)
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, backend.ErrCompacted) || errors.Is(err, backend.ErrRewound) || errors.Is(err, errDiverged):
			tc.log.Warn("storage cache out of step with the backend log; reloading", "type", tc.name, "after", after, "err", err)
			if lerr := tc.load(ctx); lerr != nil {
				tc.log.Warn("storage cache reload failed", "type", tc.name, "err", lerr)
				verified = false
				sleep(ctx, backoff)
				backoff = min(2*backoff, 2*time.Second)
			} else {
				verified = true
			}
		default:
			tc.log.Warn("storage cache cannot read the backend log; retrying", "type", tc.name, "err", err, "retry_in", backoff)
			verified = false
			sleep(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// errDiverged says the backend's log no longer holds the change the cache applied last.
var errDiverged = errors.New("the backend's history differs from the one the cache applied")

// verify checks that the backend's change at the cache's revision is the one the cache applied.
func (tc *typeCache) verify(ctx context.Context) error {
	tc.mu.RLock()
	rev, last := tc.rev, tc.last
	tc.mu.RUnlock()
	if rev == 0 {
		return nil // nothing applied, nothing to contradict
	}
	if last == nil {
		return errDiverged // no change of our own left to compare with: reload to be sure
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	evs, err := tc.be.Read(rctx, tc.rt, rev-1, 1)
	cancel()
	switch {
	case err != nil:
		return err
	case len(evs) == 0 || evs[0].Revision != rev || evs[0].UnixNano != last.UnixNano || evs[0].Type != last.Type ||
		backend.Key(evs[0].Object.GetNamespace(), evs[0].Object.GetName()) != backend.Key(last.Object.GetNamespace(), last.Object.GetName()):
		return errDiverged
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (tc *typeCache) apply(evs []backend.Event) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, ev := range evs {
		if ev.Revision != tc.rev+1 {
			// Read guarantees density; a violation is a backend bug. Skip stale ones.
			if ev.Revision <= tc.rev {
				continue
			}
			tc.log.Error("storage cache saw a revision gap", "type", tc.name, "have", tc.rev, "got", ev.Revision)
		}
		tc.ix.apply(backend.Key(ev.Object.GetNamespace(), ev.Object.GetName()), ev)
		le := &logEvent{Event: ev}
		tc.events = append(tc.events, le)
		tc.last = &le.Event
		tc.rev = ev.Revision
	}
	tc.broadcastLocked()
}

// state returns the revision, compacted revision, notify channel and generation together.
func (tc *typeCache) state() (rev, compacted int64, notify <-chan struct{}, gen uint64) {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	return tc.rev, tc.compacted, tc.notify, tc.generation
}

// waitFor blocks until the cache has applied rev, ctx ends, or timeout passes. It reports
// whether rev was reached.
func (tc *typeCache) waitFor(ctx context.Context, rev int64, timeout time.Duration) (bool, error) {
	var timer <-chan time.Time
	for {
		cur, _, notify, _ := tc.state()
		if cur >= rev {
			return true, nil
		}
		if timer == nil {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-notify:
		case <-timer:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// compactionTarget is the newest revision that retention allows to discard: every event
// committed before cutoff, and all but the newest maxEvents.
func (tc *typeCache) compactionTarget(cutoff time.Time, maxEvents int) int64 {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	c := cutoff.UnixNano()
	n := sort.Search(len(tc.events), func(i int) bool { return tc.events[i].UnixNano >= c })
	if over := len(tc.events) - maxEvents; maxEvents > 0 && over > n {
		n = over
	}
	return tc.compacted + int64(n)
}

// compact drops history up to rev (which the backend has already discarded).
func (tc *typeCache) compact(rev int64) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if rev <= tc.compacted {
		return
	}
	if rev > tc.rev {
		// Another replica compacted past what this one has read; the reader will reload.
		return
	}
	n := int(rev - tc.compacted)
	for _, ev := range tc.events[:n] {
		tc.ix.compactKey(backend.Key(ev.Object.GetNamespace(), ev.Object.GetName()), rev)
	}
	rest := tc.events[n:]
	if cap(rest) > 2*len(rest)+1024 {
		rest = append([]*logEvent(nil), rest...) // let the discarded prefix be collected
	}
	tc.events = rest
	tc.compacted = rev
	tc.broadcastLocked()
}

// eventsAfter returns retained events after rev (up to max), or errExpired-worthy state when
// rev is older than the compacted revision.
func (tc *typeCache) eventsAfter(rev int64, max int) (evs []*logEvent, cur, compacted int64, notify <-chan struct{}, gen uint64) {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	cur, compacted, notify, gen = tc.rev, tc.compacted, tc.notify, tc.generation
	if rev < compacted || rev >= cur {
		return nil, cur, compacted, notify, gen
	}
	from := int(rev - compacted)
	to := min(len(tc.events), from+max)
	return tc.events[from:to], cur, compacted, notify, gen
}
