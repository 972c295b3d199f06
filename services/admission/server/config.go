// Package server runs the admission service: the gRPC API of proto/admission/v1 over the enabled
// plugins, with the objects they read kept current from storage watches.
package server

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"platform.io/libs/service"
	"platform.io/services/admission/admission"
)

// Config is the admission service's configuration; flag names are kube-apiserver's.
type Config struct {
	// ServerConfig is the gRPC listener (--listen, --tls-*, --metrics-bind-address).
	service.ServerConfig
	// Storage is where the objects plugins read are watched, quotas' usage written and
	// auto-provisioned namespaces created.
	Storage service.ClientConfig
	// Authz answers the permission checks of some plugins.
	Authz service.ClientConfig

	// EnablePlugins, DisablePlugins and ConfigFile choose and configure the plugins.
	EnablePlugins  []string
	DisablePlugins []string
	ConfigFile     string
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7004")
	c.Storage.RegisterFlags(fs, "storage", "storage service", "127.0.0.1:7001")
	c.Authz.RegisterFlags(fs, "authz", "authorization service", "127.0.0.1:7003")
	c.RegisterPluginFlags(fs)
}

// RegisterPluginFlags registers the flags that choose and configure plugins (the all-in-one
// registers these alone).
func (c *Config) RegisterPluginFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.EnablePlugins, "enable-admission-plugins", nil, "admission plugins to enable besides the default set (order does not matter): "+fmt.Sprint(admission.Order))
	fs.StringSliceVar(&c.DisablePlugins, "disable-admission-plugins", nil, "admission plugins to disable, even default ones")
	fs.StringVar(&c.ConfigFile, "admission-control-config-file", "", "AdmissionConfiguration file with the plugins' configurations")
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
	errs = append(errs, c.Authz.Validate()...)
	errs = append(errs, c.ValidatePlugins()...)
	return errors.Join(errs...)
}

// ValidatePlugins checks the plugin flags.
func (c *Config) ValidatePlugins() []error {
	if _, err := admission.Enabled(c.EnablePlugins, c.DisablePlugins); err != nil {
		return []error{err}
	}
	return nil
}
