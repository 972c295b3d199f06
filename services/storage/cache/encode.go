package cache

import (
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// logEvent is a retained event with its watch encoding, made at most once whatever the number
// of watchers: fanning one event out to a thousand watches would otherwise encode it a thousand
// times, more than everything else the fan-out costs.
type logEvent struct {
	backend.Event
	wire atomic.Pointer[[]byte]
}

var eventTypes = [...]storagev1.EventType{
	backend.Added:    storagev1.EventType_ADDED,
	backend.Modified: storagev1.EventType_MODIFIED,
	backend.Deleted:  storagev1.EventType_DELETED,
}

// encoded returns the event's encoding as a storagev1.Event, as every watch without a selector
// sees it (and every watch whose selector matches both states).
func (e *logEvent) encoded() []byte {
	if b := e.wire.Load(); b != nil {
		return *b
	}
	b := encodeEvent(&storagev1.Event{Type: eventTypes[e.Type], Object: ReadView(e.Object), ResourceVersion: e.Revision})
	e.wire.Store(&b) // a concurrent first use may encode it twice; both results are equal
	return b
}

func encodeEvent(ev *storagev1.Event) []byte {
	// Marshal fails only on invalid UTF-8 in a string; every stored string arrived in a request
	// that protobuf decoding already checked.
	b, _ := proto.Marshal(ev)
	return b
}

// Batch is one watch response, already encoded: each element is a storagev1.Event. Its wire form
// (WireAppend) is byte for byte that of a storagev1.WatchResponse holding those events, so
// clients decode it as one.
type Batch struct {
	Events [][]byte
}

// Len is the number of events in the batch.
func (b *Batch) Len() int { return len(b.Events) }

// WireAppend appends the batch's encoding as a storagev1.WatchResponse to buf.
func (b *Batch) WireAppend(buf []byte) []byte {
	for _, ev := range b.Events {
		buf = protowire.AppendTag(buf, 1, protowire.BytesType)
		buf = protowire.AppendBytes(buf, ev)
	}
	return buf
}

// WireSize is the length of WireAppend's output.
func (b *Batch) WireSize() int {
	n := 0
	for _, ev := range b.Events {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(ev))
	}
	return n
}

// Decode returns the batch as a storagev1.WatchResponse (for tests and in-process callers).
func (b *Batch) Decode() (*storagev1.WatchResponse, error) {
	resp := &storagev1.WatchResponse{}
	return resp, proto.Unmarshal(b.WireAppend(nil), resp)
}
