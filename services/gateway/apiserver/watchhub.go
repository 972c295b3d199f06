package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// The watch hub shares one upstream storage watch per resource type among the clients watching
// that type from a known resourceVersion, so the gateway decodes and encodes each event once
// instead of once per client. Watches it cannot serve exactly (initial state, selectors, Table,
// a start older than the hub's history) go straight to storage, which has the full history.

// hubSubscriberBuffer is how many events a subscriber may lag behind; a client slower than that
// is disconnected (it resumes from its last resourceVersion), so nobody slows the others down.
const hubSubscriberBuffer = 4096

// hubEvent is one event of a type, decoded once and encoded (as a JSON watch line) at most once.
type hubEvent struct {
	typ       storagev1.EventType
	rv        int64
	namespace string
	obj       runtime.Object
	once      sync.Once
	line      []byte
	err       error
	pbOnce    sync.Once
	frame     []byte
	pbErr     error
	// metadata holds the event's PartialObjectMetadata encodings, by meta group version and
	// format, made on first use.
	metaMu   sync.Mutex
	metadata map[metadataEncoding]encodedEvent
}

// metadataEncoding is one way a hub event is sent to metadata watches.
type metadataEncoding struct {
	gvk      schema.GroupVersionKind
	protobuf bool
}

// encodedEvent is an event's encoding (a JSON line or a Protobuf frame), or why it has none.
type encodedEvent struct {
	data []byte
	err  error
}

// metadataEvent is the event with its object as PartialObjectMetadata in the group version and
// format out names, encoded once for every subscriber that wants the same.
func (e *hubEvent) metadataEvent(a *API, out negotiation.Output) ([]byte, error) {
	key := metadataEncoding{gvk: out.Metadata, protobuf: out.Format == negotiation.FormatProtobuf}
	e.metaMu.Lock()
	defer e.metaMu.Unlock()
	if enc, ok := e.metadata[key]; ok {
		return enc.data, enc.err
	}
	var buf bytes.Buffer
	pom, err := asMetadata(e.obj, out)
	if err == nil {
		err = a.writeWatchEvent(&buf, eventTypes[e.typ], pom, key.protobuf)
	}
	if e.metadata == nil {
		e.metadata = map[metadataEncoding]encodedEvent{}
	}
	e.metadata[key] = encodedEvent{data: buf.Bytes(), err: err}
	return buf.Bytes(), err
}

// jsonLine is the event as a JSON watch line, encoded on first use.
func (e *hubEvent) jsonLine() ([]byte, error) {
	e.once.Do(func() {
		var buf bytes.Buffer
		e.err = writeEvent(&buf, eventTypes[e.typ], e.obj)
		e.line = buf.Bytes()
	})
	return e.line, e.err
}

// protobufFrame is the event as a Protobuf watch frame, encoded on first use.
func (e *hubEvent) protobufFrame(a *API) ([]byte, error) {
	e.pbOnce.Do(func() {
		var buf bytes.Buffer
		e.pbErr = a.writeProtobufEvent(&buf, eventTypes[e.typ], e.obj)
		e.frame = buf.Bytes()
	})
	return e.frame, e.pbErr
}

// hubSubscriber is one client watch served by a hub.
type hubSubscriber struct {
	namespace string
	from      int64 // events at or before this resourceVersion are not for this client
	bookmarks bool
	ch        chan *hubEvent
	closed    bool
}

// watchHub is the shared upstream watch of one resource type.
type watchHub struct {
	a   *API
	res *registry.Resource

	mu      sync.Mutex
	running bool
	start   int64       // the hub holds every event after start
	latest  int64       // everything up to latest has been received
	history []*hubEvent // the most recent events, oldest first
	subs    map[*hubSubscriber]struct{}
	cancel  context.CancelFunc
}

// hubs holds the hub of each resource type, created on first use.
type hubs struct {
	mu   sync.Mutex
	byGR map[*registry.Resource]*watchHub
}

func (a *API) hubFor(res *registry.Resource) *watchHub {
	a.hubs.mu.Lock()
	defer a.hubs.mu.Unlock()
	if a.hubs.byGR == nil {
		a.hubs.byGR = map[*registry.Resource]*watchHub{}
	}
	h, ok := a.hubs.byGR[res]
	if !ok {
		h = &watchHub{a: a, res: res, subs: map[*hubSubscriber]struct{}{}}
		a.hubs.byGR[res] = h
	}
	return h
}

// dropHubs stops and forgets the hubs of resources stale reports (custom resources the registry
// no longer serves): their clients resume against what is served now.
func (a *API) dropHubs(stale func(*registry.Resource) bool) {
	a.hubs.mu.Lock()
	var stopped []*watchHub
	for res, h := range a.hubs.byGR {
		if !stale(res) {
			continue
		}
		delete(a.hubs.byGR, res)
		stopped = append(stopped, h)
	}
	a.hubs.mu.Unlock()
	for _, h := range stopped {
		h.stop()
	}
}

// subscribe registers a client watching from resourceVersion from. ok is false when the hub
// cannot promise every event after from (it started later); the caller then watches storage.
func (h *watchHub) subscribe(ctx context.Context, from int64, namespace string, bookmarks bool) (*hubSubscriber, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		if err := h.startLocked(ctx); err != nil {
			return nil, false
		}
	}
	if from < h.start {
		return nil, false
	}
	s := &hubSubscriber{namespace: namespace, from: from, bookmarks: bookmarks, ch: make(chan *hubEvent, hubSubscriberBuffer)}
	// Replay what the client has not seen yet from the hub's history.
	for _, ev := range h.history {
		if ev.rv > from && s.wants(ev) {
			if !s.offer(ev) {
				return nil, false
			}
		}
	}
	h.subs[s] = struct{}{}
	return s, true
}

// unsubscribe removes a subscriber (its client left).
func (h *watchHub) unsubscribe(s *hubSubscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		s.close()
	}
}

func (s *hubSubscriber) wants(ev *hubEvent) bool {
	return s.namespace == "" || ev.namespace == s.namespace
}

// offer queues an event without blocking; a full queue means the client is too slow.
func (s *hubSubscriber) offer(ev *hubEvent) bool {
	select {
	case s.ch <- ev:
		return true
	default:
		return false
	}
}

func (s *hubSubscriber) close() {
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

// startLocked opens the upstream watch at the type's current revision.
func (h *watchHub) startLocked(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rev, err := h.a.store.Revision(rctx, &storagev1.RevisionRequest{Type: generic.StorageType(h.res)})
	cancel()
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(h.a.runCtx)
	stream, err := h.a.store.Watch(runCtx, &storagev1.WatchRequest{
		Type: generic.StorageType(h.res), ResourceVersion: strconv.FormatInt(rev.Current, 10),
		AllowBookmarks: true, BookmarkIntervalMs: h.a.cfg.BookmarkInterval.Milliseconds(),
	})
	if err != nil {
		stop()
		return err
	}
	h.running, h.start, h.latest, h.history, h.cancel = true, rev.Current, rev.Current, nil, stop
	go h.pump(runCtx, stream)
	go h.bookmarker(runCtx)
	return nil
}

// pump receives the upstream events and fans them out. When the upstream watch ends (storage
// restarted, history expired, shutdown) every subscriber is closed: each client resumes from
// its last resourceVersion, through a new hub or straight from storage.
func (h *watchHub) pump(ctx context.Context, stream interface {
	Recv() ([]*storagev1.Event, error)
}) {
	for {
		events, err := stream.Recv()
		if err != nil {
			h.stop()
			return
		}
		decoded := make([]*hubEvent, 0, len(events))
		var progress int64
		for _, ev := range events {
			if ev.Type == storagev1.EventType_BOOKMARK {
				progress = ev.ResourceVersion
				continue
			}
			obj, err := h.res.Strategy().DecodeStored(ev.Object.Value)
			if err != nil {
				h.a.log.ErrorContext(ctx, "watch hub: undecodable stored object", "resource", h.res.Resource, "error", err)
				h.stop()
				return
			}
			rv := ev.ResourceVersion
			if rv == 0 {
				rv = ev.Object.ResourceVersion
			}
			mustMeta(obj).SetResourceVersion(strconv.FormatInt(rv, 10))
			decoded = append(decoded, &hubEvent{typ: ev.Type, rv: rv, namespace: ev.Object.Namespace, obj: obj})
			progress = rv
		}
		h.publish(decoded, progress)
	}
}

// hubHistory bounds the events a hub keeps for subscribers that start slightly in the past
// (an informer's list is usually a little older than the newest event).
const hubHistory = 10000

func (h *watchHub) publish(events []*hubEvent, progress int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return
	}
	for _, ev := range events {
		h.history = append(h.history, ev)
		for s := range h.subs {
			if ev.rv > s.from && s.wants(ev) && !s.offer(ev) {
				delete(h.subs, s)
				s.close()
			}
		}
	}
	if over := len(h.history) - hubHistory; over > 0 {
		h.start = h.history[over-1].rv
		h.history = append([]*hubEvent(nil), h.history[over:]...)
	}
	if progress > h.latest {
		h.latest = progress
	}
}

// bookmarker sends subscribers that allow bookmarks the hub's progress every interval, through
// their event queue so a bookmark never overtakes an event.
func (h *watchHub) bookmarker(ctx context.Context) {
	t := time.NewTicker(h.a.cfg.BookmarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		bm := &hubEvent{typ: storagev1.EventType_BOOKMARK, rv: h.latest}
		for s := range h.subs {
			if s.bookmarks && h.latest >= s.from {
				if !s.offer(bm) {
					delete(h.subs, s)
					s.close()
				}
			}
		}
		h.mu.Unlock()
	}
}

// stop ends the upstream watch and closes every subscriber.
func (h *watchHub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return
	}
	h.running = false
	h.cancel()
	for s := range h.subs {
		s.close()
	}
	h.subs = map[*hubSubscriber]struct{}{}
	h.history = nil
}

// serveFromHub streams a subscriber's events to the client until the timeout, the client
// leaving, or the hub closing the subscription.
func (a *API) serveFromHub(ctx context.Context, w http.ResponseWriter, info *requestInfo, out negotiation.Output, h *watchHub, s *hubSubscriber) {
	defer h.unsubscribe(s)
	flusher := startWatchResponse(w, out)
	protobuf := out.Format == negotiation.FormatProtobuf
	var buf bytes.Buffer
	write := func(ev *hubEvent) bool {
		if ev.typ == storagev1.EventType_BOOKMARK {
			var obj runtime.Object = info.res.New()
			mustMeta(obj).SetResourceVersion(strconv.FormatInt(ev.rv, 10))
			obj.GetObjectKind().SetGroupVersionKind(info.res.GroupVersionKind())
			if out.IsMetadata() {
				var err error
				if obj, err = asMetadata(obj, out); err != nil {
					return false
				}
			}
			return a.writeWatchEvent(&buf, "BOOKMARK", obj, protobuf) == nil
		}
		var line []byte
		var err error
		switch {
		case out.IsMetadata():
			// Never the whole object's encodings below.
			line, err = ev.metadataEvent(a, out)
		case protobuf:
			line, err = ev.protobufFrame(a)
		default:
			line, err = ev.jsonLine()
		}
		if err != nil {
			return false
		}
		buf.Write(line)
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-s.ch:
			if !ok {
				return
			}
			buf.Reset()
			if !write(ev) {
				return
			}
			// Send whatever else is already queued in the same write.
			for more := true; more && buf.Len() < 1<<20; {
				select {
				case ev, ok := <-s.ch:
					if !ok {
						_, _ = w.Write(buf.Bytes())
						return
					}
					if !write(ev) {
						return
					}
				default:
					more = false
				}
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
