package server

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"platform.io/libs/service"
	"platform.io/libs/storage"
	"platform.io/services/certificates/signer"
)

// Options are what an embedding process (the all-in-one, tests) hands the service instead of flags.
type Options struct {
	// StorageConn, when set, is used instead of dialing --storage-address.
	StorageConn grpc.ClientConnInterface
	// Now is the clock of issued certificates and condition times (default time.Now).
	Now func() time.Time
}

// Server is a running certificates service.
type Server struct {
	srv    *service.Server
	ctrl   *controller
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	log    *slog.Logger
	once   sync.Once
}

// Start validates the configuration, reads the signers' CAs, starts watching requests and serves
// gRPC health (NOT_SERVING until the first list of requests is in) and metrics.
func Start(_ context.Context, cfg Config, opts Options, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	signers := map[string]*signer.Signer{}
	for name, kp := range cfg.Signing.CAFiles() {
		ca, err := signer.LoadCAFiles(kp.CertFile, kp.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("the CA of signer %s: %w", name, err)
		}
		s, err := signer.New(name, ca, cfg.Signing.Duration)
		if err != nil {
			return nil, err
		}
		signers[name] = s
	}
	s := &Server{log: log, done: make(chan struct{})}
	storageConn := opts.StorageConn
	if storageConn == nil {
		c, err := cfg.Storage.Dial(storage.CallOptions())
		if err != nil {
			return nil, err
		}
		s.conn, storageConn = c, c
	}
	srv, err := service.NewServer("certificates", cfg.ServerConfig, log)
	if err != nil {
		s.closeConn()
		return nil, err
	}
	s.srv = srv
	s.ctrl = newController(storage.NewClient(storageConn), signers, now, newMetrics(srv.Metrics), log)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	synced := s.ctrl.run(runCtx, s.done)
	srv.ServeUnready()
	go func() {
		select {
		case <-synced:
			srv.SetServing(true)
			names := make([]string, 0, len(signers))
			for _, n := range signer.Names() {
				if signers[n] != nil {
					names = append(names, n)
				}
			}
			log.Info("certificate signers ready", "signers", fmt.Sprint(names), "duration", cfg.Signing.Duration.String())
		case <-runCtx.Done():
		}
	}()
	return s, nil
}

func (s *Server) closeConn() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// Addr is the address the gRPC listener (health) is on.
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// Stop shuts down: health goes NOT_SERVING, the watch and the signing worker end (a write in
// flight finishes or is abandoned within ctx), then the connection to storage closes.
func (s *Server) Stop(ctx context.Context) {
	s.once.Do(func() {
		s.srv.Stop(ctx, nil)
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		s.closeConn()
		s.log.Info("certificates service stopped")
	})
}

// Run serves until ctx ends, then shuts down within the configured timeout.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, Options{}, log)
	if err != nil {
		return err
	}
	return service.RunUntil(ctx, s.srv, cfg.ShutdownTimeout, s.Stop)
}

// Metrics is the service's metrics registry (for an embedding process to serve).
func (s *Server) Metrics() *prometheus.Registry { return s.srv.Metrics }
