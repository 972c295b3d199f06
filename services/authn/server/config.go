// Package server runs the authentication service: the gRPC API of proto/authn/v1 over the
// identity methods of the spec, in upstream's order (authenticating proxy, client certificate,
// bearer tokens: token file, service accounts, bootstrap tokens, OIDC, webhook), anonymous last.
package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/service"
)

// Config is the authentication service's configuration; the identity methods' flags are
// kube-apiserver's.
type Config struct {
	// ServerConfig is the gRPC listener (--listen, --tls-*, --metrics-bind-address).
	service.ServerConfig
	// Storage is where service accounts, bootstrap token Secrets, Pods and Nodes are read.
	Storage service.ClientConfig

	// AnonymousAuth makes requests without credentials system:anonymous (--anonymous-auth).
	AnonymousAuth bool
	// CacheTTL bounds how long callers may reuse a successful decision (upstream caches token
	// decisions for 10 seconds).
	CacheTTL time.Duration

	// ClientCAFile enables client certificates (CN = user, O = groups).
	ClientCAFile string
	// TokenAuthFile is the static token file (CSV: token,user,uid,"group1,group2").
	TokenAuthFile string

	// Service account tokens.
	ServiceAccountIssuers            []string
	ServiceAccountKeyFiles           []string
	ServiceAccountSigningKeyFile     string
	APIAudiences                     []string
	ServiceAccountMaxTokenExpiration time.Duration
	ServiceAccountLookup             bool

	// EnableBootstrapTokenAuth enables bootstrap tokens (Secrets in the system namespace).
	EnableBootstrapTokenAuth bool

	// OpenID Connect.
	OIDCIssuerURL      string
	OIDCClientID       string
	OIDCCAFile         string
	OIDCUsernameClaim  string
	OIDCUsernamePrefix string
	OIDCGroupsClaim    string
	OIDCGroupsPrefix   string
	OIDCRequiredClaims []string
	OIDCSigningAlgs    []string

	// Webhook token review.
	WebhookConfigFile string
	WebhookVersion    string
	WebhookCacheTTL   time.Duration

	// Authenticating proxy.
	RequestHeaderClientCAFile       string
	RequestHeaderAllowedNames       []string
	RequestHeaderUsernameHeaders    []string
	RequestHeaderUIDHeaders         []string
	RequestHeaderGroupHeaders       []string
	RequestHeaderExtraHeadersPrefix []string
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7002")
	c.Storage.RegisterFlags(fs, "storage", "storage service", "127.0.0.1:7001")
	c.RegisterMethodFlags(fs)
}

// SharedFlags are flags the gateway has too (it verifies the same CAs at the TLS handshake); a
// process that runs both (the all-in-one) registers them once and copies the values.
var SharedFlags = []string{"client-ca-file", "requestheader-client-ca-file"}

// RegisterMethodFlags registers the identity methods' flags; flags already in fs (SharedFlags
// registered by the gateway) are skipped.
func (c *Config) RegisterMethodFlags(fs *pflag.FlagSet) {
	str := func(p *string, name, value, usage string) {
		if fs.Lookup(name) == nil {
			fs.StringVar(p, name, value, usage)
		}
	}
	fs.BoolVar(&c.AnonymousAuth, "anonymous-auth", true, "requests without credentials are system:anonymous (group system:unauthenticated); a request with bad credentials is refused whatever this says")
	fs.DurationVar(&c.CacheTTL, "authentication-cache-ttl", 10*time.Second, "how long the gateway may reuse a successful decision for the same credentials (0: never)")
	str(&c.ClientCAFile, "client-ca-file", "", "CA bundle that verifies client certificates: the common name is the user, organizations are groups")
	fs.StringVar(&c.TokenAuthFile, "token-auth-file", "", "static bearer tokens: CSV of token,user,uid,\"group1,group2\"")
	fs.StringSliceVar(&c.ServiceAccountIssuers, "service-account-issuer", nil, "issuer of service account tokens (repeatable: the first signs new tokens, every one is accepted)")
	fs.StringSliceVar(&c.ServiceAccountKeyFiles, "service-account-key-file", nil, "PEM file of public or private keys that verify service account tokens (repeatable)")
	fs.StringVar(&c.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "", "PEM private key that signs service account tokens (the TokenRequest API)")
	fs.StringSliceVar(&c.APIAudiences, "api-audiences", nil, "audiences of the API server; tokens must be for one of them (default: the first --service-account-issuer)")
	fs.DurationVar(&c.ServiceAccountMaxTokenExpiration, "service-account-max-token-expiration", 0, "longest lifetime the TokenRequest API issues (0: no bound)")
	fs.BoolVar(&c.ServiceAccountLookup, "service-account-lookup", true, "check that the account (and the Secret of a legacy token) still exists")
	fs.BoolVar(&c.EnableBootstrapTokenAuth, "enable-bootstrap-token-auth", false, "accept bootstrap tokens (Secrets of the bootstrap token type in the system namespace)")
	fs.StringVar(&c.OIDCIssuerURL, "oidc-issuer-url", "", "https URL of the OpenID Connect issuer (enables OIDC tokens)")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", "", "client id every OIDC token must be issued for")
	fs.StringVar(&c.OIDCCAFile, "oidc-ca-file", "", "CA that verifies the OIDC issuer's certificate (default: the host's roots)")
	fs.StringVar(&c.OIDCUsernameClaim, "oidc-username-claim", "sub", "the claim that is the user name")
	fs.StringVar(&c.OIDCUsernamePrefix, "oidc-username-prefix", "", "prefix of OIDC user names ('-' for none; default '<issuer>#' unless the claim is email)")
	fs.StringVar(&c.OIDCGroupsClaim, "oidc-groups-claim", "", "the claim that lists the user's groups")
	fs.StringVar(&c.OIDCGroupsPrefix, "oidc-groups-prefix", "", "prefix of OIDC group names")
	fs.StringArrayVar(&c.OIDCRequiredClaims, "oidc-required-claim", nil, "key=value a token must carry (repeatable)")
	fs.StringSliceVar(&c.OIDCSigningAlgs, "oidc-signing-algs", []string{"RS256"}, "signing algorithms accepted for OIDC tokens")
	fs.StringVar(&c.WebhookConfigFile, "authentication-token-webhook-config-file", "", "kubeconfig file of a TokenReview webhook that authenticates bearer tokens")
	fs.StringVar(&c.WebhookVersion, "authentication-token-webhook-version", "v1beta1", "TokenReview version sent to the webhook: v1beta1 or v1")
	fs.DurationVar(&c.WebhookCacheTTL, "authentication-token-webhook-cache-ttl", 2*time.Minute, "how long webhook decisions are cached")
	str(&c.RequestHeaderClientCAFile, "requestheader-client-ca-file", "", "CA that verifies an authenticating proxy's client certificate; its identity headers are honoured only then")
	fs.StringSliceVar(&c.RequestHeaderAllowedNames, "requestheader-allowed-names", nil, "common names a proxy certificate must carry (empty: any from the CA)")
	fs.StringSliceVar(&c.RequestHeaderUsernameHeaders, "requestheader-username-headers", nil, "headers that carry the user name, in order (the first with a value wins)")
	fs.StringSliceVar(&c.RequestHeaderUIDHeaders, "requestheader-uid-headers", nil, "headers that carry the user's uid, in order (the first with a value wins)")
	fs.StringSliceVar(&c.RequestHeaderGroupHeaders, "requestheader-group-headers", nil, "headers whose values are groups")
	fs.StringSliceVar(&c.RequestHeaderExtraHeadersPrefix, "requestheader-extra-headers-prefix", nil, "prefixes of headers that carry extra attributes")
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
	if c.CacheTTL < 0 {
		errs = append(errs, errors.New("--authentication-cache-ttl must not be negative"))
	}
	if len(c.ServiceAccountKeyFiles) > 0 || c.ServiceAccountSigningKeyFile != "" {
		if len(c.ServiceAccountIssuers) == 0 {
			errs = append(errs, errors.New("--service-account-issuer is required with --service-account-key-file or --service-account-signing-key-file"))
		}
	}
	if c.ServiceAccountMaxTokenExpiration < 0 {
		errs = append(errs, errors.New("--service-account-max-token-expiration must not be negative"))
	} else if c.ServiceAccountMaxTokenExpiration > 0 && c.ServiceAccountMaxTokenExpiration < time.Hour {
		errs = append(errs, errors.New("--service-account-max-token-expiration must be at least 1h"))
	}
	if c.OIDCIssuerURL != "" {
		if !strings.HasPrefix(c.OIDCIssuerURL, "https://") {
			errs = append(errs, fmt.Errorf("--oidc-issuer-url %q must be an https URL", c.OIDCIssuerURL))
		}
		if c.OIDCClientID == "" {
			errs = append(errs, errors.New("--oidc-client-id is required with --oidc-issuer-url"))
		}
	}
	for _, rc := range c.OIDCRequiredClaims {
		if k, _, ok := strings.Cut(rc, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("--oidc-required-claim %q must be key=value", rc))
		}
	}
	switch c.WebhookVersion {
	case "v1", "v1beta1":
	default:
		errs = append(errs, fmt.Errorf("--authentication-token-webhook-version must be v1 or v1beta1, not %q", c.WebhookVersion))
	}
	if c.WebhookCacheTTL < 0 {
		errs = append(errs, errors.New("--authentication-token-webhook-cache-ttl must not be negative"))
	}
	if c.RequestHeaderClientCAFile == "" && (len(c.RequestHeaderUsernameHeaders) > 0 || len(c.RequestHeaderAllowedNames) > 0) {
		errs = append(errs, errors.New("--requestheader-username-headers and --requestheader-allowed-names need --requestheader-client-ca-file"))
	}
	if c.RequestHeaderClientCAFile != "" && len(c.RequestHeaderUsernameHeaders) == 0 {
		errs = append(errs, errors.New("--requestheader-username-headers is required with --requestheader-client-ca-file"))
	}
	return errors.Join(errs...)
}
