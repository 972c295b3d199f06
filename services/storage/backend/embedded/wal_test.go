package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"platform.io/services/storage/backend"
)

// noCheckpoints turns the checkpointer's timer off for backends opened during the test, so that
// what a test writes stays in the log until it checkpoints itself.
func noCheckpoints(t *testing.T) {
	old := checkpointInterval
	checkpointInterval = time.Hour
	t.Cleanup(func() { checkpointInterval = old })
}

// crash abandons b as a killed process would: no checkpoint, the log's file and bbolt's closed
// as they are. Close is a no-op afterwards.
func crash(t *testing.T, b *Backend) {
	t.Helper()
	b.closing.Do(func() {
		close(b.closed)
		close(b.wal.stop)
		<-b.wal.done
		b.wal.logMu.Lock()
		b.wal.closed = true
		b.wal.seg.Close()
		b.wal.logMu.Unlock()
		if err := b.db.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// state is everything a reader can see of the test's types.
func state(t *testing.T, b *Backend) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	types, err := b.Types(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range types {
		s, err := b.Snapshot(ctx, rt)
		if err != nil {
			t.Fatal(err)
		}
		cur, compacted, err := b.Revision(ctx, rt)
		if err != nil {
			t.Fatal(err)
		}
		if cur != s.Revision || compacted != s.Compacted {
			t.Fatalf("%s: Revision %d/%d, Snapshot %d/%d", rt, cur, compacted, s.Revision, s.Compacted)
		}
		evs, err := b.Read(ctx, rt, compacted, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(s.Events) {
			t.Fatalf("%s: Read has %d events, Snapshot %d", rt, len(evs), len(s.Events))
		}
		fmt.Fprintf(&sb, "type %s/%s rev %d compacted %d\n", rt.Group, rt.Resource, s.Revision, s.Compacted)
		for _, o := range s.Objects {
			fmt.Fprintf(&sb, "  obj %s/%s rv %d uid %s value %q\n", o.Namespace, o.Name, o.ResourceVersion, o.Uid, o.Value)
		}
		for i, ev := range s.Events {
			if !eqEvent(ev, evs[i]) {
				t.Fatalf("%s: Read event %v, Snapshot %v", rt, evs[i], ev)
			}
			if want := s.Compacted + int64(i) + 1; ev.Revision != want {
				t.Fatalf("%s: event %d has revision %d, want %d (dense)", rt, i, ev.Revision, want)
			}
			fmt.Fprintf(&sb, "  ev %d type %d obj %s/%s %q prev %v t %d\n", ev.Revision, ev.Type, ev.Object.GetNamespace(), ev.Object.GetName(), ev.Object.GetValue(), ev.Prev != nil, ev.UnixNano)
		}
	}
	return sb.String()
}

// writeSome makes creates, updates and deletes of pods and deployments, tagged by round.
func writeSome(t *testing.T, b *Backend, round int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		if _, err := b.Create(ctx, pods, obj("ns", fmt.Sprint("p", round, "-", i), "v1", fmt.Sprint("u", round, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Update(ctx, pods, obj("ns", fmt.Sprint("p", round, "-1"), "v2", ""), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete(ctx, pods, "ns", fmt.Sprint("p", round, "-2"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, deployments, obj("ns", fmt.Sprint("d", round), "", "")); err != nil {
		t.Fatal(err)
	}
	if round > 0 {
		// Keys written before the last checkpoint, changed in the log.
		if _, err := b.Update(ctx, pods, obj("ns", fmt.Sprint("p", round-1, "-3"), "v3", ""), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Delete(ctx, pods, "ns", fmt.Sprint("p", round-1, "-4"), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALCrashReplay: writes acknowledged and never checkpointed survive a crash; so do writes
// checkpointed whose segment was not deleted (the crash came between the two), and readers see
// the same state before the crash, after reopening, and after the next checkpoint.
func TestWALCrashReplay(t *testing.T) {
	noCheckpoints(t)
	ctx := context.Background()
	path, b := freshStore(t)
	writeSome(t, b, 0)
	// Keep the segment a checkpoint is about to retire.
	kept := b.wal.segPath(b.wal.segSeq)
	data, err := os.ReadFile(kept)
	if err != nil || len(data) == 0 {
		t.Fatalf("segment %s: %d bytes, %v", kept, len(data), err)
	}
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Fatalf("checkpointed segment still there: %v", err)
	}
	if n := b.wal.ov.count; n != 0 {
		t.Fatalf("%d events left in the overlay after a checkpoint", n)
	}
	writeSome(t, b, 1)
	if _, err := b.Create(ctx, widgets, obj("", "w", "", "")); err != nil { // a type only the log has
		t.Fatal(err)
	}
	before := state(t, b)
	crash(t, b)
	if err := os.WriteFile(kept, data, 0o600); err != nil {
		t.Fatal(err)
	}

	b = open(t, path, walCommit)
	if after := state(t, b); after != before {
		t.Fatalf("after the crash:\n%s\nbefore:\n%s", after, before)
	}
	seqs, err := b.wal.segments()
	if err != nil || len(seqs) != 1 || seqs[0] != b.wal.segSeq {
		t.Fatalf("segments after replay %v (current %d), %v", seqs, b.wal.segSeq, err)
	}
	ev, err := b.Create(ctx, pods, obj("ns", "next", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(6+2+6+2+2) + 1; ev.Revision != want {
		t.Fatalf("create after replay got revision %d, want %d", ev.Revision, want)
	}
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := state(t, b); !strings.Contains(got, "obj ns/next") || !strings.Contains(got, fmt.Sprintf("type /pods rev %d ", ev.Revision)) {
		t.Fatalf("after the next checkpoint:\n%s", got)
	}
}

// freshStore opens a store at a new path.
func freshStore(t *testing.T) (string, *Backend) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "storage.db")
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// crashedStore opens a store at a new path, creates pods 0..n-1, records what readers see and
// crashes it: it returns the path, the log's last segment and that state.
func crashedStore(t *testing.T, n int) (path, seg, before string) {
	t.Helper()
	path, b := freshStore(t)
	for i := 0; i < n; i++ {
		if _, err := b.Create(context.Background(), pods, obj("ns", fmt.Sprint(i), "", "")); err != nil {
			t.Fatal(err)
		}
	}
	before = state(t, b)
	seg = b.wal.segPath(b.wal.segSeq)
	crash(t, b)
	return path, seg, before
}

// segmentSeq is the sequence number of the segment file seg.
func segmentSeq(t *testing.T, seg string) uint64 {
	t.Helper()
	seq, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(seg), ".wal"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// nextSegment names the segment after seg.
func nextSegment(t *testing.T, seg string) string {
	t.Helper()
	return filepath.Join(filepath.Dir(seg), fmt.Sprintf("%016x.wal", segmentSeq(t, seg)+1))
}

// recordsEnd reads segment seg and returns its bytes and the offset of its end mark (where the
// next append would go).
func recordsEnd(t *testing.T, seg string) ([]byte, int) {
	t.Helper()
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	seq, off := segmentSeq(t, seg), 0
	for {
		_, _, _, n, err := readRecord(data[off:], seq)
		if errors.Is(err, errEnd) {
			return data, off
		}
		if err != nil {
			t.Fatalf("segment %s at %d: %v", seg, off, err)
		}
		off += n
	}
}

// TestWALTornTail: a record cut short at the end of the last segment (a group whose fdatasync
// never returned) is dropped and the segment cut to the records before it; a bad record in an
// earlier segment fails Open rather than losing acknowledged writes.
func TestWALTornTail(t *testing.T) {
	noCheckpoints(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tail func(frame []byte) []byte
	}{
		{"half a header", func(f []byte) []byte { return f[:5] }},
		{"half a payload", func(f []byte) []byte { return f[:len(f)-3] }},
		{"bad checksum", func(f []byte) []byte { f = append([]byte(nil), f...); f[len(f)-1] ^= 0xff; return f }},
		{"zeros", func(f []byte) []byte { return make([]byte, 4096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, seg, before := crashedStore(t, 3)
			data, end := recordsEnd(t, seg)
			// The torn group was being written over the end mark.
			frame := appendRecord(nil, segmentSeq(t, seg), "pods", pods, pendingEvent{rev: 4, key: backend.Key("ns", "torn"), entry: []byte{8, 1}})
			if err := os.WriteFile(seg, append(data[:end:end], tc.tail(frame)...), 0o600); err != nil {
				t.Fatal(err)
			}
			b := open(t, path, walCommit)
			if after := state(t, b); after != before {
				t.Fatalf("after a torn tail:\n%s\nbefore:\n%s", after, before)
			}
			if ev, err := b.Create(ctx, pods, obj("ns", "3", "", "")); err != nil || ev.Revision != 4 {
				t.Fatalf("create after replay: %v, %v", ev, err)
			}
		})
	}

	// A crash right after a checkpoint started the next segment, while the current one's last
	// group was being written: the next segment is a new empty file, or the spare renamed, which
	// holds records of its earlier life checksummed for another sequence number.
	for _, next := range []struct {
		name    string
		content func(seq uint64) []byte
	}{
		{"new empty", func(uint64) []byte { return nil }},
		{"reused", func(seq uint64) []byte {
			return appendRecord(nil, seq-2, "pods", pods, pendingEvent{rev: 1, key: backend.Key("ns", "old"), entry: []byte{8, 1}})
		}},
	} {
		t.Run("torn tail, then a "+next.name+" segment", func(t *testing.T) {
			path, seg, before := crashedStore(t, 1)
			data, end := recordsEnd(t, seg)
			if err := os.WriteFile(seg, append(data[:end:end], 9, 0, 0), 0o600); err != nil {
				t.Fatal(err)
			}
			later := nextSegment(t, seg)
			if err := os.WriteFile(later, next.content(segmentSeq(t, later)), 0o600); err != nil {
				t.Fatal(err)
			}
			b := open(t, path, walCommit)
			if after := state(t, b); after != before {
				t.Fatalf("after the crash:\n%s\nbefore:\n%s", after, before)
			}
		})
	}

	t.Run("corrupt earlier segment", func(t *testing.T) {
		path, seg, _ := crashedStore(t, 1)
		data, end := recordsEnd(t, seg)
		data[end-1] ^= 0xff // the last byte of the last record
		if err := os.WriteFile(seg, data, 0o600); err != nil {
			t.Fatal(err)
		}
		later := nextSegment(t, seg)
		next := appendRecord(nil, segmentSeq(t, later), "pods", pods, pendingEvent{rev: 2, key: backend.Key("ns", "b"), entry: []byte{8, 1}})
		if err := os.WriteFile(later, next, 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := Open(path, Options{}); err == nil {
			b.Close()
			t.Fatal("Open accepted a corrupt record in a segment that is not the last")
		} else if !strings.Contains(err.Error(), seg) {
			t.Fatalf("Open error %q does not name the segment", err)
		}
	})
}

// TestWALReusesSegments: a checkpoint keeps the newest retired segment as the spare, and the next
// one writes over the spare's blocks. Neither the records the reused file still holds past the end
// mark nor such a record where a torn group ends the log (the next revision, checksummed for the
// file's earlier sequence number) is replayed.
func TestWALReusesSegments(t *testing.T) {
	noCheckpoints(t)
	ctx := context.Background()
	path, b := freshStore(t)
	create := func(name string) int64 {
		t.Helper()
		ev, err := b.Create(ctx, pods, obj("ns", name, strings.Repeat("v", 200), ""))
		if err != nil {
			t.Fatal(err)
		}
		return ev.Revision
	}
	for i := range 50 {
		create(fmt.Sprint("a", i))
	}
	segA := b.wal.segPath(b.wal.segSeq)
	fiA, err := os.Stat(segA)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(b.wal.sparePath()); err != nil || !os.SameFile(fi, fiA) {
		t.Fatalf("the retired segment is not the spare: %v", err)
	}
	create("b")
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	segC := b.wal.segPath(b.wal.segSeq)
	if fi, err := os.Stat(segC); err != nil || !os.SameFile(fi, fiA) {
		t.Fatalf("the segment after the next checkpoint is not the spare's file: %v", err)
	}
	var last int64
	for i := range 3 {
		last = create(fmt.Sprint("c", i))
	}
	before := state(t, b)
	crash(t, b)

	data, end := recordsEnd(t, segC)
	if end >= len(data)-8 {
		t.Fatalf("the reused segment holds nothing past its end mark (%d of %d bytes)", end, len(data))
	}
	_, _, pe, _, err := readRecord(data, segmentSeq(t, segC))
	if err != nil {
		t.Fatal(err)
	}
	pe.rev, pe.key = last+1, backend.Key("ns", "stale")
	stale := appendRecord(nil, segmentSeq(t, segA), "pods", pods, pe)
	copy(data[end:], stale)
	if err := os.WriteFile(segC, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b = open(t, path, walCommit)
	if after := state(t, b); after != before {
		t.Fatalf("after replaying a reused segment:\n%s\nbefore:\n%s", after, before)
	}
	if got := create("next"); got != last+1 {
		t.Fatalf("create after replay got revision %d, want %d", got, last+1)
	}
}

// A retired segment larger than maxSpareBytes is deleted, not kept: the next segment is a new
// file.
func TestWALSpareIsBounded(t *testing.T) {
	noCheckpoints(t)
	old := maxSpareBytes
	maxSpareBytes = 1024
	t.Cleanup(func() { maxSpareBytes = old })
	_, b := freshStore(t)
	defer b.Close()
	for i := range 20 {
		if _, err := b.Create(context.Background(), pods, obj("ns", fmt.Sprint(i), strings.Repeat("v", 200), "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.wal.sparePath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a segment over the bound was kept as the spare: %v", err)
	}
	if seqs, err := b.wal.segments(); err != nil || len(seqs) != 1 {
		t.Fatalf("segments after the checkpoint: %v, %v", seqs, err)
	}
}

// TestWALReadsAcrossCheckpoint: with writes both in bbolt and in the log, Read pages through
// both without a gap, Snapshot merges keys changed or deleted in the log, and Types and Revision
// include a type only the log has.
func TestWALReadsAcrossCheckpoint(t *testing.T) {
	noCheckpoints(t)
	ctx := context.Background()
	b := newBackend(t, walCommit)
	writeSome(t, b, 0) // pods 1..8
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	writeSome(t, b, 1) // pods 9..18, two of them changing round 0's keys
	if _, err := b.Create(ctx, widgets, obj("", "w", "", "")); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for after := int64(0); after < 18; {
		evs, err := b.Read(ctx, pods, after, 3)
		if err != nil || len(evs) == 0 || len(evs) > 3 {
			t.Fatalf("Read(%d, 3) = %d events, %v", after, len(evs), err)
		}
		for _, ev := range evs {
			got = append(got, ev.Revision)
		}
		after = evs[len(evs)-1].Revision
	}
	for i, rev := range got {
		if rev != int64(i+1) {
			t.Fatalf("paged revisions %v", got)
		}
	}
	s, err := b.Snapshot(ctx, pods)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range s.Objects {
		names = append(names, fmt.Sprintf("%s=%s", o.Name, o.Value))
	}
	want := "p0-0=v1 p0-1=v2 p0-3=v3 p0-5=v1 p1-0=v1 p1-1=v2 p1-3=v1 p1-4=v1 p1-5=v1"
	if strings.Join(names, " ") != want || s.Revision != 18 || len(s.Events) != 18 {
		t.Fatalf("Snapshot: %v at %d with %d events, want %s at 18 with 18", names, s.Revision, len(s.Events), want)
	}
	if cur, _, err := b.Revision(ctx, widgets); err != nil || cur != 1 {
		t.Fatalf("Revision of a type only the log has: %d, %v", cur, err)
	}
	types, err := b.Types(ctx)
	if err != nil || len(types) != 3 {
		t.Fatalf("Types = %v, %v", types, err)
	}
	// Compact checkpoints first, so it can compact what only the log held.
	if c, err := b.Compact(ctx, pods, 15); err != nil || c != 15 {
		t.Fatalf("Compact(15) = %d, %v", c, err)
	}
	if evs, err := b.Read(ctx, pods, 15, 0); err != nil || len(evs) != 3 {
		t.Fatalf("Read after Compact: %d events, %v", len(evs), err)
	}
}

// TestWALSyncFailure: a log sync that fails fails the group's writes as unavailable, and every
// later write, since what the file holds is no longer known (as etcd stops on a failed WAL sync);
// Ping reports it, so readiness fails and the process is restarted.
func TestWALSyncFailure(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, walCommit)
	if _, err := b.Create(ctx, pods, obj("ns", "a", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	syncLog = func(*os.File) error { return syscall.EIO }
	_, err := b.Create(ctx, pods, obj("ns", "b", "", ""))
	syncLog = fdatasync
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Create with a failing sync: %v", err)
	}
	if _, err := b.Create(ctx, pods, obj("ns", "c", "", "")); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Create after a failed sync: %v", err)
	}
	if err := b.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("Ping after a failed sync: %v", err)
	}
	// Readers still see what was acknowledged, and nothing else.
	if s, err := b.Snapshot(ctx, pods); err != nil || len(s.Objects) != 1 || s.Revision != 1 {
		t.Fatalf("Snapshot after a failed sync: %v, %v", s, err)
	}
	// Checkpoints go on without starting a segment after the failed one, so that its possibly
	// torn end stays the end of the log; a restart replays it.
	seg := b.wal.segPath(b.wal.segSeq)
	if err := b.wal.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if cur := b.wal.segPath(b.wal.segSeq); cur != seg {
		t.Fatalf("a checkpoint after the failure moved the log from %s to %s", seg, cur)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(t, b.wal.dir[:len(b.wal.dir)-len(".wal")], walCommit)
	s, err := b.Snapshot(ctx, pods)
	if err != nil || len(s.Objects) < 1 || s.Objects[0].Name != "a" {
		t.Fatalf("after restarting: %v, %v", s, err)
	}
	if _, err := b.Create(ctx, pods, obj("ns", "d", "", "")); err != nil {
		t.Fatalf("Create after restarting: %v", err)
	}
}
