// Package server runs the authorization service: the gRPC API of proto/authz/v1 over the modes of
// --authorization-mode (RBAC compiled into OPA, Node, Webhook, AlwaysAllow, AlwaysDeny), with the
// RBAC objects and the node graph kept up to date from storage watches.
package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/service"
)

// Modes of --authorization-mode.
const (
	ModeRBAC        = "RBAC"
	ModeNode        = "Node"
	ModeWebhook     = "Webhook"
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeABAC        = "ABAC"
)

// Config is the authorization service's configuration; flag names are kube-apiserver's.
type Config struct {
	// ServerConfig is the gRPC listener (--listen, --tls-*, --metrics-bind-address).
	service.ServerConfig
	// Storage is where the RBAC objects, pods and volumes are watched.
	Storage service.ClientConfig

	// Modes are the authorization modes in the order they are consulted.
	Modes []string
	// Webhook mode.
	WebhookConfigFile      string
	WebhookVersion         string
	WebhookAuthorizedTTL   time.Duration
	WebhookUnauthorizedTTL time.Duration
	// PolicyDebounce coalesces bursts of RBAC changes into one recompilation; it counts against
	// the one-second enforcement bound.
	PolicyDebounce time.Duration
	// DumpPolicy prints the Rego policy and the data compiled from storage, then exits.
	DumpPolicy bool
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7003")
	c.Storage.RegisterFlags(fs, "storage", "storage service", "127.0.0.1:7001")
	c.RegisterModeFlags(fs)
	fs.DurationVar(&c.PolicyDebounce, "policy-debounce", 20*time.Millisecond, "how long RBAC changes are gathered before the policy data is rebuilt")
	fs.BoolVar(&c.DumpPolicy, "dump-policy", false, "print the Rego policy and the data compiled from the stored RBAC objects (JSON), then exit")
}

// RegisterModeFlags registers the flags that choose and configure the authorization modes (the
// all-in-one registers these alone).
func (c *Config) RegisterModeFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.Modes, "authorization-mode", []string{ModeNode, ModeRBAC}, "ordered authorization modes: RBAC, Node, Webhook, AlwaysAllow, AlwaysDeny")
	fs.StringVar(&c.WebhookConfigFile, "authorization-webhook-config-file", "", "kubeconfig file of the SubjectAccessReview webhook (mode Webhook)")
	fs.StringVar(&c.WebhookVersion, "authorization-webhook-version", "v1beta1", "SubjectAccessReview version sent to the webhook: v1beta1 or v1")
	fs.DurationVar(&c.WebhookAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", 5*time.Minute, "how long allowed answers of the webhook are cached")
	fs.DurationVar(&c.WebhookUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", 30*time.Second, "how long denied answers of the webhook are cached")
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
	errs = append(errs, c.Storage.Validate()...)
	errs = append(errs, c.ValidateModes()...)
	if c.PolicyDebounce < 0 || c.PolicyDebounce > 500*time.Millisecond {
		errs = append(errs, errors.New("--policy-debounce must be between 0 and 500ms (RBAC changes must be enforced within a second)"))
	}
	return errors.Join(errs...)
}

// ValidateModes checks --authorization-mode and the flags of the modes it names.
func (c *Config) ValidateModes() []error {
	var errs []error
	if len(c.Modes) == 0 {
		errs = append(errs, errors.New("--authorization-mode must name at least one mode"))
	}
	seen := map[string]bool{}
	for _, m := range c.Modes {
		switch m {
		case ModeRBAC, ModeNode, ModeWebhook, ModeAlwaysAllow, ModeAlwaysDeny:
		case ModeABAC:
			errs = append(errs, errors.New("--authorization-mode=ABAC is not supported: ABAC policy files are not implemented; use RBAC (roles and bindings are API objects and change without a restart)"))
		default:
			errs = append(errs, fmt.Errorf("--authorization-mode: unknown mode %q (known: RBAC, Node, Webhook, AlwaysAllow, AlwaysDeny)", m))
		}
		if seen[m] {
			errs = append(errs, fmt.Errorf("--authorization-mode names %s twice", m))
		}
		seen[m] = true
	}
	if seen[ModeWebhook] != (c.WebhookConfigFile != "") {
		errs = append(errs, errors.New("--authorization-webhook-config-file and --authorization-mode=...,Webhook go together"))
	}
	switch c.WebhookVersion {
	case "v1", "v1beta1":
	default:
		errs = append(errs, fmt.Errorf("--authorization-webhook-version must be v1 or v1beta1, not %q", c.WebhookVersion))
	}
	if c.WebhookAuthorizedTTL < 0 || c.WebhookUnauthorizedTTL < 0 {
		errs = append(errs, errors.New("--authorization-webhook-cache-authorized-ttl and -unauthorized-ttl must not be negative"))
	}
	return errs
}

// HasMode tells whether --authorization-mode names mode.
func (c *Config) HasMode(mode string) bool {
	for _, m := range c.Modes {
		if strings.EqualFold(m, mode) {
			return m == mode
		}
	}
	return false
}
