// Package oidc authenticates bearer tokens that are OpenID Connect ID tokens of one trusted issuer
// (upstream's --oidc-* flags), with github.com/coreos/go-oidc/v3.
//
// The issuer's discovery document and keys are fetched over TLS (verified with --oidc-ca-file, or
// the host's roots) in the background, retried with backoff until the issuer answers: it may start
// after us, and until then its tokens are refused with "oidc: authenticator not initialized"
// (never accepted, never anonymous). Once the keys are known, tokens are verified from memory; the
// key set is fetched again only for a token naming a key id it lacks (a rotation), at most once per
// KeysRefreshInterval.
package oidc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"platform.io/libs/service"
	"platform.io/services/authn/authenticator"
)

// MethodName is the name of the OIDC method.
const MethodName = "oidc"

// Defaults of the configuration.
const (
	// DefaultUsernameClaim is --oidc-username-claim's default.
	DefaultUsernameClaim = "sub"
	// DefaultKeysRefreshInterval bounds how often tokens with unknown key ids make the key set be
	// fetched again. It matches the cadence at which upstream retries discovery.
	DefaultKeysRefreshInterval = 10 * time.Second
	// emailClaim is the claim that, as the username claim, is not prefixed by default and must be
	// verified when the token says whether it is.
	emailClaim = "email"
	// noPrefix is the --oidc-username-prefix value that disables prefixing.
	noPrefix = "-"
)

// Discovery retry backoff: from discoveryBackoffMin doubling to discoveryBackoffMax (upstream
// polls every 10 seconds; starting faster makes a provider that starts with us usable sooner).
const (
	discoveryBackoffMin = 250 * time.Millisecond
	discoveryBackoffMax = 10 * time.Second
)

// httpTimeout bounds one discovery or key set request.
const httpTimeout = 30 * time.Second

// allowedSigningAlgs are the algorithms --oidc-signing-algs may name, as upstream: asymmetric
// only (a shared-secret algorithm would let anyone holding the client secret mint tokens, and
// "none" is never a signature).
var allowedSigningAlgs = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}

// Config configures the OIDC method.
type Config struct {
	// IssuerURL is the issuer (--oidc-issuer-url): an https URL, the tokens' "iss" exactly and
	// the base of discovery.
	IssuerURL string
	// ClientID must be among each token's audiences (--oidc-client-id).
	ClientID string
	// CAFile verifies the issuer's serving certificate (--oidc-ca-file); empty means the host's
	// roots. It is re-read when it changes.
	CAFile string
	// UsernameClaim is the claim that holds the user name (--oidc-username-claim, default sub).
	UsernameClaim string
	// UsernamePrefix prefixes user names (--oidc-username-prefix): empty means upstream's default
	// ("<issuer>#" unless the claim is email), "-" means none.
	UsernamePrefix string
	// GroupsClaim is the claim that holds the groups, an array of strings or a single string
	// (--oidc-groups-claim); empty means no groups.
	GroupsClaim string
	// GroupsPrefix prefixes group names (--oidc-groups-prefix).
	GroupsPrefix string
	// RequiredClaims must each be present in a token with exactly the given string value
	// (--oidc-required-claim key=value, repeatable; see ParseRequiredClaims).
	RequiredClaims map[string]string
	// SigningAlgs are the accepted signature algorithms (--oidc-signing-algs, default RS256).
	SigningAlgs []string
	// APIAudiences are the API server's audiences (--api-audiences). An OIDC token is good for
	// the API server only, so a request that names other audiences is not this method's.
	APIAudiences []string
	// KeysRefreshInterval bounds how often the key set is fetched again for tokens naming an
	// unknown key id (0: DefaultKeysRefreshInterval).
	KeysRefreshInterval time.Duration
}

// ParseRequiredClaims turns repeated key=value flag values into RequiredClaims (the value may
// itself contain "=").
func ParseRequiredClaims(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--oidc-required-claim %q must be key=value", p)
		}
		out[k] = v
	}
	return out, nil
}

// Validate reports every configuration error, each naming the flag that fixes it.
func (c Config) Validate() error {
	var errs []error
	if c.IssuerURL == "" {
		errs = append(errs, errors.New("--oidc-issuer-url is required"))
	} else if u, err := url.Parse(c.IssuerURL); err != nil {
		errs = append(errs, fmt.Errorf("--oidc-issuer-url %q: %v", c.IssuerURL, err))
	} else {
		if u.Scheme != "https" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--oidc-issuer-url %q must be an https URL", c.IssuerURL))
		}
		if u.User != nil {
			errs = append(errs, fmt.Errorf("--oidc-issuer-url %q must not contain a username or password", c.IssuerURL))
		}
		if u.RawQuery != "" || u.ForceQuery {
			errs = append(errs, fmt.Errorf("--oidc-issuer-url %q must not contain a query", c.IssuerURL))
		}
		if u.Fragment != "" || strings.Contains(c.IssuerURL, "#") {
			errs = append(errs, fmt.Errorf("--oidc-issuer-url %q must not contain a fragment", c.IssuerURL))
		}
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("--oidc-client-id is required with --oidc-issuer-url"))
	}
	for _, alg := range c.SigningAlgs {
		if !slices.Contains(allowedSigningAlgs, alg) {
			errs = append(errs, fmt.Errorf("--oidc-signing-algs: unsupported signing alg %q (allowed: %s)", alg, strings.Join(allowedSigningAlgs, ", ")))
		}
	}
	for k := range c.RequiredClaims {
		if strings.TrimSpace(k) == "" {
			errs = append(errs, errors.New("--oidc-required-claim has an empty claim name"))
		}
	}
	if c.KeysRefreshInterval < 0 {
		errs = append(errs, errors.New("oidc: keys refresh interval must not be negative"))
	}
	return errors.Join(errs...)
}

// Authenticator is the OIDC method.
type Authenticator struct {
	issuer         string
	clientID       string
	usernameClaim  string
	usernamePrefix string
	groupsClaim    string
	groupsPrefix   string
	required       map[string]string
	algs           []string
	apiAudiences   []string
	refresh        time.Duration
	client         *http.Client
	log            *slog.Logger

	verifier atomic.Pointer[gooidc.IDTokenVerifier]
	keys     atomic.Pointer[keySet]
}

// New validates cfg and returns the method at once; discovery (and the first key fetch) runs in
// the background, retried with backoff, until it succeeds or ctx ends.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Authenticator, error) {
	if cfg.UsernameClaim == "" {
		cfg.UsernameClaim = DefaultUsernameClaim
	}
	if len(cfg.SigningAlgs) == 0 {
		cfg.SigningAlgs = []string{"RS256"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	client, err := newHTTPClient(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	a := &Authenticator{
		issuer:        cfg.IssuerURL,
		clientID:      cfg.ClientID,
		usernameClaim: cfg.UsernameClaim,
		groupsClaim:   cfg.GroupsClaim,
		groupsPrefix:  cfg.GroupsPrefix,
		required:      maps.Clone(cfg.RequiredClaims),
		algs:          slices.Clone(cfg.SigningAlgs),
		apiAudiences:  slices.Clone(cfg.APIAudiences),
		refresh:       cfg.KeysRefreshInterval,
		client:        client,
		log:           log.With("method", MethodName, "issuer", cfg.IssuerURL),
	}
	if a.refresh == 0 {
		a.refresh = DefaultKeysRefreshInterval
	}
	// Upstream's legacy flag rule (kubernetes#31380): names from claims other than email are
	// prefixed with the issuer, so that they cannot collide with other users.
	switch {
	case cfg.UsernamePrefix == noPrefix:
		a.usernamePrefix = ""
	case cfg.UsernamePrefix == "" && cfg.UsernameClaim != emailClaim:
		a.usernamePrefix = cfg.IssuerURL + "#"
	default:
		a.usernamePrefix = cfg.UsernamePrefix
	}
	go a.initialize(ctx)
	return a, nil
}

// newHTTPClient is the client for discovery and key fetches. With a CA file, the issuer's
// certificate is verified against the bundle as it currently is: a changed file (the CAPool
// re-reads it) gets a new transport, so a rotated CA is trusted without a restart.
func newHTTPClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return &http.Client{Transport: newTransport(nil), Timeout: httpTimeout}, nil
	}
	cas, err := service.NewCAPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("--oidc-ca-file: %w", err)
	}
	return &http.Client{Transport: &poolTransport{cas: cas}, Timeout: httpTimeout}, nil
}

// newTransport is a transport trusting roots (nil: the host's).
func newTransport(roots *x509.CertPool) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        2,
		IdleConnTimeout:     90 * time.Second,
	}
}

// poolTransport sends requests through a transport that trusts the current CA bundle.
type poolTransport struct {
	cas  *service.CAPool
	mu   sync.Mutex
	pool *x509.CertPool
	rt   *http.Transport
}

// RoundTrip implements http.RoundTripper.
func (p *poolTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pool, err := p.cas.Get()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if pool != p.pool || p.rt == nil {
		if p.rt != nil {
			p.rt.CloseIdleConnections()
		}
		p.pool, p.rt = pool, newTransport(pool)
	}
	rt := p.rt
	p.mu.Unlock()
	return rt.RoundTrip(r)
}

// initialize runs discovery and the first key fetch until both succeed or ctx ends.
func (a *Authenticator) initialize(ctx context.Context) {
	backoff := discoveryBackoffMin
	for attempt := 1; ; attempt++ {
		err := a.discover(ctx)
		if err == nil {
			a.log.Info("oidc issuer discovered", "attempts", attempt)
			return
		}
		if ctx.Err() != nil {
			return
		}
		// Jitter keeps replicas that started together from polling the issuer in lockstep.
		wait := backoff/2 + rand.N(backoff/2+1)
		a.log.Warn("oidc issuer discovery failed; its tokens are refused until it succeeds", "err", err, "attempt", attempt, "retryIn", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, discoveryBackoffMax)
	}
}

func (a *Authenticator) discover(ctx context.Context) error {
	provider, err := gooidc.NewProvider(gooidc.ClientContext(ctx, a.client), a.issuer)
	if err != nil {
		return err
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil {
		return err
	}
	if meta.JWKSURL == "" {
		return errors.New("the discovery document has no jwks_uri")
	}
	ks := newKeySet(meta.JWKSURL, a.client, a.algs, a.refresh, a.log)
	if _, err := ks.refresh(ctx, true); err != nil {
		return fmt.Errorf("fetching keys: %w", err)
	}
	a.keys.Store(ks)
	a.verifier.Store(gooidc.NewVerifier(a.issuer, ks, &gooidc.Config{
		ClientID:             a.clientID,
		SupportedSigningAlgs: a.algs,
	}))
	return nil
}

// Name is the method's name.
func (a *Authenticator) Name() string { return MethodName }

// Ready reports whether discovery succeeded and the issuer's keys are known.
func (a *Authenticator) Ready() bool { return a.verifier.Load() != nil }

// KeyFetches counts the key set fetches made so far (discovery's included).
func (a *Authenticator) KeyFetches() int64 {
	if ks := a.keys.Load(); ks != nil {
		return ks.fetches.Load()
	}
	return 0
}

// errNotInitialized is upstream's message for tokens of an issuer not discovered yet.
var errNotInitialized = errors.New("oidc: authenticator not initialized")

// Authenticate verifies an ID token of the configured issuer. A token that is not a JWT, or whose
// (unverified) "iss" is another issuer, is not this method's; so is a request for audiences the
// API server is not (an OIDC token is only good for the API server itself). Every other failure
// is a refusal naming the check that failed; a decision the issuer's unavailability prevents is an
// authenticator.UnavailableError.
func (a *Authenticator) Authenticate(ctx context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	if req.Token == "" {
		return nil, authenticator.ErrNotMine
	}
	var audiences []string
	if len(req.Audiences) > 0 {
		audiences = intersect(a.apiAudiences, req.Audiences)
		if len(audiences) == 0 {
			return nil, authenticator.ErrNotMine
		}
	} else {
		audiences = slices.Clone(a.apiAudiences)
	}
	if iss, ok := tokenIssuer(req.Token); !ok || iss != a.issuer {
		return nil, authenticator.ErrNotMine
	}
	verifier := a.verifier.Load()
	if verifier == nil {
		return nil, &authenticator.UnavailableError{Err: errNotInitialized}
	}
	slot := &fetchError{}
	token, err := verifier.Verify(context.WithValue(ctx, fetchErrorKey{}, slot), req.Token)
	if err != nil {
		if slot.err != nil {
			return nil, &authenticator.UnavailableError{Err: fmt.Errorf("oidc: verify token: %v", err)}
		}
		return nil, fmt.Errorf("oidc: verify token: %v", err)
	}
	var claims map[string]json.RawMessage
	if err := token.Claims(&claims); err != nil {
		return nil, fmt.Errorf("oidc: parse claims: %v", err)
	}
	name, err := a.username(claims)
	if err != nil {
		return nil, err
	}
	groups, err := a.groups(claims)
	if err != nil {
		return nil, err
	}
	if err := a.checkRequired(claims); err != nil {
		return nil, err
	}
	return &authenticator.Response{
		User:      &authenticator.User{Name: name, Groups: groups},
		Audiences: audiences,
	}, nil
}

func (a *Authenticator) username(claims map[string]json.RawMessage) (string, error) {
	var name string
	if err := unmarshalClaim(claims, a.usernameClaim, &name); err != nil {
		return "", fmt.Errorf("oidc: parse username claims %q: %v", a.usernameClaim, err)
	}
	if name == "" {
		return "", fmt.Errorf("oidc: parse username claims %q: the claim is empty", a.usernameClaim)
	}
	if a.usernameClaim == emailClaim {
		// OpenID Connect Core, standard claims: an email the provider says it has not verified
		// is not an identity.
		if _, present := claims["email_verified"]; present {
			var verified bool
			if err := unmarshalClaim(claims, "email_verified", &verified); err != nil {
				return "", fmt.Errorf("oidc: parse 'email_verified' claim: %v", err)
			}
			if !verified {
				return "", errors.New("oidc: email not verified")
			}
		}
	}
	return a.usernamePrefix + name, nil
}

func (a *Authenticator) groups(claims map[string]json.RawMessage) ([]string, error) {
	if a.groupsClaim == "" {
		return nil, nil
	}
	if _, present := claims[a.groupsClaim]; !present {
		return nil, nil
	}
	var groups stringOrArray
	if err := unmarshalClaim(claims, a.groupsClaim, &groups); err != nil {
		return nil, fmt.Errorf("oidc: parse groups claim %q: %v", a.groupsClaim, err)
	}
	if a.groupsPrefix != "" {
		for i := range groups {
			groups[i] = a.groupsPrefix + groups[i]
		}
	}
	return groups, nil
}

func (a *Authenticator) checkRequired(claims map[string]json.RawMessage) error {
	for claim, want := range a.required {
		if _, present := claims[claim]; !present {
			return fmt.Errorf("oidc: required claim %s not present in ID token", claim)
		}
		// As upstream, only string values can satisfy a required claim.
		var got string
		if err := unmarshalClaim(claims, claim, &got); err != nil {
			return fmt.Errorf("oidc: parse claim %s: %v", claim, err)
		}
		if got != want {
			return fmt.Errorf("oidc: required claim %s value does not match. Got = %s, want = %s", claim, got, want)
		}
	}
	return nil
}

func unmarshalClaim(claims map[string]json.RawMessage, name string, v any) error {
	raw, ok := claims[name]
	if !ok {
		return errors.New("claim not present")
	}
	return json.Unmarshal(raw, v)
}

// stringOrArray is a groups claim: upstream accepts a single string as a one-element list.
type stringOrArray []string

// UnmarshalJSON accepts an array of strings or one string.
func (s *stringOrArray) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*s = list
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*s = []string{one}
	return nil
}

// intersect is the elements of want that are in have, in want's order.
func intersect(have, want []string) []string {
	var out []string
	for _, w := range want {
		if slices.Contains(have, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
