package manager

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
)

func TestEnabled(t *testing.T) {
	all := []string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrapproving", "csrcleaner", "tokencleaner", "bootstrapsigner"}
	cases := []struct {
		name        string
		controllers []string
		want        []string
	}{
		{"upstream: * is the default set (csrapproving and csrcleaner on; tokencleaner and bootstrapsigner off)", []string{"*"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrapproving", "csrcleaner"}},
		{"spec: --controllers=*,tokencleaner enables the cleaner", []string{"*", "tokencleaner"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrapproving", "csrcleaner", "tokencleaner"}},
		{"upstream: -name disables one of the default set", []string{"*", "-namespace"},
			[]string{"serviceaccount", "serviceaccount-token", "clusterrole-aggregation", "csrapproving", "csrcleaner"}},
		{"upstream: -csrcleaner turns the CSR cleaner off", []string{"*", "-csrcleaner"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrapproving"}},
		{"upstream: -csrapproving turns automatic approval off", []string{"*", "-csrapproving"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrcleaner"}},
		{"upstream 1.28+: certificatesigningrequest-approving-controller is csrapproving", []string{"-certificatesigningrequest-approving-controller", "*"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrcleaner"}},
		{"upstream: without * only the named controllers run", []string{"bootstrapsigner", "namespace"},
			[]string{"namespace", "bootstrapsigner"}},
		{"upstream: the first entry naming a controller decides", []string{"-namespace", "namespace", "*"},
			[]string{"serviceaccount", "serviceaccount-token", "clusterrole-aggregation", "csrapproving", "csrcleaner"}},
		{"upstream 1.28+: the -controller names are aliases", []string{"*", "-namespace-controller", "token-cleaner-controller"},
			[]string{"serviceaccount", "serviceaccount-token", "clusterrole-aggregation", "csrapproving", "csrcleaner", "tokencleaner"}},
		{"upstream 1.28+: certificatesigningrequest-cleaner-controller is csrcleaner", []string{"-certificatesigningrequest-cleaner-controller", "*"},
			[]string{"serviceaccount", "serviceaccount-token", "namespace", "clusterrole-aggregation", "csrapproving"}},
		{"upstream: an empty list runs nothing", []string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Controllers: tc.controllers}
			var got []string
			for _, name := range all {
				if c.Enabled(name) {
					got = append(got, name)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("enabled %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Kubeconfig = "kubeconfig"
		return c
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" means valid
	}{
		{"defaults with a kubeconfig are valid", func(*Config) {}, ""},
		{"a kubeconfig is needed", func(c *Config) { c.Kubeconfig = "" }, "--kubeconfig is required"},
		{"upstream: unknown controller names refuse to start, naming the flag", func(c *Config) { c.Controllers = []string{"*", "-nodelifecycle"} },
			`--controllers: "nodelifecycle" is not in the list of known controllers`},
		{"upstream: the lease must outlast the renew deadline", func(c *Config) { c.LeaseDuration = 10 * time.Second },
			"--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"},
		{"upstream: the renew deadline must exceed 1.2 retry periods", func(c *Config) { c.RetryPeriod = 9 * time.Second },
			"--leader-elect-renew-deadline must be greater than 1.2 times --leader-elect-retry-period"},
		{"durations do not matter without leader election", func(c *Config) { c.LeaderElect = false; c.LeaseDuration = time.Second }, ""},
		{"a missing private key file names its flag", func(c *Config) { c.ServiceAccountPrivateKeyFile = "/nonexistent/sa.key" },
			"--service-account-private-key-file"},
		{"a missing root CA file names its flag", func(c *Config) { c.RootCAFile = "/nonexistent/ca.crt" }, "--root-ca-file"},
		{"the listener's own checks apply", func(c *Config) { c.Listen = "" }, "--listen is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{"--kubeconfig=k", "--controllers=*,tokencleaner,-namespace", "--leader-elect=false",
		"--leader-elect-lease-duration=30s", "--root-ca-file=ca.crt", "--cluster-info-server=https://x:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Enabled("tokencleaner") || c.Enabled("namespace") || c.LeaderElect || c.LeaseDuration != 30*time.Second ||
		c.RootCAFile != "ca.crt" || c.ClusterInfoServer != "https://x:6443" {
		t.Fatalf("flags not applied: %+v", c)
	}
	d := DefaultConfig()
	if !d.LeaderElect || d.LeaseDuration != 15*time.Second || d.RenewDeadline != 10*time.Second || d.RetryPeriod != 2*time.Second ||
		d.LeaderElectResourceName != naming.Product+"-controller-manager" || d.LeaderElectResourceNamespace != naming.SystemNamespace {
		t.Fatalf("leader election defaults are not upstream's: %+v", d)
	}
}
