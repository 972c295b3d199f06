package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/libs/redistest"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
	"platform.io/services/storage/conformance"
	"platform.io/services/storage/server"
)

// startOnCluster runs the storage service on rc in cluster mode.
func startOnCluster(t *testing.T, rc *redistest.Cluster, tweak func(*server.Config)) *harness {
	cfg := conformance.TestConfig()
	cfg.Backend = "redis"
	cfg.RedisMode = "cluster"
	cfg.RedisURL = rc.URL()
	cfg.RedisClusterAddrs = rc.Addrs()[1:]
	cfg.RedisWaitTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&cfg)
	}
	h := &harness{t: t, cfg: cfg, cluster: rc}
	h.start()
	t.Cleanup(func() { h.stop(true) })
	return h
}

// slotOf is the cluster slot of rt's keys.
func slotOf(t *testing.T, rc *redistest.Cluster, rt *storagev1.ResourceType) int {
	t.Helper()
	slot, err := rc.Slot(naming.RedisKeyPrefix + ":{" + backend.TypeName(rt) + "}:rev")
	if err != nil {
		t.Fatal(err)
	}
	return slot
}

// writer creates objects of one type as fast as it can until stopped, and records which writes
// were acknowledged (with their revisions) and which failed (outcome unknown).
type writer struct {
	mu      sync.Mutex
	acked   map[string]int64
	failed  []string
	errs    map[string]int
	latency []time.Duration
	stop    chan struct{}
	done    chan struct{}
}

func startWriter(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, prefix string) *writer {
	w := &writer{acked: map[string]int64{}, errs: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			name := fmt.Sprintf("%s%05d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			resp, err := c.Create(ctx, &storagev1.CreateRequest{Type: rt, Object: &storagev1.Object{Namespace: "ns", Name: name, Value: []byte(name)}})
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked[name] = resp.GetObject().GetResourceVersion()
				w.latency = append(w.latency, time.Since(start))
			} else {
				w.failed = append(w.failed, name)
				w.errs[storage.ReasonOf(err).String()]++
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	return w
}

func (w *writer) finish() {
	close(w.stop)
	<-w.done
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitWrites waits until n more writes are acknowledged.
func (w *writer) waitWrites(t *testing.T, n int) {
	t.Helper()
	want := w.count() + n
	deadline := time.Now().Add(30 * time.Second)
	for w.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("writer: %d acknowledged writes, want %d within 30s (errors %v)", w.count(), want, w.errs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// follower follows a type's watch from a revision, resuming from the last revision it saw
// whenever the watch ends, and records every event in order.
type follower struct {
	mu      sync.Mutex
	events  []*storagev1.Event
	resumes int
	cancel  context.CancelFunc
	done    chan struct{}
}

func follow(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, from int64) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(f.stop)
	go func() {
		defer close(f.done)
		last := from
		for ctx.Err() == nil {
			stream, err := c.Watch(ctx, &storagev1.WatchRequest{Type: rt, ResourceVersion: fmt.Sprint(last)})
			for err == nil {
				var evs []*storagev1.Event
				if evs, err = stream.Recv(); err != nil {
					break
				}
				f.mu.Lock()
				for _, ev := range evs {
					if ev.GetType() == storagev1.EventType_BOOKMARK {
						continue
					}
					f.events = append(f.events, ev)
					last = ev.GetResourceVersion()
				}
				f.mu.Unlock()
			}
			if ctx.Err() != nil {
				return
			}
			f.mu.Lock()
			f.resumes++
			f.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return f
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
}

// waitFor waits until the follower has seen revision rev.
func (f *follower) waitFor(t *testing.T, rev int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.events)
		var last int64
		if n > 0 {
			last = f.events[n-1].GetResourceVersion()
		}
		f.mu.Unlock()
		if last >= rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch reached revision %d, want %d within 30s", last, rev)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkHistory verifies, after the writer stopped, that every acknowledged write is stored with
// its revision, that the type's revisions are dense from 1, and that the watch delivered every
// revision exactly once, in order, with the acknowledged writes' objects.
func checkHistory(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, w *writer, f *follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list *storagev1.ListResponse
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if list, err = c.List(ctx, &storagev1.ListRequest{Type: rt}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	stored := map[string]int64{}
	for _, it := range list.GetItems() {
		stored[it.GetName()] = it.GetResourceVersion()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, rev := range w.acked {
		if got, ok := stored[name]; !ok || got != rev {
			t.Errorf("acknowledged write %s@%d: stored at %d (present %v)", name, rev, got, ok)
		}
	}
	// Only creates: the type's revisions 1..current are its objects', densely.
	cur := list.GetResourceVersion()
	if int64(len(stored)) != cur {
		t.Errorf("revision %d with %d objects: revisions are not dense", cur, len(stored))
	}
	f.waitFor(t, cur)
	f.mu.Lock()
	defer f.mu.Unlock()
	byRev := map[int64]string{}
	for name, rev := range stored {
		byRev[rev] = name
	}
	for i, ev := range f.events {
		if ev.GetResourceVersion() != int64(i)+1 {
			t.Fatalf("watch event %d has revision %d: gap or duplicate (resumed %d times)", i, ev.GetResourceVersion(), f.resumes)
		}
		if name := ev.GetObject().GetName(); name != byRev[ev.GetResourceVersion()] {
			t.Fatalf("watch event at revision %d is %s, stored is %s", ev.GetResourceVersion(), name, byRev[ev.GetResourceVersion()])
		}
	}
	if int64(len(f.events)) != cur {
		t.Fatalf("watch delivered %d events, want %d", len(f.events), cur)
	}
	t.Logf("%d writes acknowledged, %d failed (%v), revision %d, watch resumed %d times", len(w.acked), len(w.failed), w.errs, cur, f.resumes)
}

func TestRedisClusterConfig(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Backend = "redis"
	if cfg.WaitReplicas() != 0 {
		t.Fatalf("standalone waits for %d replicas by default, want 0", cfg.WaitReplicas())
	}
	cfg.RedisClusterAddrs = []string{"10.0.0.2:6379"}
	cfg.RedisWaitReplicas = -2
	cfg.RedisWaitTimeout = 5 * time.Second
	err := cfg.Validate()
	for _, flag := range []string{"--redis-cluster-addrs needs --redis-mode=cluster", "--redis-wait-replicas", "--redis-wait-timeout"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("validation error %v does not say %s", err, flag)
		}
	}
	cfg = server.DefaultConfig()
	cfg.Backend, cfg.RedisMode, cfg.RedisClusterAddrs = "redis", "cluster", []string{"10.0.0.2:6379"}
	if err := cfg.Validate(); err != nil || cfg.WaitReplicas() != 1 {
		t.Fatalf("cluster mode: %v, waits for %d replicas, want 1", err, cfg.WaitReplicas())
	}
	cfg.RedisMode = "sentinel"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--redis-mode") {
		t.Fatalf("unknown mode: %v", err)
	}
	// A cluster has database 0 only.
	cfg = conformance.TestConfig()
	cfg.Backend, cfg.RedisMode, cfg.RedisURL = "redis", "cluster", "redis://127.0.0.1:1/2"
	if _, err := server.Start(context.Background(), cfg, testLogger()); err == nil || !strings.Contains(err.Error(), "database 0") {
		t.Fatalf("cluster mode with database 2: %v", err)
	}
}

// TestRedisClusterFailover fails over the master holding a type while a writer writes to it
// and a watch follows it: first a coordinated failover (CLUSTER FAILOVER on the replica), then
// a crash (SIGKILL of the new master, its replica is promoted, the killed node comes back as a
// replica). Every acknowledged write survives, revisions stay dense, and the watch, resuming
// from its last revision when it ends, sees every revision exactly once.
func TestRedisClusterFailover(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 2 * time.Second})
	h := startOnCluster(t, rc, nil)
	c := h.Client()
	rt := &storagev1.ResourceType{Group: "failover.platform.io", Resource: "widgets"}
	slot := slotOf(t, rc, rt)
	f := follow(t, c, rt, 0)
	w := startWriter(t, c, rt, "o")
	w.waitWrites(t, 50)

	master, err := rc.MasterOf(slot)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := rc.ReplicaOf(master.ID)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rc.Failover(replica.Addr, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("CLUSTER FAILOVER: %s took over slot %d from %s in %v", replica.Addr, slot, master.Addr, time.Since(start))
	w.waitWrites(t, 50)

	// The crash: kill the new master; the old one, now its replica, is promoted.
	start = time.Now()
	if err := rc.Kill(replica.Addr); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitPromoted(master.Addr, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill: %s promoted in %v", master.Addr, time.Since(start))
	// Writes wait for a replica: the type's shard takes writes again once the killed node is
	// back, as the new master's replica.
	if err := rc.Node(replica.Addr).Start(); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed node back as a replica after %v", time.Since(start))
	w.waitWrites(t, 50)
	w.finish()
	checkHistory(t, c, rt, w, f)
}

// TestRedisClusterReshardKeepsWatches migrates the slot of a watched type to another master
// while a writer writes to it; the migration is held half done (some keys moved, some not) for
// a while. The watch goes on or resumes without a gap or a duplicate, and every acknowledged
// write is there.
func TestRedisClusterReshardKeepsWatches(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	h := startOnCluster(t, rc, nil)
	c := h.Client()
	rt := &storagev1.ResourceType{Group: "reshard.platform.io", Resource: "widgets"}
	slot := slotOf(t, rc, rt)
	f := follow(t, c, rt, 0)
	w := startWriter(t, c, rt, "o")
	w.waitWrites(t, 50)

	for round := range 2 {
		src, err := rc.MasterOf(slot)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := rc.Topology()
		if err != nil {
			t.Fatal(err)
		}
		var dst string
		for _, n := range nodes {
			if n.Master && !n.Failed && n.ID != src.ID && len(n.Slots) > 0 {
				dst = n.Addr
				break
			}
		}
		start := time.Now()
		err = rc.MigrateSlot(slot, dst, func() {
			before := w.count()
			time.Sleep(300 * time.Millisecond)
			t.Logf("round %d: %d writes acknowledged while the slot was half migrated", round, w.count()-before)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: slot %d moved from %s to %s in %v", round, slot, src.Addr, dst, time.Since(start))
		w.waitWrites(t, 50)
	}
	w.finish()
	checkHistory(t, c, rt, w, f)
}

// TestRedisClusterWatchersNeverSeeLostWrites cuts a type's master off from its replica (the
// replica hangs, the master drops its link), writes to it (the writes commit on the master but
// cannot be acknowledged), then kills the master: its replica is promoted without those writes
// and gives their revisions to new ones. No watcher or list may have shown the lost writes, and
// the watch, resuming as clients do, sees the new history without a gap or a duplicate.
func TestRedisClusterWatchersNeverSeeLostWrites(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{NodeTimeout: 2 * time.Second})
	h := startOnCluster(t, rc, nil)
	c := h.Client()
	rt := &storagev1.ResourceType{Group: "lost.platform.io", Resource: "widgets"}
	f := follow(t, c, rt, 0)
	w := &writer{acked: map[string]int64{}, errs: map[string]int{}}
	create := func(name string, timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := c.Create(ctx, &storagev1.CreateRequest{Type: rt, Object: &storagev1.Object{Namespace: "ns", Name: name, Value: []byte(name)}})
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.failed = append(w.failed, name)
			w.errs[storage.ReasonOf(err).String()]++
			return err
		}
		w.acked[name] = resp.GetObject().GetResourceVersion()
		return nil
	}
	for i := range 10 {
		if err := create(fmt.Sprintf("before%02d", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor(t, 10)
	master, err := rc.MasterOf(slotOf(t, rc, rt))
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
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := create(fmt.Sprintf("lost%02d", i), 10*time.Second); err == nil {
				t.Errorf("lost%02d was acknowledged while the master had no replica", i)
			}
		}()
	}
	// The master holds the writes now; nothing may show them.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		list, err := c.List(context.Background(), &storagev1.ListRequest{Type: rt, ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if list.GetResourceVersion() != 10 || len(list.GetItems()) != 10 {
			t.Fatalf("the cache shows revision %d with %d objects before any replica has them", list.GetResourceVersion(), len(list.GetItems()))
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	if err := rc.Node(master.Addr).Start(); err != nil {
		t.Fatal(err)
	}
	if err := rc.WaitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// New writes take the lost revisions.
	for i := range 10 {
		name := fmt.Sprintf("after%02d", i)
		for deadline := time.Now().Add(30 * time.Second); create(name, 5*time.Second) != nil; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no write succeeds after the failover (errors %v)", name, w.errs)
			}
			name += "x"
		}
	}
	checkHistory(t, c, rt, w, f)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range f.events {
		if strings.HasPrefix(ev.GetObject().GetName(), "lost") {
			t.Fatalf("the watch showed %s@%d, a write the failover lost", ev.GetObject().GetName(), ev.GetResourceVersion())
		}
	}
}
