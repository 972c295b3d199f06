package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"platform.io/libs/pki"
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
	grpc     *grpc.Server
	health   *health.Server
	lis      net.Listener
	metrics  *http.Server
	cancel   context.CancelFunc // ends the cache readers, compactor and health probe
	stopping context.CancelFunc // ends the watches
	served   chan error
	stopOnce sync.Once
}

// OpenBackend opens the backend the configuration names.
func OpenBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend.Backend, error) {
	switch cfg.Backend {
	case "embedded":
		return embedded.Open(filepath.Join(cfg.DataDir, "storage.db"), embedded.Options{})
	case "redis":
		opts := redisbackend.Options{URL: cfg.RedisURL}
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
		return redisbackend.New(ctx, opts)
	}
	return nil, fmt.Errorf("--backend: unknown backend %q", cfg.Backend)
}

func serverCredentials(cfg Config) (grpc.ServerOption, error) {
	if cfg.TLSCertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClientCAFile != "" {
		pool, err := pki.LoadPool(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(credentials.NewTLS(tc)), nil
}

func listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		_ = os.Remove(path) // a stale socket of a previous run
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", addr)
}

// Start opens the backend, loads the cache and serves the gRPC API (and metrics) in the
// background. Stop it with Stop.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	creds, err := serverCredentials(cfg)
	if err != nil {
		return nil, err
	}
	be, err := OpenBackend(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c, err := cache.New(runCtx, be, cache.Config{FutureWait: cfg.FutureRevisionWait, BookmarkInterval: cfg.WatchBookmarkInterval}, log)
	if err != nil {
		cancel()
		be.Close()
		return nil, fmt.Errorf("load storage cache: %w", err)
	}
	lis, err := listen(cfg.Listen)
	if err != nil {
		cancel()
		be.Close()
		return nil, fmt.Errorf("--listen: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg, c)
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newWireCodec()),
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.ChainUnaryInterceptor(m.unary),
		grpc.ChainStreamInterceptor(m.stream),
		grpc.MaxRecvMsgSize(storage.MaxMessageBytes),
		grpc.MaxSendMsgSize(storage.MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if creds != nil {
		opts = append(opts, creds)
	} else {
		log.Warn("storage gRPC listener has no TLS; use --tls-cert-file, --tls-private-key-file and --client-ca-file outside a single host", "listen", lis.Addr().String())
	}
	stoppingCtx, stopping := context.WithCancel(context.Background())
	gs := grpc.NewServer(opts...)
	storagev1.RegisterStorageServer(gs, &Service{be: be, cache: c, log: log, stopping: stoppingCtx})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)

	s := &Server{cfg: cfg, log: log, be: be, grpc: gs, health: hs, lis: lis, cancel: cancel, stopping: stopping, served: make(chan error, 1)}
	go c.RunCompactor(runCtx, cache.Retention{Duration: cfg.HistoryRetention, MaxEvents: cfg.HistoryMaxEvents, Interval: cfg.CompactionInterval})
	go s.probe(runCtx)
	if cfg.MetricsBindAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		s.metrics = &http.Server{Addr: cfg.MetricsBindAddress, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		mlis, err := net.Listen("tcp", cfg.MetricsBindAddress)
		if err != nil {
			s.Stop(context.Background())
			return nil, fmt.Errorf("--metrics-bind-address: %w", err)
		}
		go func() { _ = s.metrics.Serve(mlis) }()
	}
	go func() { s.served <- gs.Serve(lis) }()
	log.Info("storage service started", "listen", lis.Addr().String(), "backend", cfg.Backend, "tls", creds != nil, "mtls", cfg.ClientCAFile != "")
	return s, nil
}

// probe keeps the gRPC health status in step with the backend's reachability.
func (s *Server) probe(ctx context.Context) {
	serving := true
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(storagev1.Storage_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
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
			st := healthpb.HealthCheckResponse_SERVING
			if !ok {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				s.log.Warn("storage backend unreachable", "err", err)
			} else {
				s.log.Info("storage backend reachable again")
			}
			s.health.SetServingStatus("", st)
			s.health.SetServingStatus(storagev1.Storage_ServiceDesc.ServiceName, st)
		}
	}
}

// Addr is the address the gRPC API listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Done is closed with Serve's result if the gRPC server stops on its own.
func (s *Server) Done() <-chan error { return s.served }

// Stop shuts the service down gracefully: health goes NOT_SERVING, watches end (their clients
// resume elsewhere or after a restart), in-flight requests finish within ctx, then the backend
// closes.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		s.health.Shutdown()
		s.stopping()
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
		}
		if s.metrics != nil {
			_ = s.metrics.Shutdown(ctx)
		}
		s.cancel()
		if err := s.be.Close(); err != nil {
			s.log.Warn("closing storage backend", "err", err)
		}
		s.log.Info("storage service stopped")
	})
}

// Run serves until ctx ends, then shuts down within the configured timeout.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-s.served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	s.Stop(sctx)
	return serveErr
}
