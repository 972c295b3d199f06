package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

var (
	pods        = &storagev1.ResourceType{Resource: "pods"}
	deployments = &storagev1.ResourceType{Group: "apps", Resource: "deployments"}
	widgets     = &storagev1.ResourceType{Group: "example.com", Resource: "widgets"}
)

// modes runs f with each way of committing writes: the write-ahead log (the default), group
// commit, a transaction per write, and bbolt's DB.Batch.
func modes(t *testing.T, f func(t *testing.T, mode commitMode)) {
	t.Run("wal", func(t *testing.T) { f(t, walCommit) })
	t.Run("walchurn", func(t *testing.T) { f(t, walChurn) })
	t.Run("group", func(t *testing.T) { f(t, groupCommit) })
	t.Run("solo", func(t *testing.T) { f(t, soloCommit) })
	t.Run("boltbatch", func(t *testing.T) { f(t, boltBatch) })
}

// open opens the file at path, closed at the end of the test, committing writes with mode.
func open(t testing.TB, path string, mode commitMode) *Backend {
	t.Helper()
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	setMode(b, mode, time.Millisecond)
	return b
}

// walChurn is walCommit with a checkpoint every 200µs (test only), so that writes and reads meet
// the log in every state: in the overlay, being checkpointed, in bbolt.
const walChurn commitMode = 100

func setMode(b *Backend, mode commitMode, batchDelay time.Duration) {
	b.mode = mode
	if mode == walChurn {
		b.mode = walCommit
		go func() {
			for !b.isClosed() {
				if err := b.wal.checkpoint(); err != nil && !b.isClosed() {
					panic(err)
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	if batchDelay > 0 {
		b.db.MaxBatchDelay = batchDelay
	}
}

func newBackend(t testing.TB, mode commitMode) *Backend {
	return open(t, filepath.Join(t.TempDir(), "data", "storage.db"), mode)
}

func obj(ns, name, value, uid string) *storagev1.Object {
	return &storagev1.Object{
		Namespace: ns, Name: name, Value: []byte(value), Uid: uid,
		Labels: map[string]string{"app": name}, Fields: map[string]string{"spec.node": "n1"},
	}
}

func withRV(o *storagev1.Object, rv int64, uid string) *storagev1.Object {
	o = proto.Clone(o).(*storagev1.Object)
	o.ResourceVersion = rv
	o.Uid = uid
	return o
}

func eqObj(a, b *storagev1.Object) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return proto.Equal(a, b)
}

func eqEvent(a, b backend.Event) bool {
	return a.Type == b.Type && a.Revision == b.Revision && a.UnixNano == b.UnixNano && eqObj(a.Object, b.Object) && eqObj(a.Prev, b.Prev)
}

func checkEvent(t *testing.T, ev backend.Event, typ backend.EventType, rev int64, object, prev *storagev1.Object) {
	t.Helper()
	if ev.Type != typ || ev.Revision != rev {
		t.Fatalf("event type %d revision %d, want %d %d", ev.Type, ev.Revision, typ, rev)
	}
	if !eqObj(ev.Object, object) {
		t.Fatalf("event object %v, want %v", ev.Object, object)
	}
	if !eqObj(ev.Prev, prev) {
		t.Fatalf("event prev %v, want %v", ev.Prev, prev)
	}
	if ev.UnixNano <= 0 {
		t.Fatalf("event time %d", ev.UnixNano)
	}
}

func TestCreateUpdateDelete(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)

		in := obj("ns", "a", "v1", "uid-a")
		ev, err := b.Create(ctx, pods, in)
		if err != nil {
			t.Fatal(err)
		}
		a1 := withRV(in, 1, "uid-a")
		checkEvent(t, ev, backend.Added, 1, a1, nil)
		if in.ResourceVersion != 0 || ev.Object == in {
			t.Fatal("Create modified or retained its input")
		}

		ev, err = b.Create(ctx, pods, obj("", "b", "cluster-scoped", "uid-b"))
		if err != nil {
			t.Fatal(err)
		}
		b2 := withRV(obj("", "b", "cluster-scoped", "uid-b"), 2, "uid-b")
		checkEvent(t, ev, backend.Added, 2, b2, nil)

		// Update ignores obj.Uid and obj.ResourceVersion and keeps the stored uid.
		upd := withRV(obj("ns", "a", "v2", ""), 99, "other-uid")
		ev, err = b.Update(ctx, pods, upd, &storagev1.Preconditions{ResourceVersion: 1, Uid: "uid-a"})
		if err != nil {
			t.Fatal(err)
		}
		a3 := withRV(obj("ns", "a", "v2", ""), 3, "uid-a")
		checkEvent(t, ev, backend.Modified, 3, a3, a1)
		if upd.ResourceVersion != 99 || upd.Uid != "other-uid" {
			t.Fatal("Update modified its input")
		}

		ev, err = b.Delete(ctx, pods, "ns", "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		checkEvent(t, ev, backend.Deleted, 4, withRV(a3, 4, "uid-a"), a3)

		// The key can be created again.
		ev, err = b.Create(ctx, pods, obj("ns", "a", "v3", "uid-a2"))
		if err != nil {
			t.Fatal(err)
		}
		a5 := withRV(obj("ns", "a", "v3", ""), 5, "uid-a2")
		checkEvent(t, ev, backend.Added, 5, a5, nil)

		// Another type has revisions of its own.
		ev, err = b.Create(ctx, deployments, obj("ns", "a", "d", "uid-d"))
		if err != nil {
			t.Fatal(err)
		}
		checkEvent(t, ev, backend.Added, 1, withRV(obj("ns", "a", "d", ""), 1, "uid-d"), nil)

		cur, compacted, err := b.Revision(ctx, pods)
		if err != nil || cur != 5 || compacted != 0 {
			t.Fatalf("Revision = %d, %d, %v; want 5, 0", cur, compacted, err)
		}
		s, err := b.Snapshot(ctx, pods)
		if err != nil {
			t.Fatal(err)
		}
		if s.Revision != 5 || s.Compacted != 0 || len(s.Objects) != 2 || len(s.Events) != 5 {
			t.Fatalf("snapshot rev %d compacted %d, %d objects, %d events", s.Revision, s.Compacted, len(s.Objects), len(s.Events))
		}
		// Ordered by key: "/b" < "ns/a".
		if !eqObj(s.Objects[0], b2) || !eqObj(s.Objects[1], a5) {
			t.Fatalf("snapshot objects %v", s.Objects)
		}
		wantTypes := []backend.EventType{backend.Added, backend.Added, backend.Modified, backend.Deleted, backend.Added}
		for i, e := range s.Events {
			if e.Revision != int64(i+1) || e.Type != wantTypes[i] {
				t.Fatalf("snapshot event %d: type %d revision %d", i, e.Type, e.Revision)
			}
		}
		checkEvent(t, s.Events[3], backend.Deleted, 4, withRV(a3, 4, "uid-a"), a3)
		for i := 1; i < len(s.Events); i++ {
			if s.Events[i].UnixNano < s.Events[i-1].UnixNano {
				t.Fatalf("commit times go backwards: %d then %d", s.Events[i-1].UnixNano, s.Events[i].UnixNano)
			}
		}
	})
}

func TestNotFoundAndAlreadyExists(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)

		// Unknown type: not found, and the type is not created.
		if _, err := b.Update(ctx, widgets, obj("ns", "a", "", ""), nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Update of unknown type: %v", err)
		}
		if _, err := b.Delete(ctx, widgets, "ns", "a", nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Delete of unknown type: %v", err)
		}
		if types, err := b.Types(ctx); err != nil || len(types) != 0 {
			t.Fatalf("Types = %v, %v; want none", types, err)
		}

		if _, err := b.Create(ctx, pods, obj("ns", "a", "", "u")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, pods, obj("ns", "a", "", "u")); !errors.Is(err, backend.ErrAlreadyExists) {
			t.Fatalf("second Create: %v", err)
		}
		if _, err := b.Update(ctx, pods, obj("ns", "b", "", ""), nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Update of missing key: %v", err)
		}
		if _, err := b.Delete(ctx, pods, "other", "a", nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Delete of missing key: %v", err)
		}
		if _, err := b.Delete(ctx, pods, "ns", "a", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Delete(ctx, pods, "ns", "a", nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("second Delete: %v", err)
		}
		if _, err := b.Update(ctx, pods, obj("ns", "a", "", ""), nil); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Update of deleted key: %v", err)
		}
		// Refused writes take no revision.
		if cur, _, err := b.Revision(ctx, pods); err != nil || cur != 2 {
			t.Fatalf("Revision = %d, %v; want 2", cur, err)
		}
		// Canceled context: nothing is written.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Create(cctx, pods, obj("ns", "c", "", "")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Create with canceled context: %v", err)
		}
	})
}

func TestPreconditions(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)
		if _, err := b.Create(ctx, pods, obj("ns", "a", "v1", "uid-a")); err != nil { // rev 1
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ { // revs 2..4 on another key
			if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint("x", i), "", "")); err != nil {
				t.Fatal(err)
			}
		}
		conflict := func(err error, field, expected, actual string) {
			t.Helper()
			var ce *backend.ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a conflict", err)
			}
			want := backend.ConflictError{Field: field, Expected: expected, Actual: actual, CurrentRevision: 4}
			if *ce != want {
				t.Fatalf("conflict %+v, want %+v", *ce, want)
			}
		}
		_, err := b.Update(ctx, pods, obj("ns", "a", "v2", ""), &storagev1.Preconditions{ResourceVersion: 7})
		conflict(err, "resourceVersion", "7", "1")
		_, err = b.Update(ctx, pods, obj("ns", "a", "v2", ""), &storagev1.Preconditions{Uid: "uid-b"})
		conflict(err, "uid", "uid-b", "uid-a")
		_, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{ResourceVersion: 3})
		conflict(err, "resourceVersion", "3", "1")
		_, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{ResourceVersion: 1, Uid: "uid-b"})
		conflict(err, "uid", "uid-b", "uid-a")
		if cur, _, _ := b.Revision(ctx, pods); cur != 4 {
			t.Fatalf("conflicts took a revision: %d", cur)
		}

		ev, err := b.Update(ctx, pods, obj("ns", "a", "v2", "ignored"), &storagev1.Preconditions{ResourceVersion: 1, Uid: "uid-a"})
		if err != nil || ev.Revision != 5 || ev.Object.Uid != "uid-a" {
			t.Fatalf("Update = %v, %v", ev, err)
		}
		_, err = b.Update(ctx, pods, obj("ns", "a", "v3", ""), &storagev1.Preconditions{ResourceVersion: 1})
		var ce *backend.ConflictError
		if !errors.As(err, &ce) || ce.Actual != "5" || ce.CurrentRevision != 5 {
			t.Fatalf("stale update: %v", err)
		}
		ev, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{ResourceVersion: 5, Uid: "uid-a"})
		if err != nil || ev.Revision != 6 || ev.Object.ResourceVersion != 6 || ev.Prev.ResourceVersion != 5 {
			t.Fatalf("Delete = %v, %v", ev, err)
		}
	})
}

// TestConcurrentWritersDenseRevisions runs 8 writers that create and update keys of their own and
// compete for one shared key with resourceVersion preconditions: every successful write gets a
// distinct revision, the revisions are exactly 1..N, and the log holds the returned events.
func TestConcurrentWritersDenseRevisions(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)
		if _, err := b.Create(ctx, pods, obj("", "shared", "0", "shared")); err != nil {
			t.Fatal(err)
		}
		var sharedRV atomic.Int64
		sharedRV.Store(1)

		const writers, perWriter = 8, 40
		var (
			mu        sync.Mutex
			events    = []backend.Event{}
			conflicts atomic.Int64
			wg        sync.WaitGroup
		)
		record := func(ev backend.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- func() error {
					name := fmt.Sprint("w", w)
					for i := 0; i < perWriter; i++ {
						var ev backend.Event
						var err error
						switch {
						case i == 0:
							ev, err = b.Create(ctx, pods, obj("ns", name, "0", name))
						case i%2 == 1:
							ev, err = b.Update(ctx, pods, obj("ns", name, fmt.Sprint(i), ""), nil)
						default:
							expect := sharedRV.Load()
							ev, err = b.Update(ctx, pods, obj("", "shared", fmt.Sprint(name, "-", i), ""), &storagev1.Preconditions{ResourceVersion: expect})
							var ce *backend.ConflictError
							if errors.As(err, &ce) {
								if ce.Field != "resourceVersion" || ce.Expected != fmt.Sprint(expect) || ce.Actual == ce.Expected {
									return fmt.Errorf("bad conflict %+v for expected %d", ce, expect)
								}
								conflicts.Add(1)
								continue
							}
							if err == nil {
								if ev.Prev.ResourceVersion != expect {
									return fmt.Errorf("update with precondition %d replaced revision %d", expect, ev.Prev.ResourceVersion)
								}
								for { // publish the newest revision seen
									old := sharedRV.Load()
									if old >= ev.Revision || sharedRV.CompareAndSwap(old, ev.Revision) {
										break
									}
								}
							}
						}
						if err != nil {
							return err
						}
						record(ev)
					}
					return nil
				}()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sort.Slice(events, func(i, j int) bool { return events[i].Revision < events[j].Revision })
		n := int64(len(events)) + 1 // plus the first Create
		for i, ev := range events {
			if ev.Revision != int64(i+2) {
				t.Fatalf("revisions not dense: position %d has revision %d", i, ev.Revision)
			}
		}
		if cur, _, err := b.Revision(ctx, pods); err != nil || cur != n {
			t.Fatalf("Revision = %d, %v; want %d", cur, err, n)
		}
		logged, err := b.Read(ctx, pods, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(logged)) != n {
			t.Fatalf("Read returned %d events, want %d", len(logged), n)
		}
		for i, ev := range events {
			if !eqEvent(ev, logged[i+1]) {
				t.Fatalf("logged event %v differs from returned %v", logged[i+1], ev)
			}
		}
		t.Logf("%d writes, %d conflicts", n, conflicts.Load())
	})
}

// TestFailedWriteInSharedTransaction mixes writes that fail inside the transaction (an object
// that cannot be encoded, a key too long for bbolt) with good ones: with group commit the failing
// function rolls back the shared transaction, so the others must run again and commit exactly
// once, and each caller must get its own result.
func TestFailedWriteInSharedTransaction(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)
		const writers, perWriter = 8, 30
		var (
			mu   sync.Mutex
			good = map[int64]backend.Event{}
			wg   sync.WaitGroup
		)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWriter; i++ {
					name := fmt.Sprint("w", w, "-", i)
					bad := ""
					switch i % 5 {
					case 1:
						bad, name = "invalid UTF-8", name+"\xff"
					case 3:
						bad, name = "key too long", name+strings.Repeat("x", bolt.MaxKeySize)
					}
					ev, err := b.Create(ctx, pods, obj("ns", name, "", ""))
					if bad != "" {
						if err == nil || isOutcome(err) || errors.Is(err, backend.ErrUnavailable) {
							t.Errorf("%s: Create returned %v", bad, err)
						}
						continue
					}
					if err != nil {
						t.Error(err)
						continue
					}
					mu.Lock()
					if _, dup := good[ev.Revision]; dup {
						t.Errorf("revision %d returned twice", ev.Revision)
					}
					good[ev.Revision] = ev
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		evs, err := b.Read(ctx, pods, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(good) || len(good) != writers*perWriter*3/5 {
			t.Fatalf("%d events logged, %d writes acknowledged", len(evs), len(good))
		}
		for i, ev := range evs {
			if ev.Revision != int64(i+1) || !eqEvent(ev, good[ev.Revision]) {
				t.Fatalf("logged event %v, acknowledged %v", ev, good[ev.Revision])
			}
		}
	})
}

func TestReadWaits(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, groupCommit)
	if _, err := b.Create(ctx, pods, obj("ns", "a", "", "")); err != nil {
		t.Fatal(err)
	}

	// At its deadline, Read returns an empty slice and no error.
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	start := time.Now()
	evs, err := b.Read(dctx, pods, 1, 10)
	cancel()
	if err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Read at deadline = %v, %v", evs, err)
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("Read returned after %v, before its deadline", d)
	}
	// So it does when its context is canceled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if evs, err := b.Read(cctx, pods, 1, 10); err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Read with canceled context = %v, %v", evs, err)
	}
	// Events already there are returned even with a canceled context.
	if evs, err := b.Read(cctx, pods, 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("Read of existing events = %v, %v", evs, err)
	}

	// A blocked Read returns the next write, not before it; a write of another type does not end it.
	for _, rt := range []*storagev1.ResourceType{pods, widgets} {
		after, _, _ := b.Revision(ctx, rt)
		type result struct {
			evs []backend.Event
			err error
		}
		done := make(chan result, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			evs, err := b.Read(rctx, rt, after, 10)
			done <- result{evs, err}
		}()
		time.Sleep(50 * time.Millisecond)
		if _, err := b.Create(ctx, deployments, obj("ns", fmt.Sprint("other-", rt.Resource), "", "")); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("Read of %s returned %v, %v before a write of its type", rt.Resource, r.evs, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		start := time.Now()
		if _, err := b.Create(ctx, rt, obj("ns", "b", "", "")); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || len(r.evs) != 1 || r.evs[0].Revision != after+1 || r.evs[0].Object.Name != "b" {
			t.Fatalf("woken Read = %v, %v", r.evs, r.err)
		}
		t.Logf("%s: Read woke %v after the write", rt.Resource, time.Since(start))
	}

	// max limits the batch.
	for i := 0; i < 5; i++ {
		if _, err := b.Update(ctx, pods, obj("ns", "a", fmt.Sprint(i), ""), nil); err != nil {
			t.Fatal(err)
		}
	}
	evs, err = b.Read(ctx, pods, 2, 3)
	if err != nil || len(evs) != 3 || evs[0].Revision != 3 || evs[2].Revision != 5 {
		t.Fatalf("Read(2, max 3) = %v, %v", evs, err)
	}
}

func TestReadErrors(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, groupCommit)
	for i := 0; i < 10; i++ {
		if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint(i), "", "")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Read(ctx, pods, 11, 10); !errors.Is(err, backend.ErrRewound) {
		t.Fatalf("Read past the current revision: %v", err)
	}
	if _, err := b.Read(ctx, widgets, 1, 10); !errors.Is(err, backend.ErrRewound) {
		t.Fatalf("Read past the revision of an unknown type: %v", err)
	}
	if c, err := b.Compact(ctx, pods, 4); err != nil || c != 4 {
		t.Fatalf("Compact = %d, %v", c, err)
	}
	for _, after := range []int64{0, 3} {
		if _, err := b.Read(ctx, pods, after, 10); !errors.Is(err, backend.ErrCompacted) {
			t.Fatalf("Read(%d) after Compact(4): %v", after, err)
		}
	}
	evs, err := b.Read(ctx, pods, 4, 10)
	if err != nil || len(evs) != 6 || evs[0].Revision != 5 {
		t.Fatalf("Read(4) after Compact(4) = %v, %v", evs, err)
	}
	// Unknown types: revision 0, empty snapshot; Read(0) waits.
	if cur, comp, err := b.Revision(ctx, widgets); cur != 0 || comp != 0 || err != nil {
		t.Fatalf("Revision of unknown type = %d, %d, %v", cur, comp, err)
	}
	if s, err := b.Snapshot(ctx, widgets); err != nil || s.Revision != 0 || len(s.Objects) != 0 || len(s.Events) != 0 {
		t.Fatalf("Snapshot of unknown type = %+v, %v", s, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if evs, err := b.Read(dctx, widgets, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("Read of unknown type = %v, %v", evs, err)
	}
	// Invalid types are refused.
	if _, err := b.Create(ctx, &storagev1.ResourceType{Group: "x"}, obj("", "a", "", "")); err == nil {
		t.Fatal("Create of a type without a resource succeeded")
	}
	if _, err := b.Create(ctx, &storagev1.ResourceType{Resource: "/global"}, obj("", "a", "", "")); err == nil {
		t.Fatal("Create of type /global succeeded")
	}
}

func logKeys(t *testing.T, b *Backend, rt *storagev1.ResourceType) []int64 {
	t.Helper()
	var keys []int64
	err := b.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket([]byte(backend.TypeName(rt)))
		if tb == nil {
			return nil
		}
		return tb.Bucket(logBucket).ForEach(func(k, _ []byte) error {
			r, err := readU64(k)
			keys = append(keys, r)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestCompact(t *testing.T) {
	defer func(n int) { compactChunk = n }(compactChunk)
	compactChunk = 7 // exercise the chunked deletion

	ctx := context.Background()
	b := newBackend(t, groupCommit)
	if c, err := b.Compact(ctx, widgets, 10); err != nil || c != 0 {
		t.Fatalf("Compact of unknown type = %d, %v", c, err)
	}
	if types, _ := b.Types(ctx); len(types) != 0 {
		t.Fatalf("Compact created a type: %v", types)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint(i), "", "")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	steps := []struct{ rev, want int64 }{
		{0, 0},     // nothing
		{23, 23},   // several chunks
		{10, 23},   // never backwards
		{23, 23},   // idempotent
		{1000, 50}, // never beyond the current revision
		{-1, 50},
	}
	for _, s := range steps {
		c, err := b.Compact(ctx, pods, s.rev)
		if err != nil || c != s.want {
			t.Fatalf("Compact(%d) = %d, %v; want %d", s.rev, c, err, s.want)
		}
		if _, comp, _ := b.Revision(ctx, pods); comp != s.want {
			t.Fatalf("after Compact(%d): compacted revision %d, want %d", s.rev, comp, s.want)
		}
		keys := logKeys(t, b, pods)
		if int64(len(keys)) != 50-s.want || (len(keys) > 0 && keys[0] != s.want+1) {
			t.Fatalf("after Compact(%d): log keys %v", s.rev, keys)
		}
		snap, err := b.Snapshot(ctx, pods)
		if err != nil || snap.Compacted != s.want || int64(len(snap.Events)) != 50-s.want || len(snap.Objects) != 50 {
			t.Fatalf("after Compact(%d): snapshot %d events, %d objects, compacted %d, %v", s.rev, len(snap.Events), len(snap.Objects), snap.Compacted, err)
		}
	}
	// Writes continue after a full compaction; reading from the compacted revision works.
	ev, err := b.Create(ctx, pods, obj("ns", "next", "", ""))
	if err != nil || ev.Revision != 51 {
		t.Fatalf("Create after Compact = %v, %v", ev, err)
	}
	if evs, err := b.Read(ctx, pods, 50, 0); err != nil || len(evs) != 1 || evs[0].Revision != 51 {
		t.Fatalf("Read(50) = %v, %v", evs, err)
	}
}

// TestCompactLeftovers checks that entries left at or below the compacted revision (by a
// Compact that stopped early) are neither read nor kept by the next Compact.
func TestCompactLeftovers(t *testing.T) {
	defer func(n int) { compactChunk = n }(compactChunk)
	compactChunk = 3
	ctx := context.Background()
	b := newBackend(t, groupCommit)
	for i := 0; i < 12; i++ {
		if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint(i), "", "")); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if c, err := b.Compact(cctx, pods, 8); err != nil || c != 8 {
		t.Fatalf("Compact with canceled context = %d, %v", c, err)
	}
	if keys := logKeys(t, b, pods); len(keys) != 12 {
		t.Fatalf("log keys %v, want all 12 left over", keys)
	}
	snap, err := b.Snapshot(ctx, pods)
	if err != nil || len(snap.Events) != 4 || snap.Events[0].Revision != 9 {
		t.Fatalf("snapshot with leftovers: %v, %v", snap.Events, err)
	}
	if evs, err := b.Read(ctx, pods, 8, 0); err != nil || len(evs) != 4 || evs[0].Revision != 9 {
		t.Fatalf("Read with leftovers: %v, %v", evs, err)
	}
	if c, err := b.Compact(ctx, pods, 5); err != nil || c != 8 {
		t.Fatalf("Compact(5) = %d, %v", c, err)
	}
	if keys := logKeys(t, b, pods); len(keys) != 4 || keys[0] != 9 {
		t.Fatalf("log keys %v after cleanup", keys)
	}
}

func TestReopen(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "nested", "dir", "storage.db")
		b, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		setMode(b, mode, time.Millisecond)
		for i := 0; i < 10; i++ {
			if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint(i), "v", fmt.Sprint("uid", i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Update(ctx, pods, obj("ns", "3", "v2", ""), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Delete(ctx, pods, "ns", "4", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Create(ctx, deployments, obj("ns", "d", "", "")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Compact(ctx, pods, 5); err != nil {
			t.Fatal(err)
		}
		secret, err := b.Secret(ctx)
		if err != nil || len(secret) != 32 {
			t.Fatalf("Secret = %x, %v", secret, err)
		}
		if again, _ := b.Secret(ctx); !bytes.Equal(again, secret) {
			t.Fatal("Secret changed")
		}
		before, err := b.Snapshot(ctx, pods)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}

		b = open(t, path, mode)
		after, err := b.Snapshot(ctx, pods)
		if err != nil {
			t.Fatal(err)
		}
		if after.Revision != 12 || after.Compacted != 5 || after.Revision != before.Revision || after.Compacted != before.Compacted {
			t.Fatalf("reopened at revision %d compacted %d, was %d %d", after.Revision, after.Compacted, before.Revision, before.Compacted)
		}
		if len(after.Objects) != len(before.Objects) || len(after.Events) != len(before.Events) || len(after.Events) != 7 {
			t.Fatalf("reopened with %d objects %d events, was %d %d", len(after.Objects), len(after.Events), len(before.Objects), len(before.Events))
		}
		for i := range after.Objects {
			if !eqObj(after.Objects[i], before.Objects[i]) {
				t.Fatalf("object %d: %v, was %v", i, after.Objects[i], before.Objects[i])
			}
		}
		for i := range after.Events {
			if !eqEvent(after.Events[i], before.Events[i]) {
				t.Fatalf("event %d: %v, was %v", i, after.Events[i], before.Events[i])
			}
		}
		if s2, err := b.Secret(ctx); err != nil || !bytes.Equal(s2, secret) {
			t.Fatalf("secret after reopen %x, was %x (%v)", s2, secret, err)
		}
		if types, err := b.Types(ctx); err != nil || len(types) != 2 {
			t.Fatalf("Types after reopen = %v, %v", types, err)
		}
		if _, err := b.Read(ctx, pods, 4, 0); !errors.Is(err, backend.ErrCompacted) {
			t.Fatalf("Read(4) after reopen: %v", err)
		}
		ev, err := b.Update(ctx, pods, obj("ns", "3", "v3", ""), &storagev1.Preconditions{ResourceVersion: 11, Uid: "uid3"})
		if err != nil || ev.Revision != 13 {
			t.Fatalf("Update after reopen = %v, %v", ev, err)
		}
		if ev, err := b.Create(ctx, deployments, obj("ns", "e", "", "")); err != nil || ev.Revision != 2 {
			t.Fatalf("Create after reopen = %v, %v", ev, err)
		}
	})
}

// TestSnapshotConsistency takes snapshots while writers create, update and delete: replaying a
// snapshot's events on the previous snapshot's objects gives its objects, and its events are
// the previous snapshot's followed by new ones.
func TestSnapshotConsistency(t *testing.T) {
	modes(t, func(t *testing.T, mode commitMode) {
		ctx := context.Background()
		b := newBackend(t, mode)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 1))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprint("k", r.IntN(10))
					var err error
					switch r.IntN(3) {
					case 0:
						_, err = b.Create(ctx, pods, obj("ns", name, fmt.Sprint(w, "-", i), name))
					case 1:
						_, err = b.Update(ctx, pods, obj("ns", name, fmt.Sprint(w, "-", i), ""), nil)
					case 2:
						_, err = b.Delete(ctx, pods, "ns", name, nil)
					}
					if err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, backend.ErrAlreadyExists) {
						t.Error(err)
						return
					}
				}
			}()
		}

		prev := &backend.Snapshot{}
		snapshots := 0
		start := time.Now()
		for time.Since(start) < time.Second || (prev.Revision < 30 && time.Since(start) < 30*time.Second) {
			s, err := b.Snapshot(ctx, pods)
			if err != nil {
				t.Fatal(err)
			}
			if s.Revision < prev.Revision || int64(len(s.Events)) != s.Revision {
				t.Fatalf("snapshot at %d has %d events (previous at %d)", s.Revision, len(s.Events), prev.Revision)
			}
			state := map[string]*storagev1.Object{}
			for _, o := range prev.Objects {
				state[backend.Key(o.Namespace, o.Name)] = o
			}
			for i, ev := range s.Events {
				if ev.Revision != int64(i+1) {
					t.Fatalf("event %d has revision %d", i, ev.Revision)
				}
				if i < len(prev.Events) {
					if !eqEvent(ev, prev.Events[i]) {
						t.Fatalf("event %d changed between snapshots", ev.Revision)
					}
					continue
				}
				key := backend.Key(ev.Object.Namespace, ev.Object.Name)
				if !eqObj(ev.Prev, state[key]) {
					t.Fatalf("event %d: prev %v, state %v", ev.Revision, ev.Prev, state[key])
				}
				if ev.Type == backend.Deleted {
					delete(state, key)
				} else {
					state[key] = ev.Object
				}
			}
			if len(state) != len(s.Objects) {
				t.Fatalf("snapshot at %d: %d objects, replay gives %d", s.Revision, len(s.Objects), len(state))
			}
			for _, o := range s.Objects {
				if !eqObj(o, state[backend.Key(o.Namespace, o.Name)]) {
					t.Fatalf("snapshot at %d: object %v, replay gives %v", s.Revision, o, state[backend.Key(o.Namespace, o.Name)])
				}
			}
			prev = s
			snapshots++
		}
		close(stop)
		wg.Wait()
		t.Logf("%d snapshots, up to revision %d", snapshots, prev.Revision)
	})
}

func TestTypes(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, groupCommit)
	if types, err := b.Types(ctx); err != nil || len(types) != 0 {
		t.Fatalf("Types of a new file = %v, %v", types, err)
	}
	for _, rt := range []*storagev1.ResourceType{widgets, pods, deployments} {
		if _, err := b.Create(ctx, rt, obj("", "a", "", "")); err != nil {
			t.Fatal(err)
		}
	}
	types, err := b.Types(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []*storagev1.ResourceType{deployments, pods, widgets} // by type name
	if len(types) != len(want) {
		t.Fatalf("Types = %v", types)
	}
	for i := range want {
		if !proto.Equal(types[i], want[i]) {
			t.Fatalf("Types[%d] = %v, want %v", i, types[i], want[i])
		}
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	b, err := Open(filepath.Join(t.TempDir(), "storage.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, pods, obj("", "a", "", "")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(ctx, pods, 1, 10)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("blocked Read after Close: %v", err)
	}
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Ping after Close: %v", err)
	}
	if _, err := b.Create(ctx, pods, obj("", "b", "", "")); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Create after Close: %v", err)
	}
	if _, _, err := b.Revision(ctx, pods); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Revision after Close: %v", err)
	}
	if _, err := b.Compact(ctx, pods, 1); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Compact after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestOpenLocked checks that a second Open of a file in use fails after the timeout instead of
// sharing it.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storage.db")
	open(t, path, groupCommit)
	if b, err := Open(path, Options{Timeout: 50 * time.Millisecond}); err == nil {
		b.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
}
