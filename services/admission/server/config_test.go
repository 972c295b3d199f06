package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/server"
)

// The flags are kube-apiserver's; defaults are the service's well-known addresses.
func TestFlags(t *testing.T) {
	def := server.DefaultConfig()
	if def.Listen != "127.0.0.1:7004" || def.Storage.Address != "127.0.0.1:7001" || def.Authz.Address != "127.0.0.1:7003" ||
		def.EnablePlugins != nil || def.DisablePlugins != nil || def.ConfigFile != "" {
		t.Fatalf("defaults %+v", def)
	}
	if err := def.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	var c server.Config
	fs := pflag.NewFlagSet("admission", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{
		"--enable-admission-plugins=AlwaysPullImages,EventRateLimit", "--enable-admission-plugins", "NamespaceExists",
		"--disable-admission-plugins=ServiceAccount", "--admission-control-config-file=/etc/admission.yaml",
		"--storage-address=unix:///run/storage.sock", "--authz-address=127.0.0.1:9003", "--listen=unix:///run/admission.sock",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.EnablePlugins, []string{"AlwaysPullImages", "EventRateLimit", "NamespaceExists"}) || !slices.Equal(c.DisablePlugins, []string{"ServiceAccount"}) ||
		c.ConfigFile != "/etc/admission.yaml" || c.Storage.Address != "unix:///run/storage.sock" || c.Authz.Address != "127.0.0.1:9003" || c.Listen != "unix:///run/admission.sock" {
		t.Fatalf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	// The all-in-one registers the plugin flags alone.
	var only server.Config
	fs = pflag.NewFlagSet("allinone", pflag.ContinueOnError)
	only.RegisterPluginFlags(fs)
	if fs.Lookup("listen") != nil || fs.Lookup("enable-admission-plugins") == nil || fs.Lookup("disable-admission-plugins") == nil || fs.Lookup("admission-control-config-file") == nil {
		t.Fatal("RegisterPluginFlags registers other flags, or misses one")
	}
}

// Every configuration error is reported at once, each naming the flag that fixes it.
func TestValidate(t *testing.T) {
	cases := []struct {
		rule   string
		change func(*server.Config)
		want   []string
	}{
		{"a listener is required", func(c *server.Config) { c.Listen = "" }, []string{"--listen is required"}},
		{"a non-loopback listener needs TLS", func(c *server.Config) { c.Listen = "0.0.0.0:7004" }, []string{"--listen 0.0.0.0:7004 is not loopback", "--tls-cert-file"}},
		{"storage elsewhere needs mutual TLS", func(c *server.Config) { c.Storage.Address = "10.0.0.5:7001" }, []string{"--storage-address 10.0.0.5:7001 is not loopback", "--storage-cert-file"}},
		{"the authorization service elsewhere needs mutual TLS", func(c *server.Config) { c.Authz.Address = "authz:7003" }, []string{"--authz-address authz:7003 is not loopback"}},
		{"client certificate without key", func(c *server.Config) { c.Authz.CertFile = "/c.pem" }, []string{"--authz-cert-file, --authz-key-file and --authz-ca-file go together"}},
		{"an unknown plugin", func(c *server.Config) { c.EnablePlugins = []string{"Bogus"} }, []string{`--enable-admission-plugins: unknown admission plugin "Bogus"`}},
		{"a removed plugin", func(c *server.Config) { c.EnablePlugins = []string{"PodSecurityPolicy"} }, []string{"--enable-admission-plugins: PodSecurityPolicy was removed upstream"}},
		{"a plugin both enabled and disabled", func(c *server.Config) {
			c.EnablePlugins, c.DisablePlugins = []string{"AlwaysPullImages"}, []string{"AlwaysPullImages"}
		}, []string{"--enable-admission-plugins and --disable-admission-plugins both name AlwaysPullImages"}},
		{"all at once", func(c *server.Config) {
			c.Listen, c.Storage.Address, c.DisablePlugins = "", "", []string{"Nope"}
		}, []string{"--listen is required", "--storage-address is required", `--disable-admission-plugins: unknown admission plugin "Nope"`}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cfg := server.DefaultConfig()
			c.change(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := server.Start(context.Background(), cfg, server.Options{Registry: newPlugins().registry()}, discard); err == nil {
				t.Error("Start accepted a configuration Validate refuses")
			}
		})
	}
}

// Start refuses what it cannot run, and hands each plugin its entry of the admission
// configuration file.
func TestStartErrors(t *testing.T) {
	base := func(p *plugins) server.Config {
		cfg := server.DefaultConfig()
		cfg.Listen = freeAddr(t)
		cfg.Storage.Address = "127.0.0.1:1"
		cfg.Authz.Address = "127.0.0.1:1"
		cfg.EnablePlugins, cfg.DisablePlugins = p.enabled, p.disabled
		return cfg
	}
	t.Run("a default plugin this binary lacks", func(t *testing.T) {
		p := newPlugins()
		cfg := base(p)
		cfg.DisablePlugins = slices.DeleteFunc(cfg.DisablePlugins, func(n string) bool { return n == admission.Priority })
		_, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard)
		if err == nil || err.Error() != "admission plugin Priority is not built into this binary" {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("a missing configuration file", func(t *testing.T) {
		p := newPlugins()
		cfg := base(p)
		cfg.ConfigFile = filepath.Join(t.TempDir(), "missing.yaml")
		_, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard)
		if err == nil || !strings.Contains(err.Error(), "--admission-control-config-file") {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("a configuration for an unknown plugin", func(t *testing.T) {
		p := newPlugins()
		cfg := base(p)
		cfg.ConfigFile = writeFile(t, "admission.yaml", "apiVersion: "+naming.Group("apiserver.config.k8s.io")+"/v1\nkind: AdmissionConfiguration\nplugins:\n- name: Nope\n")
		_, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard)
		if err == nil || !strings.Contains(err.Error(), `unknown admission plugin "Nope"`) {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("a listener in use", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		p := newPlugins()
		cfg := base(p)
		cfg.Listen = lis.Addr().String()
		if _, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard); err == nil || !strings.Contains(err.Error(), "--listen") {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("plugins get their configuration", func(t *testing.T) {
		p := newPlugins()
		cfg := base(p)
		cfg.ConfigFile = writeFile(t, "admission.yaml", "apiVersion: "+naming.Group("apiserver.config.k8s.io")+"/v1\nkind: AdmissionConfiguration\nplugins:\n"+
			"- name: AlwaysDeny\n  configuration: {answer: 42}\n")
		s, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop(context.Background())
		p.mu.Lock()
		defer p.mu.Unlock()
		if string(p.configs[admission.AlwaysDeny]) != `{"answer":42}` || p.configs[admission.AlwaysAdmit] != nil {
			t.Fatalf("configurations %q", p.configs)
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
