package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/version"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/libs/service"
	"platform.io/libs/storage"
	"platform.io/services/gateway/admission"
	"platform.io/services/gateway/aggregator"
	"platform.io/services/gateway/apiserver"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/filters"
	"platform.io/services/gateway/health"
	"platform.io/services/gateway/openapi"
	"platform.io/services/gateway/registry"
)

// Version is what /version reports: the upstream API level the gateway serves.
var Version = version.Info{Major: "1", Minor: "33", GitVersion: "v1.33.0+" + naming.Product, Platform: runtime.GOOS + "/" + runtime.GOARCH}

// Options are what an embedding process (the all-in-one) hands the gateway instead of flags.
type Options struct {
	// StorageConn, AuthnConn, AuthzConn and AdmissionConn, when set, are used instead of dialing
	// the services' addresses.
	StorageConn   grpc.ClientConnInterface
	AuthnConn     grpc.ClientConnInterface
	AuthzConn     grpc.ClientConnInterface
	AdmissionConn grpc.ClientConnInterface
	// Ready, when set, is called once the gateway serves.
	Ready func(addr net.Addr)
	// LogHealthy, when set, is what the "log" health check reports (see LogWriter).
	LogHealthy func() error
	// MoreMetrics, when set, gives registries /metrics serves beside the gateway's, at every
	// scrape (the all-in-one's other services, prepared with service.InProcessMetrics; some start
	// after the gateway).
	MoreMetrics func() []prometheus.Gatherer
}

// Server is a running gateway.
type Server struct {
	cfg      Config
	log      *slog.Logger
	lis      net.Listener
	http     *http.Server
	health   *health.Health
	conns    []*grpc.ClientConn
	cancel   context.CancelFunc
	served   chan error
	stopOnce sync.Once
	stopped  chan struct{}
	auditor  *audit.Auditor
	// bootstrapped is closed once the initial namespaces and the default RBAC policy are stored.
	bootstrapped chan struct{}
	// kubeService keeps the kubernetes Service and this gateway's place in its endpoints.
	kubeService *apiserver.KubernetesService
}

// Start validates the configuration, connects to storage, and serves HTTPS in the background.
func Start(ctx context.Context, cfg Config, opts Options, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, _ := registry.ParseRuntimeConfig(cfg.RuntimeConfig)
	reg, err := registry.New(rc)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := servingTLS(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, served: make(chan error, 1), stopped: make(chan struct{}), bootstrapped: make(chan struct{})}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	started := false
	defer func() {
		if !started {
			cancel()
			s.closeConns()
		}
	}()
	dial := func(given grpc.ClientConnInterface, cc service.ClientConfig, opts ...grpc.DialOption) (grpc.ClientConnInterface, error) {
		if given != nil {
			return given, nil
		}
		conn, err := cc.Dial(opts...)
		if err != nil {
			return nil, err
		}
		s.conns = append(s.conns, conn)
		return conn, nil
	}
	storageConn, err := dial(opts.StorageConn, cfg.Storage, storage.CallOptions())
	if err != nil {
		return nil, err
	}
	authnConn, err := dial(opts.AuthnConn, cfg.Authn)
	if err != nil {
		return nil, err
	}
	authzConn, err := dial(opts.AuthzConn, cfg.Authz)
	if err != nil {
		return nil, err
	}
	admissionConn, err := dial(opts.AdmissionConn, cfg.Admission)
	if err != nil {
		return nil, err
	}
	s.health = health.New(health.Options{LivezGracePeriod: cfg.LivezGracePeriod, Start: time.Now(), Logger: log, LogHealthy: opts.LogHealthy})
	authnCheck, authzCheck := serviceCheck("authentication", authnConn), serviceCheck("authorization", authzConn)
	admissionCheck := serviceCheck("admission", admissionConn)
	s.health.AddHealthz(health.Ping(), health.Log(), serviceCheck("storage", storageConn), authnCheck, authzCheck, admissionCheck)
	s.health.AddLivez(health.Ping(), health.Log(), serviceCheck("storage", storageConn))
	s.health.AddReadyz(health.Ping(), health.Log(), serviceCheck("storage", storageConn), authnCheck, authzCheck, admissionCheck)

	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	authz := auth.NewRemoteAuthorizer(authzConn, log, metrics)
	go authz.Run(runCtx)
	authn := auth.NewRemote(authnConn, log, metrics)
	adm := admission.New(admissionConn, log, metrics)
	go adm.Run(runCtx)
	api := apiserver.New(apiserver.Config{
		Registry:          reg,
		Storage:           apiserver.StorageClient(storage.NewClient(storageConn)),
		Authn:             authn,
		Authz:             authz,
		Admission:         adm,
		Logger:            log,
		MinRequestTimeout: cfg.MinRequestTimeout,
		RequestTimeout:    cfg.RequestTimeout,
		BookmarkInterval:  cfg.WatchBookmarkInterval,
		Version:           Version,
		Context:           runCtx,
		DisableWatchHub:   !cfg.WatchCache,
		Metrics:           metrics,
		DiscoveryV2Beta1:  !cfg.FeatureGates.AggregatedDiscoveryRemoveBetaType,
		// core componentstatuses report the services behind the gateway, by their readyz names.
		Components: []apiserver.Component{componentOf("storage", storageConn), componentOf("authentication", authnConn),
			componentOf("authorization", authzConn), componentOf("admission", admissionConn)},
	})
	router := mux.NewRouter()
	router.UseEncodedPath()
	s.health.Install(router)
	reqs := newRequestMetrics(metrics)
	var gatherer prometheus.Gatherer = metrics
	if more := opts.MoreMetrics; more != nil {
		gatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			return append(prometheus.Gatherers{metrics}, more()...).Gather()
		})
	}
	router.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	if cfg.Profiling {
		router.PathPrefix("/debug/pprof/").Handler(service.ProfilingHandler())
	}
	oa, err := openapi.New(reg)
	if err != nil {
		return nil, err
	}
	oa.Install(router)
	api.Install(router)
	router.NotFoundHandler = api.NotFound()
	router.MethodNotAllowedHandler = api.NotFound()
	// The aggregation layer: requests for remote APIServices' group versions go to their
	// extension API servers (aggregator.New is nil when apiregistration is turned off).
	agg, err := aggregator.New(aggregator.Config{
		API: api, Registry: reg, ProxyClientCertFile: cfg.ProxyClientCertFile, ProxyClientKeyFile: cfg.ProxyClientKeyFile,
		Controllers: cfg.EnableControllers, CRDsSynced: api.CRDsSynced(), Logger: log,
		Metrics: metrics, EndpointRouting: cfg.EnableAggregatorRouting,
	})
	if err != nil {
		return nil, err
	}
	var routed http.Handler = api.ResourcesFirst(router)
	if agg != nil {
		routed = agg.Handler(routed)
		oa.SetAggregatedV2(agg.OpenAPIV2) // extension servers' documents join /openapi/v2
	}

	auditOpts := cfg.Audit
	auditOpts.ProtobufToJSON = protobufToJSON(reg.Scheme)
	auditor, err := audit.New(auditOpts, log, metrics)
	if err != nil {
		return nil, err
	}
	s.auditor = auditor
	// The handler chain, outermost first (docs/architecture.md, decision 24): panic recovery, the
	// server span, the Audit-Id, request info, response compression, the audit record, metrics,
	// in-flight limits, authentication, impersonation, authorization, the request timeout, then
	// the routes. Every path goes through all of it: no route authenticates or authorizes by
	// itself, and a 404 is only ever the answer to someone authorized to ask. Compression wraps
	// everything that writes answers (the audit record keeps the bodies as they were encoded).
	handler := filters.WithTimeout(routed, cfg.RequestTimeout)
	handler = filters.WithAuthorization(handler, authz, api.WriteError, log)
	handler = filters.WithImpersonation(handler, authz, api.WriteError, log)
	handler = filters.WithAuthentication(handler, authn, api.WriteError, log)
	handler = newInflightLimiter(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight).wrap(handler)
	handler = withTrace(reqs.wrap(handler), log)
	handler = auditor.Handler(handler)
	handler = filters.WithCompression(handler, cfg.FeatureGates.APIResponseCompression)
	handler = filters.WithRequestInfo(handler, api.Resolver())
	handler = withRequestID(handler, log)
	// One server span per request, continuing a client's traceparent; named "{method} {route}".
	handler = withServerSpan(handler)
	handler = withPanicRecovery(handler, log)

	s.lis, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.SecurePort)))
	if err != nil {
		return nil, fmt.Errorf("--bind-address/--secure-port: %w", err)
	}
	started = true
	// The kubernetes Service: its cluster IP and this gateway's advertised address and port (the
	// listener's, which a port of 0 chose).
	serviceIP, _ := cfg.KubernetesServiceIP()
	var advertise net.IP
	if cfg.EndpointReconcilerType == apiserver.EndpointReconcilerLease {
		advertise, _ = cfg.AdvertiseIP()
	}
	s.kubeService = api.KubernetesService(apiserver.KubernetesServiceConfig{ServiceIP: serviceIP, AdvertiseIP: advertise,
		SecurePort: int32(s.lis.Addr().(*net.TCPAddr).Port), Reconciler: cfg.EndpointReconcilerType})
	s.http = &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		// One client (an informer factory, kubectl get -w) multiplexes many watches over one
		// connection: allow as many streams per connection as upstream does.
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: 1000},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		err := s.http.ServeTLS(s.lis, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()

	bootstrap := s.health.AddPostStartHook("bootstrap-namespaces")
	policy := s.health.AddPostStartHook("rbac/bootstrap-roles")
	priorities := s.health.AddPostStartHook("scheduling/bootstrap-system-priority-classes")
	go func() {
		// The default policy's namespaced roles live in the initial namespaces: these go first.
		for _, step := range []struct {
			what string
			run  func(context.Context) error
			done func()
		}{
			{"creating the initial namespaces", api.EnsureNamespaces, bootstrap},
			{"reconciling the default RBAC policy", api.EnsureBootstrapPolicy, policy},
			{"creating the system priority classes", api.EnsurePriorityClasses, priorities},
		} {
			for runCtx.Err() == nil {
				if err := step.run(runCtx); err != nil {
					log.Warn(step.what, "error", err)
					select {
					case <-runCtx.Done():
					case <-time.After(time.Second):
					}
					continue
				}
				step.done()
				break
			}
		}
		if runCtx.Err() == nil {
			close(s.bootstrapped)
			// The kubernetes Service lives in the default namespace, which exists from now on
			// (upstream's bootstrap-controller).
			go s.kubeService.Run(runCtx)
		}
	}()
	// Custom resources are served once the stored definitions are read (readyz waits for it).
	crdsSynced := s.health.AddPostStartHook("crd-informer-synced")
	go api.RunCRDInformer(runCtx, cfg.EnableControllers)
	if agg != nil {
		// Requests for remote group versions are routed once the stored APIServices are read.
		registered := s.health.AddPostStartHook("apiservice-registration-controller")
		go func() {
			select {
			case <-agg.Synced():
				registered()
			case <-runCtx.Done():
			}
		}()
		go agg.Run(runCtx)
	}
	go func() {
		select {
		case <-api.CRDsSynced():
			crdsSynced()
		case <-runCtx.Done():
		}
	}()
	log.Info("gateway serving", "address", s.lis.Addr().String())
	if opts.Ready != nil {
		opts.Ready(s.lis.Addr())
	}
	return s, nil
}

// Bootstrapped is closed once the initial namespaces and the default RBAC policy are stored (the
// controllers, whose permissions come from that policy, start after it in the all-in-one).
func (s *Server) Bootstrapped() <-chan struct{} { return s.bootstrapped }

// Addr is the address the gateway serves on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Done delivers the listener's end (nil after a clean shutdown).
func (s *Server) Done() <-chan error { return s.served }

// Stop shuts down as upstream does: /readyz fails at once, requests are served for
// --shutdown-delay-duration, then the listener closes, open watches end (clients resume
// elsewhere), and in-flight requests finish within --shutdown-timeout.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		s.health.ShutdownInitiated()
		// This gateway leaves the kubernetes Service's endpoints first, so in-cluster clients
		// stop being sent to it during the shutdown delay (upstream's pre-shutdown hook).
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.kubeService.Stop(lctx); err != nil {
			s.log.Warn("leaving the kubernetes service's endpoints", "error", err)
		}
		cancel()
		if d := s.cfg.ShutdownDelayDuration; d > 0 {
			s.log.Info("shutdown delayed", "delay", d.String())
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		sctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
		// Watches are long-running: end them so Shutdown does not wait out their timeouts.
		go func() {
			time.Sleep(100 * time.Millisecond)
			s.cancel()
		}()
		if err := s.http.Shutdown(sctx); err != nil {
			s.log.Warn("graceful shutdown incomplete", "error", err)
			_ = s.http.Close()
		}
		s.cancel()
		s.closeConns()
		if err := s.auditor.Close(); err != nil {
			s.log.Warn("closing the audit log", "error", err)
		}
		close(s.stopped)
	})
	<-s.stopped
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config, opts Options, log *slog.Logger) error {
	s, err := Start(ctx, cfg, opts, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		s.Stop(context.Background())
		return nil
	case err := <-s.Done():
		s.Stop(context.Background())
		return err
	}
}

// servingTLS is the HTTPS configuration: HTTP/2 and HTTP/1.1, client certificates verified
// against --client-ca-file when offered (a request without one is answered 401 by the API).
func servingTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
	}
	pool, err := pki.LoadPool(cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	if cfg.RequestHeaderClientCAFile != "" {
		// Proxies present certificates of their own CA; which CA vouches for which identity is
		// the authentication service's decision.
		data, err := os.ReadFile(cfg.RequestHeaderClientCAFile)
		if err != nil || !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("--requestheader-client-ca-file: no CA certificate read from %s (%v)", cfg.RequestHeaderClientCAFile, err)
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

func (s *Server) closeConns() {
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// serviceCheck is the health check of a service behind the gateway (its gRPC health, which
// follows its own dependencies).
func serviceCheck(name string, conn grpc.ClientConnInterface) health.Check {
	return health.Check{Name: name, Run: func(r *http.Request) error {
		return service.CheckHealth(r.Context(), conn, 2*time.Second)
	}}
}

// componentOf is a service behind the gateway as core componentstatuses report it (its gRPC
// health, as its readyz check).
func componentOf(name string, conn grpc.ClientConnInterface) apiserver.Component {
	return apiserver.Component{Name: name, Check: func(ctx context.Context) error {
		return service.CheckHealth(ctx, conn, 2*time.Second)
	}}
}

// withRequestID gives every request an Audit-Id (echoed to the client, as upstream) and a logger
// line when it fails on the server side.
func withRequestID(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Audit-Id")
		if id == "" {
			id = uuid.NewString()
		}
		w.Header().Set("Audit-Id", id)
		next.ServeHTTP(w, r.WithContext(apiserver.WithAuditID(r.Context(), id)))
	})
}

// withPanicRecovery turns a handler panic into a 500 (and a log line) instead of a dropped
// connection; http.ErrAbortHandler keeps its meaning.
func withPanicRecovery(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The outermost handler, on the goroutine net/http started for the request: give it the
		// stack the chain needs now, rather than through copies deep inside it (a write, with
		// admission and the field manager, needs twice a read's).
		service.GrowStack(r.Method != http.MethodGet && r.Method != http.MethodHead)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("handler panic", "audit_id", w.Header().Get("Audit-Id"), "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internal error","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// protobufToJSON decodes a Protobuf body with the registry's kinds and encodes it as JSON (for
// the audit log's request and response objects).
func protobufToJSON(scheme *kruntime.Scheme) func([]byte) ([]byte, error) {
	pb := protobuf.NewSerializer(scheme, scheme)
	return func(data []byte) ([]byte, error) {
		obj, gvk, err := pb.Decode(data, nil, nil)
		if err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		return json.Marshal(obj)
	}
}
