package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A read gets a revision not older than every write acknowledged before it asked, even when it
// arrives while another read's call is in flight (that call may have read the revision before
// the write): the fake backend reads its revision when a call starts and answers 200 µs later,
// while writers keep acknowledging. Concurrent reads share calls, and never more than one is in
// flight.
func TestRevisionBatcherLinearizable(t *testing.T) {
	var committed, calls, inFlight, maxInFlight atomic.Int64
	b := &revisionBatcher{base: context.Background(), timeout: time.Second, fetch: func(ctx context.Context) (int64, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		calls.Add(1)
		rev := committed.Load()
		time.Sleep(200 * time.Microsecond)
		return rev, nil
	}}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := 0; w < 2; w++ {
		writers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				committed.Add(1) // acknowledged from here on
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
	const readers, reads = 16, 200
	var wg sync.WaitGroup
	var stale atomic.Int64
	for r := 0; r < readers; r++ {
		wg.Go(func() {
			for i := 0; i < reads; i++ {
				acked := committed.Load()
				rev, err := b.revision(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if rev < acked {
					stale.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	writers.Wait()
	if n := stale.Load(); n > 0 {
		t.Errorf("%d of %d reads got a revision older than a write acknowledged before they asked", n, readers*reads)
	}
	if c := calls.Load(); c > readers*reads/2 {
		t.Errorf("%d backend calls for %d concurrent reads: not coalesced", c, readers*reads)
	}
	if m := maxInFlight.Load(); m > 1 {
		t.Errorf("%d calls in flight at once, want at most 1", m)
	}
	t.Logf("%d reads, %d backend calls", readers*reads, calls.Load())
}

type ctxKey struct{}

// A read that finds no call in flight makes its own on its own context; one that waits for a
// shared call returns its own context's error when that ends first, and a shared call's error
// reaches every read that waited for it.
func TestRevisionBatcherContextsAndErrors(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []any
	failNext := errors.New("backend down")
	var calls atomic.Int64
	b := &revisionBatcher{base: context.Background(), timeout: time.Second, fetch: func(ctx context.Context) (int64, error) {
		mu.Lock()
		seen = append(seen, ctx.Value(ctxKey{}))
		mu.Unlock()
		if calls.Add(1) == 1 {
			<-release
			return 7, nil
		}
		return 0, failNext
	}}
	first := make(chan int64)
	go func() {
		rev, _ := b.revision(context.WithValue(context.Background(), ctxKey{}, "first"))
		first <- rev
	}()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Two reads wait for the next call; one gives up.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() { _, err := b.revision(ctx); gaveUp <- err }()
	waited := make(chan error)
	go func() { _, err := b.revision(context.Background()); waited <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiting read whose context ended got %v", err)
	}
	close(release)
	if rev := <-first; rev != 7 {
		t.Errorf("the lone read got %d", rev)
	}
	if err := <-waited; !errors.Is(err, failNext) {
		t.Errorf("a read of the shared call got %v, want its error", err)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2 (the lone read's, the shared one)", calls.Load())
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != "first" || seen[1] != nil {
		t.Errorf("call contexts carried %v, want the lone read's own, then none", seen)
	}
	mu.Unlock()
	// Idle again: the next read calls alone, at once, on its own context.
	if _, err := b.revision(context.WithValue(context.Background(), ctxKey{}, "later")); !errors.Is(err, failNext) {
		t.Errorf("read after idle: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[len(seen)-1] != "later" {
		t.Errorf("read after idle ran on context %v, want its own", seen[len(seen)-1])
	}
}
