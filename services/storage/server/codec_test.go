package server

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
)

// A list whose items arrive pre-encoded (cache.ListWire) goes out byte for byte as Protobuf
// marshals the same list with decoded items, and the response no longer holds the items' buffer.
func TestListWireMarshalsAsTheDecodedList(t *testing.T) {
	remaining := int64(7)
	for _, tc := range []struct {
		name string
		list *storagev1.ListResponse
	}{
		{"unpaged", &storagev1.ListResponse{ResourceVersion: 42}},
		{"page", &storagev1.ListResponse{ResourceVersion: 42, Continue: "token", RemainingItemCount: &remaining}},
	} {
		var raw []byte
		for i := range 50 {
			obj := &storagev1.Object{Namespace: "ns", Name: fmt.Sprint("obj-", i), Value: bytes.Repeat([]byte{byte(i)}, 300),
				ResourceVersion: int64(i + 1), Uid: fmt.Sprint("uid-", i)}
			tc.list.Items = append(tc.list.Items, obj)
			enc, err := proto.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			raw = protowire.AppendBytes(protowire.AppendTag(raw, 1, protowire.BytesType), enc)
		}
		want, err := proto.Marshal(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		pre := proto.Clone(tc.list).(*storagev1.ListResponse)
		pre.Items = nil
		pre.ProtoReflect().SetUnknown(raw)
		got, err := newWireCodec().Marshal(pre)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Materialize(); !bytes.Equal(b, want) {
			t.Fatalf("%s: the pre-encoded list marshals as %d bytes, not as the decoded list's %d", tc.name, len(b), len(want))
		}
		got.Free()
		if len(pre.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("%s: the response still holds the items' buffer", tc.name)
		}
	}
}
