package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"platform.io/services/storage/cache"
)

// wireCodec is the service's gRPC codec: protobuf, except that a *cache.Batch (a watch response
// whose events are encoded once and shared by every watcher) is written as it is.
type wireCodec struct{ proto encoding.CodecV2 }

func newWireCodec() wireCodec { return wireCodec{proto: encoding.GetCodecV2(proto.Name)} }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*cache.Batch); ok {
		return mem.BufferSlice{mem.SliceBuffer(b.WireAppend(make([]byte, 0, b.WireSize())))}, nil
	}
	return c.proto.Marshal(v)
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c wireCodec) Name() string { return proto.Name }
