package cache

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend/embedded"
)

// ListWire's response, once marshaled, is List's response: every request shape (unpaged, pages
// with continue, selectors, an exact revision) decodes to the same items and list metadata, and
// an item changed after a list is returned as it is now, not as the shared encoding had it.
func TestListWireDecodesAsList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	be, err := embedded.Open(filepath.Join(t.TempDir(), "db"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	c, err := New(ctx, be, Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rt := &storagev1.ResourceType{Group: "test.platform.io", Resource: "things"}
	var firstRev int64
	for i := range 30 {
		obj := &storagev1.Object{Namespace: fmt.Sprint("ns", i%2), Name: fmt.Sprintf("obj-%02d", i),
			Value: []byte(fmt.Sprintf("value %d", i)), Labels: map[string]string{"parity": strconv.Itoa(i % 3)}}
		ev, err := be.Create(ctx, rt, obj)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstRev = ev.Revision
		}
	}
	check := func(name string, req *storagev1.ListRequest) *storagev1.ListResponse {
		t.Helper()
		want, err := c.List(ctx, req)
		if err != nil {
			t.Fatalf("%s: List: %v", name, err)
		}
		wire, err := c.ListWire(ctx, req)
		if err != nil {
			t.Fatalf("%s: ListWire: %v", name, err)
		}
		if len(wire.GetItems()) != 0 {
			t.Fatalf("%s: ListWire returned %d decoded items", name, len(wire.GetItems()))
		}
		b, err := proto.Marshal(wire)
		if err != nil {
			t.Fatal(err)
		}
		got := &storagev1.ListResponse{}
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatalf("%s: decoding ListWire's response: %v", name, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%s: ListWire decodes as\n%v\nList returned\n%v", name, got, want)
		}
		if len(got.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("%s: unknown fields left after decoding", name)
		}
		return want
	}
	all := check("unpaged", &storagev1.ListRequest{Type: rt})
	if len(all.GetItems()) != 30 {
		t.Fatalf("unpaged list: %d items, want 30", len(all.GetItems()))
	}
	check("one namespace", &storagev1.ListRequest{Type: rt, Namespace: "ns1"})
	check("label selector", &storagev1.ListRequest{Type: rt, LabelSelector: "parity=1"})
	pages, cont := 0, ""
	for {
		page := check("page "+strconv.Itoa(pages), &storagev1.ListRequest{Type: rt, Limit: 7, Continue: cont})
		pages++
		if cont = page.GetContinue(); cont == "" {
			break
		}
	}
	if pages != 5 {
		t.Fatalf("30 items in pages of 7: %d pages, want 5", pages)
	}
	// An update after the encodings were shared: the new state is listed, the old one is still
	// what the old revision reads.
	upd := proto.Clone(all.GetItems()[3]).(*storagev1.Object)
	upd.Value = []byte("changed")
	if _, err := be.Update(ctx, rt, upd, nil); err != nil {
		t.Fatal(err)
	}
	now := check("after an update", &storagev1.ListRequest{Type: rt})
	found := false
	for _, it := range now.GetItems() {
		if it.GetName() == upd.GetName() && it.GetNamespace() == upd.GetNamespace() {
			found = string(it.GetValue()) == "changed"
		}
	}
	if !found {
		t.Fatalf("the updated object is not listed with its new value")
	}
	old := check("exact revision", &storagev1.ListRequest{Type: rt, ResourceVersion: strconv.FormatInt(all.GetResourceVersion(), 10),
		ResourceVersionMatch: storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT})
	if !proto.Equal(old, all) {
		t.Fatalf("the list at revision %d changed", all.GetResourceVersion())
	}
	check("first page at a revision", &storagev1.ListRequest{Type: rt, Limit: 4, ResourceVersion: strconv.FormatInt(firstRev+10, 10)})
}
