package manager

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/services/controllers/bootstrapsigner"
	"platform.io/services/controllers/clusterroleaggregation"
	"platform.io/services/controllers/csrapproving"
	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/garbagecollector"
	"platform.io/services/controllers/namespace"
	"platform.io/services/controllers/resourcequota"
	"platform.io/services/controllers/rootcacertpublisher"
	"platform.io/services/controllers/serviceaccount"
	"platform.io/services/controllers/serviceaccounttoken"
	"platform.io/services/controllers/tokencleaner"
)

// ControllerInfo names a controller as --controllers does and tells whether "*" enables it.
type ControllerInfo struct {
	Name      string
	OnDefault bool
}

// Known lists every controller, in the order they start.
var Known = []ControllerInfo{
	{serviceaccount.Name, true},
	{serviceaccounttoken.Name, true},
	{namespace.Name, true},
	{clusterroleaggregation.Name, true},
	{resourcequota.Name, true},
	{rootcacertpublisher.Name, true},
	{csrapproving.Name, true},
	{csrcleaner.Name, true},
	{garbagecollector.Name, true},
	{tokencleaner.Name, false},
	{bootstrapsigner.Name, false},
}

// aliases are the names upstream's controller manager gives the same controllers since 1.28
// (the short names above are its older names, still accepted upstream and used by the spec).
var aliases = map[string]string{
	"serviceaccount-controller":                      serviceaccount.Name,
	"serviceaccount-token-controller":                serviceaccounttoken.Name,
	"namespace-controller":                           namespace.Name,
	"clusterrole-aggregation-controller":             clusterroleaggregation.Name,
	"resourcequota-controller":                       resourcequota.Name,
	"root-ca-certificate-publisher-controller":       rootcacertpublisher.Name,
	"certificatesigningrequest-approving-controller": csrapproving.Name,
	"certificatesigningrequest-cleaner-controller":   csrcleaner.Name,
	"garbage-collector-controller":                   garbagecollector.Name,
	"token-cleaner-controller":                       tokencleaner.Name,
	"bootstrap-signer-controller":                    bootstrapsigner.Name,
}

// LeaseName is the name of the leader Lease (upstream kube-controller-manager).
var LeaseName = naming.Product + "-controller-manager"

// Config is the controllers service's configuration; flag names are kube-controller-manager's
// where it has the flag.
type Config struct {
	// ServerConfig serves the gRPC health service and metrics (--listen, --tls-*,
	// --metrics-bind-address, --shutdown-timeout).
	service.ServerConfig

	// Kubeconfig is the gateway, and the client certificate of naming.ControllerManagerUser.
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst bound the requests to the gateway.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// LeaderElect runs the controllers only while this process holds the leader Lease
	// LeaderElectResourceNamespace/LeaderElectResourceName.
	LeaderElect                  bool
	LeaseDuration                time.Duration
	RenewDeadline                time.Duration
	RetryPeriod                  time.Duration
	LeaderElectResourceName      string
	LeaderElectResourceNamespace string

	// Controllers selects the controllers: "*" the default set, "name" enables, "-name" disables;
	// the first entry naming a controller decides.
	Controllers []string

	// ServiceAccountPrivateKeyFile signs the tokens of token Secrets (serviceaccount-token).
	ServiceAccountPrivateKeyFile string
	// RootCAFile is the ca.crt put in token Secrets, in a new cluster-info and in every
	// namespace's root CA ConfigMap (default: the CA that verifies the gateway).
	RootCAFile string
	// ClusterInfoServer is the server URL of a new cluster-info (default: the gateway's URL).
	ClusterInfoServer string
	// ResourceQuotaSyncPeriod is how often every ResourceQuota's usage is recounted.
	ResourceQuotaSyncPeriod time.Duration
	// ConcurrentGCSyncs is the garbage collector's number of workers; GCKubeAPIQPS and
	// GCKubeAPIBurst bound its own requests (deleting thousands of dependents at the shared
	// --kube-api-qps would take minutes).
	ConcurrentGCSyncs int
	GCKubeAPIQPS      float32
	GCKubeAPIBurst    int

	// The fields below have no flags: an embedding process (the all-in-one, tests) sets them.

	// RESTConfig, when set, is used instead of Kubeconfig.
	RESTConfig *rest.Config
	// TokenGenerator signs the tokens of token Secrets; when nil and
	// ServiceAccountPrivateKeyFile is set, NewTokenGenerator (default serviceaccounttoken.NewSigner)
	// builds it from the file.
	TokenGenerator    serviceaccounttoken.TokenGenerator
	NewTokenGenerator func(privateKeyFile string) (serviceaccounttoken.TokenGenerator, error)
	// Identity is this process's holder identity in the Lease (default: hostname_uuid).
	Identity string
	// NamespaceDeletionGracePeriod delays the handling of a deleted namespace (default
	// namespace.DefaultDeletionGracePeriod).
	NamespaceDeletionGracePeriod time.Duration
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7006")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the gateway, with the client certificate of "+naming.ControllerManagerUser)
	fs.Float32Var(&c.KubeAPIQPS, "kube-api-qps", 100, "requests per second to the gateway (upstream 20; the namespace controller needs about two per resource type per pass)")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 200, "burst of requests to the gateway")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run the controllers only while holding the leader Lease, so that several replicas are safe")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the last renewal it saw before it takes the lease")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leading (less than the lease duration)")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how long candidates wait between attempts to acquire or renew")
	fs.StringVar(&c.LeaderElectResourceName, "leader-elect-resource-name", LeaseName, "name of the leader Lease")
	fs.StringVar(&c.LeaderElectResourceNamespace, "leader-elect-resource-namespace", naming.SystemNamespace, "namespace of the leader Lease")
	// The default is the configuration's own selection (the all-in-one's adds two), "*" without one.
	def := c.Controllers
	if len(def) == 0 {
		def = []string{"*"}
	}
	fs.StringSliceVar(&c.Controllers, "controllers", def, "controllers to run: '*' the default set, 'foo' enables foo, '-foo' disables foo. All: "+
		strings.Join(names(false), ", ")+". Off by default: "+strings.Join(names(true), ", "))
	fs.StringVar(&c.ServiceAccountPrivateKeyFile, "service-account-private-key-file", "", "PEM private key that signs the tokens of service account token Secrets (without it serviceaccount-token does not run)")
	fs.StringVar(&c.RootCAFile, "root-ca-file", "", "CA bundle put as ca.crt in token Secrets, in every namespace's "+naming.RootCAConfigMap+" ConfigMap and in a new cluster-info (default: the CA of --kubeconfig)")
	fs.StringVar(&c.ClusterInfoServer, "cluster-info-server", "", "server URL written into a new cluster-info ConfigMap (default: the server of --kubeconfig)")
	fs.DurationVar(&c.ResourceQuotaSyncPeriod, "resource-quota-sync-period", resourcequota.DefaultSyncPeriod, "how often every ResourceQuota's usage is recounted from the objects it covers")
	fs.IntVar(&c.ConcurrentGCSyncs, "concurrent-gc-syncs", garbagecollector.DefaultWorkers, "garbage collector workers")
	fs.Float32Var(&c.GCKubeAPIQPS, "gc-kube-api-qps", 1000, "requests per second of the garbage collector to the gateway (its own budget beside --kube-api-qps)")
	fs.IntVar(&c.GCKubeAPIBurst, "gc-kube-api-burst", 2000, "burst of the garbage collector's requests to the gateway")
}

// names lists the controllers' names (only those off by default when offOnly).
func names(offOnly bool) []string {
	var out []string
	for _, k := range Known {
		if !offOnly || !k.OnDefault {
			out = append(out, k.Name)
		}
	}
	return out
}

// DefaultConfig is the configuration with every flag at its default.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError))
	return c
}

// Validate reports every configuration error, each naming the flag that fixes it.
func (c *Config) Validate() error {
	errs := c.ServerConfig.Validate()
	if c.RESTConfig == nil && c.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	if c.KubeAPIQPS <= 0 {
		errs = append(errs, errors.New("--kube-api-qps must be positive"))
	}
	if c.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-burst must be positive"))
	}
	if c.ConcurrentGCSyncs <= 0 {
		errs = append(errs, errors.New("--concurrent-gc-syncs must be positive"))
	}
	if c.GCKubeAPIQPS <= 0 || c.GCKubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--gc-kube-api-qps and --gc-kube-api-burst must be positive"))
	}
	if c.ResourceQuotaSyncPeriod <= 0 {
		errs = append(errs, errors.New("--resource-quota-sync-period must be positive"))
	}
	if c.LeaderElect {
		if c.LeaseDuration <= c.RenewDeadline {
			errs = append(errs, errors.New("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"))
		}
		if c.RetryPeriod <= 0 {
			errs = append(errs, errors.New("--leader-elect-retry-period must be positive"))
		} else if float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod) {
			errs = append(errs, errors.New("--leader-elect-renew-deadline must be greater than 1.2 times --leader-elect-retry-period"))
		}
		if c.LeaderElectResourceName == "" {
			errs = append(errs, errors.New("--leader-elect-resource-name is required with --leader-elect"))
		}
		if c.LeaderElectResourceNamespace == "" {
			errs = append(errs, errors.New("--leader-elect-resource-namespace is required with --leader-elect"))
		}
	}
	for _, entry := range c.Controllers {
		if entry == "*" {
			continue
		}
		name := strings.TrimPrefix(entry, "-")
		if canonical(name) == "" {
			errs = append(errs, fmt.Errorf("--controllers: %q is not in the list of known controllers (%s)", name, strings.Join(names(false), ", ")))
		}
	}
	if c.ServiceAccountPrivateKeyFile != "" {
		if _, err := os.Stat(c.ServiceAccountPrivateKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("--service-account-private-key-file: %w", err))
		}
	}
	if c.RootCAFile != "" {
		if _, err := os.Stat(c.RootCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--root-ca-file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// canonical is the controller a --controllers name means ("" when none).
func canonical(name string) string {
	if a, ok := aliases[name]; ok {
		return a
	}
	for _, k := range Known {
		if k.Name == name {
			return name
		}
	}
	return ""
}

// Enabled tells whether --controllers turns the named controller on: the first entry naming it
// (or its alias) decides; otherwise "*" enables the controllers on by default.
func (c *Config) Enabled(name string) bool {
	star := false
	for _, entry := range c.Controllers {
		switch {
		case entry == "*":
			star = true
		case canonical(entry) == name:
			return true
		case strings.HasPrefix(entry, "-") && canonical(entry[1:]) == name:
			return false
		}
	}
	if !star {
		return false
	}
	i := slices.IndexFunc(Known, func(k ControllerInfo) bool { return k.Name == name })
	return i >= 0 && Known[i].OnDefault
}
