package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Field numbers of the log-entry envelope. The envelope is a protobuf message written by hand with
// protowire so that no new .proto file is needed; unknown fields are skipped on decode, so fields
// can be added later.
const (
	fieldType     protowire.Number = 1 // varint: backend.EventType
	fieldObject   protowire.Number = 2 // bytes: storagev1.Object (absent for Deleted)
	fieldPrev     protowire.Number = 3 // bytes: storagev1.Object (absent for Added)
	fieldUnixNano protowire.Number = 4 // varint: commit time
)

var marshal = proto.MarshalOptions{Deterministic: true}

// u64 encodes n as 8 bytes big-endian, so that keys sort numerically.
func u64(n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return b[:]
}

// readU64 decodes a value written by u64; a missing value is 0.
func readU64(b []byte) (int64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("embedded: corrupt 8-byte integer of length %d", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

func encodeObject(o *storagev1.Object) ([]byte, error) {
	return marshal.Marshal(o)
}

func decodeObject(b []byte) (*storagev1.Object, error) {
	o := new(storagev1.Object)
	if err := proto.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("embedded: corrupt object: %w", err)
	}
	return o, nil
}

// encodeEvent encodes ev without its revision (the revision is the log key). For Deleted, the
// object is not stored: it is Prev with the deletion revision, rebuilt by decodeEvent.
func encodeEvent(ev *backend.Event) ([]byte, error) {
	return encodeEventWith(ev, nil, nil)
}

// encodeEventWith is encodeEvent with the encodings of ev.Object and ev.Prev when the caller has
// them already (nil: encode them).
func encodeEventWith(ev *backend.Event, object, prev []byte) ([]byte, error) {
	var err error
	withObject := ev.Type != backend.Deleted && ev.Object != nil
	if withObject && object == nil {
		if object, err = encodeObject(ev.Object); err != nil {
			return nil, err
		}
	}
	if ev.Prev != nil && prev == nil {
		if prev, err = encodeObject(ev.Prev); err != nil {
			return nil, err
		}
	}
	size := protowire.SizeTag(fieldType) + protowire.SizeVarint(uint64(ev.Type)) +
		protowire.SizeTag(fieldUnixNano) + protowire.SizeVarint(uint64(ev.UnixNano))
	if withObject {
		size += protowire.SizeTag(fieldObject) + protowire.SizeBytes(len(object))
	}
	if ev.Prev != nil {
		size += protowire.SizeTag(fieldPrev) + protowire.SizeBytes(len(prev))
	}
	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, fieldType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(ev.Type))
	if withObject {
		b = protowire.AppendTag(b, fieldObject, protowire.BytesType)
		b = protowire.AppendBytes(b, object)
	}
	if ev.Prev != nil {
		b = protowire.AppendTag(b, fieldPrev, protowire.BytesType)
		b = protowire.AppendBytes(b, prev)
	}
	b = protowire.AppendTag(b, fieldUnixNano, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(ev.UnixNano))
	return b, nil
}

var errCorruptEvent = errors.New("embedded: corrupt log entry")

// decodeEvent decodes a log entry stored under revision rev.
func decodeEvent(rev int64, b []byte) (backend.Event, error) {
	ev := backend.Event{Revision: rev}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return backend.Event{}, fmt.Errorf("%w at revision %d: %v", errCorruptEvent, rev, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		switch {
		case num == fieldType && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			ev.Type = backend.EventType(v)
		case num == fieldUnixNano && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			ev.UnixNano = int64(v)
		case (num == fieldObject || num == fieldPrev) && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				var o *storagev1.Object
				if o, err = decodeObject(v); err == nil {
					if num == fieldObject {
						ev.Object = o
					} else {
						ev.Prev = o
					}
				}
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err != nil {
			return backend.Event{}, fmt.Errorf("%w at revision %d: %v", errCorruptEvent, rev, err)
		}
		if n < 0 {
			return backend.Event{}, fmt.Errorf("%w at revision %d: %v", errCorruptEvent, rev, protowire.ParseError(n))
		}
		b = b[n:]
	}
	switch ev.Type {
	case backend.Added, backend.Modified:
		if ev.Object == nil {
			return backend.Event{}, fmt.Errorf("%w at revision %d: no object", errCorruptEvent, rev)
		}
	case backend.Deleted:
		if ev.Prev == nil {
			return backend.Event{}, fmt.Errorf("%w at revision %d: no previous object", errCorruptEvent, rev)
		}
		ev.Object = proto.Clone(ev.Prev).(*storagev1.Object)
		ev.Object.ResourceVersion = rev
	default:
		return backend.Event{}, fmt.Errorf("%w at revision %d: event type %d", errCorruptEvent, rev, ev.Type)
	}
	return ev, nil
}
