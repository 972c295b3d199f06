package server

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/cache"
)

// wireCodec is the service's gRPC codec: protobuf, except that a *cache.Batch (a watch response
// whose events are encoded once and shared by every watcher) is written as it is, and so are the
// pre-encoded items of a list (cache.ListWire).
type wireCodec struct{ proto encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *cache.Batch:
		return mem.BufferSlice{mem.SliceBuffer(m.WireAppend(make([]byte, 0, m.WireSize())))}, nil
	case *storagev1.ListResponse:
		if items := m.ProtoReflect().GetUnknown(); len(m.GetItems()) == 0 && len(items) > 0 {
			return marshalListWire(m, items)
		}
	}
	return c.proto.Marshal(v)
}

// marshalListWire writes a list whose items are already encoded (cache.ListWire): those bytes as
// they are, then the list's other fields. That is byte for byte what Protobuf marshals for the
// same list with decoded items (fields in number order, items first), without copying the items
// once more. The items' buffer came from gRPC's pool and goes back there once written; the
// response no longer holds it.
func marshalListWire(m *storagev1.ListResponse, items []byte) (mem.BufferSlice, error) {
	m.ProtoReflect().SetUnknown(nil)
	rest, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	b := []byte(items)
	return mem.BufferSlice{mem.NewBuffer(&b, mem.DefaultBufferPool()), mem.SliceBuffer(rest)}, nil
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c wireCodec) Name() string { return grpcproto.Name }
