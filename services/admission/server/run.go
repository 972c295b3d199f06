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
	admissionv1 "platform.io/proto/admission/v1"
	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/webhook"
)

// Options are what an embedding process (the all-in-one, tests) hands the service instead of flags.
type Options struct {
	// StorageConn and AuthzConn, when set, are used instead of dialing the services' addresses.
	StorageConn grpc.ClientConnInterface
	AuthzConn   grpc.ClientConnInterface
	// Registry holds the plugins' factories (default: every plugin this module has, Plugins()).
	Registry *admission.Registry
}

// Server is a running admission service.
type Server struct {
	srv    *service.Server
	inproc *service.InProcess
	svc    *Service
	conns  []*grpc.ClientConn
	cancel context.CancelFunc
	log    *slog.Logger
	once   sync.Once
}

// Start validates the configuration, builds the enabled plugins, starts the watches of the objects
// they read and serves the gRPC API (NOT_SERVING until the watches have listed).
func Start(ctx context.Context, cfg Config, opts Options, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	enabled, _ := admission.Enabled(cfg.EnablePlugins, cfg.DisablePlugins)
	var configs map[string][]byte
	if cfg.ConfigFile != "" {
		var warnings []string
		var err error
		if configs, warnings, err = admission.ReadConfigFile(cfg.ConfigFile); err != nil {
			return nil, err
		}
		for _, w := range warnings {
			log.Warn(w)
		}
	}
	s := &Server{log: log}
	dial := func(given grpc.ClientConnInterface, cc service.ClientConfig, o ...grpc.DialOption) (grpc.ClientConnInterface, error) {
		if given != nil {
			return given, nil
		}
		c, err := cc.Dial(o...)
		if err != nil {
			return nil, err
		}
		s.conns = append(s.conns, c)
		return c, nil
	}
	storageConn, err := dial(opts.StorageConn, cfg.Storage, storage.CallOptions())
	if err != nil {
		return nil, err
	}
	authzConn, err := dial(opts.AuthzConn, cfg.Authz)
	if err != nil {
		s.closeConns()
		return nil, err
	}
	client := storage.NewClient(storageConn)
	objs := newObjects(client, log)
	srv, err := service.NewServer("admission", cfg.ServerConfig, log)
	if err != nil {
		s.closeConns()
		return nil, err
	}
	m := newMetrics(srv.Metrics)
	if err := webhook.SetMetrics(srv.Metrics); err != nil {
		srv.Stop(context.Background(), nil)
		s.closeConns()
		return nil, err
	}
	reg := opts.Registry
	if reg == nil {
		reg = Plugins()
	}
	deps := admission.Deps{Objects: objs, Store: &store{client: client, now: time.Now}, Authorizer: remoteAuthorizer{authzv1.NewAuthorizationClient(authzConn)},
		Resources: objs.resources, Log: log, Now: time.Now}
	chain, err := admission.Build(reg, enabled, configs, deps, m.observe)
	if err != nil {
		srv.Stop(context.Background(), nil)
		s.closeConns()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	synced := objs.run(runCtx)
	ready := func() bool {
		select {
		case <-synced:
			return true
		default:
			return false
		}
	}
	s.svc = &Service{chain: chain, ready: ready, interest: newInterestState(chain), log: log, metrics: m}
	admissionv1.RegisterAdmissionServer(srv.GRPC, s.svc)
	// The same service (and the health service) without the socket, for clients in this process.
	s.inproc = srv.NewInProcess(service.InProcessOptions{})
	admissionv1.RegisterAdmissionServer(s.inproc, s.svc)
	s.srv = srv
	srv.ServeUnready()
	go s.svc.interest.follow(runCtx)
	go func() {
		select {
		case <-synced:
			s.svc.interest.refresh()
			srv.SetServing(true)
			log.Info("admission plugins ready", "plugins", fmt.Sprint(chain.Names()))
		case <-runCtx.Done():
		}
	}()
	return s, nil
}

func (s *Server) closeConns() {
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// Addr is the address the gRPC API listens on.
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// InProcess is a connection to this service for clients in the same process (the all-in-one): it
// calls the handlers directly (through the same interceptors as the listener, health included),
// without the listener's gRPC transport. It fails with Unavailable once the service stops.
func (s *Server) InProcess() grpc.ClientConnInterface { return s.inproc }

// Stop shuts down gracefully: interest streams end, in-flight calls (in-process ones included)
// finish within ctx.
func (s *Server) Stop(ctx context.Context) {
	s.once.Do(func() {
		s.srv.Stop(ctx, s.svc.interest.stop)
		s.cancel()
		s.closeConns()
		s.log.Info("admission service stopped")
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

// remoteAuthorizer asks the authorization service.
type remoteAuthorizer struct {
	client authzv1.AuthorizationClient
}

// Authorize decides one access for a plugin.
func (r remoteAuthorizer) Authorize(ctx context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
	u := &authzv1.User{}
	if a.User != nil {
		u = &authzv1.User{Name: a.User.Name, Uid: a.User.UID, Groups: a.User.Groups}
		if len(a.User.Extra) > 0 {
			u.Extra = map[string]*authzv1.Values{}
			for k, v := range a.User.Extra {
				u.Extra[k] = &authzv1.Values{Values: v}
			}
		}
	}
	resp, err := r.client.Authorize(ctx, &authzv1.AuthorizeRequest{Attributes: &authzv1.Attributes{
		User: u, Verb: a.Verb, ResourceRequest: a.ResourceRequest, ApiGroup: a.APIGroup, ApiVersion: a.APIVersion,
		Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name, Path: a.Path,
	}})
	if err != nil {
		return false, "", err
	}
	return resp.GetDecision() == authzv1.Decision_DECISION_ALLOW, resp.GetReason(), nil
}

// Metrics is the service's metrics registry (for an embedding process to serve).
func (s *Server) Metrics() *prometheus.Registry { return s.srv.Metrics }
