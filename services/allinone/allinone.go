package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/libs/service"
	admission "platform.io/services/admission/server"
	authn "platform.io/services/authn/server"
	authz "platform.io/services/authz/server"
	certificates "platform.io/services/certificates/server"
	controllers "platform.io/services/controllers/manager"
	gateway "platform.io/services/gateway/server"
	storage "platform.io/services/storage/server"
)

// Validity of the certificates the all-in-one creates.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
)

// AdminUser is the user of the admin kubeconfig; its group system:masters may do everything.
const AdminUser = naming.Product + "-admin"

// FrontProxyClient is the common name of the gateway's proxy client certificate (what extension
// API servers list in --requestheader-allowed-names).
const FrontProxyClient = "front-proxy-client"

// config is the all-in-one's configuration: a data directory, the gateway's own flags (whose file
// and address flags default to what the data directory holds), and the identity-method,
// authorization-mode and controller flags of the services it runs in process.
type config struct {
	dataDir      string
	verbose      bool
	gateway      gateway.Config
	storage      storage.Config
	authn        authn.Config
	authz        authz.Config
	admission    admission.Config
	certificates certificates.Config
	controllers  controllers.Config
	// anonymousSet and bootstrapSet record whether the flags were given (their defaults here
	// depend on other flags).
	anonymousSet, bootstrapSet bool
	// logHealthy reports whether the process log can be written (the "log" health check).
	logHealthy func() error
	// noControllers runs no controllers (the kube-apiserver stand-in: envtest runs no
	// controller manager).
	noControllers bool
}

func defaultConfig() config {
	c := config{dataDir: ".platform", gateway: gateway.DefaultConfig(), storage: storage.DefaultConfig(),
		authn: authn.DefaultConfig(), authz: authz.DefaultConfig(), admission: admission.DefaultConfig(), certificates: certificates.DefaultConfig(),
		controllers: controllers.DefaultConfig()}
	// One process: no other replica to elect a leader against. The bootstrap token cleaner and
	// signer run too, as kubeadm enables them, so TLS bootstrap works out of the box.
	c.controllers.LeaderElect = false
	c.controllers.Controllers = []string{"*", "tokencleaner", "bootstrapsigner"}
	return c
}

func (c *config) registerFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", c.dataDir, "directory for the embedded storage, the cluster CA, certificates, the service account key and the admin kubeconfig")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "log at debug level")
	c.gateway.RegisterFlags(fs)
	for _, name := range []string{"storage-address", "storage-ca-file", "storage-cert-file", "storage-key-file",
		"authn-address", "authn-ca-file", "authn-cert-file", "authn-key-file", "authz-address", "authz-ca-file", "authz-cert-file", "authz-key-file",
		"admission-address", "admission-ca-file", "admission-cert-file", "admission-key-file"} {
		_ = fs.MarkHidden(name)
	}
	// The identity methods and authorization modes: --client-ca-file and
	// --requestheader-client-ca-file are the gateway's, shared.
	c.authn.RegisterMethodFlags(fs)
	c.authz.RegisterModeFlags(fs)
	c.admission.RegisterPluginFlags(fs)
	// The signers' CAs (default: the cluster CA of the data directory) and duration.
	c.certificates.Signing.RegisterFlags(fs)
	// --controllers, whose default is the all-in-one's selection: a value given replaces it.
	cm := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
	c.controllers.RegisterFlags(cm)
	fs.AddFlag(cm.Lookup("controllers"))
}

// parsed records which flags were set, for the defaults that depend on other flags.
func (c *config) parsed(fs *pflag.FlagSet) {
	c.anonymousSet = fs.Changed("anonymous-auth")
	c.bootstrapSet = fs.Changed("enable-bootstrap-token-auth")
}

func (c *config) logLevel() slog.Level {
	if c.verbose {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// platform is the running all-in-one.
type platform struct {
	cfg          config
	storage      *storage.Server
	authn        *authn.Server
	authz        *authz.Server
	admission    *admission.Server
	certificates *certificates.Server
	gateway      *gateway.Server
	// mu guards controllers, which start after the gateway serves /metrics.
	mu          sync.Mutex
	controllers *controllers.Manager
	kubeconfig  string
	url         string
}

// start prepares the data directory (CA, certificates, service account key, kubeconfig on first
// use), starts storage, authentication, authorization, admission and the certificates service on
// unix sockets inside it, then the gateway and the controllers. The services call each other in
// process (each one's InProcess connection: no gRPC transport between them); the sockets still
// serve health and anyone who dials them.
func start(ctx context.Context, cfg config, log *slog.Logger) (*platform, error) {
	dir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	host := cfg.gateway.BindAddress
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	p := &platform{cfg: cfg, url: "https://" + net.JoinHostPort(host, strconv.Itoa(cfg.gateway.SecurePort))}
	// The service account key of the data directory signs tokens unless the flags name keys.
	ownSAKey := cfg.authn.ServiceAccountSigningKeyFile == "" && len(cfg.authn.ServiceAccountKeyFiles) == 0
	files, err := ensureCredentials(dir, cfg.gateway.BindAddress, p.url, ownSAKey)
	if err != nil {
		return nil, err
	}
	p.kubeconfig = files.kubeconfig
	ok := false
	defer func() {
		if !ok {
			p.stop(context.Background())
		}
	}()

	sc := cfg.storage
	sc.Backend = "embedded"
	sc.DataDir = filepath.Join(dir, "storage")
	sc.Listen = "unix://" + filepath.Join(dir, "storage.sock")
	sc.MetricsBindAddress = ""
	p.storage, err = storage.Start(ctx, sc, log.With("service", "storage"))
	if err != nil {
		return nil, fmt.Errorf("starting storage: %w", err)
	}

	gc := cfg.gateway
	if gc.TLSCertFile == "" {
		gc.TLSCertFile, gc.TLSPrivateKeyFile = files.servingCert, files.servingKey
	}
	if gc.ClientCAFile == "" {
		gc.ClientCAFile = files.caCert
	}
	if gc.ProxyClientCertFile == "" && gc.ProxyClientKeyFile == "" {
		gc.ProxyClientCertFile, gc.ProxyClientKeyFile = files.proxyClientCert, files.proxyClientKey
	}

	ac := cfg.authn
	ac.Listen = "unix://" + filepath.Join(dir, "authn.sock")
	ac.Storage.Address = sc.Listen
	ac.MetricsBindAddress = ""
	ac.ClientCAFile, ac.RequestHeaderClientCAFile = gc.ClientCAFile, gc.RequestHeaderClientCAFile
	if len(ac.ServiceAccountIssuers) == 0 {
		ac.ServiceAccountIssuers = []string{p.url}
	}
	if ac.ServiceAccountSigningKeyFile == "" && len(ac.ServiceAccountKeyFiles) == 0 {
		ac.ServiceAccountSigningKeyFile = files.serviceAccountKey
	}
	if !cfg.anonymousSet && len(cfg.authz.Modes) == 1 && cfg.authz.Modes[0] == authz.ModeAlwaysAllow {
		// As upstream: anonymous requests are off by default when everything is allowed anyway.
		ac.AnonymousAuth = false
	}
	if !cfg.bootstrapSet {
		ac.EnableBootstrapTokenAuth = true
	}
	p.authn, err = authn.Start(ctx, ac, authn.Options{StorageConn: p.storage.InProcess()}, log.With("service", "authn"))
	if err != nil {
		return nil, fmt.Errorf("starting authentication: %w", err)
	}

	zc := cfg.authz
	zc.Listen = "unix://" + filepath.Join(dir, "authz.sock")
	zc.Storage.Address = sc.Listen
	zc.MetricsBindAddress = ""
	p.authz, err = authz.Start(ctx, zc, authz.Options{StorageConn: p.storage.InProcess()}, log.With("service", "authz"))
	if err != nil {
		return nil, fmt.Errorf("starting authorization: %w", err)
	}

	dc := cfg.admission
	dc.Listen = "unix://" + filepath.Join(dir, "admission.sock")
	dc.Storage.Address, dc.Authz.Address = sc.Listen, zc.Listen
	dc.MetricsBindAddress = ""
	p.admission, err = admission.Start(ctx, dc, admission.Options{StorageConn: p.storage.InProcess(), AuthzConn: p.authz.InProcess()}, log.With("service", "admission"))
	if err != nil {
		return nil, fmt.Errorf("starting admission: %w", err)
	}

	// The CSR signers: the cluster CA signs unless --cluster-signing-* name other CAs, so issued
	// client certificates authenticate here.
	kc := cfg.certificates
	kc.Listen = "unix://" + filepath.Join(dir, "certificates.sock")
	kc.Storage.Address = sc.Listen
	kc.MetricsBindAddress = ""
	if kc.Signing.Default.CertFile == "" && kc.Signing.Default.KeyFile == "" {
		kc.Signing.Default = certificates.KeyPair{CertFile: files.caCert, KeyFile: files.caKey}
	}
	p.certificates, err = certificates.Start(ctx, kc, certificates.Options{StorageConn: p.storage.InProcess()}, log.With("service", "certificates"))
	if err != nil {
		return nil, fmt.Errorf("starting the certificates service: %w", err)
	}

	gc.Storage.Address, gc.Authn.Address, gc.Authz.Address, gc.Admission.Address = sc.Listen, ac.Listen, zc.Listen, dc.Listen
	// The gateway calls every service in process (no gRPC transport on its hottest paths: storage,
	// and authentication, authorization and admission on every request).
	p.gateway, err = gateway.Start(ctx, gc, gateway.Options{LogHealthy: cfg.logHealthy, MoreMetrics: p.metrics, StorageConn: p.storage.InProcess(),
		AuthnConn: p.authn.InProcess(), AuthzConn: p.authz.InProcess(), AdmissionConn: p.admission.InProcess()}, log.With("service", "gateway"))
	if err != nil {
		return nil, fmt.Errorf("starting the gateway: %w", err)
	}
	if gc.SecurePort == 0 {
		p.url = "https://" + p.gateway.Addr().String()
	}

	if cfg.noControllers {
		ok = true
		return p, nil
	}
	// The controllers' permissions come from the default policy: start them once it is stored.
	select {
	case <-p.gateway.Bootstrapped():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cc := cfg.controllers
	cc.Listen = "unix://" + filepath.Join(dir, "controllers.sock")
	cc.MetricsBindAddress = ""
	cc.RESTConfig = files.controllersConfig(p.url)
	cc.ServiceAccountPrivateKeyFile = ac.ServiceAccountSigningKeyFile
	cc.RootCAFile = files.caCert
	cm, err := controllers.Start(ctx, cc, log.With("service", "controllers"))
	if err != nil {
		return nil, fmt.Errorf("starting the controllers: %w", err)
	}
	p.mu.Lock()
	p.controllers = cm
	p.mu.Unlock()
	ok = true
	return p, nil
}

// metrics are the registries of the services other than the gateway, which the gateway's
// /metrics serves with its own: every service's metrics under the names and labels of its own
// endpoint in the split deployment.
func (p *platform) metrics() []prometheus.Gatherer {
	gs := []prometheus.Gatherer{
		service.InProcessMetrics("storage", p.storage.Metrics()),
		service.InProcessMetrics("authn", p.authn.Metrics()),
		service.InProcessMetrics("authz", p.authz.Metrics()),
		service.InProcessMetrics("admission", p.admission.Metrics()),
		service.InProcessMetrics("certificates", p.certificates.Metrics()),
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.controllers != nil {
		gs = append(gs, service.InProcessMetrics("controllers", p.controllers.Metrics()))
	}
	return gs
}

// stop stops the callers before what they call: the controllers and the gateway first, then each
// service after every service that calls it in process (whose connection answers Unavailable once
// its service stopped), storage last.
func (p *platform) stop(ctx context.Context) {
	if p.controllers != nil {
		p.controllers.Stop(ctx)
	}
	if p.gateway != nil {
		p.gateway.Stop(ctx)
	}
	if p.certificates != nil {
		p.certificates.Stop(ctx)
	}
	if p.admission != nil {
		p.admission.Stop(ctx)
	}
	if p.authz != nil {
		p.authz.Stop(ctx)
	}
	if p.authn != nil {
		p.authn.Stop(ctx)
	}
	if p.storage != nil {
		p.storage.Stop(ctx)
	}
}

func (p *platform) banner() string {
	return fmt.Sprintf(`Platform is running at %s (embedded storage in %s).
Use it with kubectl:

    export KUBECONFIG=%s
    kubectl get namespaces

Stop it with Ctrl-C.
`, p.url, p.cfg.dataDir, p.kubeconfig)
}

// credentialFiles are the paths of what ensureCredentials keeps in the data directory, and the
// controllers' client certificate (issued on every start, never written).
type credentialFiles struct {
	caCert, caKey, servingCert, servingKey, kubeconfig, serviceAccountKey string
	// frontProxyCA verifies the gateway's proxy client certificate (proxyClientCert) at
	// extension API servers: their requestheader CA (upstream's front-proxy-ca).
	frontProxyCA, proxyClientCert, proxyClientKey string
	controllersCert, controllersKey, caPEM        []byte
}

// controllersConfig is the controllers' client configuration for the gateway at url.
func (f credentialFiles) controllersConfig(url string) *rest.Config {
	return &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: f.caPEM, CertData: f.controllersCert, KeyData: f.controllersKey}}
}

// ensureCredentials creates, once, the cluster CA and the serving certificate (for the bind
// address, 127.0.0.1, ::1, localhost and the host name); later starts reuse them. The admin
// kubeconfig gets a fresh client certificate on every start.
func ensureCredentials(dir, bindAddress, url string, serviceAccountKey bool) (credentialFiles, error) {
	pkiDir := filepath.Join(dir, "pki")
	f := credentialFiles{
		caCert:            filepath.Join(pkiDir, "ca.crt"),
		caKey:             filepath.Join(pkiDir, "ca.key"),
		servingCert:       filepath.Join(pkiDir, "apiserver.crt"),
		servingKey:        filepath.Join(pkiDir, "apiserver.key"),
		kubeconfig:        filepath.Join(dir, "admin.kubeconfig"),
		serviceAccountKey: filepath.Join(pkiDir, "sa.key"),
		frontProxyCA:      filepath.Join(pkiDir, "front-proxy", "ca.crt"),
		proxyClientCert:   filepath.Join(pkiDir, "front-proxy-client.crt"),
		proxyClientKey:    filepath.Join(pkiDir, "front-proxy-client.key"),
	}
	ca, _, err := pki.EnsureCA(pkiDir, naming.Product+"-ca")
	if err != nil {
		return f, fmt.Errorf("cluster CA: %w", err)
	}
	f.caPEM = ca.CertPEM
	// The key that signs service account tokens: kept, so tokens survive restarts (not made when
	// the flags name keys: an RSA key takes a good part of a start).
	if serviceAccountKey {
		if err := pki.EnsureSigningKey(f.serviceAccountKey); err != nil {
			return f, fmt.Errorf("service account key: %w", err)
		}
	}
	if f.controllersCert, f.controllersKey, err = ca.IssueClient(naming.ControllerManagerUser, nil, certValidity); err != nil {
		return f, err
	}
	if _, err := os.Stat(f.servingCert); os.IsNotExist(err) {
		hosts := []string{"127.0.0.1", "::1", "localhost"}
		if ip := net.ParseIP(bindAddress); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
			hosts = append(hosts, bindAddress)
		}
		if h, err := os.Hostname(); err == nil {
			hosts = append(hosts, h)
		}
		cert, key, err := ca.IssueServing(naming.Product+"-apiserver", hosts, certValidity)
		if err != nil {
			return f, err
		}
		if err := pki.WritePair(f.servingCert, f.servingKey, cert, key); err != nil {
			return f, err
		}
	}
	// The front proxy's CA and the gateway's proxy client certificate (the aggregation layer's
	// identity at extension API servers), created once, as kubeadm does.
	proxyCA, _, err := pki.EnsureCA(filepath.Dir(f.frontProxyCA), naming.Product+"-front-proxy-ca")
	if err != nil {
		return f, fmt.Errorf("front proxy CA: %w", err)
	}
	if _, err := os.Stat(f.proxyClientCert); os.IsNotExist(err) {
		cert, key, err := proxyCA.IssueClient(FrontProxyClient, nil, certValidity)
		if err != nil {
			return f, err
		}
		if err := pki.WritePair(f.proxyClientCert, f.proxyClientKey, cert, key); err != nil {
			return f, err
		}
	}
	// The kubeconfig is rewritten on every start, so it always names the current address.
	{
		cert, key, err := ca.IssueClient(AdminUser, []string{"system:masters"}, certValidity)
		if err != nil {
			return f, err
		}
		err = pki.WriteKubeconfig(f.kubeconfig, pki.Kubeconfig{
			ClusterName: naming.Product, ContextName: AdminUser + "@" + naming.Product, UserName: AdminUser,
			Server: url, CAPEM: ca.CertPEM, CertPEM: cert, KeyPEM: key, Namespace: "default",
		})
		if err != nil {
			return f, err
		}
	}
	return f, nil
}
