// Package manager runs the controllers service: the controllers upstream runs in its controller
// manager, talking to the gateway with client-go like any client (as naming.ControllerManagerUser,
// by client certificate), running only while this process holds the leader Lease so that
// several replicas are safe. It serves the gRPC health service (NOT_SERVING until the informers
// have synced) and Prometheus metrics.
//
// Informers start at once in every replica, so a standby is ready (and reports SERVING) and takes
// over with warm caches; controllers act only while leading. Losing the lease stops the
// controllers and ends the manager with ErrLeaderLost (the process exits and restarts clean, as
// upstream's does). A graceful stop first lets the controllers finish their syncs in flight, then
// releases the lease so that a standby takes over at its next retry.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/bootstrapsigner"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/clusterroleaggregation"
	"platform.io/services/controllers/csrapproving"
	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/garbagecollector"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/namespace"
	"platform.io/services/controllers/resourcequota"
	"platform.io/services/controllers/rootcacertpublisher"
	"platform.io/services/controllers/serviceaccount"
	"platform.io/services/controllers/serviceaccounttoken"
	"platform.io/services/controllers/tokencleaner"
)

// ErrLeaderLost ends a manager whose leader lease was lost (or could not be renewed in time).
var ErrLeaderLost = errors.New("leader election lost")

// resyncPeriod is how often informers replay their caches to the controllers (upstream's
// --min-resync-period), which repairs anything a failed sync left behind.
const resyncPeriod = 12 * time.Hour

// Workers per controller, as upstream's defaults.
var workers = map[string]int{
	serviceaccount.Name:         1,
	serviceaccounttoken.Name:    5,
	namespace.Name:              10,
	clusterroleaggregation.Name: 5,
	resourcequota.Name:          resourcequota.DefaultWorkers,
	rootcacertpublisher.Name:    rootcacertpublisher.DefaultWorkers,
	csrapproving.Name:           csrapproving.DefaultWorkers,
	csrcleaner.Name:             1,
	tokencleaner.Name:           1,
	bootstrapsigner.Name:        1,
}

// controller is one enabled controller.
type controller struct {
	name string
	run  func(ctx context.Context, workers int)
}

// Manager is a running controllers service.
type Manager struct {
	cfg         Config
	log         *slog.Logger
	srv         *service.Server
	metrics     *metrics.Metrics
	clients     *apiclient.Clients
	factories   []informers.SharedInformerFactory
	controllers []controller
	identity    string

	informersCtx    context.Context // informers run until Stop
	stopInformers   context.CancelFunc
	controllersCtx  context.Context // closed by Stop before the lease is released
	stopControllers context.CancelFunc
	stopElection    context.CancelFunc
	electionDone    chan struct{}
	mu              sync.Mutex     // orders lead's start against Stop
	running         sync.WaitGroup // controllers running
	leading         atomic.Bool
	stopping        atomic.Bool
	synced          atomic.Bool
	done            chan error
	doneOnce        sync.Once
	stopOnce        sync.Once
}

// RESTConfig builds the client configuration of cfg: RESTConfig when set, else --kubeconfig; the
// QPS and burst of the flags apply to both.
func RESTConfig(cfg *Config) (*rest.Config, error) {
	var rc *rest.Config
	if cfg.RESTConfig != nil {
		rc = rest.CopyConfig(cfg.RESTConfig)
	} else {
		var err error
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
	}
	rc.QPS = cfg.KubeAPIQPS
	rc.Burst = cfg.KubeAPIBurst
	if rc.UserAgent == "" {
		rc.UserAgent = naming.Product + "-controller-manager"
	}
	return rc, nil
}

// rootCA is the CA bundle for token Secrets and cluster-info: --root-ca-file, else the CA the
// client trusts the gateway with (upstream's fallback).
func rootCA(cfg *Config, rc *rest.Config) ([]byte, error) {
	if cfg.RootCAFile != "" {
		b, err := os.ReadFile(cfg.RootCAFile)
		if err != nil {
			return nil, fmt.Errorf("--root-ca-file: %w", err)
		}
		return b, nil
	}
	if len(rc.CAData) > 0 {
		return rc.CAData, nil
	}
	if rc.CAFile != "" {
		b, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("the CA file of --kubeconfig: %w", err)
		}
		return b, nil
	}
	return nil, nil
}

// Start connects to the gateway, serves health and metrics, starts the informers and begins the
// leader election (or, without --leader-elect, the controllers) in the background. Stop ends it.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, err := RESTConfig(&cfg)
	if err != nil {
		return nil, err
	}
	clients, err := apiclient.New(rc)
	if err != nil {
		return nil, fmt.Errorf("building the gateway clients: %w", err)
	}
	ca, err := rootCA(&cfg, rc)
	if err != nil {
		return nil, err
	}
	server := cfg.ClusterInfoServer
	if server == "" {
		server = rc.Host
	}
	generator := cfg.TokenGenerator
	if generator == nil && cfg.ServiceAccountPrivateKeyFile != "" {
		newGenerator := cfg.NewTokenGenerator
		if newGenerator == nil {
			newGenerator = serviceaccounttoken.NewSigner
		}
		if generator, err = newGenerator(cfg.ServiceAccountPrivateKeyFile); err != nil {
			return nil, fmt.Errorf("--service-account-private-key-file: %w", err)
		}
	}
	identity := cfg.Identity
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader election identity: %w", err)
		}
		identity = host + "_" + string(uuid.NewUUID())
	}

	srv, err := service.NewServer("controllers", cfg.ServerConfig, log)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:          cfg,
		log:          log,
		srv:          srv,
		metrics:      metrics.New(srv.Metrics),
		clients:      clients,
		identity:     identity,
		electionDone: make(chan struct{}),
		done:         make(chan error, 1),
	}
	m.informersCtx, m.stopInformers = context.WithCancel(context.Background())
	m.controllersCtx, m.stopControllers = context.WithCancel(context.Background())
	if err := m.build(ca, server, generator); err != nil {
		m.stopInformers()
		m.stopControllers()
		srv.Stop(context.Background(), nil)
		return nil, err
	}
	// Not ready until the caches are: a replica that answers SERVING can take over at once.
	srv.ServeUnready()
	for _, f := range m.factories {
		f.Start(m.informersCtx.Done())
	}
	go m.waitSynced()
	go func() {
		if err := <-srv.Done(); err != nil {
			m.finish(fmt.Errorf("health server: %w", err))
		}
	}()
	if cfg.LeaderElect {
		if err := m.elect(); err != nil {
			m.Stop(ctx)
			return nil, err
		}
	} else {
		close(m.electionDone)
		go m.lead(m.controllersCtx)
	}
	return m, nil
}

// trimManagedFields is the informers' transform: objects are cached without managed fields.
func trimManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// build creates the informer factories and the enabled controllers.
func (m *Manager) build(ca []byte, server string, generator serviceaccounttoken.TokenGenerator) error {
	kube := m.clients.Kubernetes
	// Every cache drops the objects' managed fields, which no controller reads, as upstream's
	// controller manager does: less memory, and less for the garbage collector to mark (in the
	// all-in-one the caches share the heap with the API).
	trim := informers.WithTransform(trimManagedFields)
	shared := informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, trim)
	tokenSecrets := informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", naming.SecretTypeServiceAccountToken).String()
		}))
	bootstrapSecrets := informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, trim,
		informers.WithNamespace(naming.SystemNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", naming.SecretTypeBootstrapToken).String()
		}))
	clusterInfo := informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, trim,
		informers.WithNamespace(naming.PublicNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", bootstraptoken.ConfigMapClusterInfo).String()
		}))
	// Only the root CA ConfigMaps, in every namespace: caching every ConfigMap would cost memory
	// and events for nothing.
	rootCAConfigMaps := informers.NewSharedInformerFactoryWithOptions(kube, resyncPeriod, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", naming.RootCAConfigMap).String()
		}))
	m.factories = []informers.SharedInformerFactory{shared, tokenSecrets, bootstrapSecrets, clusterInfo, rootCAConfigMaps}

	log := m.log
	for _, k := range Known {
		if !m.cfg.Enabled(k.Name) {
			continue
		}
		clog := log.With("controller", k.Name)
		var run func(context.Context, int)
		switch k.Name {
		case serviceaccount.Name:
			c, err := serviceaccount.New(kube, shared.Core().V1().Namespaces(), shared.Core().V1().ServiceAccounts(), serviceaccount.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case serviceaccounttoken.Name:
			if generator == nil {
				log.Warn("controller disabled: no --service-account-private-key-file to sign tokens with", "controller", k.Name)
				continue
			}
			c, err := serviceaccounttoken.New(kube, shared.Core().V1().ServiceAccounts(), tokenSecrets.Core().V1().Secrets(), serviceaccounttoken.Options{Generator: generator, RootCA: ca, Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case namespace.Name:
			c, err := namespace.New(kube, m.clients.Dynamic, m.clients.Discovery, shared.Core().V1().Namespaces(), namespace.Options{DeletionGracePeriod: m.cfg.NamespaceDeletionGracePeriod, Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case clusterroleaggregation.Name:
			c, err := clusterroleaggregation.New(m.clients.RBAC, shared.Rbac().V1().ClusterRoles(), clusterroleaggregation.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case resourcequota.Name:
			c, err := resourcequota.New(kube, m.clients.Dynamic, m.clients.Discovery, shared, resourcequota.Options{SyncPeriod: m.cfg.ResourceQuotaSyncPeriod, Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case rootcacertpublisher.Name:
			if len(ca) == 0 {
				log.Warn("controller disabled: no root CA bundle to publish (neither --root-ca-file nor a CA in --kubeconfig)", "controller", k.Name)
				continue
			}
			c, err := rootcacertpublisher.New(kube, shared.Core().V1().Namespaces(), rootCAConfigMaps.Core().V1().ConfigMaps(), ca, rootcacertpublisher.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case csrapproving.Name:
			c, err := csrapproving.New(m.clients.Certificates, m.clients.Authorization, shared.Certificates().V1().CertificateSigningRequests(), csrapproving.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case csrcleaner.Name:
			c, err := csrcleaner.New(m.clients.Certificates, shared.Certificates().V1().CertificateSigningRequests(), csrcleaner.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case garbagecollector.Name:
			gcConfig := rest.CopyConfig(m.clients.Config)
			gcConfig.QPS, gcConfig.Burst = m.cfg.GCKubeAPIQPS, m.cfg.GCKubeAPIBurst
			md, err := metadata.NewForConfig(gcConfig)
			if err != nil {
				return err
			}
			c, err := garbagecollector.New(kube, md, m.clients.Discovery, garbagecollector.Options{Metrics: m.metrics, Registerer: m.srv.Metrics, Log: clog})
			if err != nil {
				return err
			}
			run = func(ctx context.Context, _ int) { c.Run(ctx, m.cfg.ConcurrentGCSyncs) }
		case tokencleaner.Name:
			c, err := tokencleaner.New(kube, bootstrapSecrets.Core().V1().Secrets(), tokencleaner.Options{Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		case bootstrapsigner.Name:
			c, err := bootstrapsigner.New(kube, bootstrapSecrets.Core().V1().Secrets(), clusterInfo.Core().V1().ConfigMaps(), bootstrapsigner.Options{Server: server, RootCA: ca, Metrics: m.metrics, Log: clog})
			if err != nil {
				return err
			}
			run = c.Run
		}
		m.controllers = append(m.controllers, controller{name: k.Name, run: run})
	}
	return nil
}

// waitSynced marks the service SERVING once every informer has its first list.
func (m *Manager) waitSynced() {
	for _, f := range m.factories {
		for typ, ok := range f.WaitForCacheSync(m.informersCtx.Done()) {
			if !ok {
				if m.informersCtx.Err() == nil {
					m.log.Warn("informer did not sync", "type", typ.String())
				}
				return
			}
		}
	}
	m.synced.Store(true)
	if !m.stopping.Load() {
		m.srv.SetServing(true)
	}
	m.log.Info("informers synced")
}

// elect runs the leader election in the background.
func (m *Manager) elect() error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: m.cfg.LeaderElectResourceNamespace, Name: m.cfg.LeaderElectResourceName},
		Client:     m.clients.Coordination,
		LockConfig: resourcelock.ResourceLockConfig{Identity: m.identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   m.cfg.LeaseDuration,
		RenewDeadline:   m.cfg.RenewDeadline,
		RetryPeriod:     m.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            m.cfg.LeaderElectResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				lctx, cancel := context.WithCancel(ctx)
				defer cancel()
				stop := context.AfterFunc(m.controllersCtx, cancel)
				defer stop()
				m.lead(lctx)
			},
			OnStoppedLeading: func() {
				if m.stopping.Load() {
					return
				}
				m.log.Error("leader lease lost; stopping", "lease", m.cfg.LeaderElectResourceNamespace+"/"+m.cfg.LeaderElectResourceName, "identity", m.identity)
				m.finish(ErrLeaderLost)
			},
			OnNewLeader: func(identity string) {
				if identity != m.identity {
					m.log.Info("following the leader", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.stopElection = cancel
	m.log.Info("waiting for the leader lease", "lease", m.cfg.LeaderElectResourceNamespace+"/"+m.cfg.LeaderElectResourceName, "identity", m.identity)
	go func() {
		defer close(m.electionDone)
		elector.Run(ctx)
	}()
	return nil
}

// lead runs the enabled controllers until ctx ends and returns when they all have stopped.
func (m *Manager) lead(ctx context.Context) {
	m.mu.Lock()
	if m.stopping.Load() {
		m.mu.Unlock()
		return
	}
	m.running.Add(1)
	m.mu.Unlock()
	defer m.running.Done()
	m.leading.Store(true)
	m.metrics.Leader.WithLabelValues(m.cfg.LeaderElectResourceName).Set(1)
	defer func() {
		m.leading.Store(false)
		m.metrics.Leader.WithLabelValues(m.cfg.LeaderElectResourceName).Set(0)
	}()
	m.log.Info("leading: starting controllers", "identity", m.identity, "controllers", len(m.controllers))
	var wg sync.WaitGroup
	for _, c := range m.controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.log.Info("started controller", "controller", c.name)
			c.run(ctx, workers[c.name])
		}()
	}
	wg.Wait()
	m.log.Info("controllers stopped", "identity", m.identity)
}

func (m *Manager) finish(err error) {
	m.doneOnce.Do(func() { m.done <- err })
}

// Done delivers the error that ends the manager on its own (ErrLeaderLost, or a failed health
// server).
func (m *Manager) Done() <-chan error { return m.done }

// IsLeader tells whether the controllers are running here now.
func (m *Manager) IsLeader() bool { return m.leading.Load() }

// Synced tells whether the informers have synced (the health service says SERVING).
func (m *Manager) Synced() bool { return m.synced.Load() }

// Identity is this process's holder identity in the leader Lease.
func (m *Manager) Identity() string { return m.identity }

// Addr is the address of the gRPC health service.
func (m *Manager) Addr() net.Addr { return m.srv.Addr() }

// Metrics is the registry of the manager's metrics.
func (m *Manager) Metrics() *prometheus.Registry { return m.srv.Metrics }

// Stop shuts down gracefully: health goes NOT_SERVING, the controllers finish the syncs in flight
// and stop, then the lease is released (a standby takes over at its next retry), then the
// informers and the health server stop. ctx bounds the wait.
func (m *Manager) Stop(ctx context.Context) {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.stopping.Store(true)
		m.mu.Unlock()
		m.srv.SetServing(false)
		m.stopControllers()
		stopped := make(chan struct{})
		go func() { m.running.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			m.log.Warn("controllers did not stop in time")
		}
		if m.stopElection != nil {
			m.stopElection()
		}
		select {
		case <-m.electionDone:
		case <-ctx.Done():
		}
		m.stopInformers()
		m.srv.Stop(ctx, nil)
		m.log.Info("controllers service stopped")
	})
}

// Run starts the manager and runs it until ctx ends (then stops within --shutdown-timeout) or it
// ends on its own: losing the leader lease returns ErrLeaderLost, so the process exits.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	m, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-m.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	m.Stop(sctx)
	return runErr
}
