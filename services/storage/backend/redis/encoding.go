package redisbackend

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Field numbers of Object.resource_version and Object.uid: the stored payload leaves them out,
// the value header carries them.
var (
	rvField  = fieldNumber("resource_version")
	uidField = fieldNumber("uid")
)

func fieldNumber(name string) protowire.Number {
	fd := (&storagev1.Object{}).ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("redisbackend: storagev1.Object has no field " + name)
	}
	return fd.Number()
}

var errCorrupt = errors.New("redisbackend: corrupt stored value")

// payloadBufs recycles the buffers objects are marshaled into: go-redis has written the payload
// to the socket by the time the write returns.
var payloadBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBuf = 256 << 10

func getBuf() *[]byte { return payloadBufs.Get().(*[]byte) }

func putBuf(b *[]byte, used []byte) {
	if cap(used) > maxPooledBuf {
		return
	}
	*b = used[:0]
	payloadBufs.Put(b)
}

// appendPayload appends the protobuf encoding of obj without resource_version and uid to dst.
func appendPayload(dst []byte, obj *storagev1.Object) ([]byte, error) {
	start := len(dst)
	out, err := proto.MarshalOptions{}.MarshalAppend(dst, obj)
	if err != nil {
		return dst, fmt.Errorf("redisbackend: marshal object: %w", err)
	}
	if obj.GetResourceVersion() == 0 && obj.GetUid() == "" {
		return out, nil
	}
	// Drop the two fields in place: the kept bytes never overtake the read position.
	r, w := start, start
	for r < len(out) {
		num, typ, n := protowire.ConsumeTag(out[r:])
		if n < 0 {
			return dst, errCorrupt
		}
		m := protowire.ConsumeFieldValue(num, typ, out[r+n:])
		if m < 0 {
			return dst, errCorrupt
		}
		end := r + n + m
		if num != rvField && num != uidField {
			w += copy(out[w:], out[r:end])
		}
		r = end
	}
	return out[:w], nil
}

// splitValue splits a stored value "<rev>|<len(uid)>|<uid><payload>".
func splitValue(v string) (rev int64, uid, payload string, err error) {
	i := strings.IndexByte(v, '|')
	if i <= 0 {
		return 0, "", "", errCorrupt
	}
	rev, err = strconv.ParseInt(v[:i], 10, 64)
	if err != nil {
		return 0, "", "", errCorrupt
	}
	rest := v[i+1:]
	j := strings.IndexByte(rest, '|')
	if j <= 0 {
		return 0, "", "", errCorrupt
	}
	n, err := strconv.Atoi(rest[:j])
	if err != nil || n < 0 || n > len(rest)-j-1 {
		return 0, "", "", errCorrupt
	}
	rest = rest[j+1:]
	return rev, rest[:n], rest[n:], nil
}

// decodeValue decodes a stored value into a new Object.
func decodeValue(v string) (*storagev1.Object, error) {
	rev, uid, payload, err := splitValue(v)
	if err != nil {
		return nil, err
	}
	if uid != "" {
		uid = strings.Clone(uid) // do not pin the whole reply
	}
	// Unmarshal copies what it keeps, so reading the reply string in place is safe.
	return decodePayload(unsafe.Slice(unsafe.StringData(payload), len(payload)), rev, uid)
}

// decodePayload decodes a payload into a new Object with the given revision and uid.
func decodePayload(payload []byte, rev int64, uid string) (*storagev1.Object, error) {
	obj := new(storagev1.Object)
	if err := proto.Unmarshal(payload, obj); err != nil {
		return nil, fmt.Errorf("redisbackend: decode stored object: %w", err)
	}
	obj.ResourceVersion = rev
	obj.Uid = uid
	return obj, nil
}

// Stream entry fields.
const (
	fType = "t" // "a" (added), "m" (modified), "d" (deleted)
	fKey  = "k"
	fObj  = "o" // the new stored value (absent for "d")
	fPrev = "p" // the previous stored value (absent for "a")
	fTime = "ts"
)

// parseID returns the revision of a log entry ID "<rev>-0".
func parseID(id string) (int64, error) {
	i := strings.IndexByte(id, '-')
	if i <= 0 || id[i+1:] != "0" {
		return 0, fmt.Errorf("redisbackend: unexpected log entry id %q", id)
	}
	return strconv.ParseInt(id[:i], 10, 64)
}

func field(values map[string]any, name string) (string, bool) {
	v, ok := values[name].(string)
	return v, ok
}

// entryEvent decodes one log entry.
func entryEvent(id string, values map[string]any) (backend.Event, error) {
	rev, err := parseID(id)
	if err != nil {
		return backend.Event{}, err
	}
	ev := backend.Event{Revision: rev}
	ts, _ := field(values, fTime)
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return backend.Event{}, fmt.Errorf("redisbackend: log entry %s: bad time %q", id, ts)
	}
	ev.UnixNano = us * 1000
	t, _ := field(values, fType)
	switch t {
	case "a", "m":
		ev.Type = backend.Added
		o, ok := field(values, fObj)
		if !ok {
			return backend.Event{}, fmt.Errorf("redisbackend: log entry %s has no object", id)
		}
		if ev.Object, err = decodeValue(o); err != nil {
			return backend.Event{}, err
		}
		if t == "m" {
			ev.Type = backend.Modified
			p, ok := field(values, fPrev)
			if !ok {
				return backend.Event{}, fmt.Errorf("redisbackend: log entry %s has no previous object", id)
			}
			if ev.Prev, err = decodeValue(p); err != nil {
				return backend.Event{}, err
			}
		}
	case "d":
		ev.Type = backend.Deleted
		p, ok := field(values, fPrev)
		if !ok {
			return backend.Event{}, fmt.Errorf("redisbackend: log entry %s has no previous object", id)
		}
		if ev.Prev, err = decodeValue(p); err != nil {
			return backend.Event{}, err
		}
		if ev.Object, err = decodeValue(p); err != nil {
			return backend.Event{}, err
		}
		ev.Object.ResourceVersion = rev
	default:
		return backend.Event{}, fmt.Errorf("redisbackend: log entry %s has unknown type %q", id, t)
	}
	return ev, nil
}
