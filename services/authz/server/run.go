package server

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1api "k8s.io/api/storage/v1"

	"platform.io/libs/bootstrappolicy"
	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/libs/storage"
	authzv1 "platform.io/proto/authz/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/authz/authorizer"
	"platform.io/services/authz/node"
	"platform.io/services/authz/rbac"
	"platform.io/services/authz/webhook"
)

// Options are what an embedding process (the all-in-one) hands the service instead of flags.
type Options struct {
	// StorageConn, when set, is used instead of dialing --storage-address.
	StorageConn grpc.ClientConnInterface
}

// Server is a running authorization service.
type Server struct {
	srv     *service.Server
	inproc  *service.InProcess
	svc     *Service
	sources *policySources
	conn    *grpc.ClientConn
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	log     *slog.Logger
	once    sync.Once
}

// policySources are the informers and authorizers the policy is built from.
type policySources struct {
	client *storage.Client
	log    *slog.Logger
	gen    *generation
	ready  atomic.Bool
	// compiledAt is the storage revision of each RBAC type (roles, cluster roles, role bindings,
	// cluster role bindings) the policy data in effect was built from, at least.
	compiledAt atomic.Pointer[[4]int64]

	rbac                *rbac.Authorizer
	roles               *storage.Informer[*rbacv1.Role]
	clusterRoles        *storage.Informer[*rbacv1.ClusterRole]
	roleBindings        *storage.Informer[*rbacv1.RoleBinding]
	clusterRoleBindings *storage.Informer[*rbacv1.ClusterRoleBinding]

	graph       *node.Graph
	pods        *storage.Informer[*corev1.Pod]
	pvs         *storage.Informer[*corev1.PersistentVolume]
	attachments *storage.Informer[*storagev1api.VolumeAttachment]
}

// decoder returns the decode function of a stored built-in kind.
func decoder[T any, PT interface {
	*T
	storage.Unmarshaler
}]() func(*storagev1.Object) (PT, error) {
	return func(o *storagev1.Object) (PT, error) {
		obj := PT(new(T))
		if err := storage.DecodeStored(o.GetValue(), obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
}

func rbacType(resource string) *storagev1.ResourceType {
	return &storagev1.ResourceType{Group: naming.Group("rbac.authorization.k8s.io"), Resource: resource}
}

// newRBACSources builds the RBAC authorizer and the informers that feed it.
func (p *policySources) newRBAC() error {
	a, err := rbac.New(rbac.WithLogger(p.log))
	if err != nil {
		return err
	}
	p.rbac = a
	p.roles = storage.NewInformer(p.client, rbacType("roles"), decoder[rbacv1.Role](), p.log)
	p.clusterRoles = storage.NewInformer(p.client, rbacType("clusterroles"), decoder[rbacv1.ClusterRole](), p.log)
	p.roleBindings = storage.NewInformer(p.client, rbacType("rolebindings"), decoder[rbacv1.RoleBinding](), p.log)
	p.clusterRoleBindings = storage.NewInformer(p.client, rbacType("clusterrolebindings"), decoder[rbacv1.ClusterRoleBinding](), p.log)
	return nil
}

// snapshot is the RBAC objects the informers hold now.
func (p *policySources) snapshot() rbac.Snapshot {
	return rbac.Snapshot{
		Roles:               p.roles.List(),
		ClusterRoles:        p.clusterRoles.List(),
		RoleBindings:        p.roleBindings.List(),
		ClusterRoleBindings: p.clusterRoleBindings.List(),
	}
}

// runRBAC keeps the RBAC data in step with storage: each burst of changes (gathered for
// debounce) becomes one Update and one new generation.
func (p *policySources) runRBAC(ctx context.Context, debounce time.Duration, m *metrics) {
	dirty := make(chan struct{}, 1)
	mark := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	p.roles.OnChange(func([]storage.Change[*rbacv1.Role]) { mark() })
	p.clusterRoles.OnChange(func([]storage.Change[*rbacv1.ClusterRole]) { mark() })
	p.roleBindings.OnChange(func([]storage.Change[*rbacv1.RoleBinding]) { mark() })
	p.clusterRoleBindings.OnChange(func([]storage.Change[*rbacv1.ClusterRoleBinding]) { mark() })
	for _, run := range []func(context.Context){p.roles.Run, p.clusterRoles.Run, p.roleBindings.Run, p.clusterRoleBindings.Run} {
		go run(ctx)
	}
	for _, synced := range []<-chan struct{}{p.roles.Synced(), p.clusterRoles.Synced(), p.roleBindings.Synced(), p.clusterRoleBindings.Synced()} {
		select {
		case <-synced:
		case <-ctx.Done():
			return
		}
	}
	for {
		start := time.Now()
		// Revisions first: the snapshot taken after holds at least what they say.
		revs := [4]int64{p.roles.Revision(), p.clusterRoles.Revision(), p.roleBindings.Revision(), p.clusterRoleBindings.Revision()}
		if err := p.rbac.Update(ctx, p.snapshot()); err != nil {
			p.log.Error("compiling the RBAC policy data", "err", err)
		} else {
			m.compile.Observe(time.Since(start).Seconds())
			p.compiledAt.Store(&revs)
			p.gen.bump()
		}
		p.ready.Store(true)
		select {
		case <-ctx.Done():
			return
		case <-dirty:
		}
		if debounce > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(debounce):
			}
		}
		select {
		case <-dirty:
		default:
		}
	}
}

// newNode builds the node graph and the informers that feed it.
func (p *policySources) newNode() {
	p.graph = node.NewGraph()
	p.pods = storage.NewInformer(p.client, &storagev1.ResourceType{Resource: "pods"}, decoder[corev1.Pod](), p.log)
	p.pvs = storage.NewInformer(p.client, &storagev1.ResourceType{Resource: "persistentvolumes"}, decoder[corev1.PersistentVolume](), p.log)
	p.attachments = storage.NewInformer(p.client, &storagev1.ResourceType{Group: naming.Group("storage.k8s.io"), Resource: "volumeattachments"}, decoder[storagev1api.VolumeAttachment](), p.log)
	p.pods.OnChange(func(cs []storage.Change[*corev1.Pod]) {
		for _, c := range cs {
			if c.Type == storage.Deleted {
				p.graph.DeletePod(c.Old.Namespace, c.Old.Name)
			} else {
				p.graph.AddOrUpdatePod(c.New)
			}
		}
		p.gen.bump()
	})
	p.pvs.OnChange(func(cs []storage.Change[*corev1.PersistentVolume]) {
		for _, c := range cs {
			if c.Type == storage.Deleted {
				p.graph.DeletePV(c.Old.Name)
			} else {
				p.graph.AddOrUpdatePV(c.New)
			}
		}
		p.gen.bump()
	})
	p.attachments.OnChange(func(cs []storage.Change[*storagev1api.VolumeAttachment]) {
		for _, c := range cs {
			if c.Type == storage.Deleted {
				p.graph.DeleteVolumeAttachment(c.Old.Name)
			} else {
				p.graph.AddOrUpdateVolumeAttachment(c.New)
			}
		}
		p.gen.bump()
	})
}

func (p *policySources) runNode(ctx context.Context) (synced <-chan struct{}) {
	for _, run := range []func(context.Context){p.pods.Run, p.pvs.Run, p.attachments.Run} {
		go run(ctx)
	}
	done := make(chan struct{})
	go func() {
		for _, s := range []<-chan struct{}{p.pods.Synced(), p.pvs.Synced(), p.attachments.Synced()} {
			select {
			case <-s:
			case <-ctx.Done():
				return
			}
		}
		close(done)
	}()
	return done
}

// buildModes builds the authorizers of --authorization-mode in order.
func buildModes(cfg Config, p *policySources) ([]mode, error) {
	var modes []mode
	for _, name := range cfg.Modes {
		switch name {
		case ModeRBAC:
			if err := p.newRBAC(); err != nil {
				return nil, fmt.Errorf("RBAC: %w", err)
			}
			modes = append(modes, mode{name, p.rbac})
		case ModeNode:
			p.newNode()
			modes = append(modes, mode{name, node.NewAuthorizer(p.graph, bootstrappolicy.NodeRules())})
		case ModeWebhook:
			w, err := webhook.New(webhook.Config{ConfigFile: cfg.WebhookConfigFile, Version: cfg.WebhookVersion, AuthorizedTTL: cfg.WebhookAuthorizedTTL, UnauthorizedTTL: cfg.WebhookUnauthorizedTTL, Log: p.log})
			if err != nil {
				return nil, fmt.Errorf("--authorization-webhook-config-file: %w", err)
			}
			modes = append(modes, mode{name, w})
		case ModeAlwaysAllow:
			modes = append(modes, mode{name, always(authorizer.Allow)})
		case ModeAlwaysDeny:
			modes = append(modes, mode{name, always(authorizer.Deny)})
		}
	}
	return modes, nil
}

// always is the AlwaysAllow or AlwaysDeny mode.
type always authorizer.Decision

func (a always) Authorize(context.Context, authorizer.Attributes) (authorizer.Result, error) {
	return authorizer.Result{Decision: authorizer.Decision(a), NameIndependent: true}, nil
}

// RulesFor lists everything for AlwaysAllow and nothing for AlwaysDeny.
func (a always) RulesFor(context.Context, *authorizer.User, string) ([]authorizer.Rule, []authorizer.Rule, bool, error) {
	if authorizer.Decision(a) != authorizer.Allow {
		return nil, nil, false, nil
	}
	all := []string{"*"}
	return []authorizer.Rule{{Verbs: all, APIGroups: all, Resources: all}}, []authorizer.Rule{{Verbs: all, NonResourceURLs: all}}, false, nil
}

// Start validates the configuration, starts the informers and serves the gRPC API.
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
	gen := newGeneration()
	p := &policySources{client: storage.NewClient(conn), log: log, gen: gen}
	modes, err := buildModes(cfg, p)
	if err != nil {
		s.closeConn()
		return nil, err
	}
	srv, err := service.NewServer("authz", cfg.ServerConfig, log)
	if err != nil {
		s.closeConn()
		return nil, err
	}
	m := newMetrics(srv.Metrics, gen)
	var nodeSynced <-chan struct{}
	ready := func() bool {
		if p.rbac != nil && !p.ready.Load() {
			return false
		}
		if nodeSynced != nil {
			select {
			case <-nodeSynced:
			default:
				return false
			}
		}
		return true
	}
	s.svc = &Service{modes: modes, rbac: p.rbac, gen: gen, ready: ready, log: log, metrics: m}
	s.sources = p
	authzv1.RegisterAuthorizationServer(srv.GRPC, s.svc)
	// The same service (and the health service) without the socket, for clients in this process.
	s.inproc = srv.NewInProcess(service.InProcessOptions{})
	authzv1.RegisterAuthorizationServer(s.inproc, s.svc)
	s.srv = srv
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if p.graph != nil {
		nodeSynced = p.runNode(runCtx)
	}
	if p.rbac != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); p.runRBAC(runCtx, cfg.PolicyDebounce, m) }()
	}
	// Health follows readiness: NOT_SERVING until the policy is loaded.
	srv.ServeUnready()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			if ready() {
				srv.SetServing(true)
				log.Info("authorization policy loaded", "modes", cfg.Modes)
				return
			}
		}
	}()
	return s, nil
}

func (s *Server) closeConn() {
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

// RBACCompiledAt returns the storage revisions of the RBAC types (roles, cluster roles, role
// bindings, cluster role bindings, in that order) the policy in effect was built from, at least;
// ok is false before the first build or without RBAC. A process that stored RBAC objects can wait
// until they are enforced (tests; the spec bounds it at a second).
func (s *Server) RBACCompiledAt() (revs [4]int64, ok bool) {
	if s.sources == nil {
		return revs, false
	}
	p := s.sources.compiledAt.Load()
	if p == nil {
		return revs, false
	}
	return *p, true
}

// Stop shuts down gracefully: policy watches end, in-flight decisions (in-process ones included)
// finish within ctx.
func (s *Server) Stop(ctx context.Context) {
	s.once.Do(func() {
		s.srv.Stop(ctx, s.svc.gen.stop)
		s.cancel()
		s.wg.Wait()
		s.closeConn()
		s.log.Info("authorization service stopped")
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

// DumpPolicy reads the stored RBAC objects once and writes the Rego policy and its data.
func DumpPolicy(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	conn, err := cfg.Storage.Dial(storage.CallOptions())
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &policySources{client: storage.NewClient(conn), log: log, gen: newGeneration()}
	if err := p.newRBAC(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, inf := range []interface {
		Run(context.Context)
		Synced() <-chan struct{}
	}{p.roles, p.clusterRoles, p.roleBindings, p.clusterRoleBindings} {
		go inf.Run(ctx)
		select {
		case <-inf.Synced():
		case <-ctx.Done():
			return fmt.Errorf("reading the RBAC objects from storage: %w", ctx.Err())
		}
	}
	if err := p.rbac.Update(ctx, p.snapshot()); err != nil {
		return err
	}
	data, err := p.rbac.Data()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "# Rego policy (package and rules); evaluate with the data document below, e.g.\n#   opa eval -d policy.rego -d data.json -i input.json 'data'\n%s\n# data.json\n%s\n", p.rbac.Policy(), data)
	return err
}

// Metrics is the service's metrics registry (for an embedding process to serve).
func (s *Server) Metrics() *prometheus.Registry { return s.srv.Metrics }
