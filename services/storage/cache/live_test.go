package cache

import (
	"testing"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// The live count behind apiserver_storage_objects: objects that exist now, whatever history the
// index retains for reads at older revisions, before and after compaction and when rebuilt from a
// snapshot.
func TestIndexCountsLiveObjects(t *testing.T) {
	// a: created 1, updated 3, deleted 5. b: created 2. c: created 4, updated 6.
	snap := &backend.Snapshot{Revision: 6, Objects: []*storagev1.Object{o("b", 2), o("c", 6)}}
	snap.Events = []backend.Event{
		{Type: backend.Added, Revision: 1, Object: o("a", 1)},
		{Type: backend.Added, Revision: 2, Object: o("b", 2)},
		{Type: backend.Modified, Revision: 3, Object: o("a", 3), Prev: o("a", 1)},
		{Type: backend.Added, Revision: 4, Object: o("c", 4)},
		{Type: backend.Deleted, Revision: 5, Object: o("a", 5), Prev: o("a", 3)},
		{Type: backend.Modified, Revision: 6, Object: o("c", 6), Prev: o("c", 4)},
	}
	ix := buildIndex(snap)
	if ix.live != 2 || ix.len() != 3 {
		t.Fatalf("rebuilt index: live %d, keys %d; want 2 live of 3 keys (a is deleted)", ix.live, ix.len())
	}
	for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
		ix.compactKey(key, 6)
	}
	if ix.live != 2 || ix.len() != 2 {
		t.Fatalf("after compaction: live %d, keys %d; want 2 and 2", ix.live, ix.len())
	}
	ix.apply("ns/a", backend.Event{Type: backend.Added, Revision: 7, Object: o("a", 7)})
	ix.apply("ns/a", backend.Event{Type: backend.Modified, Revision: 8, Object: o("a", 8), Prev: o("a", 7)})
	ix.apply("ns/b", backend.Event{Type: backend.Deleted, Revision: 9, Object: o("b", 9), Prev: o("b", 2)})
	if ix.live != 2 {
		t.Fatalf("after re-create of a, update of a and delete of b: live %d, want 2", ix.live)
	}
	// A snapshot whose only state is in its retained events (no live object left).
	empty := buildIndex(&backend.Snapshot{Revision: 2, Events: []backend.Event{
		{Type: backend.Added, Revision: 1, Object: o("x", 1)},
		{Type: backend.Deleted, Revision: 2, Object: o("x", 2), Prev: o("x", 1)},
	}})
	if empty.live != 0 {
		t.Fatalf("everything deleted: live %d, want 0", empty.live)
	}
}
