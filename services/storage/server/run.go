package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"platform.io/libs/pki"
	"platform.io/libs/service"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
	"platform.io/services/storage/backend/embedded"
	redisbackend "platform.io/services/storage/backend/redis"
	"platform.io/services/storage/cache"
)

// Server is a running storage service.
type Server struct {
	cfg      Config
	log      *slog.Logger
	be       backend.Backend
	srv      *service.Server
	inproc   *service.InProcess
	cancel   context.CancelFunc // ends the cache readers, compactor and health probe
	stopping context.CancelFunc // ends the watches
	stopOnce sync.Once
}

// OpenBackend opens the backend the configuration names.
func OpenBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend.Backend, error) {
	switch cfg.Backend {
	case "embedded":
		return embedded.Open(filepath.Join(cfg.DataDir, "storage.db"), embedded.Options{})
	case "redis":
		opts := redisbackend.Options{
			URL:          cfg.RedisURL,
			Cluster:      cfg.RedisMode == "cluster",
			ClusterAddrs: cfg.RedisClusterAddrs,
			WaitReplicas: cfg.WaitReplicas(),
			WaitTimeout:  cfg.RedisWaitTimeout,
		}
		if cfg.RedisPasswordFile != "" {
			b, err := os.ReadFile(cfg.RedisPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("--redis-password-file: %w", err)
			}
			opts.Password = strings.TrimSpace(string(b))
		}
		if cfg.RedisCAFile != "" {
			pool, err := pki.LoadPool(cfg.RedisCAFile)
			if err != nil {
				return nil, fmt.Errorf("--redis-ca-file: %w", err)
			}
			opts.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		redisbackend.RouteClientLogs(log)
		be, err := redisbackend.New(ctx, opts)
		if err != nil {
			return nil, err
		}
		if err := be.CheckReplicas(ctx); err != nil {
			log.Warn("redis cluster cannot acknowledge writes to some slots", "err", err)
		}
		return be, nil
	}
	return nil, fmt.Errorf("--backend: unknown backend %q", cfg.Backend)
}

// Start opens the backend, loads the cache and serves the gRPC API (and metrics) in the
// background. Stop it with Stop.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	stoppingCtx, stopping := context.WithCancel(context.Background())
	var m *metrics
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return m.unary(ctx, req, info, h)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return m.stream(srv, ss, info, h)
	}
	srv, err := service.NewServer("storage", cfg.ServerConfig, log,
		grpc.ForceServerCodecV2(newWireCodec()),
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
		grpc.MaxRecvMsgSize(storage.MaxMessageBytes),
		grpc.MaxSendMsgSize(storage.MaxMessageBytes),
	)
	if err != nil {
		stopping()
		return nil, err
	}
	be, err := OpenBackend(ctx, cfg, log)
	if err != nil {
		stopping()
		srv.Stop(context.Background(), nil)
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c, err := cache.New(runCtx, be, cache.Config{FutureWait: cfg.FutureRevisionWait, BookmarkInterval: cfg.WatchBookmarkInterval,
		CoalesceRevisions: cfg.Backend == "redis"}, log)
	if err != nil {
		cancel()
		stopping()
		be.Close()
		srv.Stop(context.Background(), nil)
		return nil, fmt.Errorf("load storage cache: %w", err)
	}
	m = newMetrics(srv.Metrics, c)
	svc := &Service{be: be, cache: c, log: log, stopping: stoppingCtx}
	storagev1.RegisterStorageServer(srv.GRPC, svc)
	// The same service, codec and interceptors (and the health service) without the socket, for
	// clients in this process.
	inproc := srv.NewInProcess(service.InProcessOptions{Codec: newWireCodec(),
		Unary: []grpc.UnaryServerInterceptor{unary}, Stream: []grpc.StreamServerInterceptor{stream}})
	storagev1.RegisterStorageServer(inproc, svc)

	s := &Server{cfg: cfg, log: log, be: be, srv: srv, inproc: inproc, cancel: cancel, stopping: stopping}
	go c.RunCompactor(runCtx, cache.Retention{Duration: cfg.HistoryRetention, MaxEvents: cfg.HistoryMaxEvents, Interval: cfg.CompactionInterval})
	srv.Serve()
	go s.probe(runCtx)
	if cfg.Backend == "redis" {
		log.Info("storage backend open", "backend", cfg.Backend, "redis_mode", cmp.Or(cfg.RedisMode, "standalone"), "redis_wait_replicas", cfg.WaitReplicas())
	} else {
		log.Info("storage backend open", "backend", cfg.Backend)
	}
	return s, nil
}

// probe keeps the gRPC health status in step with the backend's reachability.
func (s *Server) probe(ctx context.Context) {
	serving := true
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.be.Ping(pctx)
		cancel()
		if ok := err == nil; ok != serving && ctx.Err() == nil {
			serving = ok
			if !ok {
				s.log.Warn("storage backend unreachable", "err", err)
			} else {
				s.log.Info("storage backend reachable again")
			}
			s.srv.SetServing(ok)
		}
	}
}

// Addr is the address the gRPC API listens on.
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// InProcess is a connection to this service for clients in the same process: it calls the
// handlers directly (through the same codec and interceptors as the listener, health included),
// without the listener's gRPC transport. It fails with Unavailable once the service stops.
func (s *Server) InProcess() grpc.ClientConnInterface { return s.inproc }

// Done is closed with Serve's result if the gRPC server stops on its own.
func (s *Server) Done() <-chan error { return s.srv.Done() }

// Stop shuts the service down gracefully: health goes NOT_SERVING, watches end (their clients
// resume elsewhere or after a restart), in-flight requests finish within ctx, then the backend
// closes.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		s.srv.Stop(ctx, s.stopping)
		s.cancel()
		if err := s.be.Close(); err != nil {
			s.log.Warn("closing storage backend", "err", err)
		}
		s.log.Info("storage service stopped")
	})
}

// Run serves until ctx ends, then shuts down within the configured timeout.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Backend == "embedded" {
		// Writes wait in fdatasync, holding their P (see service.SyncProcs).
		runtime.GOMAXPROCS(service.SyncProcs(os.Getenv("GOMAXPROCS")))
	}
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	return service.RunUntil(ctx, s.srv, cfg.ShutdownTimeout, s.Stop)
}

// Metrics is the service's metrics registry (for an embedding process to serve).
func (s *Server) Metrics() *prometheus.Registry { return s.srv.Metrics }
