package server_test

// Benchmarks of the storage service through its gRPC API: the real service on a real loopback
// socket, over a real redis-server or the embedded bbolt backend, with the load generated in the
// same process (so on the same cores). They run only with -bench:
//
//	go test -run '^$' -bench . -benchtime 5s ./services/storage/server/
//
// Targets and results: docs/benchmarks.md. The load tool test/load/storageload runs the same
// scenarios against a service in another process.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"platform.io/libs/redistest"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

const (
	// casWriters is the number of concurrent compare-and-swap writers.
	casWriters = 16
	// casConns is the number of gRPC connections the writers share (round-robin), as a few
	// API server replicas would.
	casConns = 4
	// listObjects is the size of the listed collection.
	listObjects = 2000
	// valueBytes is the size of a stored object's value: a small serialized API object.
	valueBytes = 500
	// watchers, watchConns, watchRate and watchDuration shape the watch fan-out: watchers of one
	// type multiplexed over watchConns connections, one writer at watchRate events per second.
	watchers      = 1000
	watchConns    = 8
	watchRate     = 100
	watchDuration = 10 * time.Second
	// maxWatchScenarios bounds the scenarios one run of BenchmarkWatchFanout1000 makes.
	maxWatchScenarios = 3
)

// benchService is a storage service started for a benchmark, with its clients.
type benchService struct {
	addr    string
	clients []*storage.Client
}

func benchLogger() *slog.Logger {
	level := slog.LevelError // the service warns about its plain-text listener at every start
	if os.Getenv("STORAGE_BENCH_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// startBenchService starts redis-server (for backendName "redis", with the given appendfsync
// policy) and the storage service, and dials it conns times. Everything is stopped by owner's
// cleanup, so a fixture can outlive the calibration rounds of one sub-benchmark.
func startBenchService(owner *testing.B, backendName, fsync string, conns int) (*benchService, error) {
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Backend = backendName
	switch backendName {
	case "redis":
		rs, err := redistest.StartProcess(owner.TempDir(), redistest.Options{AppendFsync: fsync})
		if err != nil {
			return nil, err
		}
		owner.Cleanup(func() { _ = rs.Stop(false) })
		cfg.RedisURL = rs.URL()
	case "embedded":
		cfg.DataDir = owner.TempDir()
	}
	srv, err := server.Start(context.Background(), cfg, benchLogger())
	if err != nil {
		return nil, err
	}
	owner.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	s := &benchService{addr: srv.Addr().String()}
	for range conns {
		conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
		if err != nil {
			return nil, err
		}
		owner.Cleanup(func() { _ = conn.Close() })
		s.clients = append(s.clients, storage.NewClient(conn))
	}
	return s, nil
}

// benchValue is a value of valueBytes bytes: an 8-byte sequence number and the 8-byte send time
// (Unix nanoseconds), big-endian, then filler that looks like a serialized object.
func benchValue(seq int64, sent time.Time) []byte {
	v := make([]byte, 16, valueBytes)
	binary.BigEndian.PutUint64(v[0:8], uint64(seq))
	binary.BigEndian.PutUint64(v[8:16], uint64(sent.UnixNano()))
	const filler = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench","namespace":"bench",` +
		`"labels":{"app":"bench","tier":"backend"},"annotations":{"note":"storage benchmark object"}},` +
		`"data":{"key":"lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor"}}`
	for len(v) < valueBytes {
		v = append(v, filler[:min(len(filler), valueBytes-len(v))]...)
	}
	return v
}

func valueTimes(v []byte) (seq int64, sent time.Time, ok bool) {
	if len(v) < 16 {
		return 0, time.Time{}, false
	}
	return int64(binary.BigEndian.Uint64(v[0:8])), time.Unix(0, int64(binary.BigEndian.Uint64(v[8:16]))), true
}

func benchLabels(i int) map[string]string {
	return map[string]string{
		"app":                         "bench",
		"tier":                        []string{"frontend", "backend", "cache"}[i%3],
		"shard":                       strconv.Itoa(i % 16),
		"platform.io/benchmark-owner": "storage",
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportLatencies sorts lat and reports its p50 and p99 in milliseconds.
func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

// casWriter updates one object of its own with compare-and-swap on the revision it last got.
type casWriter struct {
	client *storage.Client
	obj    *storagev1.Object
	rv     int64
	seq    int64
}

type casFixture struct {
	rt      *storagev1.ResourceType
	writers []*casWriter
}

func newCASFixture(owner *testing.B, backendName, fsync string) (*casFixture, error) {
	svc, err := startBenchService(owner, backendName, fsync, casConns)
	if err != nil {
		return nil, err
	}
	fx := &casFixture{rt: &storagev1.ResourceType{Group: "bench.platform.io", Resource: "casobjects"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for w := range casWriters {
		c := svc.clients[w%len(svc.clients)]
		o := &storagev1.Object{Namespace: "bench", Name: fmt.Sprintf("writer-%02d", w), Uid: fmt.Sprintf("uid-writer-%02d", w),
			Labels: benchLabels(w), Value: benchValue(0, time.Now())}
		resp, err := c.Create(ctx, &storagev1.CreateRequest{Type: fx.rt, Object: o})
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", o.Name, err)
		}
		fx.writers = append(fx.writers, &casWriter{client: c, obj: o, rv: resp.GetObject().GetResourceVersion()})
	}
	return fx, nil
}

// run makes b.N compare-and-swap updates, spread over the writers, and reports writes/s and
// the latency of one update. A conflict (which cannot happen: every writer owns its object) fails
// the benchmark.
func (fx *casFixture) run(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lat := make([][]time.Duration, len(fx.writers))
	var conflicts, failures atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, w := range fx.writers {
		n := b.N / len(fx.writers)
		if i < b.N%len(fx.writers) {
			n++
		}
		lat[i] = make([]time.Duration, 0, n)
		wg.Go(func() {
			for range n {
				w.seq++
				obj := &storagev1.Object{Namespace: w.obj.Namespace, Name: w.obj.Name, Uid: w.obj.Uid, Labels: w.obj.Labels,
					Value: benchValue(w.seq, time.Now())}
				t0 := time.Now()
				resp, err := w.client.Update(ctx, &storagev1.UpdateRequest{Type: fx.rt, Object: obj,
					Preconditions: &storagev1.Preconditions{ResourceVersion: w.rv}})
				lat[i] = append(lat[i], time.Since(t0))
				switch {
				case err == nil:
					w.rv = resp.GetObject().GetResourceVersion()
				case storage.IsConflict(err):
					conflicts.Add(1)
					got, gerr := w.client.Get(ctx, &storagev1.GetRequest{Type: fx.rt, Namespace: w.obj.Namespace, Name: w.obj.Name})
					if gerr != nil {
						failures.Add(1)
						b.Errorf("get after conflict: %v", gerr)
						return
					}
					w.rv = got.GetObject().GetResourceVersion()
				default:
					failures.Add(1)
					b.Errorf("update %s: %v", w.obj.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := conflicts.Load(); n > 0 {
		b.Fatalf("%d compare-and-swap conflicts among writers that each own their object", n)
	}
	if failures.Load() > 0 {
		b.FailNow()
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	reportLatencies(b, slices.Concat(lat...))
}

// BenchmarkCASUpdate measures compare-and-swap updates by 16 concurrent writers, each updating
// its own object with Preconditions.ResourceVersion set to the revision its last write returned.
func BenchmarkCASUpdate(b *testing.B) {
	top := b
	for _, bc := range []struct{ name, backend, fsync string }{
		{"redis-everysec", "redis", "everysec"},
		{"redis-always", "redis", "always"},
		{"embedded", "embedded", ""},
	} {
		var fx *casFixture // shared by the calibration rounds of the sub-benchmark
		b.Run(bc.name, func(b *testing.B) {
			if fx == nil {
				var err error
				if fx, err = newCASFixture(top, bc.backend, bc.fsync); err != nil {
					b.Fatal(err)
				}
			}
			fx.run(b)
		})
	}
}

type listFixture struct {
	client *storage.Client
	raw    *grpc.ClientConn // with rawCodec: responses are received but not decoded
	rt     *storagev1.ResourceType
}

func newListFixture(owner *testing.B, backendName string) (*listFixture, error) {
	svc, err := startBenchService(owner, backendName, "everysec", 1)
	if err != nil {
		return nil, err
	}
	raw, err := grpc.NewClient(svc.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions(),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		return nil, err
	}
	owner.Cleanup(func() { _ = raw.Close() })
	fx := &listFixture{client: svc.clients[0], raw: raw, rt: &storagev1.ResourceType{Group: "bench.platform.io", Resource: "listobjects"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Create the collection with a few concurrent writers, spread over 10 namespaces.
	var wg sync.WaitGroup
	errs := make(chan error, casWriters)
	for w := range casWriters {
		wg.Go(func() {
			for i := w; i < listObjects; i += casWriters {
				o := &storagev1.Object{Namespace: fmt.Sprintf("ns-%02d", i%10), Name: fmt.Sprintf("object-%05d", i),
					Uid: fmt.Sprintf("uid-%05d", i), Labels: benchLabels(i), Value: benchValue(int64(i), time.Now())}
				if _, err := fx.client.Create(ctx, &storagev1.CreateRequest{Type: fx.rt, Object: o}); err != nil {
					errs <- fmt.Errorf("create %s: %w", o.Name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return fx, nil
}

// rawCodec sends requests as protobuf but hands the response over undecoded: its length goes
// into an *int. It separates the service's and the transport's share of a list's latency from
// the client's decoding.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*int)) = data.Len()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// run lists the whole collection b.N times, one list at a time, each a consistent ("most
// recent", resourceVersion unset) unpaged read, and reports the latency of one list as the client
// sees it: request, read, transfer and, unless decode is false, decoding of every item.
func (fx *listFixture) run(b *testing.B, decode bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	var size int
	req := &storagev1.ListRequest{Type: fx.rt}
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if decode {
			resp, err := fx.client.List(ctx, req)
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.GetItems()) != listObjects {
				b.Fatalf("list returned %d items, want %d", len(resp.GetItems()), listObjects)
			}
			if size == 0 {
				size = proto.Size(resp)
			}
		} else {
			var n int
			err := fx.raw.Invoke(ctx, storagev1.Storage_List_FullMethodName, req, &n)
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			size = n
		}
	}
	b.StopTimer()
	b.SetBytes(int64(size))
	reportLatencies(b, lat)
}

// BenchmarkList2000 measures an unpaged, consistent list of 2,000 objects of ~500-byte values
// with a few labels each, as a client sees it (redis, embedded), and without the client's
// decoding of the response (redis-nodecode, embedded-nodecode).
func BenchmarkList2000(b *testing.B) {
	top := b
	fixtures := map[string]*listFixture{} // by backend, shared by its sub-benchmarks
	for _, bc := range []struct {
		name, backend string
		decode        bool
	}{
		{"redis", "redis", true},
		{"embedded", "embedded", true},
		{"redis-nodecode", "redis", false},
		{"embedded-nodecode", "embedded", false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			fx := fixtures[bc.backend]
			if fx == nil {
				var err error
				if fx, err = newListFixture(top, bc.backend); err != nil {
					b.Fatal(err)
				}
				fixtures[bc.backend] = fx
			}
			fx.run(b, bc.decode)
		})
	}
}

// watchRecord is what one watcher received: the revision of every event, in arrival order, and
// when its batch arrived.
type watchRecord struct {
	revs   []int64
	at     []time.Time
	sent   []time.Time // the send time embedded in the value
	last   atomic.Int64
	err    error
	others int // events that were not MODIFIED (none are expected)
}

// BenchmarkWatchFanout1000 measures delivery of one writer's changes to 1,000 watchers of the
// type, multiplexed over 8 connections, on the Redis backend (appendfsync everysec). The writer
// makes 100 compare-and-swap updates per second for 10 seconds; each value carries its send
// time. Latency is from the writer's send to the arrival at each watcher (so it includes the
// write itself); p99-ack-ms is from the write's acknowledgement instead. Every watcher must
// receive every acknowledged revision exactly once, in order, or the benchmark fails.
//
// One iteration is one 10-second scenario. Whatever b.N is (-benchtime=100x would make it 100),
// at most maxWatchScenarios run, and ns/op is the measured time of one scenario.
func BenchmarkWatchFanout1000(b *testing.B) {
	svc, err := startBenchService(b, "redis", "everysec", watchConns)
	if err != nil {
		b.Fatal(err)
	}
	rt := &storagev1.ResourceType{Group: "bench.platform.io", Resource: "watchobjects"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	writer := svc.clients[0]
	created, err := writer.Create(ctx, &storagev1.CreateRequest{Type: rt, Object: &storagev1.Object{
		Namespace: "bench", Name: "watched", Uid: "uid-watched", Labels: benchLabels(0), Value: benchValue(0, time.Now())}})
	if err != nil {
		b.Fatal(err)
	}
	rv := created.GetObject().GetResourceVersion()

	var fromSend, fromAck []time.Duration
	var delivered, lost, reordered, duplicated int64
	var measured time.Duration
	scenarios := min(b.N, maxWatchScenarios)
	b.ResetTimer()
	for range scenarios {
		b.StopTimer()
		wctx, wcancel := context.WithCancel(ctx)
		recs := make([]*watchRecord, watchers)
		var wg sync.WaitGroup
		for i := range recs {
			rec := &watchRecord{}
			recs[i] = rec
			capacity := int(watchRate*watchDuration/time.Second) + 64
			rec.revs, rec.at, rec.sent = make([]int64, 0, capacity), make([]time.Time, 0, capacity), make([]time.Time, 0, capacity)
			stream, err := svc.clients[i%len(svc.clients)].Watch(wctx, &storagev1.WatchRequest{Type: rt, ResourceVersion: strconv.FormatInt(rv, 10)})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				for {
					evs, err := stream.Recv()
					if err != nil {
						if wctx.Err() == nil {
							rec.err = err
						}
						return
					}
					now := time.Now()
					for _, ev := range evs {
						if ev.GetType() != storagev1.EventType_MODIFIED {
							rec.others++
							continue
						}
						_, sent, _ := valueTimes(ev.GetObject().GetValue())
						rec.revs = append(rec.revs, ev.GetResourceVersion())
						rec.at = append(rec.at, now)
						rec.sent = append(rec.sent, sent)
						rec.last.Store(ev.GetResourceVersion())
					}
				}
			})
		}
		update := func(seq int64) (time.Time, error) {
			resp, err := writer.Update(ctx, &storagev1.UpdateRequest{Type: rt,
				Object:        &storagev1.Object{Namespace: "bench", Name: "watched", Labels: benchLabels(0), Value: benchValue(seq, time.Now())},
				Preconditions: &storagev1.Preconditions{ResourceVersion: rv}})
			if err != nil {
				return time.Time{}, err
			}
			rv = resp.GetObject().GetResourceVersion()
			return time.Now(), nil
		}
		waitAll := func(target int64, timeout time.Duration) bool {
			deadline := time.Now().Add(timeout)
			for time.Now().Before(deadline) {
				if !slices.ContainsFunc(recs, func(r *watchRecord) bool { return r.last.Load() < target }) {
					return true
				}
				time.Sleep(5 * time.Millisecond)
			}
			return false
		}
		// A first write that every watcher must see proves every watch is established.
		if _, err := update(0); err != nil {
			b.Fatal(err)
		}
		warm := rv
		if !waitAll(warm, 60*time.Second) {
			b.Fatalf("not every watcher received the warm-up event within 60s")
		}

		b.StartTimer()
		phase := time.Now()
		acked := []int64{warm}
		ackAt := map[int64]time.Time{}
		total := int(watchRate * watchDuration / time.Second)
		start := time.Now()
		for i := 1; i <= total; i++ {
			if d := time.Until(start.Add(time.Duration(i-1) * time.Second / watchRate)); d > 0 {
				time.Sleep(d)
			}
			at, err := update(int64(i))
			if err != nil {
				b.Fatal(err)
			}
			acked = append(acked, rv)
			ackAt[rv] = at
		}
		complete := waitAll(rv, 30*time.Second)
		b.StopTimer()
		measured += time.Since(phase)
		wcancel()
		wg.Wait()

		for i, rec := range recs {
			if rec.err != nil {
				b.Errorf("watcher %d ended early: %v", i, rec.err)
			}
			if rec.others > 0 {
				b.Errorf("watcher %d received %d events that were not MODIFIED", i, rec.others)
			}
			seen := make(map[int64]bool, len(rec.revs))
			var prev int64
			for j, r := range rec.revs {
				if seen[r] {
					duplicated++
				} else if r <= prev {
					reordered++
				}
				seen[r] = true
				prev = max(prev, r)
				if at, ok := ackAt[r]; ok {
					fromSend = append(fromSend, rec.at[j].Sub(rec.sent[j]))
					fromAck = append(fromAck, max(0, rec.at[j].Sub(at)))
					delivered++
				}
			}
			for _, r := range acked {
				if !seen[r] {
					lost++
				}
			}
		}
		if !complete || lost+reordered+duplicated > 0 {
			b.Fatalf("watch delivery broken: complete=%v lost=%d reordered=%d duplicated=%d", complete, lost, reordered, duplicated)
		}
	}
	b.ReportMetric(float64(measured.Nanoseconds())/float64(scenarios), "ns/op")
	b.ReportMetric(float64(delivered)/float64(scenarios), "events-delivered")
	reportLatencies(b, fromSend)
	slices.Sort(fromAck)
	b.ReportMetric(ms(percentile(fromAck, 99)), "p99-ack-ms")
	b.ReportMetric(ms(fromSend[len(fromSend)-1]), "max-ms")
	b.ReportMetric(float64(lost), "lost")
}
