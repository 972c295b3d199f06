package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// fileCacheState is what Linux's cachestat(2) (Linux 6.5) reports for a whole file: pages in the
// page cache, of which dirty (written, not yet on the device) and under writeback.
type fileCacheState struct {
	Cache, Dirty, Writeback, Evicted, RecentlyEvicted uint64
}

const sysCachestat = 451 // the same number on every architecture (the unified syscall table)

var errNoCachestat = errors.New("the kernel has no cachestat(2) (Linux 6.5 or later)")

func cachestat(path string) (fileCacheState, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileCacheState{}, err
	}
	defer f.Close()
	rng := [2]uint64{0, 0} // offset 0, length 0: the whole file
	var st fileCacheState
	_, _, errno := syscall.Syscall6(sysCachestat, f.Fd(), uintptr(unsafe.Pointer(&rng)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
	if errno == syscall.ENOSYS {
		return st, errNoCachestat
	}
	if errno != 0 {
		return st, errno
	}
	return st, nil
}

// TestAcknowledgedWriteIsOnDisk: when Create, Update or Delete returns, nothing of the file is
// left only in the page cache (no dirty page, none under writeback): the write's transaction was
// written and fdatasync'ed before it was acknowledged, so a power loss or kernel crash right after
// the acknowledgement keeps it. The check is the kernel's own view of the file's pages, so it
// holds for any way of committing; the control with bbolt's NoSync (acknowledging before the
// sync) shows that it sees an acknowledgement that comes too early.
func TestAcknowledgedWriteIsOnDisk(t *testing.T) {
	ctx := context.Background()
	dirtyAfter := func(t *testing.T, path string) uint64 {
		t.Helper()
		st, err := cachestat(path)
		if errors.Is(err, errNoCachestat) {
			t.Skip(err) // the check needs the kernel's view; the other tests still run
		}
		if err != nil {
			t.Fatal(err)
		}
		return st.Dirty + st.Writeback
	}
	writes := func(b *Backend, i int) []func() error {
		name := fmt.Sprint("o", i)
		return []func() error{
			func() error { _, err := b.Create(ctx, pods, obj("ns", name, "v1", "")); return err },
			func() error { _, err := b.Update(ctx, pods, obj("ns", name, "v2", ""), nil); return err },
			func() error { _, err := b.Delete(ctx, pods, "ns", name, nil); return err },
			func() error { _, err := b.Create(ctx, pods, obj("ns", name, "v3", "")); return err },
		}
	}
	// What must be on disk when a write is acknowledged: the log's segments with the
	// write-ahead log (bbolt's file is synced by the checkpoints, in the background), else
	// bbolt's file.
	ackedFiles := func(t *testing.T, b *Backend, path string, mode commitMode) []string {
		t.Helper()
		if mode != walCommit && mode != walChurn {
			return []string{path}
		}
		seqs, err := b.wal.segments()
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, seq := range seqs {
			files = append(files, b.wal.segPath(seq))
		}
		return files
	}
	dirtyAcked := func(t *testing.T, b *Backend, path string, mode commitMode) uint64 {
		t.Helper()
		var d uint64
		for _, f := range ackedFiles(t, b, path, mode) {
			st, err := cachestat(f)
			switch {
			case errors.Is(err, os.ErrNotExist):
				continue // a segment deleted by a checkpoint meanwhile
			case errors.Is(err, errNoCachestat):
				t.Skip(err)
			case err != nil:
				t.Fatal(err)
			}
			d += st.Dirty + st.Writeback
		}
		return d
	}
	modes(t, func(t *testing.T, mode commitMode) {
		path := filepath.Join(t.TempDir(), "storage.db")
		b := open(t, path, mode)
		for i := 0; i < 20; i++ {
			for j, w := range writes(b, i) {
				if err := w(); err != nil {
					t.Fatal(err)
				}
				if d := dirtyAcked(t, b, path, mode); d != 0 {
					t.Fatalf("write %d.%d acknowledged with %d pages of the file not yet on disk", i, j, d)
				}
			}
		}
		// Concurrent writers sharing transactions: once every write has been acknowledged
		// (none in flight), none of them is only in memory.
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					for _, write := range writes(b, 100*(w+1)+i) {
						if err := write(); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if d := dirtyAcked(t, b, path, mode); d != 0 {
			t.Fatalf("16 writers' writes acknowledged with %d pages of the file not yet on disk", d)
		}
	})
	t.Run("control-wal-nosync", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "storage.db")
		b := open(t, path, walCommit)
		syncLog = func(*os.File) error { return nil }
		defer func() { syncLog = fdatasync }()
		var seen uint64
		for i := 0; i < 20 && seen == 0; i++ {
			for _, w := range writes(b, i) {
				if err := w(); err != nil {
					t.Fatal(err)
				}
				seen += dirtyAcked(t, b, path, walCommit)
			}
		}
		if seen == 0 {
			t.Fatal("writes logged without fdatasync left no dirty page: the check cannot tell")
		}
	})
	t.Run("control-nosync", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "storage.db")
		b := open(t, path, groupCommit)
		b.db.NoSync = true
		var seen uint64
		for i := 0; i < 20 && seen == 0; i++ {
			for _, w := range writes(b, i) {
				if err := w(); err != nil {
					t.Fatal(err)
				}
				seen += dirtyAfter(t, path)
			}
		}
		if seen == 0 {
			t.Fatal("writes acknowledged without fdatasync left no dirty page: the check cannot tell")
		}
	})
}
