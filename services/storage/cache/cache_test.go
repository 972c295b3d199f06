package cache

import (
	"fmt"
	"testing"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

func o(name string, rev int64) *storagev1.Object {
	return &storagev1.Object{Namespace: "ns", Name: name, ResourceVersion: rev, Value: []byte(fmt.Sprint(name, rev))}
}

func TestIndexReadsEveryRetainedRevisionAndCompacts(t *testing.T) {
	// a: created 1, updated 3, deleted 5. b: created 2. c: created 4, updated 6.
	snap := &backend.Snapshot{Revision: 6, Compacted: 0, Objects: []*storagev1.Object{o("b", 2), o("c", 6)}}
	snap.Events = []backend.Event{
		{Type: backend.Added, Revision: 1, Object: o("a", 1)},
		{Type: backend.Added, Revision: 2, Object: o("b", 2)},
		{Type: backend.Modified, Revision: 3, Object: o("a", 3), Prev: o("a", 1)},
		{Type: backend.Added, Revision: 4, Object: o("c", 4)},
		{Type: backend.Deleted, Revision: 5, Object: o("a", 5), Prev: o("a", 3)},
		{Type: backend.Modified, Revision: 6, Object: o("c", 6), Prev: o("c", 4)},
	}
	ix := buildIndex(snap)
	state := func(rev int64) string {
		s := ""
		ix.scan("ns/", "", rev, func(_ string, v *version) bool {
			s += fmt.Sprintf("%s@%d ", v.out.GetName(), v.out.GetResourceVersion())
			return true
		})
		return s
	}
	want := map[int64]string{1: "a@1 ", 2: "a@1 b@2 ", 3: "a@3 b@2 ", 4: "a@3 b@2 c@4 ", 5: "b@2 c@4 ", 6: "b@2 c@6 "}
	for rev, w := range want {
		if got := state(rev); got != w {
			t.Errorf("at %d: %q, want %q", rev, got, w)
		}
	}
	// Compacting to 4 keeps the state at 4 and everything after; a's tombstone goes once compacted past.
	for _, ev := range snap.Events[:4] {
		ix.compactKey(backend.Key(ev.Object.GetNamespace(), ev.Object.GetName()), 4)
	}
	for rev := int64(4); rev <= 6; rev++ {
		if got := state(rev); got != want[rev] {
			t.Errorf("after compaction to 4, at %d: %q, want %q", rev, got, want[rev])
		}
	}
	for _, ev := range snap.Events[4:] {
		ix.compactKey(backend.Key(ev.Object.GetNamespace(), ev.Object.GetName()), 6)
	}
	if _, ok := ix.versions["ns/a"]; ok || ix.len() != 2 {
		t.Errorf("deleted key still indexed after compaction past its deletion: %d keys", ix.len())
	}
	if len(ix.versions["ns/c"]) != 1 {
		t.Errorf("c keeps %d versions after compaction to its newest", len(ix.versions["ns/c"]))
	}
	// Scans start after a key and stay within the prefix.
	ix.add("nt/z", 7, o("z", 7))
	if got := ""; true {
		ix.scan("ns/", "ns/b", 7, func(k string, _ *version) bool { got += k + " "; return true })
		if got != "ns/c " {
			t.Errorf("scan after ns/b: %q", got)
		}
	}
}

func TestContinueTokenRoundTrip(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	tok := encodeToken(secret, "pods", "ns", continueToken{rev: 42, lastKey: "ns/name-1"})
	got, ok := decodeToken(secret, "pods", "ns", tok)
	if !ok || got.rev != 42 || got.lastKey != "ns/name-1" {
		t.Fatalf("round trip: %v %v", got, ok)
	}
	if _, ok := decodeToken([]byte("another secret, another cluster!"), "pods", "ns", tok); ok {
		t.Fatal("token verified under another secret")
	}
}

func FuzzDecodeContinueToken(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	f.Add(encodeToken(secret, "pods", "ns", continueToken{rev: 7, lastKey: "ns/a"}))
	f.Add(encodeToken(secret, "pods", "ns", continueToken{rev: 0, lastKey: "ns/a"}))
	f.Add("")
	f.Add(".")
	f.Add("AQc.AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := decodeToken(secret, "pods", "ns", s)
		if !ok {
			return
		}
		// Whatever verifies must be exactly what the server would have issued.
		if tok.rev < 0 || encodeToken(secret, "pods", "ns", tok) != s { // 0: an inconsistent continue
			t.Fatalf("accepted a token the server did not issue: %q -> %+v", s, tok)
		}
	})
}

func FuzzParseResourceVersion(f *testing.F) {
	for _, s := range []string{"", "0", "1", "-1", "abc", "9223372036854775807", "9223372036854775808", "01", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, n, err := parseRV("resourceVersion", s)
		if err != nil {
			return
		}
		if (kind == rvExact) != (n > 0) || (kind != rvExact && s != "" && s != "0") {
			t.Fatalf("parseRV(%q) = %v, %d", s, kind, n)
		}
	})
}

func FuzzSelectors(f *testing.F) {
	for _, s := range []string{"a=b", "a in (x,y),!c", "metadata.name=x", "a!=b,c", "=", "a in (", "x.y/z notin (q)"} {
		f.Add(s)
	}
	obj := &storagev1.Object{Namespace: "ns", Name: "n", Labels: map[string]string{"a": "b"}, Fields: map[string]string{"spec.x": "y"}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, fl := range []func() (*storage.Filter, error){
			func() (*storage.Filter, error) { return storage.NewFilter("ns", s, "") },
			func() (*storage.Filter, error) { return storage.NewFilter("", "", s) },
		} {
			flt, err := fl()
			if err != nil {
				continue
			}
			_ = flt.Matches(obj) // must not panic
		}
	})
}

func TestWatchBatchesAreBoundedInBytes(t *testing.T) {
	big := make([]byte, 1<<20)
	var evs []*logEvent
	for i := range 20 {
		evs = append(evs, &logEvent{Event: backend.Event{Type: backend.Added, Revision: int64(i + 1),
			Object: &storagev1.Object{Namespace: "ns", Name: fmt.Sprint(i), Value: big, ResourceVersion: int64(i + 1)}}})
	}
	w := &Watch{f: &storage.Filter{}}
	var sent int
	for rest := evs; len(rest) > 0; {
		out, consumed := w.convert(rest)
		if consumed == 0 || out.Len() != consumed {
			t.Fatalf("batch consumed %d, produced %d", consumed, out.Len())
		}
		if size := out.WireSize(); size > batchBytes+len(big)+100 {
			t.Fatalf("batch of %d bytes exceeds the bound", size)
		}
		// The batch decodes as the WatchResponse it stands for, in order.
		resp, err := out.Decode()
		if err != nil || len(resp.GetEvents()) != consumed || resp.GetEvents()[0].GetResourceVersion() != int64(sent+1) ||
			resp.GetEvents()[0].GetType() != storagev1.EventType_ADDED || len(resp.GetEvents()[0].GetObject().GetValue()) != len(big) {
			t.Fatalf("decoded batch: %v", err)
		}
		sent += consumed
		rest = rest[consumed:]
	}
	if sent != len(evs) {
		t.Fatalf("sent %d of %d events", sent, len(evs))
	}
	// Initial events are bounded the same way.
	for _, ev := range evs {
		w.initial = append(w.initial, &storagev1.Event{Type: storagev1.EventType_ADDED, Object: ev.Object})
	}
	first, err := w.Next(t.Context())
	if err != nil || first.Len() == 0 || first.Len() > batchBytes/len(big)+1 {
		t.Fatalf("first initial batch: %d events, %v", first.Len(), err)
	}
}

func TestSharedEncodingIsWhatEachWatchWouldEncode(t *testing.T) {
	ev := &logEvent{Event: backend.Event{Type: backend.Modified, Revision: 9,
		Object: &storagev1.Object{Namespace: "ns", Name: "a", Value: []byte("v2"), ResourceVersion: 9, Labels: map[string]string{"k": "v"}},
		Prev:   &storagev1.Object{Namespace: "ns", Name: "a", Value: []byte("v1"), ResourceVersion: 4}}}
	b := &Batch{Events: [][]byte{ev.encoded(), ev.encoded()}}
	resp, err := b.Decode()
	if err != nil || len(resp.GetEvents()) != 2 {
		t.Fatal(err)
	}
	got := resp.GetEvents()[0]
	if got.GetType() != storagev1.EventType_MODIFIED || got.GetResourceVersion() != 9 || string(got.GetObject().GetValue()) != "v2" ||
		got.GetObject().GetResourceVersion() != 9 || len(got.GetObject().GetLabels()) != 0 {
		t.Fatalf("shared encoding decodes as %v", got)
	}
}
