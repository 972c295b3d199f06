// Package service is the scaffolding every Platform gRPC service shares: a listener (TCP or unix
// socket) served over mutual TLS with certificates re-read on rotation, the standard gRPC health
// service, Prometheus metrics, OpenTelemetry spans, graceful shutdown; and on the client side,
// dialing another service with the same credentials. Each service adds only its own API.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"
)

// ServerConfig is how a service serves its gRPC API; each service embeds it in its Config.
type ServerConfig struct {
	// Listen is host:port, or unix:///path for a unix socket.
	Listen string
	// TLSCertFile and TLSPrivateKeyFile enable TLS on the listener (re-read when they change).
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile requires client certificates signed by this CA (mutual TLS).
	ClientCAFile string
	// MetricsBindAddress serves Prometheus metrics at /metrics; empty disables.
	MetricsBindAddress string
	// Profiling also serves Go's runtime profiles at /debug/pprof/ on the metrics listener.
	Profiling bool
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration
}

// RegisterFlags registers the listener's flags; listen is the default address.
func (c *ServerConfig) RegisterFlags(fs *pflag.FlagSet, listen string) {
	fs.StringVar(&c.Listen, "listen", listen, "gRPC listen address: host:port or unix:///path")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "serving certificate (PEM) for the gRPC listener; re-read when it changes")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", "", "private key (PEM) of --tls-cert-file")
	fs.StringVar(&c.ClientCAFile, "tls-client-ca-file", "", "require client certificates signed by this CA (mutual TLS between services); re-read when it changes")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", "", "host:port serving Prometheus metrics at /metrics (empty: off)")
	fs.BoolVar(&c.Profiling, "profiling", false, "also serve Go's runtime profiles at /debug/pprof/ on --metrics-bind-address (unauthenticated: keep that address private)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long a graceful shutdown may take")
}

// Validate reports the listener's configuration errors, each naming its flag.
func (c *ServerConfig) Validate() []error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("--listen is required"))
	}
	if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	if c.ClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-private-key-file"))
	}
	if c.Profiling && c.MetricsBindAddress == "" {
		errs = append(errs, errors.New("--profiling needs --metrics-bind-address (the profiles are served there)"))
	}
	if c.TLSCertFile == "" && !strings.HasPrefix(c.Listen, "unix://") && c.Listen != "" && !IsLoopback(c.Listen) {
		errs = append(errs, fmt.Errorf("--listen %s is not loopback: set --tls-cert-file, --tls-private-key-file and --tls-client-ca-file for mutual TLS", c.Listen))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	return errs
}

// Server is a gRPC service being served.
type Server struct {
	// GRPC is the gRPC server: register the service's API on it before Serve.
	GRPC *grpc.Server
	// Metrics is the service's Prometheus registry (Go and process collectors and the gRPC
	// server metrics, grpc_server_*, included; grpc_server_panics_total among them).
	Metrics *prometheus.Registry

	name     string
	cfg      ServerConfig
	log      *slog.Logger
	health   *health.Server
	lis      net.Listener
	metrics  *http.Server
	mlis     net.Listener
	served   chan error
	stopOnce sync.Once
	grpcm    *grpcMetrics
	recovery *panicRecovery
	// started is set by Serve: a server stopped before it served closes its listener itself.
	started atomic.Bool
	// inprocs are the in-process connections NewInProcess made, which Stop stops.
	inprocMu sync.Mutex
	inprocs  []*InProcess
}

// NewServer listens and builds the gRPC server with the service's credentials, spans and
// keepalive policy, and recovery from handler panics (an Internal status, logged and counted in
// grpc_server_panics_total); opts add the service's own options (codecs, interceptors, message
// sizes). Nothing is served until Serve.
func NewServer(name string, cfg ServerConfig, log *slog.Logger, opts ...grpc.ServerOption) (*Server, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The registry comes first: the gRPC metrics interceptors record into it.
	reg := prometheus.NewRegistry()
	gm := newGRPCMetrics(reg)
	rec := newPanicRecovery(log, reg)
	base := []grpc.ServerOption{
		// Recovery runs inside the metrics, which count a recovered panic as the Internal the
		// client gets, and outside the service's own interceptors (opts), whose panics it
		// recovers too.
		grpc.ChainUnaryInterceptor(gm.unary, rec.unary),
		grpc.ChainStreamInterceptor(gm.stream, rec.stream),
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		// Calls run on a pool of worker goroutines, one per P, instead of a new goroutine each:
		// a worker's stack has grown to what a call needs, where a new goroutine grew (copied)
		// its stack during every call (5% of the storage service's CPU serving gets). A call
		// that finds every worker busy (a watch holds one for its life) gets its own goroutine.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if cfg.TLSCertFile != "" {
		tc, err := ServerTLS(cfg.TLSCertFile, cfg.TLSPrivateKeyFile, cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file/--tls-client-ca-file: %w", err)
		}
		base = append(base, grpc.Creds(credentials.NewTLS(tc)))
	}
	lis, err := Listen(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	s := &Server{
		GRPC:     grpc.NewServer(append(base, opts...)...),
		Metrics:  reg,
		grpcm:    gm,
		recovery: rec,
		name:     name,
		cfg:      cfg,
		log:      log,
		health:   health.NewServer(),
		lis:      lis,
		served:   make(chan error, 1),
	}
	s.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	healthpb.RegisterHealthServer(s.GRPC, s.health)
	if cfg.MetricsBindAddress != "" {
		if s.mlis, err = net.Listen("tcp", cfg.MetricsBindAddress); err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	return s, nil
}

// Listen opens host:port, or unix:///path (replacing a stale socket of an earlier run).
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		_ = os.Remove(path)
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", addr)
}

// Serve starts serving the gRPC API and metrics in the background and marks every registered
// service SERVING.
func (s *Server) Serve() { s.serve(true) }

// ServeUnready is Serve for a service that is not ready yet (caches still loading): health says
// NOT_SERVING until SetServing(true).
func (s *Server) ServeUnready() { s.serve(false) }

func (s *Server) serve(ready bool) {
	s.started.Store(true)
	s.grpcm.initialize(s.GRPC)
	s.recovery.initialize(s.GRPC)
	if s.mlis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{Registry: s.Metrics}))
		if s.cfg.Profiling {
			mux.Handle("/debug/pprof/", ProfilingHandler())
		}
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = s.metrics.Serve(s.mlis) }()
	}
	s.SetServing(ready)
	go func() { s.served <- s.GRPC.Serve(s.lis) }()
	if s.cfg.TLSCertFile == "" {
		s.log.Warn(s.name+" gRPC listener has no TLS; use --tls-cert-file, --tls-private-key-file and --tls-client-ca-file outside a single host", "listen", s.lis.Addr().String())
	}
	s.log.Info(s.name+" service started", "listen", s.lis.Addr().String(), "tls", s.cfg.TLSCertFile != "", "mtls", s.cfg.ClientCAFile != "")
}

// SetServing sets the health of the server and every service registered on it.
func (s *Server) SetServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for name := range s.GRPC.GetServiceInfo() {
		if name != healthpb.Health_ServiceDesc.ServiceName {
			s.health.SetServingStatus(name, st)
		}
	}
}

// Addr is the address the gRPC API listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Done delivers Serve's result if the gRPC server stops on its own.
func (s *Server) Done() <-chan error { return s.served }

// Stop shuts down gracefully: health goes NOT_SERVING, beforeDrain runs (ending streams such as
// watches, whose clients resume elsewhere), in-flight calls finish within ctx (those over the
// listener, then those of the in-process connections, which refuse new calls from then on), then
// metrics stop.
func (s *Server) Stop(ctx context.Context, beforeDrain func()) {
	s.stopOnce.Do(func() {
		s.health.Shutdown()
		if !s.started.Load() {
			// Never served: gRPC does not own the listener yet.
			_ = s.lis.Close()
		}
		if beforeDrain != nil {
			beforeDrain()
		}
		done := make(chan struct{})
		go func() { s.GRPC.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.GRPC.Stop()
		}
		s.inprocMu.Lock()
		inprocs := s.inprocs
		s.inprocMu.Unlock()
		for _, p := range inprocs {
			p.Stop(ctx)
		}
		if s.metrics != nil {
			_ = s.metrics.Shutdown(ctx)
		} else if s.mlis != nil {
			_ = s.mlis.Close()
		}
	})
}

// RunUntil serves until ctx ends or the server fails, then stops within the configured timeout;
// stop is the service's own shutdown (it should call Stop).
func RunUntil(ctx context.Context, s *Server, timeout time.Duration, stop func(context.Context)) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-s.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stop(sctx)
	return err
}

// runtimeFamilies are the metric families of the Go runtime and the process, which every
// service's registry has: in one process (the all-in-one) they are one process's, served once.
var runtimeFamilies = []string{"go_", "process_"}

// grpcServerFamilies are the gRPC server's families, which every service has for the methods it
// serves (all of them for grpc.health.v1.Health).
const grpcServerFamilies = "grpc_server_"

// InProcessMetrics is the registry g of the named service prepared for serving with other
// services' registries of one process: without the Go runtime's and the process's families, and
// with its gRPC server series labelled service=<name> (those of grpc.health.v1.Health would
// otherwise be the same series in every service). Every other series is as the service's own
// endpoint serves it.
func InProcessMetrics(name string, g prometheus.Gatherer) prometheus.Gatherer {
	label := &dto.LabelPair{Name: proto.String("service"), Value: proto.String(name)}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if slices.ContainsFunc(runtimeFamilies, func(p string) bool { return strings.HasPrefix(mf.GetName(), p) }) {
				continue
			}
			if strings.HasPrefix(mf.GetName(), grpcServerFamilies) {
				for _, m := range mf.Metric {
					i, _ := slices.BinarySearchFunc(m.Label, "service", func(l *dto.LabelPair, n string) int { return strings.Compare(l.GetName(), n) })
					m.Label = slices.Insert(m.Label, i, label)
				}
			}
			out = append(out, mf)
		}
		return out, err
	})
}
