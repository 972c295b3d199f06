// Package stack builds and starts Platform as real processes for end-to-end tests and the load
// tool: the split stack (redis-server, the storage service over mutual TLS, the gateway) or the
// all-in-one binary. Everything listens on loopback ports chosen at start.
package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/libs/redistest"
)

// Mode selects what to start.
type Mode string

// Modes.
const (
	// Split runs redis-server, the storage service (Redis backend), the authentication,
	// authorization, admission and certificates services, the gateway and the controllers as separate processes
	// talking gRPC (the controllers HTTPS) over mutual TLS.
	Split Mode = "split"
	// AllInOne runs the all-in-one binary (embedded storage).
	AllInOne Mode = "allinone"
)

// Options adjust the stack.
type Options struct {
	Mode Mode
	// Dir holds binaries' data, certificates and logs (a temporary directory when empty).
	Dir string
	// StorageArgs, AuthnArgs, AuthzArgs, AdmissionArgs, CertificatesArgs, ControllersArgs and GatewayArgs are extra flags (split
	// mode; GatewayArgs also for the all-in-one).
	StorageArgs, AuthnArgs, AuthzArgs, AdmissionArgs, CertificatesArgs, ControllersArgs, GatewayArgs []string
	// RequestHeaderArgs turn on the authenticating proxy: --requestheader-client-ca-file names the
	// stack's CA (for the gateway and the authentication service) and these flags
	// (--requestheader-username-headers, ...) go to the authentication service (the all-in-one).
	RequestHeaderArgs []string
	// Metrics gives each service of the split stack a --metrics-bind-address on loopback (listed
	// in Stack.MetricsURLs; the gateway serves /metrics on its own port).
	Metrics bool
	// Stderr receives the services' logs (default: files in Dir).
	Stderr *os.File
}

// Stack is a running Platform.
type Stack struct {
	// URL is the gateway's https URL; Kubeconfig an admin kubeconfig for it.
	URL, Kubeconfig string
	// ServiceAccountIssuer is the issuer of service account tokens.
	ServiceAccountIssuer string
	// MetricsURLs are the services' Prometheus endpoints by service name, with Options.Metrics.
	MetricsURLs map[string]string
	// CA signs client certificates; CAPEM verifies the gateway.
	CA    *pki.CA
	CAPEM []byte
	Dir   string

	opts    Options
	bins    string
	redis   *redistest.Server
	mu      sync.Mutex
	procs   map[string]*process
	args    map[string][]string
	logs    []*os.File
	gwPort  int
	stPort  int
	stopped bool
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// RepoRoot finds the repository root (the directory holding go.work) from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Build compiles the service binaries and the all-in-one once per process. With
// PLATFORM_BIN_DIR set it uses the binaries in that directory instead (built earlier, for
// example from another commit, to compare two builds in one session).
func Build() (string, error) {
	buildOnce.Do(func() {
		if dir := os.Getenv("PLATFORM_BIN_DIR"); dir != "" {
			buildDir, buildErr = dir, nil
			if _, err := os.Stat(filepath.Join(dir, "gateway")); err != nil {
				buildDir, buildErr = "", fmt.Errorf("PLATFORM_BIN_DIR: %w", err)
			}
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "platform-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+string(filepath.Separator), "./services/storage", "./services/authn", "./services/authz", "./services/admission", "./services/certificates", "./services/controllers", "./services/gateway", "./services/allinone")
		cmd.Dir = RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building the binaries: %v\n%s", err, out)
		}
	})
	return buildDir, buildErr
}

// CleanupBuild removes the binaries Build compiled; call it from TestMain after the tests (each
// test process builds its own copy, about 130 MB).
func CleanupBuild() {
	if buildDir != "" && os.Getenv("PLATFORM_BIN_DIR") == "" {
		_ = os.RemoveAll(buildDir)
	}
}

// Start builds the binaries (once) and starts the stack; Stop ends it.
func Start(opts Options) (*Stack, error) {
	if opts.Mode == "" {
		opts.Mode = Split
	}
	bins, err := Build()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		if opts.Dir, err = os.MkdirTemp("", "platform-stack-"); err != nil {
			return nil, err
		}
	}
	s := &Stack{Dir: opts.Dir, opts: opts, bins: bins, procs: map[string]*process{}, args: map[string][]string{}}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start() error {
	// The all-in-one keeps its CA in <data-dir>/pki and reuses one it finds there: share it.
	pkiDir := filepath.Join(s.Dir, "pki")
	if s.opts.Mode == AllInOne {
		pkiDir = filepath.Join(s.Dir, "allinone", "pki")
	}
	ca, _, err := pki.EnsureCA(pkiDir, "platform-test-ca")
	if err != nil {
		return err
	}
	s.CA, s.CAPEM = ca, ca.CertPEM
	s.gwPort, err = freePort()
	if err != nil {
		return err
	}
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.gwPort)
	switch s.opts.Mode {
	case AllInOne:
		s.args["allinone"] = append([]string{"--data-dir", filepath.Join(s.Dir, "allinone"), "--secure-port", strconv.Itoa(s.gwPort)}, s.opts.GatewayArgs...)
		if len(s.opts.RequestHeaderArgs) > 0 {
			s.args["allinone"] = append(append(s.args["allinone"], "--requestheader-client-ca-file", filepath.Join(pkiDir, "ca.crt")), s.opts.RequestHeaderArgs...)
		}
		if err := s.run("allinone"); err != nil {
			return err
		}
	case Split:
		if err := s.startSplit(ca, pkiDir); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", s.opts.Mode)
	}
	s.Kubeconfig = filepath.Join(s.Dir, "admin.kubeconfig")
	cert, key, err := ca.IssueClient("admin", []string{"system:masters"}, 24*time.Hour)
	if err != nil {
		return err
	}
	if err := pki.WriteKubeconfig(s.Kubeconfig, pki.Kubeconfig{ClusterName: "platform", UserName: "admin", Server: s.URL, CAPEM: ca.CertPEM, CertPEM: cert, KeyPEM: key, Namespace: "default"}); err != nil {
		return err
	}
	return s.WaitReady(60 * time.Second)
}

func (s *Stack) startSplit(ca *pki.CA, pkiDir string) error {
	redisDir := filepath.Join(s.Dir, "redis")
	if err := os.MkdirAll(redisDir, 0o700); err != nil {
		return err
	}
	redis, err := redistest.StartProcess(redisDir, redistest.Options{})
	if err != nil {
		return err
	}
	s.redis = redis
	peer := func(name string) (string, string, error) {
		c, k, err := ca.IssuePeer(name, []string{"127.0.0.1", "localhost"}, 24*time.Hour)
		if err != nil {
			return "", "", err
		}
		cf, kf := filepath.Join(pkiDir, name+".crt"), filepath.Join(pkiDir, name+".key")
		return cf, kf, pki.WritePair(cf, kf, c, k)
	}
	servCert, servKey, err := ca.IssueServing("gateway", []string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return err
	}
	gwCert, gwKey := filepath.Join(pkiDir, "gateway.crt"), filepath.Join(pkiDir, "gateway.key")
	if err := pki.WritePair(gwCert, gwKey, servCert, servKey); err != nil {
		return err
	}
	caFile := filepath.Join(pkiDir, "ca.crt")
	saKey := filepath.Join(pkiDir, "sa.key")
	if err := pki.EnsureSigningKey(saKey); err != nil {
		return err
	}
	s.ServiceAccountIssuer = s.URL
	addr := func() (string, error) {
		port, err := freePort()
		return "127.0.0.1:" + strconv.Itoa(port), err
	}
	if s.stPort, err = freePort(); err != nil {
		return err
	}
	stAddr := "127.0.0.1:" + strconv.Itoa(s.stPort)
	anAddr, err := addr()
	if err != nil {
		return err
	}
	azAddr, err := addr()
	if err != nil {
		return err
	}
	adAddr, err := addr()
	if err != nil {
		return err
	}
	// Every hop is mutual TLS: each client presents a certificate of the same CA.
	client := func(prefix, name, address string) ([]string, error) {
		c, k, err := peer(name)
		if err != nil {
			return nil, err
		}
		return []string{"--" + prefix + "-address", address, "--" + prefix + "-ca-file", caFile, "--" + prefix + "-cert-file", c, "--" + prefix + "-key-file", k}, nil
	}
	serve := func(name, address string) ([]string, error) {
		c, k, err := peer(name)
		if err != nil {
			return nil, err
		}
		return []string{"--listen", address, "--tls-cert-file", c, "--tls-private-key-file", k, "--tls-client-ca-file", caFile}, nil
	}
	stServe, err := serve("storage", stAddr)
	if err != nil {
		return err
	}
	s.args["storage"] = append(append([]string{"--backend", "redis", "--redis-url", redis.URL()}, stServe...), s.opts.StorageArgs...)
	anServe, err := serve("authn", anAddr)
	if err != nil {
		return err
	}
	anStorage, err := client("storage", "authn-storage-client", stAddr)
	if err != nil {
		return err
	}
	s.args["authn"] = append(append(append(anServe, anStorage...), "--client-ca-file", caFile,
		"--service-account-issuer", s.ServiceAccountIssuer, "--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--enable-bootstrap-token-auth"), s.opts.AuthnArgs...)
	var proxyCA []string
	if len(s.opts.RequestHeaderArgs) > 0 {
		proxyCA = []string{"--requestheader-client-ca-file", caFile}
		s.args["authn"] = append(append(s.args["authn"], proxyCA...), s.opts.RequestHeaderArgs...)
	}
	azServe, err := serve("authz", azAddr)
	if err != nil {
		return err
	}
	azStorage, err := client("storage", "authz-storage-client", stAddr)
	if err != nil {
		return err
	}
	s.args["authz"] = append(append(azServe, azStorage...), s.opts.AuthzArgs...)
	adServe, err := serve("admission", adAddr)
	if err != nil {
		return err
	}
	adStorage, err := client("storage", "admission-storage-client", stAddr)
	if err != nil {
		return err
	}
	adAuthz, err := client("authz", "admission-authz-client", azAddr)
	if err != nil {
		return err
	}
	s.args["admission"] = append(append(append(adServe, adStorage...), adAuthz...), s.opts.AdmissionArgs...)
	// The CSR signers sign with the cluster CA, so issued client certificates authenticate.
	ceAddr, err := addr()
	if err != nil {
		return err
	}
	ceServe, err := serve("certificates", ceAddr)
	if err != nil {
		return err
	}
	ceStorage, err := client("storage", "certificates-storage-client", stAddr)
	if err != nil {
		return err
	}
	s.args["certificates"] = append(append(append(ceServe, ceStorage...), "--cluster-signing-cert-file", caFile,
		"--cluster-signing-key-file", filepath.Join(pkiDir, "ca.key")), s.opts.CertificatesArgs...)
	gwStorage, err := client("storage", "gateway-storage-client", stAddr)
	if err != nil {
		return err
	}
	gwAuthn, err := client("authn", "gateway-authn-client", anAddr)
	if err != nil {
		return err
	}
	gwAuthz, err := client("authz", "gateway-authz-client", azAddr)
	if err != nil {
		return err
	}
	gwAdmission, err := client("admission", "gateway-admission-client", adAddr)
	if err != nil {
		return err
	}
	s.args["gateway"] = append(append(append(append(append([]string{"--secure-port", strconv.Itoa(s.gwPort), "--tls-cert-file", gwCert, "--tls-private-key-file", gwKey,
		"--client-ca-file", caFile}, gwStorage...), gwAuthn...), gwAuthz...), gwAdmission...), append(proxyCA, s.opts.GatewayArgs...)...)
	// The controllers use the API like any client, as their own user.
	cmKubeconfig := filepath.Join(s.Dir, "controllers.kubeconfig")
	cmCert, cmKey, err := ca.IssueClient(naming.ControllerManagerUser, nil, 24*time.Hour)
	if err != nil {
		return err
	}
	if err := pki.WriteKubeconfig(cmKubeconfig, pki.Kubeconfig{ClusterName: "platform", UserName: naming.ControllerManagerUser, Server: s.URL, CAPEM: ca.CertPEM, CertPEM: cmCert, KeyPEM: cmKey}); err != nil {
		return err
	}
	// The all-in-one's selection of controllers, unless ControllersArgs names its own (a second
	// --controllers would add to the first).
	cmArgs := []string{"--kubeconfig", cmKubeconfig, "--listen", "unix://" + filepath.Join(s.Dir, "controllers.sock"),
		"--service-account-private-key-file", saKey, "--root-ca-file", caFile}
	if !slices.ContainsFunc(s.opts.ControllersArgs, func(a string) bool { return a == "--controllers" || strings.HasPrefix(a, "--controllers=") }) {
		cmArgs = append(cmArgs, "--controllers", "*,tokencleaner,bootstrapsigner")
	}
	s.args["controllers"] = append(cmArgs, s.opts.ControllersArgs...)
	if s.opts.Metrics {
		s.MetricsURLs = map[string]string{}
		for _, name := range []string{"storage", "authn", "authz", "admission", "certificates", "controllers"} {
			a, err := addr()
			if err != nil {
				return err
			}
			s.args[name] = append(s.args[name], "--metrics-bind-address", a)
			s.MetricsURLs[name] = "http://" + a + "/metrics"
		}
	}
	for _, name := range []string{"storage", "authn", "authz", "admission", "certificates", "gateway", "controllers"} {
		if err := s.run(name); err != nil {
			return err
		}
	}
	return nil
}

// run starts one service process with its recorded arguments; a replica "<service>-<n>" runs
// the service's binary.
func (s *Stack) run(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bin := name
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			bin = name[:i]
		}
	}
	return s.runLocked(name, bin)
}

// runLocked starts binary bin as service name (s.mu held).
func (s *Stack) runLocked(name, bin string) error {
	cmd := exec.Command(filepath.Join(s.bins, bin), s.args[name]...)
	if s.opts.Stderr != nil {
		cmd.Stderr = s.opts.Stderr
	} else {
		f, err := os.OpenFile(filepath.Join(s.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		s.logs = append(s.logs, f)
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	s.procs[name] = p
	go func() { _ = cmd.Wait(); close(p.done) }()
	return nil
}

// process is a started service and a channel closed when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Restart stops one service (SIGTERM, or SIGKILL when kill is set) and starts it again with the
// same flags: "gateway", "storage" or "allinone". The same ports are reused.
func (s *Stack) Restart(name string, kill bool) error {
	if err := s.StopService(name, kill); err != nil {
		return err
	}
	return s.StartService(name)
}

// StopService stops one service and waits for it to exit.
func (s *Stack) StopService(name string, kill bool) error {
	s.mu.Lock()
	p := s.procs[name]
	delete(s.procs, name)
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s: %w", name, ErrNotRunning)
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// StartGatewayReplica starts another gateway process of a split stack (the same storage,
// authentication, authorization and admission services) as service "gateway-<n>", and returns its URL once
// it is ready.
func (s *Stack) StartGatewayReplica() (string, error) {
	return s.StartGatewayReplicaOn("")
}

// StartGatewayReplicaOn is StartGatewayReplica with the new gateway talking to the storage
// service at storageAddr (a replica from StartStorageReplica); "" is the stack's own.
func (s *Stack) StartGatewayReplicaOn(storageAddr string) (string, error) {
	if s.opts.Mode != Split {
		return "", errors.New("gateway replicas need the split stack")
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	name := fmt.Sprintf("gateway-%d", len(s.args))
	args := withFlag(s.args["gateway"], "--secure-port", strconv.Itoa(port))
	if storageAddr != "" {
		args = withFlag(args, "--storage-address", storageAddr)
	}
	s.args[name] = args
	s.mu.Unlock()
	s.mu.Lock()
	err = s.runLocked(name, "gateway")
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	return url, s.waitReadyAt(url, 30*time.Second)
}

// StartGatewayReplicaAt starts another gateway process of a split stack as service
// "gateway-<n>", serving at ip (another loopback address, such as 127.0.0.2) on the stack's
// gateway port and advertising ip in the kubernetes Service's endpoints, as API servers of one
// cluster share a port on addresses of their own. Its serving certificate names ip. It returns
// the gateway's URL once it is ready.
func (s *Stack) StartGatewayReplicaAt(ip string) (string, error) {
	if s.opts.Mode != Split {
		return "", errors.New("gateway replicas need the split stack")
	}
	cert, key, err := s.CA.IssueServing("gateway", []string{ip, "127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return "", err
	}
	certFile, keyFile := filepath.Join(s.Dir, "pki", "gateway-"+ip+".crt"), filepath.Join(s.Dir, "pki", "gateway-"+ip+".key")
	if err := pki.WritePair(certFile, keyFile, cert, key); err != nil {
		return "", err
	}
	s.mu.Lock()
	name := fmt.Sprintf("gateway-%d", len(s.args))
	args := withFlag(withFlag(s.args["gateway"], "--tls-cert-file", certFile), "--tls-private-key-file", keyFile)
	s.args[name] = append(args, "--bind-address", ip, "--advertise-address", ip)
	err = s.runLocked(name, "gateway")
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	url := "https://" + net.JoinHostPort(ip, strconv.Itoa(s.gwPort))
	return url, s.waitReadyAt(url, 30*time.Second)
}

// GatewayReplicas lists the names of the running gateway replicas ("gateway-<n>").
func (s *Stack) GatewayReplicas() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name := range s.procs {
		if strings.HasPrefix(name, "gateway-") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// StartStorageReplica starts another storage process of a split stack on the same Redis (the
// same flags, its own listen address and metrics address) as service "storage-<n>", and returns
// its name and gRPC address once it accepts connections. Point a gateway at it with
// StartGatewayReplicaOn.
func (s *Stack) StartStorageReplica() (name, addr string, err error) {
	if s.opts.Mode != Split {
		return "", "", errors.New("storage replicas need the split stack")
	}
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	addr = "127.0.0.1:" + strconv.Itoa(port)
	s.mu.Lock()
	name = fmt.Sprintf("storage-%d", len(s.args))
	args := withFlag(s.args["storage"], "--listen", addr)
	if s.MetricsURLs != nil {
		mport, err := freePort()
		if err != nil {
			s.mu.Unlock()
			return "", "", err
		}
		args = withFlag(args, "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(mport))
		s.MetricsURLs[name] = "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
	}
	s.args[name] = args
	err = s.runLocked(name, "storage")
	s.mu.Unlock()
	if err != nil {
		return "", "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return name, addr, nil
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("%s did not listen on %s in 30s (log in %s)", name, addr, s.Dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartControllersReplica starts another controllers process of a split stack (a candidate for
// the same leader Lease) against the gateway at gatewayURL ("" is the stack's), as service
// "controllers-<n>", and returns its name; with Options.Metrics its metrics URL is in
// MetricsURLs[name].
func (s *Stack) StartControllersReplica(gatewayURL string) (string, error) {
	if s.opts.Mode != Split {
		return "", errors.New("controllers replicas need the split stack")
	}
	if gatewayURL == "" {
		gatewayURL = s.URL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := fmt.Sprintf("controllers-%d", len(s.args))
	kubeconfig := filepath.Join(s.Dir, name+".kubeconfig")
	cert, key, err := s.CA.IssueClient(naming.ControllerManagerUser, nil, 24*time.Hour)
	if err != nil {
		return "", err
	}
	if err := pki.WriteKubeconfig(kubeconfig, pki.Kubeconfig{ClusterName: "platform", UserName: naming.ControllerManagerUser, Server: gatewayURL, CAPEM: s.CAPEM, CertPEM: cert, KeyPEM: key}); err != nil {
		return "", err
	}
	args := withFlag(withFlag(s.args["controllers"], "--kubeconfig", kubeconfig), "--listen", "unix://"+filepath.Join(s.Dir, name+".sock"))
	if s.MetricsURLs != nil {
		mport, err := freePort()
		if err != nil {
			return "", err
		}
		args = withFlag(args, "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(mport))
		s.MetricsURLs[name] = "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
	}
	s.args[name] = args
	return name, s.runLocked(name, "controllers")
}

// withFlag is a copy of args with the value of every "flag value" pair set to value.
func withFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
		}
	}
	return out
}

// StartService starts a service stopped with StopService.
func (s *Stack) StartService(name string) error {
	return s.run(name)
}

// WaitReady waits until the gateway's /readyz answers 200.
func (s *Stack) WaitReady(timeout time.Duration) error {
	return s.waitReadyAt(s.URL, timeout)
}

func (s *Stack) waitReadyAt(url string, timeout time.Duration) error {
	client, err := s.HTTPClient("admin", "system:masters")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway at %s did not become ready in %v (logs in %s)", url, timeout, s.Dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ClientCert issues PEM client credentials for user in groups.
func (s *Stack) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	return s.CA.IssueClient(user, groups, 24*time.Hour)
}

// TLSConfig is a client TLS configuration for user, trusting the cluster CA.
func (s *Stack) TLSConfig(user string, groups ...string) (*tls.Config, error) {
	c, k, err := s.ClientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// HTTPClient is an HTTP client (HTTP/2 when the server offers it) authenticated as user.
func (s *Stack) HTTPClient(user string, groups ...string) (*http.Client, error) {
	tc, err := s.TLSConfig(user, groups...)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}}, nil
}

// Stop ends every process (gateway first) and removes nothing (logs stay in Dir).
func (s *Stack) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.mu.Lock()
	var controllers, gateways, storages []string
	for name := range s.procs {
		switch {
		case strings.HasPrefix(name, "controllers-"):
			controllers = append(controllers, name)
		case strings.HasPrefix(name, "gateway-"):
			gateways = append(gateways, name)
		case strings.HasPrefix(name, "storage-"):
			storages = append(storages, name)
		}
	}
	s.mu.Unlock()
	order := append(append(append(append(controllers, "controllers"), gateways...), "gateway", "allinone", "certificates", "admission", "authz", "authn"), storages...)
	for _, name := range append(order, "storage") {
		_ = s.StopService(name, false)
	}
	if s.redis != nil {
		_ = s.redis.Stop(false)
	}
	for _, f := range s.logs {
		_ = f.Close()
	}
}

// Logs returns what a service wrote to its log file so far.
func (s *Stack) Logs(name string) string {
	data, err := os.ReadFile(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err.Error()
	}
	return string(data)
}

func freePort() (int, error) {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// The port is free now, but the service binds it later: another stack of this process
		// starting meanwhile must not be handed the same number (its gateway would then talk to
		// our service, and readiness checks would not notice).
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port that was not handed out already")
}

// handedOut are the ports freePort has returned in this process.
var handedOut = struct {
	mu    sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ErrNotRunning is returned for a service that is not running.
var ErrNotRunning = errors.New("not running")

// Eventually polls cond every 50 ms until it returns nil or timeout passes; it then fails the test
// with cond's last error. Tests wait this way for what the system promises to happen, with a bound,
// instead of sleeping a guessed time (docs/architecture.md, "Tests").
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
