package server_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"platform.io/libs/redistest"
	"platform.io/libs/storage"
	"platform.io/services/storage/backend"
	"platform.io/services/storage/conformance"
	"platform.io/services/storage/server"
)

// harness runs the storage service in this process, on a real TCP socket, over a real backend.
type harness struct {
	t       *testing.T
	cfg     server.Config
	srv     *server.Server
	client  *storage.Client
	redis   *redistest.Server
	cluster *redistest.Cluster
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("STORAGE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func (h *harness) start() {
	h.t.Helper()
	// A Redis node that stalls on its fsyncs (appendfsync always, on a machine busy with other
	// suites) can miss the service's start-up PING; the service then exits, as it would for its
	// supervisor to start it again. Start again here, for a while: the cases are about what the
	// service does once it runs.
	deadline := time.Now().Add(30 * time.Second)
	var srv *server.Server
	var err error
	for {
		srv, err = server.Start(context.Background(), h.cfg, testLogger())
		if err == nil || !errors.Is(err, backend.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		h.t.Logf("start storage service: %v; starting again", err)
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatalf("start storage service: %v", err)
	}
	h.srv = srv
	conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	h.client = storage.NewClient(conn)
}

func (h *harness) stop(graceful bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if !graceful {
		cancel()
	}
	defer cancel()
	h.srv.Stop(ctx)
}

func (h *harness) Client() *storage.Client { return h.client }

func (h *harness) RestartService(t *testing.T) {
	h.stop(true)
	h.start()
}

func (h *harness) CrashBackend(t *testing.T) {
	if h.redis != nil {
		if err := h.redis.Restart(true); err != nil {
			t.Fatalf("restart redis: %v", err)
		}
		return
	}
	if h.cluster != nil {
		crashCluster(t, h.cluster)
		return
	}
	h.stop(false)
	h.start()
}

// crashCluster kills every node of the cluster at once and starts them again (each with its AOF
// and nodes.conf), then waits until the cluster is healthy.
func crashCluster(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		if err := n.Stop(true); err != nil {
			t.Fatalf("kill redis node: %v", err)
		}
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			t.Fatalf("restart redis node: %v", err)
		}
	}
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func newHarness(t *testing.T, cfg server.Config, tweak func(*server.Config), rs *redistest.Server) *harness {
	if tweak != nil {
		tweak(&cfg)
	}
	h := &harness{t: t, cfg: cfg, redis: rs}
	h.start()
	t.Cleanup(func() { h.stop(true) })
	return h
}

func TestConformanceEmbedded(t *testing.T) {
	conformance.Run(t, func(t *testing.T, tweak func(*server.Config)) conformance.Harness {
		cfg := conformance.TestConfig()
		cfg.Backend = "embedded"
		cfg.DataDir = t.TempDir()
		return newHarness(t, cfg, tweak, nil)
	})
}

func TestConformanceRedis(t *testing.T) {
	conformance.Run(t, func(t *testing.T, tweak func(*server.Config)) conformance.Harness {
		rs := redistest.Start(t, redistest.Options{AppendFsync: "always"})
		cfg := conformance.TestConfig()
		cfg.Backend = "redis"
		cfg.RedisURL = rs.URL()
		return newHarness(t, cfg, tweak, rs)
	})
}

// TestConformanceRedisCluster runs the suite against a Redis Cluster of 3 masters with a
// replica each (writes wait for the replica: --redis-wait-replicas defaults to 1 in cluster
// mode). One cluster serves every case, to keep the run short: each case uses types of its own,
// which hash to slots spread over the masters.
func TestConformanceRedisCluster(t *testing.T) {
	// No case fails a node over: Redis's default node timeout keeps a loaded machine from
	// failing one over on its own.
	rc := redistest.StartCluster(t, redistest.ClusterOptions{AppendFsync: "always", NodeTimeout: 15 * time.Second})
	conformance.Run(t, func(t *testing.T, tweak func(*server.Config)) conformance.Harness {
		cfg := conformance.TestConfig()
		cfg.Backend = "redis"
		cfg.RedisMode = "cluster"
		cfg.RedisURL = rc.URL()
		cfg.RedisClusterAddrs = rc.Addrs()[1:]
		cfg.RedisWaitTimeout = 2 * time.Second // slow replicas on a loaded machine are not the subject
		if tweak != nil {
			tweak(&cfg)
		}
		h := &harness{t: t, cfg: cfg, cluster: rc}
		h.start()
		t.Cleanup(func() { h.stop(true) })
		return h
	})
}
