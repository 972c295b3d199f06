package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
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

// config is the all-in-one's configuration: a data directory and the gateway's own flags (whose
// file and address flags default to what the data directory holds).
type config struct {
	dataDir string
	verbose bool
	gateway gateway.Config
	storage storage.Config
	// logHealthy reports whether the process log can be written (the "log" health check).
	logHealthy func() error
}

func defaultConfig() config {
	return config{dataDir: ".platform", gateway: gateway.DefaultConfig(), storage: storage.DefaultConfig()}
}

func (c *config) registerFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", c.dataDir, "directory for the embedded storage, the cluster CA, certificates and the admin kubeconfig")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "log at debug level")
	c.gateway.RegisterFlags(fs)
	for _, name := range []string{"storage-address", "storage-ca-file", "storage-cert-file", "storage-key-file"} {
		_ = fs.MarkHidden(name)
	}
}

func (c *config) logLevel() slog.Level {
	if c.verbose {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// platform is the running all-in-one.
type platform struct {
	cfg        config
	storage    *storage.Server
	gateway    *gateway.Server
	kubeconfig string
	url        string
}

// start prepares the data directory (CA, certificates, kubeconfig on first use), starts the
// storage service on a unix socket inside it, then the gateway.
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
	files, err := ensureCredentials(dir, cfg.gateway.BindAddress, p.url)
	if err != nil {
		return nil, err
	}
	p.kubeconfig = files.kubeconfig

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
	gc.StorageAddress = sc.Listen
	if gc.TLSCertFile == "" {
		gc.TLSCertFile, gc.TLSPrivateKeyFile = files.servingCert, files.servingKey
	}
	if gc.ClientCAFile == "" {
		gc.ClientCAFile = files.caCert
	}
	p.gateway, err = gateway.Start(ctx, gc, gateway.Options{LogHealthy: cfg.logHealthy}, log.With("service", "gateway"))
	if err != nil {
		p.storage.Stop(context.Background())
		return nil, fmt.Errorf("starting the gateway: %w", err)
	}
	if gc.SecurePort == 0 {
		p.url = "https://" + p.gateway.Addr().String()
	}
	return p, nil
}

func (p *platform) stop(ctx context.Context) {
	p.gateway.Stop(ctx)
	p.storage.Stop(ctx)
}

func (p *platform) banner() string {
	return fmt.Sprintf(`Platform is running at %s (embedded storage in %s).
Use it with kubectl:

    export KUBECONFIG=%s
    kubectl get namespaces

Stop it with Ctrl-C.
`, p.url, p.cfg.dataDir, p.kubeconfig)
}

// credentialFiles are the paths of what ensureCredentials keeps in the data directory.
type credentialFiles struct {
	caCert, servingCert, servingKey, kubeconfig string
}

// ensureCredentials creates, once, the cluster CA and the serving certificate (for the bind
// address, 127.0.0.1, ::1, localhost and the host name); later starts reuse them. The admin
// kubeconfig gets a fresh client certificate on every start.
func ensureCredentials(dir, bindAddress, url string) (credentialFiles, error) {
	pkiDir := filepath.Join(dir, "pki")
	f := credentialFiles{
		caCert:      filepath.Join(pkiDir, "ca.crt"),
		servingCert: filepath.Join(pkiDir, "apiserver.crt"),
		servingKey:  filepath.Join(pkiDir, "apiserver.key"),
		kubeconfig:  filepath.Join(dir, "admin.kubeconfig"),
	}
	ca, _, err := pki.EnsureCA(pkiDir, naming.Product+"-ca")
	if err != nil {
		return f, fmt.Errorf("cluster CA: %w", err)
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
