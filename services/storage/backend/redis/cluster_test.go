package redisbackend

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"platform.io/libs/naming"
	"platform.io/libs/redistest"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

func newClusterBackend(t testing.TB, rc *redistest.Cluster, wait int) *Backend {
	t.Helper()
	return newBackend(t, Options{URL: rc.URL(), Cluster: true, ClusterAddrs: rc.Addrs()[1:], WaitReplicas: wait, WaitTimeout: 2 * time.Second})
}

func typeSlot(t testing.TB, rc *redistest.Cluster, rt *storagev1.ResourceType) int {
	t.Helper()
	slot, err := rc.Slot(naming.RedisKeyPrefix + ":{" + backend.TypeName(rt) + "}:rev")
	if err != nil {
		t.Fatal(err)
	}
	return slot
}

// TestClusterEveryOperationAcrossMasters runs every backend operation on types whose slots are
// spread over the three masters, with log readers of all of them blocked at once.
func TestClusterEveryOperationAcrossMasters(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	b := newClusterBackend(t, rc, 1)
	ctx := ctxT(t)

	var types []*storagev1.ResourceType
	masters := map[string]bool{}
	for i := range 12 {
		rt := &storagev1.ResourceType{Group: "spread.platform.io", Resource: fmt.Sprintf("things%d", i)}
		m, err := rc.MasterOf(typeSlot(t, rc, rt))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr] = true
		types = append(types, rt)
	}
	if len(masters) != 3 {
		t.Fatalf("the test's types hash to %d masters, want all 3", len(masters))
	}

	// A blocked reader per type, all at once: each wakes with its own type's write.
	var wg sync.WaitGroup
	got := make([][]backend.Event, len(types))
	errs := make([]error, len(types))
	for i, rt := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, 4*time.Second)
			defer cancel()
			got[i], errs[i] = b.Read(rctx, rt, 0, 10)
		}()
	}
	time.Sleep(200 * time.Millisecond)
	for _, rt := range types {
		ev, err := b.Create(ctx, rt, object("ns", "a", "v1", "uid-a"))
		if err != nil || ev.Revision != 1 {
			t.Fatalf("create %s: %v %v", backend.TypeName(rt), ev, err)
		}
	}
	wg.Wait()
	for i, rt := range types {
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].Revision != 1 || got[i][0].Object.GetName() != "a" {
			t.Fatalf("blocked read of %s: %v %v", backend.TypeName(rt), got[i], errs[i])
		}
	}

	for _, rt := range types {
		name := backend.TypeName(rt)
		ev, err := b.Update(ctx, rt, object("ns", "a", "v2", ""), &storagev1.Preconditions{ResourceVersion: 1})
		if err != nil || ev.Revision != 2 || ev.Prev.GetResourceVersion() != 1 {
			t.Fatalf("%s: update: %v %v", name, ev, err)
		}
		if _, err := b.Update(ctx, rt, object("ns", "a", "v3", ""), &storagev1.Preconditions{ResourceVersion: 1}); err == nil {
			t.Fatalf("%s: stale update succeeded", name)
		}
		if _, err := b.Create(ctx, rt, object("ns", "a", "v", "")); err != backend.ErrAlreadyExists {
			t.Fatalf("%s: create of a live key: %v", name, err)
		}
		if _, err := b.Create(ctx, rt, object("ns", "b", "v", "uid-b")); err != nil {
			t.Fatal(err)
		}
		if ev, err := b.Delete(ctx, rt, "ns", "b", &storagev1.Preconditions{Uid: "uid-b"}); err != nil || ev.Revision != 4 {
			t.Fatalf("%s: delete: %v %v", name, ev, err)
		}
		cur, compacted, err := b.Revision(ctx, rt)
		if err != nil || cur != 4 || compacted != 0 {
			t.Fatalf("%s: revision %d/%d %v", name, cur, compacted, err)
		}
		evs, err := b.Read(ctx, rt, 1, 10)
		if err != nil || len(evs) != 3 || evs[0].Revision != 2 || evs[2].Type != backend.Deleted {
			t.Fatalf("%s: read: %v %v", name, evs, err)
		}
		if n, err := b.Compact(ctx, rt, 2); err != nil || n != 2 {
			t.Fatalf("%s: compact: %d %v", name, n, err)
		}
		if _, err := b.Read(ctx, rt, 1, 10); err != backend.ErrCompacted {
			t.Fatalf("%s: read of compacted history: %v", name, err)
		}
		snap, err := b.Snapshot(ctx, rt)
		if err != nil || snap.Revision != 4 || snap.Compacted != 2 || len(snap.Objects) != 1 || len(snap.Events) != 2 ||
			string(snap.Objects[0].GetValue()) != "v2" || snap.Objects[0].GetUid() != "uid-a" {
			t.Fatalf("%s: snapshot: %+v %v", name, snap, err)
		}
	}
	listed, err := b.Types(ctx)
	if err != nil || len(listed) != len(types) {
		t.Fatalf("types: %v %v", listed, err)
	}
	s1, err := b.Secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := newClusterBackend(t, rc, 0).Secret(ctx); err != nil || string(s1) != string(s2) {
		t.Fatalf("a second client sees another secret: %v", err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckReplicas(ctx); err != nil {
		t.Fatalf("every master has a replica: %v", err)
	}
}

// TestClusterCheckReplicas: masters without the replicas writes wait for are reported.
func TestClusterCheckReplicas(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{ReplicasPerMaster: -1})
	ctx := ctxT(t)
	err := newClusterBackend(t, rc, 1).CheckReplicas(ctx)
	if err == nil || strings.Count(err.Error(), "(0)") != 3 {
		t.Fatalf("3 masters without replicas, writes waiting for 1: %v", err)
	}
	if err := newClusterBackend(t, rc, 0).CheckReplicas(ctx); err != nil {
		t.Fatalf("writes that do not wait: %v", err)
	}
}

// TestClusterWaitKeepsAcknowledgedWritesWhenTheMasterDies cuts a master off from its replica
// (the replica hangs, SIGSTOP, and the master drops its link), writes, then kills the master:
// the replica is promoted without the writes made meanwhile. Without WAIT those writes were
// acknowledged and are lost; with WAIT (the service's default in cluster mode) none of them is
// acknowledged, and every acknowledged write survives.
func TestClusterWaitKeepsAcknowledgedWritesWhenTheMasterDies(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 2 * time.Second})
	for i, wait := range []int{0, 1} {
		t.Run(fmt.Sprintf("wait=%d", wait), func(t *testing.T) {
			b := newClusterBackend(t, rc, wait)
			ctx := ctxT(t)
			rt := &storagev1.ResourceType{Group: "crash.platform.io", Resource: fmt.Sprintf("things%d", i)}
			acked := map[string]int64{}
			for j := range 10 {
				ev, err := b.Create(ctx, rt, object("ns", fmt.Sprint("before", j), "v", ""))
				if err != nil {
					t.Fatal(err)
				}
				acked[ev.Object.GetName()] = ev.Revision
			}
			master, err := rc.MasterOf(typeSlot(t, rc, rt))
			if err != nil {
				t.Fatal(err)
			}
			replica, err := rc.ReplicaOf(master.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := rc.Node(replica.Addr).Pause(); err != nil {
				t.Fatal(err)
			}
			if _, err := rc.Command(master.Addr, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for j := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					defer cancel()
					if ev, err := b.Create(wctx, rt, object("ns", fmt.Sprint("during", j), "v", "")); err == nil {
						mu.Lock()
						acked[ev.Object.GetName()] = ev.Revision
						mu.Unlock()
					}
				}()
			}
			time.Sleep(300 * time.Millisecond)
			if err := rc.Kill(master.Addr); err != nil {
				t.Fatal(err)
			}
			if err := rc.Node(replica.Addr).Resume(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if err := rc.WaitPromoted(replica.Addr, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			// The killed master comes back as the new master's replica (with WAIT, reads
			// confirm what they show with a replica too).
			if err := rc.Node(master.Addr).Start(); err != nil {
				t.Fatal(err)
			}
			if err := rc.WaitHealthy(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			ctx = ctxT(t)
			var snap *backend.Snapshot
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if snap, err = b.Snapshot(ctx, rt); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			stored := map[string]int64{}
			for _, o := range snap.Objects {
				stored[o.GetName()] = o.GetResourceVersion()
			}
			lost := 0
			for name, rev := range acked {
				if stored[name] != rev {
					lost++
				}
			}
			t.Logf("%d writes acknowledged, %d of them lost; %d stored at revision %d", len(acked), lost, len(stored), snap.Revision)
			switch {
			case wait > 0 && lost > 0:
				t.Errorf("WAIT %d: %d acknowledged writes lost", wait, lost)
			case wait == 0 && lost == 0:
				t.Errorf("without WAIT no acknowledged write was lost: the test no longer cuts the replica off")
			}
		})
	}
}

// BenchmarkClusterUpdateCAS is BenchmarkUpdateCAS on a 3-master cluster, without and with WAIT
// for one replica, with 1 and 16 writers on one type.
func BenchmarkClusterUpdateCAS(b *testing.B) {
	rc := redistest.StartCluster(b, redistest.ClusterOptions{})
	for _, wait := range []int{0, 1} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("wait=%d/writers=%d", wait, writers), func(b *testing.B) {
				be := newClusterBackend(b, rc, wait)
				err := be.cluster.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
					return c.FlushAll(ctx).Err()
				})
				if err != nil {
					b.Fatal(err)
				}
				benchUpdates(b, be, writers)
			})
		}
	}
}

// BenchmarkStandaloneUpdateCAS is BenchmarkUpdateCAS with 1 and 16 writers, to compare with
// BenchmarkClusterUpdateCAS.
func BenchmarkStandaloneUpdateCAS(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			be := newBackend(b, Options{URL: srv.URL()})
			if _, err := be.client.FlushAll(context.Background()).Result(); err != nil {
				b.Fatal(err)
			}
			benchUpdates(b, be, writers)
		})
	}
}

var benchTypes atomic.Int64

// BenchmarkClusterRead measures a log reader's Read of 100 retained changes, without and with
// the replica confirmation that WAIT mode adds (a readmark write and a WAIT per read).
func BenchmarkClusterRead(b *testing.B) {
	rc := redistest.StartCluster(b, redistest.ClusterOptions{})
	for _, wait := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", wait), func(b *testing.B) {
			be := newClusterBackend(b, rc, wait)
			ctx := context.Background()
			rt := &storagev1.ResourceType{Group: "bench.platform.io", Resource: fmt.Sprintf("reads%d", benchTypes.Add(1))}
			for i := range 100 {
				if _, err := be.Create(ctx, rt, object("ns", fmt.Sprint(i), "v", "")); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if evs, err := be.Read(ctx, rt, 0, 100); err != nil || len(evs) != 100 {
					b.Fatalf("read: %d events, %v", len(evs), err)
				}
			}
		})
	}
}
