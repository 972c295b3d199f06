package embedded

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	storagev1 "platform.io/proto/storage/v1"
)

// BenchmarkConcurrentUpdates measures write throughput with 16 concurrent writers, each updating
// a key of its own (no conflicts), with a transaction per write and with group commit.
//
//	go test -run '^$' -bench ConcurrentUpdates -benchtime 3s ./services/storage/backend/embedded/
func BenchmarkConcurrentUpdates(b *testing.B) { benchmarkUpdates(b, 16) }

// BenchmarkSingleWriter measures the latency of a lone writer, which group commit makes wait for
// the batch delay.
func BenchmarkSingleWriter(b *testing.B) { benchmarkUpdates(b, 1) }

func benchmarkUpdates(b *testing.B, writers int) {
	for _, m := range []struct {
		name  string
		mode  commitMode
		delay time.Duration // DB.MaxBatchDelay for boltBatch
	}{
		{"update", soloCommit, 0},
		{"boltbatch-10ms", boltBatch, 10 * time.Millisecond}, // bbolt's default MaxBatchDelay
		{"boltbatch-1ms", boltBatch, time.Millisecond},
		{"boltbatch-200us", boltBatch, 200 * time.Microsecond},
		{"group", groupCommit, 0},
		{"wal", walCommit, 0},
	} {
		b.Run(m.name, func(b *testing.B) {
			ctx := context.Background()
			be := newBackend(b, m.mode)
			setMode(be, m.mode, m.delay)
			value := make([]byte, 512)
			for w := 0; w < writers; w++ {
				if _, err := be.Create(ctx, pods, &storagev1.Object{Namespace: "bench", Name: fmt.Sprint("w", w), Value: value}); err != nil {
					b.Fatal(err)
				}
			}
			runWriters(b, writers, func(w, _ int) error {
				_, err := be.Update(ctx, pods, &storagev1.Object{Namespace: "bench", Name: fmt.Sprint("w", w), Value: value}, nil)
				return err
			})
		})
	}
}

// BenchmarkConcurrentCreates measures creates of new keys by 16 writers (group commit and the
// write-ahead log), each
// naming its objects as the load tool's create scenario does (c16-w<writer>-<i>): unlike updates
// of 16 keys, every commit grows the tree at 16 places and appends to the log, as the all-in-one's
// creates do.
//
//	go test -run '^$' -bench ConcurrentCreates -benchtime 20000x ./services/storage/backend/embedded/
func BenchmarkConcurrentCreates(b *testing.B) {
	for _, m := range []struct {
		name string
		mode commitMode
	}{{"group", groupCommit}, {"wal", walCommit}} {
		b.Run(m.name, func(b *testing.B) {
			const writers = 16
			ctx := context.Background()
			be := newBackend(b, m.mode)
			value := make([]byte, 300)
			runWriters(b, writers, func(w, i int) error {
				_, err := be.Create(ctx, pods, &storagev1.Object{Namespace: "bench", Name: fmt.Sprintf("c%d-w%d-%d", writers, w, i), Value: value})
				return err
			})
		})
	}
}

// runWriters splits b.N writes among writers concurrent goroutines, write(w, i) being writer w's
// i-th, and reports the rate.
func runWriters(b *testing.B, writers int, write func(w, i int) error) {
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		n := b.N / writers
		if w < b.N%writers {
			n++
		}
		wg.Go(func() {
			for i := 0; i < n; i++ {
				if err := write(w, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}
