package server

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"

	"platform.io/libs/service"
	"platform.io/libs/storage"
	authnv1 "platform.io/proto/authn/v1"
)

// Options are what an embedding process (the all-in-one) hands the service instead of flags.
type Options struct {
	// StorageConn, when set, is used instead of dialing --storage-address.
	StorageConn grpc.ClientConnInterface
}

// Server is a running authentication service.
type Server struct {
	srv    *service.Server
	inproc *service.InProcess
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	log    *slog.Logger
	once   sync.Once
}

// Start validates the configuration, builds the identity methods and serves the gRPC API.
func Start(ctx context.Context, cfg Config, opts Options, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{log: log}
	conn := opts.StorageConn
	if conn == nil {
		c, err := cfg.Storage.Dial(storage.CallOptions())
		if err != nil {
			return nil, err
		}
		s.conn, conn = c, c
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	m, err := buildMethods(runCtx, cfg, storedObjects{client: storage.NewClient(conn)}, log)
	if err != nil {
		s.close()
		return nil, err
	}
	srv, err := service.NewServer("authn", cfg.ServerConfig, log)
	if err != nil {
		s.close()
		return nil, err
	}
	svc := &Service{
		requestMethods: m.request,
		tokenMethods:   m.token,
		issuer:         m.issuer,
		describe:       m.describe(cfg),
		cacheTTL:       cfg.CacheTTL,
		log:            log,
		metrics:        newMetrics(srv.Metrics),
	}
	authnv1.RegisterAuthenticationServer(srv.GRPC, svc)
	// The same service (and the health service) without the socket, for clients in this process.
	s.inproc = srv.NewInProcess(service.InProcessOptions{})
	authnv1.RegisterAuthenticationServer(s.inproc, svc)
	s.srv = srv
	srv.Serve()
	return s, nil
}

func (s *Server) close() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// Addr is the address the gRPC API listens on.
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// InProcess is a connection to this service for clients in the same process (the all-in-one): it
// calls the handlers directly (through the same interceptors as the listener, health included),
// without the listener's gRPC transport. It fails with Unavailable once the service stops.
func (s *Server) InProcess() grpc.ClientConnInterface { return s.inproc }

// Stop shuts down gracefully: in-flight calls, in-process ones included, finish within ctx.
func (s *Server) Stop(ctx context.Context) {
	s.once.Do(func() {
		s.srv.Stop(ctx, nil)
		s.close()
		s.log.Info("authentication service stopped")
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
