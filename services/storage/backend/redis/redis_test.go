package redisbackend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"platform.io/libs/naming"
	"platform.io/libs/redistest"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// quietLogger drops go-redis's log lines (failed dials while a test has Redis stopped).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

var (
	pods        = &storagev1.ResourceType{Resource: "pods"}
	deployments = &storagev1.ResourceType{Group: "apps", Resource: "deployments"}
	roles       = &storagev1.ResourceType{Group: "rbac." + naming.GroupSuffix, Resource: "roles"}
)

func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	b, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func start(t testing.TB, o redistest.Options) (*redistest.Server, *Backend) {
	t.Helper()
	srv := redistest.Start(t, o)
	return srv, newBackend(t, Options{URL: srv.URL()})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func object(ns, name, value, uid string) *storagev1.Object {
	return &storagev1.Object{
		Namespace: ns,
		Name:      name,
		Value:     []byte(value),
		Uid:       uid,
		Labels:    map[string]string{"app": name},
		Fields:    map[string]string{"spec.node": "n1"},
	}
}

// withRV returns a copy of o with the resource version set.
func withRV(o *storagev1.Object, rv int64) *storagev1.Object {
	c := proto.CloneOf(o)
	c.ResourceVersion = rv
	return c
}

func mustEqual(t testing.TB, what string, got, want *storagev1.Object) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func TestCreateUpdateDelete(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	before := time.Now()

	in := object("ns1", "a", "v1", "uid-a")
	ev, err := b.Create(ctx, pods, in)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != backend.Added || ev.Revision != 1 || ev.Prev != nil {
		t.Fatalf("create event: %+v", ev)
	}
	mustEqual(t, "created object", ev.Object, withRV(in, 1))
	if in.ResourceVersion != 0 {
		t.Fatal("Create modified its input")
	}
	if d := time.Unix(0, ev.UnixNano).Sub(before); d < -time.Second || d > 5*time.Second {
		t.Fatalf("commit time %v is %v away from the test's clock", time.Unix(0, ev.UnixNano), d)
	}

	cluster := object("", "node-1", "n", "uid-n")
	if ev, err := b.Create(ctx, pods, cluster); err != nil || ev.Revision != 2 {
		t.Fatalf("create cluster-scoped: %+v %v", ev, err)
	}

	// Update: the stored uid wins over the one sent, the sent resourceVersion is ignored.
	upd := object("ns1", "a", "v2", "another-uid")
	upd.ResourceVersion = 77
	ev, err = b.Update(ctx, pods, upd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != backend.Modified || ev.Revision != 3 {
		t.Fatalf("update event: %+v", ev)
	}
	want := withRV(upd, 3)
	want.Uid = "uid-a"
	mustEqual(t, "updated object", ev.Object, want)
	mustEqual(t, "update prev", ev.Prev, withRV(in, 1))
	if upd.ResourceVersion != 77 || upd.Uid != "another-uid" {
		t.Fatal("Update modified its input")
	}

	ev, err = b.Delete(ctx, pods, "ns1", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != backend.Deleted || ev.Revision != 4 {
		t.Fatalf("delete event: %+v", ev)
	}
	mustEqual(t, "deleted object (carries the deletion revision)", ev.Object, withRV(want, 4))
	mustEqual(t, "delete prev", ev.Prev, withRV(want, 3))

	// Recreate after delete gets a new uid.
	re := object("ns1", "a", "v3", "uid-a2")
	if ev, err = b.Create(ctx, pods, re); err != nil || ev.Revision != 5 || ev.Object.Uid != "uid-a2" {
		t.Fatalf("recreate: %+v %v", ev, err)
	}

	snap, err := b.Snapshot(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != 5 || snap.Compacted != 0 || len(snap.Objects) != 2 || len(snap.Events) != 5 {
		t.Fatalf("snapshot: rev %d compacted %d, %d objects, %d events", snap.Revision, snap.Compacted, len(snap.Objects), len(snap.Events))
	}
	mustEqual(t, "snapshot object 0", snap.Objects[0], withRV(cluster, 2))
	mustEqual(t, "snapshot object 1", snap.Objects[1], withRV(re, 5))
	types := []backend.EventType{backend.Added, backend.Added, backend.Modified, backend.Deleted, backend.Added}
	for i, e := range snap.Events {
		if e.Revision != int64(i+1) || e.Type != types[i] || e.Object.ResourceVersion != e.Revision {
			t.Fatalf("snapshot event %d: %+v", i, e)
		}
	}
	mustEqual(t, "snapshot delete event object", snap.Events[3].Object, withRV(want, 4))
	mustEqual(t, "snapshot delete event prev", snap.Events[3].Prev, withRV(want, 3))
	mustEqual(t, "snapshot update event prev", snap.Events[2].Prev, withRV(in, 1))

	cur, comp, err := b.Revision(ctx, pods)
	if err != nil || cur != 5 || comp != 0 {
		t.Fatalf("Revision = %d, %d, %v", cur, comp, err)
	}
	// Another type has its own revisions.
	if cur, comp, err := b.Revision(ctx, deployments); err != nil || cur != 0 || comp != 0 {
		t.Fatalf("Revision of an unwritten type = %d, %d, %v", cur, comp, err)
	}
	if ev, err := b.Create(ctx, deployments, object("ns1", "a", "d", "u")); err != nil || ev.Revision != 1 {
		t.Fatalf("create in another type: %+v %v", ev, err)
	}
}

func TestExistsAndNotFound(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); !errors.Is(err, backend.ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
	if _, err := b.Update(ctx, pods, object("ns", "missing", "v", ""), nil); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Update of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := b.Delete(ctx, pods, "ns", "missing", nil); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Delete of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := b.Delete(ctx, pods, "ns", "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete(ctx, pods, "ns", "a", nil); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	if cur, _, _ := b.Revision(ctx, pods); cur != 2 {
		t.Fatalf("failed writes used revisions: current %d, want 2", cur)
	}
	if _, err := b.Create(ctx, &storagev1.ResourceType{Resource: "bad.name"}, object("", "x", "", "")); err == nil {
		t.Fatal("a resource with a dot was accepted")
	}
}

func TestConflicts(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	if _, err := b.Create(ctx, pods, object("ns", "a", "v1", "uid-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, pods, object("ns", "b", "v1", "uid-b")); err != nil {
		t.Fatal(err)
	}
	check := func(err error, field, expected, actual string, current int64) {
		t.Helper()
		var ce *backend.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("got %v, want a *ConflictError", err)
		}
		want := backend.ConflictError{Field: field, Expected: expected, Actual: actual, CurrentRevision: current}
		if *ce != want {
			t.Fatalf("conflict %+v, want %+v", *ce, want)
		}
	}
	_, err := b.Update(ctx, pods, object("ns", "a", "v2", ""), &storagev1.Preconditions{ResourceVersion: 2})
	check(err, "resourceVersion", "2", "1", 2)
	_, err = b.Update(ctx, pods, object("ns", "a", "v2", ""), &storagev1.Preconditions{Uid: "uid-x"})
	check(err, "uid", "uid-x", "uid-a", 2)
	_, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{ResourceVersion: 9})
	check(err, "resourceVersion", "9", "1", 2)
	_, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{Uid: "uid-b"})
	check(err, "uid", "uid-b", "uid-a", 2)

	ev, err := b.Update(ctx, pods, object("ns", "a", "v2", ""), &storagev1.Preconditions{ResourceVersion: 1, Uid: "uid-a"})
	if err != nil || ev.Revision != 3 {
		t.Fatalf("update with holding preconditions: %+v %v", ev, err)
	}
	_, err = b.Update(ctx, pods, object("ns", "a", "v3", ""), &storagev1.Preconditions{ResourceVersion: 1})
	check(err, "resourceVersion", "1", "3", 3)
	if _, err := b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{ResourceVersion: 3, Uid: "uid-a"}); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentWritersDenseRevisions(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	const writers, perWriter = 8, 60
	shared := object("ns", "shared", "0", "uid-shared")
	if _, err := b.Create(ctx, pods, shared); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events = map[int64]backend.Event{}
		errs   = make(chan error, writers)
		wg     sync.WaitGroup
	)
	record := func(ev backend.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := events[ev.Revision]; dup {
			return fmt.Errorf("revision %d returned twice", ev.Revision)
		}
		events[ev.Revision] = ev
		return nil
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				name := fmt.Sprintf("w%d", w)
				ev, err := b.Create(ctx, pods, object("ns", name, "0", "uid-"+name))
				if err != nil {
					return err
				}
				if err := record(ev); err != nil {
					return err
				}
				rv := ev.Revision
				for i := range perWriter {
					// Own key: a CAS that always holds.
					ev, err := b.Update(ctx, pods, object("ns", name, fmt.Sprint(i+1), ""), &storagev1.Preconditions{ResourceVersion: rv})
					if err != nil {
						return err
					}
					rv = ev.Revision
					if err := record(ev); err != nil {
						return err
					}
					// Shared key: a contended CAS, retried on conflict.
					for {
						cur, err := b.Update(ctx, pods, object("ns", "shared", name, ""), &storagev1.Preconditions{ResourceVersion: -1})
						var ce *backend.ConflictError
						if !errors.As(err, &ce) {
							return fmt.Errorf("probe: %v %v", cur, err)
						}
						snapRV, err := strconv.ParseInt(ce.Actual, 10, 64)
						if err != nil {
							return err
						}
						ev, err := b.Update(ctx, pods, object("ns", "shared", name, ""), &storagev1.Preconditions{ResourceVersion: snapRV})
						if errors.As(err, &ce) {
							continue
						}
						if err != nil {
							return err
						}
						if err := record(ev); err != nil {
							return err
						}
						break
					}
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
	n := int64(1 + writers*(1+2*perWriter))
	if int64(len(events)) != n-1 {
		t.Fatalf("%d events, want %d", len(events), n-1)
	}
	for r := int64(2); r <= n; r++ {
		if _, ok := events[r]; !ok {
			t.Fatalf("revision %d missing", r)
		}
	}
	if cur, _, err := b.Revision(ctx, pods); err != nil || cur != n {
		t.Fatalf("Revision = %d, %v; want %d", cur, err, n)
	}

	// The log returns the same events, in order, in pages.
	var read []backend.Event
	for after := int64(0); after < n; {
		page, err := b.Read(ctx, pods, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 || len(page) > 100 {
			t.Fatalf("Read(%d) returned %d events", after, len(page))
		}
		read = append(read, page...)
		after = page[len(page)-1].Revision
	}
	if int64(len(read)) != n {
		t.Fatalf("read %d events, want %d", len(read), n)
	}
	for i, got := range read {
		if got.Revision != int64(i+1) {
			t.Fatalf("event %d has revision %d", i, got.Revision)
		}
		if i == 0 {
			continue
		}
		want := events[got.Revision]
		if got.Type != want.Type || got.UnixNano != want.UnixNano {
			t.Fatalf("revision %d: read %+v, wrote %+v", got.Revision, got, want)
		}
		mustEqual(t, fmt.Sprintf("revision %d object", got.Revision), got.Object, want.Object)
		mustEqual(t, fmt.Sprintf("revision %d prev", got.Revision), got.Prev, want.Prev)
	}
}

func TestReadBlocksAndTimesOut(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	// A read timeout far shorter than the BLOCK: go-redis must extend it for XREAD.
	b := newBackend(t, Options{URL: srv.URL() + "?read_timeout=100ms"})
	ctx := ctxT(t)

	// Nothing written yet: after 0 waits, then returns empty.
	rctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	t0 := time.Now()
	evs, err := b.Read(rctx, pods, 0, 10)
	cancel()
	if err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Read on an empty type: %v, %v; want an empty slice", evs, err)
	}
	if d := time.Since(t0); d < 350*time.Millisecond || d > 2*time.Second {
		t.Fatalf("Read returned after %v, want about 400ms", d)
	}

	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != nil {
		t.Fatal(err)
	}
	// A waiting Read returns the write as soon as it is committed.
	type result struct {
		evs []backend.Event
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		evs, err := b.Read(rctx, pods, 1, 10)
		done <- result{evs, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Read returned before the write: %v %v", r.evs, r.err)
	default:
	}
	wrote := time.Now()
	if _, err := b.Create(ctx, pods, object("ns", "b", "v", "u")); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.evs) != 1 || r.evs[0].Revision != 2 || r.evs[0].Object.Name != "b" {
		t.Fatalf("blocked Read: %+v %v", r.evs, r.err)
	}
	if d := r.at.Sub(wrote); d > time.Second {
		t.Fatalf("blocked Read returned %v after the write", d)
	}

	// No write: empty after the deadline, longer than the client's read timeout.
	rctx, cancel = context.WithTimeout(ctx, 700*time.Millisecond)
	t0 = time.Now()
	evs, err = b.Read(rctx, pods, 2, 10)
	cancel()
	if err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Read with nothing new: %v, %v; want an empty slice", evs, err)
	}
	if d := time.Since(t0); d < 650*time.Millisecond || d > 2*time.Second {
		t.Fatalf("Read returned after %v, want about 700ms", d)
	}

	// Cancellation ends a wait at once with ctx.Err().
	cctx, ccancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, ccancel)
	t0 = time.Now()
	if _, err := b.Read(cctx, pods, 2, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Read: %v, want context.Canceled", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("cancelled Read returned after %v", d)
	}
	// The backend still works (the abandoned XREAD finishes on its own).
	if evs, err := b.Read(ctx, pods, 0, 10); err != nil || len(evs) != 2 {
		t.Fatalf("Read after a cancelled Read: %v %v", evs, err)
	}
}

func TestCompact(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	for i := range 10 {
		if _, err := b.Create(ctx, pods, object("ns", fmt.Sprint(i), "v", "u")); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.Compact(ctx, pods, 4); err != nil || got != 4 {
		t.Fatalf("Compact(4) = %d, %v", got, err)
	}
	if _, err := b.Read(ctx, pods, 3, 10); !errors.Is(err, backend.ErrCompacted) {
		t.Fatalf("Read(3) after Compact(4): %v, want ErrCompacted", err)
	}
	if _, err := b.Read(ctx, pods, 0, 10); !errors.Is(err, backend.ErrCompacted) {
		t.Fatalf("Read(0) after Compact(4): %v, want ErrCompacted", err)
	}
	evs, err := b.Read(ctx, pods, 4, 100)
	if err != nil || len(evs) != 6 || evs[0].Revision != 5 || evs[5].Revision != 10 {
		t.Fatalf("Read(4): %d events, %v", len(evs), err)
	}
	if got, err := b.Compact(ctx, pods, 2); err != nil || got != 4 {
		t.Fatalf("Compact(2) after Compact(4) = %d, %v; compaction went backwards", got, err)
	}
	snap, err := b.Snapshot(ctx, pods)
	if err != nil || snap.Compacted != 4 || snap.Revision != 10 || len(snap.Events) != 6 || snap.Events[0].Revision != 5 || len(snap.Objects) != 10 {
		t.Fatalf("snapshot after Compact(4): %+v %v", snap, err)
	}
	if got, err := b.Compact(ctx, pods, 100); err != nil || got != 10 {
		t.Fatalf("Compact(100) at revision 10 = %d, %v; want 10", got, err)
	}
	if cur, comp, err := b.Revision(ctx, pods); err != nil || cur != 10 || comp != 10 {
		t.Fatalf("Revision = %d, %d, %v", cur, comp, err)
	}
	if n, err := b.client.XLen(ctx, b.mustKeys(t, pods).log).Result(); err != nil || n != 0 {
		t.Fatalf("log length after full compaction = %d, %v", n, err)
	}
	// Reading at the compacted revision is allowed: it waits for the next write.
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	evs, err = b.Read(rctx, pods, 10, 10)
	cancel()
	if err != nil || len(evs) != 0 {
		t.Fatalf("Read(10) at compacted 10: %v %v", evs, err)
	}
	if _, err := b.Update(ctx, pods, object("ns", "1", "v2", ""), nil); err != nil {
		t.Fatal(err)
	}
	evs, err = b.Read(ctx, pods, 10, 10)
	if err != nil || len(evs) != 1 || evs[0].Revision != 11 || evs[0].Prev.ResourceVersion != 2 {
		t.Fatalf("Read(10) after a write: %+v %v", evs, err)
	}
	// Compacting an unwritten type creates nothing.
	if got, err := b.Compact(ctx, deployments, 5); err != nil || got != 0 {
		t.Fatalf("Compact of an unwritten type = %d, %v", got, err)
	}
	if types, err := b.Types(ctx); err != nil || len(types) != 1 {
		t.Fatalf("Types = %v, %v", types, err)
	}
}

func TestRewound(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	for i := range 3 {
		if _, err := b.Create(ctx, pods, object("ns", fmt.Sprint(i), "v", "u")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int64{1, 3} {
		if _, err := b.Read(ctx, pods, after, 10); !errors.Is(err, backend.ErrRewound) {
			t.Fatalf("Read(%d) after FLUSHALL: %v, want ErrRewound", after, err)
		}
	}
}

func (b *Backend) mustKeys(t testing.TB, rt *storagev1.ResourceType) *typeKeys {
	t.Helper()
	k, err := b.keys(rt)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyNamesShareHashTag(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	for _, rt := range []*storagev1.ResourceType{pods, deployments} {
		if _, err := b.Create(ctx, rt, object("ns", "a", "v", "u")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Compact(ctx, rt, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Secret(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := b.client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	p := naming.RedisKeyPrefix
	want := []string{
		p + ":continue-secret",
		p + ":{deployments.apps}:compacted",
		p + ":{deployments.apps}:log",
		p + ":{deployments.apps}:objs",
		p + ":{deployments.apps}:rev",
		p + ":{pods}:compacted",
		p + ":{pods}:log",
		p + ":{pods}:objs",
		p + ":{pods}:rev",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys:\n got  %q\n want %q", keys, want)
	}
	for _, k := range keys[1:] {
		tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
		if tag != "pods" && tag != "deployments.apps" {
			t.Fatalf("key %q has hash tag %q", k, tag)
		}
	}
	// The stored value starts with the revision and the uid; its payload has neither.
	v, err := b.client.HGet(ctx, p+":{pods}:objs", "ns/a").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "1|1|u") {
		t.Fatalf("stored value %q", v)
	}
	var payload storagev1.Object
	if err := proto.Unmarshal([]byte(v[len("1|1|u"):]), &payload); err != nil || payload.ResourceVersion != 0 || payload.Uid != "" || payload.Name != "a" {
		t.Fatalf("stored payload %v, %v", &payload, err)
	}
	if typ, err := b.client.Type(ctx, p+":{pods}:log").Result(); err != nil || typ != "stream" {
		t.Fatalf("log key type %q, %v", typ, err)
	}
	ids, err := b.client.XRange(ctx, p+":{deployments.apps}:log", "-", "+").Result()
	if err != nil || len(ids) != 0 {
		t.Fatalf("compacted log holds %v, %v", ids, err)
	}
	if _, err := b.Create(ctx, deployments, object("ns", "b", "v", "u")); err != nil {
		t.Fatal(err)
	}
	ids, err = b.client.XRange(ctx, p+":{deployments.apps}:log", "-", "+").Result()
	if err != nil || len(ids) != 1 || ids[0].ID != "2-0" {
		t.Fatalf("log entries %v, %v", ids, err)
	}
}

func TestPassword(t *testing.T) {
	const pw = "s3cret-Passw0rd"
	srv := redistest.Start(t, redistest.Options{Password: pw})
	ctx := ctxT(t)

	b := newBackend(t, Options{URL: srv.URL()}) // password in the URL
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != nil {
		t.Fatal(err)
	}
	bare := "redis://" + srv.Addr() + "/0"
	b2 := newBackend(t, Options{URL: bare, Password: pw}) // Options.Password
	if cur, _, err := b2.Revision(ctx, pods); err != nil || cur != 1 {
		t.Fatalf("Revision via Options.Password = %d, %v", cur, err)
	}
	b3 := newBackend(t, Options{URL: "redis://:wrong@" + srv.Addr() + "/0", Password: pw}) // Password overrides the URL's
	if err := b3.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	for _, o := range []Options{{URL: bare}, {URL: bare, Password: "wrong-" + pw}} {
		_, err := New(ctx, o)
		if err == nil {
			t.Fatalf("New(%q) without the right password succeeded", o.URL)
		}
		if errors.Is(err, backend.ErrUnavailable) || strings.Contains(err.Error(), pw) {
			t.Fatalf("New without the right password: %v", err)
		}
	}
	if _, err := New(ctx, Options{URL: "redis://:" + pw + "@" + srv.Addr() + ":bad/0"}); err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("New with a malformed URL: %v", err)
	}
}

func TestAcknowledgedWritesSurviveKill(t *testing.T) {
	srv, b := start(t, redistest.Options{AppendFsync: "always"})
	ctx := ctxT(t)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := b.Create(ctx, pods, object("ns", fmt.Sprintf("%d-%d", w, i), "v", "u")); err != nil {
					t.Error(err)
					return
				}
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := srv.Restart(true); err != nil {
		t.Fatal(err)
	}
	// The backend's pooled connections died with the server; the next call still works.
	snap, err := b.Snapshot(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != acked.Load() || int64(len(snap.Objects)) != acked.Load() || int64(len(snap.Events)) != acked.Load() {
		t.Fatalf("after SIGKILL: revision %d, %d objects, %d events; %d writes were acknowledged",
			snap.Revision, len(snap.Objects), len(snap.Events), acked.Load())
	}
	if ev, err := b.Create(ctx, pods, object("ns", "after", "v", "u")); err != nil || ev.Revision != acked.Load()+1 {
		t.Fatalf("write after restart: %+v %v", ev, err)
	}
}

func TestUnavailable(t *testing.T) {
	const pw = "unavailable-Passw0rd"
	srv := redistest.Start(t, redistest.Options{Password: pw})
	b := newBackend(t, Options{URL: srv.URL()})
	ctx := ctxT(t)
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(false); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, took time.Duration) {
		t.Helper()
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("%s with Redis stopped: %v, want ErrUnavailable", what, err)
		}
		if !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), pw) {
			t.Fatalf("%s: error message %q", what, err)
		}
		if took > 2*time.Second {
			t.Fatalf("%s took %v to fail", what, took)
		}
	}
	t0 := time.Now()
	_, err := b.Create(ctx, pods, object("ns", "b", "v", "u"))
	check("Create", err, time.Since(t0))
	t0 = time.Now()
	_, err = b.Update(ctx, pods, object("ns", "a", "v2", ""), nil)
	check("Update", err, time.Since(t0))
	t0 = time.Now()
	_, err = b.Read(ctx, pods, 0, 10)
	check("Read", err, time.Since(t0))
	t0 = time.Now()
	_, _, err = b.Revision(ctx, pods)
	check("Revision", err, time.Since(t0))
	t0 = time.Now()
	_, err = b.Snapshot(ctx, pods)
	check("Snapshot", err, time.Since(t0))
	t0 = time.Now()
	check("Ping", b.Ping(ctx), time.Since(t0))
	// Enough failed dials to make go-redis stop dialing until a background probe succeeds.
	for range 2 * defaultPoolSize {
		if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Ping with Redis stopped: %v", err)
		}
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	for {
		ev, err := b.Create(ctx, pods, object("ns", "b", "v", "u"))
		if err == nil {
			if ev.Revision != 2 {
				t.Fatalf("write after restart has revision %d, want 2", ev.Revision)
			}
			break
		}
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("write after restart: %v", err)
		}
		if time.Since(t0) > 5*time.Second {
			t.Fatalf("writes still fail %v after Redis came back: %v", time.Since(t0), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first write succeeded %v after Redis came back", time.Since(t0))
	if _, err := b.Update(ctx, pods, object("ns", "b", "v2", ""), nil); err != nil {
		t.Fatal(err)
	}
}

func TestNewFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t0 := time.Now()
	_, err = New(context.Background(), Options{URL: "redis://" + addr + "/0"})
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("New against a closed port: %v, want ErrUnavailable", err)
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("New took %v to fail", d)
	}
	if _, err := New(context.Background(), Options{URL: "http://" + addr}); err == nil {
		t.Fatal("New accepted an http URL")
	}
}

func TestSecretShared(t *testing.T) {
	srv, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	b2 := newBackend(t, Options{URL: srv.URL()})
	s1, err := b.Secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b2.Secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := b.Secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != 32 || string(s1) != string(s2) || string(s1) != string(s3) {
		t.Fatalf("secrets differ or have the wrong length: %x %x %x", s1, s2, s3)
	}
	if string(s1) == string(make([]byte, 32)) {
		t.Fatal("secret is all zeros")
	}
}

func TestTypes(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	if types, err := b.Types(ctx); err != nil || len(types) != 0 {
		t.Fatalf("Types on an empty Redis = %v, %v", types, err)
	}
	for _, rt := range []*storagev1.ResourceType{pods, deployments, roles} {
		if _, err := b.Create(ctx, rt, object("ns", "a", "v", "u")); err != nil {
			t.Fatal(err)
		}
	}
	// A failed write does not make a type exist.
	if _, err := b.Update(ctx, &storagev1.ResourceType{Resource: "secrets"}, object("ns", "a", "v", ""), nil); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal(err)
	}
	types, err := b.Types(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(types))
	for _, rt := range types {
		got = append(got, rt.Group+"|"+rt.Resource)
	}
	slices.Sort(got)
	want := []string{"|pods", "apps|deployments", "rbac." + naming.GroupSuffix + "|roles"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Types = %q, want %q", got, want)
	}
}

func TestEncoding(t *testing.T) {
	o := object("ns", "a", "value", "uid|with|bars")
	o.ResourceVersion = 42
	payload, err := appendPayload([]byte("prefix"), o)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload[:6]) != "prefix" {
		t.Fatal("appendPayload overwrote dst")
	}
	var p storagev1.Object
	if err := proto.Unmarshal(payload[6:], &p); err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(o)
	want.ResourceVersion, want.Uid = 0, ""
	mustEqual(t, "payload", &p, want)

	v := fmt.Sprintf("7|%d|%s%s", len(o.Uid), o.Uid, payload[6:])
	got, err := decodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want.ResourceVersion, want.Uid = 7, o.Uid
	mustEqual(t, "decoded", got, want)
	for _, bad := range []string{"", "x", "1|", "1|5|ab", "a|0|", "1|-1|"} {
		if _, err := decodeValue(bad); err == nil {
			t.Fatalf("decodeValue(%q) succeeded", bad)
		}
	}
}

func TestUIDWithSeparator(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx := ctxT(t)
	uid := "a|b|c"
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", uid)); err != nil {
		t.Fatal(err)
	}
	ev, err := b.Update(ctx, pods, object("ns", "a", "v2", ""), &storagev1.Preconditions{Uid: uid, ResourceVersion: 1})
	if err != nil || ev.Object.Uid != uid || ev.Prev.Uid != uid {
		t.Fatalf("update: %+v %v", ev, err)
	}
	ev, err = b.Delete(ctx, pods, "ns", "a", &storagev1.Preconditions{Uid: uid})
	if err != nil || ev.Object.Uid != uid {
		t.Fatalf("delete: %+v %v", ev, err)
	}
}

// BenchmarkUpdateCAS measures compare-and-swap updates with 16 concurrent writers, each on its
// own key.
func BenchmarkUpdateCAS(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	be := newBackend(b, Options{URL: srv.URL()})
	benchUpdates(b, be, 16)
}

// benchUpdates measures compare-and-swap updates of 512-byte objects by concurrent writers,
// each on an object of its own.
func benchUpdates(b *testing.B, be *Backend, writers int) {
	ctx := context.Background()
	value := []byte(strings.Repeat("x", 512))
	var next atomic.Int64
	var wg sync.WaitGroup
	work := make(chan struct{}, 1024)
	revs := make([]int64, writers)
	for w := range writers {
		ev, err := be.Create(ctx, pods, &storagev1.Object{Namespace: "ns", Name: fmt.Sprint(w), Value: value, Uid: fmt.Sprint("uid-", w)})
		if err != nil {
			b.Fatal(err)
		}
		revs[w] = ev.Revision
	}
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := &storagev1.Object{Namespace: "ns", Name: fmt.Sprint(w), Value: value, Labels: map[string]string{"app": "x"}}
			rv := revs[w]
			for range work {
				ev, err := be.Update(ctx, pods, obj, &storagev1.Preconditions{ResourceVersion: rv})
				if err != nil {
					b.Error(err)
					return
				}
				rv = ev.Revision
				next.Add(1)
			}
		}()
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "updates/s")
}

func TestClientOptions(t *testing.T) {
	ro, err := clientOptions(Options{URL: "redis://:from-url@127.0.0.1:6379/2"})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Password != "from-url" || ro.DB != 2 || ro.PoolSize != defaultPoolSize || ro.TLSConfig != nil ||
		ro.MaxRetries != -1 || ro.DialTimeout != time.Second {
		t.Fatalf("options from a plain URL: %+v", ro)
	}
	tc := &tls.Config{ServerName: "redis.example", MinVersion: tls.VersionTLS13}
	ro, err = clientOptions(Options{URL: "rediss://:from-url@127.0.0.1:6380", Password: "override", TLSConfig: tc, PoolSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Password != "override" || ro.TLSConfig != tc || ro.PoolSize != 7 {
		t.Fatalf("overridden options: %+v", ro)
	}
	ro, err = clientOptions(Options{URL: "rediss://127.0.0.1:6380"})
	if err != nil || ro.TLSConfig == nil {
		t.Fatalf("rediss:// without TLSConfig: %+v, %v", ro, err)
	}
	ro, err = clientOptions(Options{URL: "redis://127.0.0.1:6379?dial_timeout=3s"})
	if err != nil || ro.DialTimeout != 3*time.Second {
		t.Fatalf("dial_timeout from the URL: %+v, %v", ro, err)
	}
	for _, u := range []string{"redis://:pw-in-url@host:port/0", "redis://:pw-in-url@[::1/0", "ftp://:pw-in-url@host"} {
		if _, err := clientOptions(Options{URL: u}); err == nil || strings.Contains(err.Error(), "pw-in-url") {
			t.Fatalf("clientOptions(%q): %v", u, err)
		}
	}
}

func TestDoneContext(t *testing.T) {
	_, b := start(t, redistest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Read(ctx, pods, 0, 10); err != context.Canceled {
		t.Fatalf("Read with a cancelled context: %v", err)
	}
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != context.Canceled {
		t.Fatalf("Create with a cancelled context: %v", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if _, err := b.Update(dctx, pods, object("ns", "a", "v", "u"), nil); err != context.DeadlineExceeded {
		t.Fatalf("Update with an expired context: %v", err)
	}
	if _, _, err := b.Revision(dctx, pods); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Revision with an expired context: %v", err)
	}
	if cur, _, err := b.Revision(context.Background(), pods); err != nil || cur != 0 {
		t.Fatalf("Revision = %d, %v: a write with a done context was committed", cur, err)
	}
}

// TestBlockedReadersDoNotStarveWrites: every resource type in use has a log reader blocked in
// XREAD for seconds at a time; with more types than pooled connections, writes must still go
// through at once.
func TestBlockedReadersDoNotStarveWrites(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	b := newBackend(t, Options{URL: srv.URL(), PoolSize: 2})
	const idleTypes = 10
	var wg sync.WaitGroup
	for i := range idleTypes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, _ = b.Read(ctx, &storagev1.ResourceType{Resource: fmt.Sprint("idle", i)}, 0, 10)
		}()
	}
	time.Sleep(300 * time.Millisecond) // the readers are blocked in XREAD now
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.Create(ctx, pods, object("ns", "a", "v", "u")); err != nil {
		t.Fatalf("write while %d readers block: %v", idleTypes, err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("write waited %v behind blocked readers", took)
	}
	wg.Wait()
}
