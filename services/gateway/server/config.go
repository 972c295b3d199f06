// Package server runs the gateway: the HTTPS listener, the handler chain around the resource
// API, health endpoints, metrics, the connection to the storage service, and graceful shutdown.
package server

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/services/gateway/apiserver"
	"platform.io/services/gateway/audit"

	"platform.io/services/gateway/registry"
)

// Config is the gateway's configuration; flag names follow kube-apiserver's.
type Config struct {
	// BindAddress and SecurePort are where HTTPS is served.
	BindAddress string
	SecurePort  int
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile verifies client certificates at the TLS handshake (the authentication service
	// maps them to users); RequestHeaderClientCAFile adds the CA of authenticating proxies.
	ClientCAFile              string
	RequestHeaderClientCAFile string

	// Storage, Authn, Authz and Admission are the services behind the gateway: addresses and
	// mutual TLS credentials (required for TCP addresses that are not loopback).
	Storage   service.ClientConfig
	Authn     service.ClientConfig
	Authz     service.ClientConfig
	Admission service.ClientConfig

	// RuntimeConfig enables and disables group versions and resources.
	RuntimeConfig string
	// LivezGracePeriod: until this long after start, /livez treats unfinished startup hooks as live.
	LivezGracePeriod time.Duration
	// ShutdownDelayDuration: on SIGTERM, keep serving this long while /readyz fails, so load
	// balancers stop sending traffic before the listener closes.
	ShutdownDelayDuration time.Duration
	// ShutdownTimeout bounds the graceful part of shutdown after the delay.
	ShutdownTimeout time.Duration
	// MinRequestTimeout bounds watches that name no timeoutSeconds.
	MinRequestTimeout time.Duration
	// WatchBookmarkInterval is how often watches that allow bookmarks get one.
	WatchBookmarkInterval time.Duration
	// RequestTimeout bounds every request but watches (upstream's --request-timeout).
	RequestTimeout time.Duration
	// MaxRequestsInflight and MaxMutatingRequestsInflight bound the read-only and the mutating
	// requests served at once; beyond them a request is answered 429. 0 means no bound.
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// WatchCache shares one storage watch per resource type among the gateway's watchers.
	WatchCache bool
	// Profiling serves Go's profiles at /debug/pprof/ (authenticated and authorized as a
	// non-resource URL, as upstream's --profiling).
	Profiling bool
	// Audit is the audit log: policy file, log path and rotation (off without a policy).
	Audit audit.Options
	// EnableControllers runs the CustomResourceDefinition status controller (names, Established,
	// cleanup on delete) in this process; the other controllers are the controllers service's.
	EnableControllers bool
	// ProxyClientCertFile and ProxyClientKeyFile are the client certificate the aggregator
	// presents to extension API servers (upstream --proxy-client-cert-file, -key-file).
	ProxyClientCertFile, ProxyClientKeyFile string
	// EnableAggregatorRouting sends proxied requests to an endpoint of the APIService's Service
	// instead of its cluster IP.
	EnableAggregatorRouting bool
	// FeatureGates are --feature-gates (features.go).
	FeatureGates FeatureGates
	// ServiceClusterIPRange is upstream's --service-cluster-ip-range: one CIDR, or two of
	// different families; the kubernetes Service gets the first address of the first (default
	// 10.0.0.0/24, as upstream's).
	ServiceClusterIPRange string
	// AdvertiseAddress is the address this gateway is listed at in the kubernetes Service's
	// endpoints (default: --bind-address, or the host's default interface when that is
	// unspecified or loopback).
	AdvertiseAddress string
	// EndpointReconcilerType is lease (every gateway keeps a lease and the endpoints list the
	// gateways whose leases are current) or none (the endpoints are left to someone else).
	EndpointReconcilerType string
}

// DefaultServiceClusterIPRange is upstream's default service range.
const DefaultServiceClusterIPRange = "10.0.0.0/24"

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.BindAddress, "bind-address", "127.0.0.1", "the IP address to serve HTTPS on")
	fs.IntVar(&c.SecurePort, "secure-port", 6443, "the port to serve HTTPS on")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "the serving certificate (PEM)")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", "", "the serving certificate's private key (PEM)")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", "", "CA bundle that verifies client certificates at the TLS handshake (the authentication service maps them to users)")
	fs.StringVar(&c.RequestHeaderClientCAFile, "requestheader-client-ca-file", "", "CA bundle of authenticating proxies' client certificates, also accepted at the TLS handshake")
	c.Storage.RegisterFlags(fs, "storage", "storage service", "127.0.0.1:7001")
	c.Authn.RegisterFlags(fs, "authn", "authentication service", "127.0.0.1:7002")
	c.Authz.RegisterFlags(fs, "authz", "authorization service", "127.0.0.1:7003")
	c.Admission.RegisterFlags(fs, "admission", "admission service", "127.0.0.1:7004")
	fs.StringVar(&c.RuntimeConfig, "runtime-config", "", "comma-separated <group>/<version>[/<resource>][=true|false]; api/all=false turns everything off")
	fs.DurationVar(&c.LivezGracePeriod, "livez-grace-period", 0, "how long after start /livez treats unfinished startup hooks as live")
	fs.DurationVar(&c.ShutdownDelayDuration, "shutdown-delay-duration", 0, "on SIGTERM, keep serving this long with /readyz failing before shutting down")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "bound on the graceful part of shutdown")
	fs.DurationVar(&c.MinRequestTimeout, "min-request-timeout", 30*time.Minute, "watches without timeoutSeconds end after a random time between this and twice this")
	fs.DurationVar(&c.WatchBookmarkInterval, "watch-bookmark-interval", time.Minute, "how often watches that allow bookmarks get one")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", time.Minute, "bound on every request but watches; past it the request is answered 504")
	fs.IntVar(&c.MaxRequestsInflight, "max-requests-inflight", 400, "read-only requests served at once before answering 429 (0: no bound)")
	fs.IntVar(&c.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", 200, "mutating requests served at once before answering 429 (0: no bound)")
	fs.BoolVar(&c.Profiling, "profiling", true, "serve Go's runtime profiles at /debug/pprof/ to users allowed the non-resource URL (system:masters only by default)")
	fs.BoolVar(&c.WatchCache, "watch-cache", true, "share one storage watch per resource type among watches that start at a known resourceVersion (decode and encode each event once), and keep the types clients list in memory to answer unpaged lists without reading them from storage")
	fs.StringVar(&c.Audit.PolicyFile, "audit-policy-file", "", "audit Policy (audit."+naming.GroupSuffix+"/v1): which requests are recorded at which level; auditing is off without it")
	fs.StringVar(&c.Audit.LogPath, "audit-log-path", "", "file the audit events are written to as JSON lines, - for standard output")
	fs.IntVar(&c.Audit.MaxAge, "audit-log-maxage", 0, "days to keep rotated audit log files (0: no limit)")
	fs.IntVar(&c.Audit.MaxBackups, "audit-log-maxbackup", 0, "rotated audit log files to keep (0: no limit)")
	fs.IntVar(&c.Audit.MaxSize, "audit-log-maxsize", 0, "megabytes an audit log file grows to before it is rotated (0: no limit)")
	fs.StringVar(&c.Audit.Format, "audit-log-format", "json", "format of audit log lines: json")
	fs.BoolVar(&c.EnableControllers, "enable-controllers", true, "run the CustomResourceDefinition status controller (accepted names, Established, cleanup on delete) and the APIService controllers (local APIServices, availability) in this process")
	fs.StringVar(&c.ProxyClientCertFile, "proxy-client-cert-file", "", "client certificate (PEM) the gateway presents to extension API servers of remote APIServices, with the user in the front-proxy headers")
	fs.StringVar(&c.ProxyClientKeyFile, "proxy-client-key-file", "", "the private key of --proxy-client-cert-file")
	fs.BoolVar(&c.EnableAggregatorRouting, "enable-aggregator-routing", false, "send requests for remote APIServices to an endpoint of their Service instead of its cluster IP")
	c.FeatureGates = DefaultFeatureGates()
	fs.Var(featureGatesFlag{&c.FeatureGates}, "feature-gates", "comma-separated Name=true|false pairs, as kube-apiserver's: "+
		APIResponseCompression+" (default true: gzip answers over 128 KiB for clients that accept gzip), "+
		AggregatedDiscoveryRemoveBetaType+" (default true: aggregated discovery in apidiscovery v2 only; false also serves v2beta1)")
	fs.StringVar(&c.ServiceClusterIPRange, "service-cluster-ip-range", "", "CIDR range of Services' cluster IPs (or two, comma-separated, of different families); the "+naming.APIServerServiceName+" Service in the default namespace gets its first address (default "+DefaultServiceClusterIPRange+")")
	fs.StringVar(&c.AdvertiseAddress, "advertise-address", "", "the IP address this gateway is listed at in the endpoints of the "+naming.APIServerServiceName+" Service; it must be reachable by the rest of the cluster (default: --bind-address, or the host's default interface when that is unspecified or loopback)")
	fs.StringVar(&c.EndpointReconcilerType, "endpoint-reconciler-type", "lease", "how the endpoints of the "+naming.APIServerServiceName+" Service are kept: lease (each gateway renews a lease and the endpoints list every gateway whose lease is current) or none")
}

// KubernetesServiceIP is the kubernetes Service's cluster IP: the first address of the first
// --service-cluster-ip-range.
func (c *Config) KubernetesServiceIP() (net.IP, error) {
	ranges := c.ServiceClusterIPRange
	if ranges == "" {
		ranges = DefaultServiceClusterIPRange
	}
	var cidrs []*net.IPNet
	for _, r := range strings.Split(ranges, ",") {
		_, cidr, err := net.ParseCIDR(strings.TrimSpace(r))
		if err != nil {
			return nil, fmt.Errorf("--service-cluster-ip-range: %q is not a CIDR", r)
		}
		cidrs = append(cidrs, cidr)
	}
	switch {
	case len(cidrs) > 2:
		return nil, errors.New("--service-cluster-ip-range: at most two ranges, one per IP family")
	case len(cidrs) == 2 && (cidrs[0].IP.To4() == nil) == (cidrs[1].IP.To4() == nil):
		return nil, errors.New("--service-cluster-ip-range: two ranges must be of different IP families (dual-stack)")
	}
	ones, bits := cidrs[0].Mask.Size()
	if bits-ones < 2 {
		return nil, fmt.Errorf("--service-cluster-ip-range: %s is too small to hold a service address", cidrs[0])
	}
	// The first address after the network's own (upstream's GetIndexedIP(range, 1)).
	ip := make(net.IP, len(cidrs[0].IP))
	copy(ip, cidrs[0].IP)
	for i := len(ip) - 1; i >= 0; i-- {
		ip[i]++
		if ip[i] != 0 {
			break
		}
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip, nil
}

// AdvertiseIP is the address this gateway advertises in the kubernetes Service's endpoints:
// --advertise-address, else --bind-address unless it is unspecified or loopback (which the
// rest of a cluster cannot reach), else the host's default interface, as upstream chooses it
// (utilnet.ResolveBindAddress). A loopback bind address on a host without a default route is
// advertised as it is (upstream refuses to start), so a machine without a network still runs.
func (c *Config) AdvertiseIP() (net.IP, error) {
	if c.AdvertiseAddress != "" {
		ip := net.ParseIP(c.AdvertiseAddress)
		if ip == nil || ip.IsUnspecified() {
			return nil, fmt.Errorf("--advertise-address %q is not a usable IP address", c.AdvertiseAddress)
		}
		return ip, nil
	}
	bind := net.ParseIP(c.BindAddress)
	if bind == nil {
		return nil, fmt.Errorf("--bind-address %q is not an IP address", c.BindAddress)
	}
	ip, err := utilnet.ResolveBindAddress(bind)
	switch {
	case err != nil && bind.IsLoopback():
		return bind, nil
	case err != nil:
		return nil, fmt.Errorf("choosing the address to advertise (set --advertise-address): %w", err)
	}
	return ip, nil
}

// DefaultConfig returns the configuration the flags default to.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError))
	return c
}

// Validate reports every configuration error, each naming the flag that fixes it.
func (c *Config) Validate() error {
	var errs []error
	if net.ParseIP(c.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", c.BindAddress))
	}
	if c.SecurePort < 0 || c.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d is out of range", c.SecurePort))
	}
	if c.TLSCertFile == "" || c.TLSPrivateKeyFile == "" {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file are required"))
	}
	if c.ClientCAFile == "" {
		errs = append(errs, errors.New("--client-ca-file is required: client certificates are how administrators authenticate"))
	}
	errs = append(errs, c.Storage.Validate()...)
	errs = append(errs, c.Authn.Validate()...)
	errs = append(errs, c.Authz.Validate()...)
	errs = append(errs, c.Admission.Validate()...)
	if rc, err := registry.ParseRuntimeConfig(c.RuntimeConfig); err != nil {
		errs = append(errs, err)
	} else if _, err := registry.New(rc); err != nil {
		errs = append(errs, err)
	}
	for flag, d := range map[string]time.Duration{"--livez-grace-period": c.LivezGracePeriod, "--shutdown-delay-duration": c.ShutdownDelayDuration} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", flag))
		}
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("--request-timeout must be positive"))
	}
	if c.MaxRequestsInflight < 0 || c.MaxMutatingRequestsInflight < 0 {
		errs = append(errs, errors.New("--max-requests-inflight and --max-mutating-requests-inflight must not be negative"))
	}
	if c.MinRequestTimeout <= 0 {
		errs = append(errs, errors.New("--min-request-timeout must be positive"))
	}
	if (c.ProxyClientCertFile == "") != (c.ProxyClientKeyFile == "") {
		errs = append(errs, errors.New("--proxy-client-cert-file and --proxy-client-key-file go together"))
	}
	errs = append(errs, c.validateAudit()...)
	if _, err := c.KubernetesServiceIP(); err != nil {
		errs = append(errs, err)
	}
	switch c.EndpointReconcilerType {
	case apiserver.EndpointReconcilerLease:
		if _, err := c.AdvertiseIP(); err != nil {
			errs = append(errs, err)
		}
	case apiserver.EndpointReconcilerNone:
	case "master-count":
		errs = append(errs, errors.New("--endpoint-reconciler-type master-count is not supported (upstream deprecated it): use lease"))
	default:
		errs = append(errs, fmt.Errorf("--endpoint-reconciler-type %q: lease or none", c.EndpointReconcilerType))
	}
	return errors.Join(errs...)
}

func (c *Config) validateAudit() []error {
	a := c.Audit
	var errs []error
	switch {
	case a.PolicyFile != "" && a.LogPath == "":
		errs = append(errs, errors.New("--audit-policy-file needs --audit-log-path (where the events go)"))
	case a.LogPath != "" && a.PolicyFile == "":
		errs = append(errs, errors.New("--audit-log-path needs --audit-policy-file (which requests are recorded)"))
	case a.PolicyFile != "":
		if _, err := audit.LoadPolicy(a.PolicyFile); err != nil {
			errs = append(errs, fmt.Errorf("--audit-policy-file: %w", err))
		}
	}
	if a.Format != "json" {
		errs = append(errs, fmt.Errorf("--audit-log-format %q: only json is supported", a.Format))
	}
	if a.MaxAge < 0 || a.MaxBackups < 0 || a.MaxSize < 0 {
		errs = append(errs, errors.New("--audit-log-maxage, --audit-log-maxbackup and --audit-log-maxsize must not be negative"))
	}
	return errs
}
