// Package webhook authenticates bearer tokens by asking an external service (upstream's
// --authentication-token-webhook-* flags): it POSTs a TokenReview with the token and the
// audiences, and the service answers whether, and as whom, the token authenticates.
//
// The TokenReview is sent in the spec's group (authentication.platform.io: naming.Group of
// upstream's authentication.k8s.io, so the kubernetes naming profile sends upstream's) in the
// version configured (v1beta1 by default, or v1), and must be answered in the same version. The
// answer may name either group, since webhooks built on upstream's libraries answer in the group
// they were built with (the admission webhook dispatcher accepts AdmissionReview answers the same
// way). Decisions are cached as upstream does: successes and plain refusals for the cache TTL
// (2 minutes by default), keyed by the token and audiences (hashed); errors, including refusals
// that carry status.error, are not cached. Calls that fail transiently (connection reset, 429,
// 500, 504, Retry-After) are retried with upstream's backoff.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/lru"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/services/authn/authenticator"
)

// MethodName is the name of the webhook token method.
const MethodName = "webhook"

// Versions of the TokenReview sent.
const (
	VersionV1      = "v1"
	VersionV1beta1 = "v1beta1"
)

// The groups of TokenReview on the wire.
var (
	// reviewGroup is the group reviews are sent in: the naming profile's.
	reviewGroup = naming.Group(authenticationv1.SchemeGroupVersion.Group)
	// answerGroups are the groups an answer may name: the one sent, or upstream's, since webhooks
	// built on upstream's types may answer in that whatever they were sent (in the kubernetes
	// profile the two are the same).
	answerGroups = map[string]bool{
		authenticationv1.SchemeGroupVersion.Group: true,
		reviewGroup: true,
	}
)

// Defaults of the configuration.
const (
	// DefaultCacheTTL is --authentication-token-webhook-cache-ttl's default.
	DefaultCacheTTL = 2 * time.Minute
	// DefaultRequestTimeout bounds one call, as upstream's webhook client does (a kubeconfig
	// cannot set a timeout).
	DefaultRequestTimeout = 30 * time.Second
	// DefaultCacheSize bounds the decision cache (upstream's is unbounded).
	DefaultCacheSize = 10000
)

// maxResponseBytes bounds a TokenReview answer; real ones are well under a kilobyte.
const maxResponseBytes = 1 << 20

// ErrNotAuthenticated is the refusal of a token the webhook did not authenticate without saying
// why: upstream's generic message for a bearer token no authenticator accepts.
var ErrNotAuthenticated = errors.New("invalid bearer token")

// Backoff is the retry schedule of calls that fail transiently: Steps attempts in all, the first
// retry after Initial, each next one Factor times longer, each wait stretched by up to Jitter of
// itself.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Jitter  float64
	Steps   int
}

// DefaultBackoff is upstream's (k8s.io/apiserver webhook.DefaultRetryBackoff).
var DefaultBackoff = Backoff{Initial: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Config configures the webhook method.
type Config struct {
	// ConfigFile is the kubeconfig that names the webhook (--authentication-token-webhook-config-file):
	// the current context's cluster gives the URL (server) and the CA that verifies it
	// (certificate-authority or certificate-authority-data), its user the client certificate and
	// key (or a token) presented to it.
	ConfigFile string
	// Version is the TokenReview version sent (--authentication-token-webhook-version): v1beta1
	// (the default when empty) or v1.
	Version string
	// CacheTTL is how long decisions are cached (--authentication-token-webhook-cache-ttl,
	// DefaultCacheTTL); 0 disables the cache.
	CacheTTL time.Duration
	// APIAudiences are the API server's audiences (--api-audiences): the audiences asked for when
	// a request names none, and those a review without status.audiences is taken to grant.
	APIAudiences []string
	// Backoff is the retry schedule (zero: DefaultBackoff).
	Backoff Backoff
	// RequestTimeout bounds one call (0: DefaultRequestTimeout).
	RequestTimeout time.Duration
	// CacheSize bounds the number of cached decisions (0: DefaultCacheSize).
	CacheSize int
}

// Validate reports configuration errors, naming the flag that fixes them.
func (c Config) Validate() error {
	var errs []error
	if c.ConfigFile == "" {
		errs = append(errs, errors.New("--authentication-token-webhook-config-file is required for webhook token authentication"))
	}
	switch c.Version {
	case "", VersionV1, VersionV1beta1:
	default:
		errs = append(errs, fmt.Errorf("--authentication-token-webhook-version must be v1 or v1beta1, not %q", c.Version))
	}
	if c.CacheTTL < 0 {
		errs = append(errs, errors.New("--authentication-token-webhook-cache-ttl must not be negative"))
	}
	if c.RequestTimeout < 0 || c.CacheSize < 0 || c.Backoff.Steps < 0 || c.Backoff.Initial < 0 || c.Backoff.Factor < 0 || c.Backoff.Jitter < 0 {
		errs = append(errs, errors.New("webhook: timeouts, sizes and backoff must not be negative"))
	}
	return errors.Join(errs...)
}

// Authenticator is the webhook token method.
type Authenticator struct {
	url          string
	client       *http.Client
	version      string // the TokenReview version sent, which answers must have
	apiVersion   string // the apiVersion sent: reviewGroup/version
	apiAudiences []string
	ttl          time.Duration
	backoff      Backoff
	log          *slog.Logger

	// cache maps a key derived from the token and audiences to a *decision. The key is an
	// HMAC-like hash with a per-process random salt, so the cache never holds a token and
	// its keys cannot be precomputed.
	cache *lru.Cache
	salt  [32]byte

	mu       sync.Mutex
	inflight map[[sha256.Size]byte]*call

	hits, misses atomic.Int64
}

// decision is a cached outcome: a response, or a plain refusal (resp nil).
type decision struct {
	resp    *authenticator.Response
	expires time.Time
}

// call is a review in flight that concurrent requests for the same token wait for.
type call struct {
	done chan struct{}
	resp *authenticator.Response
	err  error
}

// New reads the kubeconfig and returns the method.
func New(cfg Config, log *slog.Logger) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = VersionV1beta1
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Backoff.Steps == 0 {
		cfg.Backoff.Steps = 1
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if log == nil {
		log = slog.Default()
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.ConfigFile}, &clientcmd.ConfigOverrides{})
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--authentication-token-webhook-config-file %s: %w", cfg.ConfigFile, err)
	}
	rc.Timeout = cfg.RequestTimeout
	rc.UserAgent = naming.Product + "-authn/webhook"
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("--authentication-token-webhook-config-file %s: %w", cfg.ConfigFile, err)
	}
	a := &Authenticator{
		url:          rc.Host,
		client:       client,
		version:      cfg.Version,
		apiVersion:   reviewGroup + "/" + cfg.Version,
		apiAudiences: slices.Clone(cfg.APIAudiences),
		ttl:          cfg.CacheTTL,
		backoff:      cfg.Backoff,
		log:          log.With("method", MethodName),
		cache:        lru.New(cfg.CacheSize),
		inflight:     map[[sha256.Size]byte]*call{},
	}
	if _, err := rand.Read(a.salt[:]); err != nil {
		return nil, err
	}
	return a, nil
}

// Name is the method's name.
func (a *Authenticator) Name() string { return MethodName }

// Hits reports how many decisions the cache answered and how many it did not (for tests and
// metrics).
func (a *Authenticator) Hits() (hits, misses int64) { return a.hits.Load(), a.misses.Load() }

// Authenticate asks the webhook about req.Token (or answers from the cache). Every bearer token
// is this method's: the webhook is the authority of last resort for tokens no other method
// recognized. A token the webhook does not authenticate is refused with its status.error, or
// ErrNotAuthenticated; a call that fails (transport, non-2xx, an answer in another version) is an
// authenticator.UnavailableError: the credentials were not judged.
func (a *Authenticator) Authenticate(ctx context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	if req.Token == "" {
		return nil, authenticator.ErrNotMine
	}
	audiences := req.Audiences
	if len(audiences) == 0 {
		audiences = a.apiAudiences
	}
	key := a.key(req.Token, audiences)
	if a.ttl > 0 {
		if v, ok := a.cache.Get(key); ok {
			d := v.(*decision)
			if time.Now().Before(d.expires) {
				a.hits.Add(1)
				if d.resp == nil {
					return nil, ErrNotAuthenticated
				}
				return copyResponse(d.resp), nil
			}
			a.cache.Remove(key)
		}
	}
	a.misses.Add(1)

	// One review per token and audiences at a time: a burst of requests with a new token costs
	// the webhook one call. The review runs on its own, so a caller that gives up does not fail
	// the others waiting for it; it keeps the first caller's context values (trace) and is
	// bounded by the per-call timeout and the retry schedule.
	a.mu.Lock()
	c, joined := a.inflight[key]
	if !joined {
		c = &call{done: make(chan struct{})}
		a.inflight[key] = c
		go func(ctx context.Context) {
			// The review runs on a goroutine of its own, where a panic would kill the service:
			// it is a review that could not decide instead (the token is not judged, so not
			// refused), logged with the stack, and the waiters are released as for any outcome.
			var resp *authenticator.Response
			err := service.Recover(ctx, a.log, func() (err error) {
				resp, err = a.review(ctx, req.Token, audiences)
				return err
			})
			if errors.Is(err, service.ErrPanicked) {
				resp, err = nil, &authenticator.UnavailableError{Err: fmt.Errorf("webhook token review: %w", err)}
			}
			c.resp, c.err = resp, err
			if a.ttl > 0 && (c.err == nil || errors.Is(c.err, errPlainRefusal)) {
				a.cache.Add(key, &decision{resp: c.resp, expires: time.Now().Add(a.ttl)})
			}
			a.mu.Lock()
			delete(a.inflight, key)
			a.mu.Unlock()
			close(c.done)
		}(context.WithoutCancel(ctx))
	}
	a.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		if errors.Is(c.err, errPlainRefusal) {
			return nil, ErrNotAuthenticated
		}
		return nil, c.err
	}
	return copyResponse(c.resp), nil
}

// errPlainRefusal marks a refusal without status.error internally (it is cached; it reaches
// callers as ErrNotAuthenticated).
var errPlainRefusal = errors.New("not authenticated")

func (a *Authenticator) key(token string, audiences []string) [sha256.Size]byte {
	h := sha256.New()
	h.Write(a.salt[:])
	var n [8]byte
	for _, s := range append(slices.Clone(audiences), token) {
		// Length-prefixed: no two different (audiences, token) pairs hash the same input.
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// tokenReview is the wire shape of TokenReview in both versions: v1beta1's fields and JSON names
// are v1's.
type tokenReview struct {
	APIVersion string                             `json:"apiVersion,omitempty"`
	Kind       string                             `json:"kind,omitempty"`
	Spec       authenticationv1.TokenReviewSpec   `json:"spec"`
	Status     authenticationv1.TokenReviewStatus `json:"status"`
}

func (a *Authenticator) review(ctx context.Context, token string, audiences []string) (*authenticator.Response, error) {
	body, err := json.Marshal(tokenReview{
		APIVersion: a.apiVersion,
		Kind:       "TokenReview",
		Spec:       authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	})
	if err != nil {
		return nil, err
	}
	var status *authenticationv1.TokenReviewStatus
	wait := a.backoff.Initial
	for attempt := 1; ; attempt++ {
		status, err = a.post(ctx, body)
		if err == nil || attempt >= a.backoff.Steps || !retriable(err) {
			break
		}
		d := wait
		if a.backoff.Jitter > 0 {
			d += time.Duration(mathrand.Float64() * a.backoff.Jitter * float64(wait))
		}
		a.log.DebugContext(ctx, "token review failed; retrying", "err", err, "attempt", attempt, "retryIn", d)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
		wait = time.Duration(math.Min(float64(wait)*a.backoff.Factor, float64(math.MaxInt64/2)))
	}
	if err != nil {
		a.log.WarnContext(ctx, "token review webhook call failed", "err", err)
		return nil, &authenticator.UnavailableError{Err: fmt.Errorf("webhook token review: %w", err)}
	}
	if !status.Authenticated {
		if status.Error != "" {
			return nil, errors.New(status.Error)
		}
		return nil, errPlainRefusal
	}
	if status.User.Username == "" {
		return nil, &authenticator.UnavailableError{Err: errors.New("webhook token review: an authenticated TokenReview has no status.user.username")}
	}
	var granted []string
	if len(audiences) > 0 {
		// Upstream: the webhook grants what status.audiences lists; when it lists nothing the token
		// is good for the API server itself.
		got := status.Audiences
		if len(got) == 0 {
			got = a.apiAudiences
		}
		granted = intersect(audiences, got)
		if len(granted) == 0 {
			return nil, errPlainRefusal
		}
	}
	u := &authenticator.User{
		Name:   status.User.Username,
		UID:    status.User.UID,
		Groups: slices.Clone(status.User.Groups),
	}
	if len(status.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(status.User.Extra))
		for k, v := range status.User.Extra {
			u.Extra[k] = slices.Clone([]string(v))
		}
	}
	return &authenticator.Response{User: u, Audiences: granted}, nil
}

// statusError is a non-2xx answer.
type statusError struct {
	code       int
	status     string
	retryAfter bool
}

func (e *statusError) Error() string {
	return fmt.Sprintf("the webhook answered %s", e.status)
}

// versionError is an answer in another version or kind than the review sent.
type versionError struct{ got, want string }

func (e *versionError) Error() string {
	return fmt.Sprintf("the webhook answered %s, not a %s TokenReview (it must answer in the version it was sent)", e.got, e.want)
}

// answerVersionOK reports whether an answer's apiVersion is the version sent, in either group of
// answerGroups. An empty one is read as the version sent, as upstream's decoder defaults it from
// the object it decodes into.
func (a *Authenticator) answerVersionOK(apiVersion string) bool {
	if apiVersion == "" {
		return true
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	return ok && answerGroups[group] && version == a.version
}

func (a *Authenticator) post(ctx context.Context, body []byte) (*authenticationv1.TokenReviewStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The body is not quoted: a misbehaving webhook could echo the token.
		return nil, &statusError{code: resp.StatusCode, status: resp.Status, retryAfter: resp.Header.Get("Retry-After") != ""}
	}
	if len(data) > maxResponseBytes {
		return nil, fmt.Errorf("the webhook's answer is larger than %d bytes", maxResponseBytes)
	}
	var out tokenReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("the webhook's answer is not a TokenReview: %v", err)
	}
	// An answer without apiVersion or kind is read as the version sent (as upstream's decoder
	// defaults them from the object it decodes into); the version sent in upstream's group is
	// accepted too; any other version or kind is refused.
	if !a.answerVersionOK(out.APIVersion) || (out.Kind != "" && out.Kind != "TokenReview") {
		got := strings.TrimSpace(out.APIVersion + " " + out.Kind)
		return nil, &versionError{got: got, want: a.apiVersion}
	}
	return &out.Status, nil
}

// retriable is upstream's DefaultShouldRetry: connection resets, lost HTTP/2 connections, 429,
// 500, 504, and any answer that asks to be retried with Retry-After.
func retriable(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusGatewayTimeout:
			return true
		}
		return se.retryAfter
	}
	if errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	return strings.Contains(err.Error(), "http2: client connection lost")
}

func intersect(want, have []string) []string {
	var out []string
	for _, w := range want {
		if slices.Contains(have, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func copyResponse(r *authenticator.Response) *authenticator.Response {
	u := *r.User
	u.Groups = slices.Clone(u.Groups)
	if u.Extra != nil {
		u.Extra = make(map[string][]string, len(r.User.Extra))
		for k, v := range r.User.Extra {
			u.Extra[k] = slices.Clone(v)
		}
	}
	return &authenticator.Response{User: &u, Audiences: slices.Clone(r.Audiences)}
}
