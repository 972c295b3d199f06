package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry/generic"
)

// watchParams are the watch-only query parameters.
type watchParams struct {
	bookmarks bool
	timeout   time.Duration
	// sendInitialEvents is nil when the parameter is absent.
	sendInitialEvents *bool
}

func (a *API) parseWatchParams(r *http.Request) (watchParams, error) {
	q := r.URL.Query()
	var p watchParams
	if v := q.Get("allowWatchBookmarks"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, apierrors.NewBadRequest("allowWatchBookmarks must be true or false")
		}
		p.bookmarks = b
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return p, apierrors.NewBadRequest("timeoutSeconds must be a non-negative integer")
		}
		p.timeout = time.Duration(n) * time.Second
	}
	if p.timeout == 0 {
		min := a.cfg.MinRequestTimeout
		p.timeout = min + time.Duration(rand.Int64N(int64(min)))
	}
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, apierrors.NewBadRequest("sendInitialEvents must be true or false")
		}
		p.sendInitialEvents = &b
	}
	match := q.Get("resourceVersionMatch")
	switch {
	case p.sendInitialEvents != nil && match != string(metav1.ResourceVersionMatchNotOlderThan):
		return p, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan")
	case p.sendInitialEvents == nil && match != "":
		return p, apierrors.NewBadRequest("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
	case p.sendInitialEvents != nil && *p.sendInitialEvents && !p.bookmarks:
		return p, apierrors.NewBadRequest("sendInitialEvents requires setting allowWatchBookmarks to true")
	}
	return p, nil
}

// watch serves GET ?watch=true: a chunked stream of JSON watch events (or Table events), one
// per line, until the timeout, the client leaving, or an error (sent as an ERROR event).
func (a *API) watch(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, negotiation.Options{Table: true, Protobuf: true, Metadata: true}.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out.IsMetadata() && out.Metadata.Kind != negotiation.KindPartialObjectMetadata {
		// Watch events carry single objects: client-go's metadata client watches with
		// as=PartialObjectMetadata. Upstream would fail on every event; the watch is refused instead.
		a.writeError(w, r, negotiation.NotAcceptable(fmt.Sprintf("you requested %s, but the requested object is not a list (%T)", out.Metadata.Kind, info.res.New())))
		return
	}
	lp, err := parseListParams(r, info.res)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wp, err := a.parseWatchParams(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wp.timeout)
	defer cancel()
	if info.res.Strategy().Definition() != nil {
		// The watch ends when its kind's definition changes or goes away (clients re-watch
		// what is served then), as upstream ends them.
		defer a.customWatches.add(info.res, cancel)()
	}
	// over tells whether the watch has reached its end: its timeout, the client leaving, or its
	// kind changing. The clock is asked too because ctx's timer can run hundreds of milliseconds
	// late on a busy machine, and an error that arrives once the timeout has passed, whatever it
	// is, must not turn the watch's normal end into an ERROR event.
	deadline, timed := ctx.Deadline()
	over := func() bool { return ctx.Err() != nil || (timed && !time.Now().Before(deadline)) }
	req := &storagev1.WatchRequest{
		Type: generic.StorageType(info.res), Namespace: info.namespace,
		LabelSelector: lp.labelSelector, FieldSelector: lp.fieldSelector,
		ResourceVersion: lp.resourceVersion, AllowBookmarks: wp.bookmarks,
	}
	if wp.bookmarks {
		req.BookmarkIntervalMs = a.cfg.BookmarkInterval.Milliseconds()
	}
	if info.name != "" {
		req.FieldSelector = joinSelectors(req.FieldSelector, "metadata.name="+info.name)
	}
	if s := wp.sendInitialEvents; s != nil {
		req.SendInitialEvents = *s
		if !*s && (req.ResourceVersion == "" || req.ResourceVersion == "0") {
			// No initial state wanted: start at the current revision.
			rev, err := a.store.Revision(ctx, &storagev1.RevisionRequest{Type: req.Type})
			if err != nil {
				if over() {
					startWatchResponse(w, out) // the time is up: an empty stream, ended cleanly
					return
				}
				a.writeError(w, r, generic.FromStorage(err, info.res.GroupResource(), ""))
				return
			}
			req.ResourceVersion = strconv.FormatInt(rev.Current, 10)
		}
	}
	if h, from, ok := a.hubEligible(info, req, out); ok {
		if sub, ok := h.subscribe(ctx, from, info.namespace, wp.bookmarks); ok {
			a.serveFromHub(ctx, w, info, out, h, sub)
			return
		}
	}
	// The storage watch does not carry the watch's deadline: it runs until this handler ends it.
	// With the deadline, the storage side's own timer for it could end the stream
	// (DEADLINE_EXCEEDED) before this handler's timer had fired, and the watch ended with a 504
	// ERROR event instead of cleanly. Now the storage stream is cancelled only after ctx is done,
	// so its cancellation is always seen as the watch's end. Values (trace) are kept.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	defer context.AfterFunc(ctx, scancel)()
	stream, err := a.store.Watch(sctx, req)
	if err != nil {
		if over() {
			startWatchResponse(w, out)
			return
		}
		a.writeError(w, r, generic.FromStorage(err, info.res.GroupResource(), ""))
		return
	}
	flusher := startWatchResponse(w, out)
	enc := &watchEncoder{a: a, info: info, out: out, r: r}
	var buf bytes.Buffer
	for {
		events, err := stream.Recv()
		if err != nil {
			if over() || errors.Is(err, io.EOF) || storage.IsUnavailable(err) {
				// The time is up (whatever storage said at that moment), or the storage service
				// went away (restart, shutdown): end the stream cleanly, as an API server that
				// stops does, so clients resume from their last resourceVersion instead of
				// relisting. Errors before the timeout are ERROR events.
				return
			}
			buf.Reset()
			enc.writeError(&buf, generic.FromStorage(err, info.res.GroupResource(), ""))
			_, _ = w.Write(buf.Bytes())
			return
		}
		buf.Reset()
		for _, ev := range events {
			if err := enc.write(&buf, ev); err != nil {
				enc.writeError(&buf, apierrors.NewInternalError(err))
				_, _ = w.Write(buf.Bytes())
				return
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

// startWatchResponse sends the headers of a watch stream. Protobuf streams are
// "<media type>;stream=watch", as client-go expects.
func startWatchResponse(w http.ResponseWriter, out negotiation.Output) http.Flusher {
	ct := out.MediaType
	if out.Format == negotiation.FormatProtobuf {
		ct += ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	return flusher
}

// joinSelectors ANDs two field selectors.
func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// watchEncoder renders storage events as watch events in the negotiated representation.
type watchEncoder struct {
	a           *API
	info        *requestInfo
	out         negotiation.Output
	r           *http.Request
	wroteHeader bool
}

var eventTypes = map[storagev1.EventType]string{
	storagev1.EventType_ADDED:    "ADDED",
	storagev1.EventType_MODIFIED: "MODIFIED",
	storagev1.EventType_DELETED:  "DELETED",
	storagev1.EventType_BOOKMARK: "BOOKMARK",
}

// write appends one event line to buf.
func (e *watchEncoder) write(buf *bytes.Buffer, ev *storagev1.Event) error {
	res := e.info.res
	var obj runtime.Object
	rv := strconv.FormatInt(ev.ResourceVersion, 10)
	if ev.Type == storagev1.EventType_BOOKMARK {
		// A bookmark's object carries only the resourceVersion (and the end-of-initial-events mark).
		obj = res.New()
		m := mustMeta(obj)
		m.SetResourceVersion(rv)
		if ev.InitialEventsEnd {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		obj.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
	} else {
		var err error
		obj, err = res.Strategy().DecodeStored(ev.Object.Value)
		if err != nil {
			return err
		}
		if ev.ResourceVersion == 0 {
			rv = strconv.FormatInt(ev.Object.ResourceVersion, 10)
		}
		mustMeta(obj).SetResourceVersion(rv)
	}
	e.info.toWire(obj)
	if e.out.IsMetadata() {
		// Every event's object, bookmarks' too (their resourceVersion and annotations kept).
		var err error
		if obj, err = asMetadata(obj, e.out); err != nil {
			return err
		}
	}
	if e.out.Format == negotiation.FormatTable {
		var table *metav1.Table
		var err error
		if ev.Type == storagev1.EventType_BOOKMARK {
			table = &metav1.Table{}
			table.SetGroupVersionKind(e.out.TableGV.WithKind("Table"))
			table.ResourceVersion = rv
		} else if table, err = e.a.table(res, []runtime.Object{obj}, e.out, e.r); err != nil {
			return err
		}
		if e.wroteHeader {
			// Column definitions go with the first event only, as upstream sends them.
			table.ColumnDefinitions = nil
		}
		e.wroteHeader = e.wroteHeader || ev.Type != storagev1.EventType_BOOKMARK
		obj = table
	}
	if e.out.Format == negotiation.FormatProtobuf {
		return e.a.writeProtobufEvent(buf, eventTypes[ev.Type], obj)
	}
	return writeEvent(buf, eventTypes[ev.Type], obj)
}

// writeError appends an ERROR event carrying err's Status.
func (e *watchEncoder) writeError(buf *bytes.Buffer, err error) {
	s := statusOf(err)
	s.Kind, s.APIVersion = "Status", "v1"
	if e.out.Format == negotiation.FormatProtobuf {
		_ = e.a.writeProtobufEvent(buf, "ERROR", s)
		return
	}
	_ = writeEvent(buf, "ERROR", s)
}

// writeProtobufEvent appends one frame of a Protobuf watch stream: a 4-byte big-endian length,
// then a WatchEvent (without the envelope) whose object is the object's Protobuf envelope.
func (a *API) writeProtobufEvent(buf *bytes.Buffer, typ string, obj runtime.Object) error {
	raw, err := a.enc.Encode(obj, negotiation.Output{Format: negotiation.FormatProtobuf})
	if err != nil {
		return err
	}
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	data, err := ev.Marshal()
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	buf.Write(n[:])
	buf.Write(data)
	return nil
}

// writeWatchEvent appends one event as a Protobuf frame or a JSON line.
func (a *API) writeWatchEvent(buf *bytes.Buffer, typ string, obj runtime.Object, protobuf bool) error {
	if protobuf {
		return a.writeProtobufEvent(buf, typ, obj)
	}
	return writeEvent(buf, typ, obj)
}

func writeEvent(buf *bytes.Buffer, typ string, obj runtime.Object) error {
	buf.WriteString(`{"type":"`)
	buf.WriteString(typ)
	buf.WriteString(`","object":`)
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	buf.Write(data)
	buf.WriteString("}\n")
	return nil
}

// hubEligible tells whether a watch can be served by its type's shared hub: it starts at an
// exact resourceVersion (no initial state), selects by namespace at most, and wants plain JSON or
// Protobuf, of the objects or of their PartialObjectMetadata.
func (a *API) hubEligible(info *requestInfo, req *storagev1.WatchRequest, out negotiation.Output) (*watchHub, int64, bool) {
	// The hub encodes each event once for every watcher, in the served group: a client that
	// addressed upstream's group name gets its own watch (unless it wants PartialObjectMetadata,
	// which does not name the object's group; the hub encodes those once per meta group version).
	if a.cfg.DisableWatchHub || (!info.wire.Empty() && !out.IsMetadata()) || (out.Format != negotiation.FormatJSON && out.Format != negotiation.FormatProtobuf) || out.Pretty || req.SendInitialEvents ||
		req.LabelSelector != "" || req.FieldSelector != "" {
		return nil, 0, false
	}
	from, err := strconv.ParseInt(req.ResourceVersion, 10, 64)
	if err != nil || from <= 0 {
		return nil, 0, false
	}
	return a.hubFor(info.res), from, true
}
