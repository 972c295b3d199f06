package cache

import (
	"context"
	"time"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

const (
	watchBatch         = 512 // most events handed to one Next
	initialEventsBatch = 256
	// batchBytes bounds the object bytes handed to one Next (one gRPC message): a batch always
	// holds at least one event, so no message exceeds batchBytes plus one object.
	batchBytes       = 4 << 20
	minBookmarkEvery = 50 * time.Millisecond
)

// Watch is one client's cursor over a type's events. It holds no buffer of its own: Next reads
// the type's retained events after its position, so a slow client falls behind (and, past the
// compacted revision, ends with EXPIRED) without slowing anyone else.
type Watch struct {
	tc        *typeCache
	f         *storage.Filter
	pos       int64 // every event up to pos has been handed out (or filtered away)
	gen       uint64
	initial   []*storagev1.Event
	bookmarks bool
	// attrs: the watch asked for index attributes (labels and fields) with every object, so its
	// events are encoded for it alone instead of sharing the read view's encoding.
	attrs  bool
	ticker *time.Ticker
}

// Watch starts a watch under the watch semantics of resourceVersion: unset starts at the most
// recent state and "0" at any state, both with synthetic ADDED events for existing objects; a
// revision starts with the changes after it (and sendInitialEvents adds the state at it).
func (c *Cache) Watch(ctx context.Context, req *storagev1.WatchRequest) (*Watch, error) {
	tc, f, kind, n, err := c.request(ctx, req.GetType(), req.GetNamespace(), req.GetLabelSelector(), req.GetFieldSelector(), req.GetResourceVersion())
	if err != nil {
		return nil, err
	}
	var start int64
	switch kind {
	case rvUnset:
		start, err = c.consistentRev(ctx, tc)
	case rvZero:
		start, _, _, _ = tc.state()
	case rvExact:
		if _, compacted, _, _ := tc.state(); n < compacted {
			return nil, tooOld(n, compacted)
		}
		_, err = c.notOlderThan(ctx, tc, n)
		start = n
	}
	if err != nil {
		return nil, err
	}
	w := &Watch{tc: tc, f: f, pos: start, bookmarks: req.GetAllowBookmarks(), attrs: req.GetIndexAttributes()}

	withInitial := kind != rvExact || req.GetSendInitialEvents()

	tc.mu.Lock()
	if start < tc.compacted {
		compacted := tc.compacted
		tc.mu.Unlock()
		return nil, tooOld(start, compacted)
	}
	w.gen = tc.generation
	if withInitial {
		tc.ix.scan(f.Prefix(), "", start, func(_ string, v *version) bool {
			if f.Matches(v.obj) {
				w.initial = append(w.initial, &storagev1.Event{Type: storagev1.EventType_ADDED, Object: w.view(v.obj), ResourceVersion: v.rev})
			}
			return true
		})
	}
	tc.watchers++
	tc.mu.Unlock()
	if req.GetSendInitialEvents() && w.bookmarks {
		w.initial = append(w.initial, &storagev1.Event{Type: storagev1.EventType_BOOKMARK, ResourceVersion: start, InitialEventsEnd: true})
	}
	if w.bookmarks {
		every := c.cfg.BookmarkInterval
		if ms := req.GetBookmarkIntervalMs(); ms > 0 {
			every = max(time.Duration(ms)*time.Millisecond, minBookmarkEvery)
		}
		w.ticker = time.NewTicker(every)
	}
	return w, nil
}

// Close releases the watch.
func (w *Watch) Close() {
	if w.ticker != nil {
		w.ticker.Stop()
	}
	w.tc.mu.Lock()
	w.tc.watchers--
	w.tc.mu.Unlock()
}

// Next blocks until there is something to send and returns it: the next initial events, the next
// changes in revision order, or a bookmark. It fails with EXPIRED when the watch fell behind the
// compacted revision, with an IsReset error when the cache was reloaded, and with ctx's error.
func (w *Watch) Next(ctx context.Context) (*Batch, error) {
	if len(w.initial) > 0 {
		b := &Batch{}
		for size := 0; len(w.initial) > 0 && len(b.Events) < initialEventsBatch && size < batchBytes; {
			enc := encodeEvent(w.initial[0])
			b.Events = append(b.Events, enc)
			size += len(enc)
			w.initial = w.initial[1:]
		}
		return b, nil
	}
	var tick <-chan time.Time
	if w.ticker != nil {
		tick = w.ticker.C
	}
	for {
		evs, _, compacted, notify, gen := w.tc.eventsAfter(w.pos, watchBatch)
		if gen != w.gen {
			return nil, errReset
		}
		if w.pos < compacted {
			return nil, tooOld(w.pos, compacted)
		}
		if len(evs) > 0 {
			out, consumed := w.convert(evs)
			w.pos = evs[consumed-1].Revision
			if len(out.Events) > 0 {
				return out, nil
			}
			// Everything was filtered away; a bookmark may still be due under steady load.
			select {
			case <-tick:
				return w.bookmark(), nil
			default:
			}
			continue
		}
		select {
		case <-notify:
		case <-tick:
			return w.bookmark(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (w *Watch) bookmark() *Batch {
	return &Batch{Events: [][]byte{encodeEvent(&storagev1.Event{Type: storagev1.EventType_BOOKMARK, ResourceVersion: w.pos})}}
}

// convert encodes log events for this watch's filter, up to batchBytes, and says how many of
// evs it consumed. Events every watch of the type sees alike share one encoding. A modification
// that moves an object into the selection is an ADDED, one that moves it out a DELETED (of the
// previous state, at the event's revision), as upstream's watch cache does; those are encoded
// for this watch alone.
func (w *Watch) convert(evs []*logEvent) (*Batch, int) {
	out := &Batch{Events: make([][]byte, 0, len(evs))}
	f := w.f
	size := 0
	for i, ev := range evs {
		if size >= batchBytes {
			return out, i
		}
		if f.Prefix() != "" && ev.Object.GetNamespace()+"/" != f.Prefix() {
			continue
		}
		var typ storagev1.EventType
		obj := ev.Object
		switch ev.Type {
		case backend.Added:
			if f.Matches(ev.Object) {
				typ = storagev1.EventType_ADDED
			}
		case backend.Deleted:
			if f.Matches(ev.Prev) {
				typ = storagev1.EventType_DELETED
			}
		case backend.Modified:
			now, before := true, true
			if f.HasSelectors() {
				now, before = f.Matches(ev.Object), f.Matches(ev.Prev)
			}
			switch {
			case now && before:
				typ = storagev1.EventType_MODIFIED
			case now:
				typ = storagev1.EventType_ADDED
			case before:
				typ, obj = storagev1.EventType_DELETED, atRevision(ev.Prev, ev.Revision)
			}
		}
		if typ == storagev1.EventType_EVENT_TYPE_UNSPECIFIED {
			continue
		}
		enc := w.encode(ev, typ, obj)
		out.Events = append(out.Events, enc)
		size += len(enc)
	}
	return out, len(evs)
}

// encode is ev as this watch sends it, typ of obj: the encoding every watch of the type shares
// when it sends the event as it is, read view and all; one of its own otherwise (a selection
// transition, or a watch of index attributes).
func (w *Watch) encode(ev *logEvent, typ storagev1.EventType, obj *storagev1.Object) []byte {
	if !w.attrs && typ == eventTypes[ev.Type] && obj == ev.Object {
		return ev.encoded()
	}
	return encodeEvent(&storagev1.Event{Type: typ, Object: w.view(obj), ResourceVersion: ev.Revision})
}

// view is obj as this watch sends it: the read view, or obj itself with its index attributes.
func (w *Watch) view(obj *storagev1.Object) *storagev1.Object {
	if w.attrs {
		return obj
	}
	return ReadView(obj)
}

// atRevision is obj's read view at another revision (the shared parts are immutable).
func atRevision(obj *storagev1.Object, rev int64) *storagev1.Object {
	return &storagev1.Object{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: obj.GetValue(),
		ResourceVersion: rev, Uid: obj.GetUid()}
}
