// Package server runs the certificates service: it watches CertificateSigningRequests through the
// storage API and signs the approved ones addressed to the built-in signers it runs, or marks them
// Failed when they break their signer's rules. Writes are compare-and-swap on the stored
// resourceVersion, so replicas never issue two certificates for one request.
package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/services/certificates/signer"
)

// KeyPair is a CA's certificate and key files (PEM).
type KeyPair struct {
	CertFile, KeyFile string
}

func (k KeyPair) set() bool { return k.CertFile != "" || k.KeyFile != "" }

// SigningConfig chooses the signers' CAs and the certificates' longest lifetime; flag names are
// kube-controller-manager's.
type SigningConfig struct {
	// Default is the CA of every signer without its own (--cluster-signing-cert-file,
	// --cluster-signing-key-file).
	Default KeyPair
	// APIServerClient, KubeletClient and KubeletServing are the per-signer CAs, overriding Default
	// (--cluster-signing-kube-apiserver-client-*, --cluster-signing-kubelet-client-*,
	// --cluster-signing-kubelet-serving-*).
	APIServerClient, KubeletClient, KubeletServing KeyPair
	// Duration is the longest lifetime of an issued certificate (--cluster-signing-duration);
	// spec.expirationSeconds wins when smaller.
	Duration time.Duration
}

// RegisterFlags registers the signing flags with their defaults.
func (c *SigningConfig) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Default.CertFile, "cluster-signing-cert-file", "", "PEM CA certificate used to issue certificates for every built-in signer without its own --cluster-signing-*-cert-file")
	fs.StringVar(&c.Default.KeyFile, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
	fs.StringVar(&c.APIServerClient.CertFile, "cluster-signing-kube-apiserver-client-cert-file", "", "PEM CA certificate of the "+naming.SignerAPIServerClient+" signer")
	fs.StringVar(&c.APIServerClient.KeyFile, "cluster-signing-kube-apiserver-client-key-file", "", "PEM private key of the "+naming.SignerAPIServerClient+" signer")
	fs.StringVar(&c.KubeletClient.CertFile, "cluster-signing-kubelet-client-cert-file", "", "PEM CA certificate of the "+naming.SignerAPIServerClientKubelet+" signer")
	fs.StringVar(&c.KubeletClient.KeyFile, "cluster-signing-kubelet-client-key-file", "", "PEM private key of the "+naming.SignerAPIServerClientKubelet+" signer")
	fs.StringVar(&c.KubeletServing.CertFile, "cluster-signing-kubelet-serving-cert-file", "", "PEM CA certificate of the "+naming.SignerKubeletServing+" signer")
	fs.StringVar(&c.KubeletServing.KeyFile, "cluster-signing-kubelet-serving-key-file", "", "PEM private key of the "+naming.SignerKubeletServing+" signer")
	fs.DurationVar(&c.Duration, "cluster-signing-duration", signer.DefaultDuration, "the longest lifetime of issued certificates; a request's spec.expirationSeconds wins when smaller")
}

// flagPrefixes name each signer's per-signer flags.
var flagPrefixes = map[string]string{
	naming.SignerAPIServerClient:        "cluster-signing-kube-apiserver-client",
	naming.SignerAPIServerClientKubelet: "cluster-signing-kubelet-client",
	naming.SignerKubeletServing:         "cluster-signing-kubelet-serving",
}

// perSigner returns each signer's own key pair.
func (c *SigningConfig) perSigner() map[string]KeyPair {
	return map[string]KeyPair{
		naming.SignerAPIServerClient:        c.APIServerClient,
		naming.SignerAPIServerClientKubelet: c.KubeletClient,
		naming.SignerKubeletServing:         c.KubeletServing,
	}
}

// CAFiles is the CA of each signer that runs: its own pair, else the default one; a signer with
// neither does not run.
func (c *SigningConfig) CAFiles() map[string]KeyPair {
	out := map[string]KeyPair{}
	for name, kp := range c.perSigner() {
		switch {
		case kp.set():
			out[name] = kp
		case c.Default.set():
			out[name] = c.Default
		}
	}
	return out
}

// Validate reports the signing flags' errors, each naming its flag.
func (c *SigningConfig) Validate() []error {
	var errs []error
	pair := func(kp KeyPair, prefix string) {
		if (kp.CertFile == "") != (kp.KeyFile == "") {
			errs = append(errs, fmt.Errorf("--%s-cert-file and --%s-key-file go together", prefix, prefix))
		}
	}
	pair(c.Default, "cluster-signing")
	for _, name := range signer.Names() {
		pair(c.perSigner()[name], flagPrefixes[name])
	}
	if len(c.CAFiles()) == 0 {
		errs = append(errs, errors.New("no signer has a CA: set --cluster-signing-cert-file and --cluster-signing-key-file (or a signer's own --cluster-signing-*-cert-file and -key-file)"))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-signing-duration %v must be positive", c.Duration))
	}
	return errs
}

// Config is the certificates service's configuration.
type Config struct {
	// ServerConfig is the gRPC listener (health only) and metrics (--listen, --tls-*,
	// --metrics-bind-address).
	service.ServerConfig
	// Storage is where requests are watched and their status written.
	Storage service.ClientConfig
	// Signing chooses the signers' CAs and the certificates' lifetime.
	Signing SigningConfig
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7005")
	c.Storage.RegisterFlags(fs, "storage", "storage service", "127.0.0.1:7001")
	c.Signing.RegisterFlags(fs)
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
	errs = append(errs, c.Signing.Validate()...)
	return errors.Join(errs...)
}
