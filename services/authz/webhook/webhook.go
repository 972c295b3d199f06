// Package webhook is the Webhook authorization mode, as upstream's: every decision is asked of a
// remote service with a SubjectAccessReview (authorization.k8s.io v1beta1 or v1, the API the
// remote implements), and its answers are cached for their own TTLs.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/services/authz/authorizer"
)

// Versions of the SubjectAccessReview sent to the remote service.
const (
	VersionV1      = "v1"
	VersionV1beta1 = "v1beta1"
)

// Upstream's defaults (kube-apiserver flags and the generic webhook client).
const (
	// DefaultVersion is kube-apiserver's --authorization-webhook-version default.
	DefaultVersion = VersionV1beta1
	// DefaultAuthorizedTTL is how long an allow is reused.
	DefaultAuthorizedTTL = 5 * time.Minute
	// DefaultUnauthorizedTTL is how long a deny or no-opinion is reused.
	DefaultUnauthorizedTTL = 30 * time.Second
	// DefaultRequestTimeout bounds one call to the remote service.
	DefaultRequestTimeout = 30 * time.Second
	// cacheSize bounds the decision cache (entries, least recently used go first).
	cacheSize = 8192
)

// reviewGroup is the group of the SubjectAccessReview the remote implements: upstream's, since the
// callee is an external service written against upstream's API.
const reviewGroup = "authorization.k8s.io"

// Backoff is the retry schedule of transient failures: Steps attempts, the first retry after
// Duration, each next one Factor times later, each delay stretched by up to Jitter.
type Backoff struct {
	Duration time.Duration
	Factor   float64
	Jitter   float64
	Steps    int
}

// DefaultBackoff is upstream's authorization webhook retry backoff (500ms, x1.5, 20% jitter,
// 5 attempts).
var DefaultBackoff = Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Config configures the Webhook mode, with kube-apiserver's flags.
type Config struct {
	// ConfigFile is a kubeconfig naming the remote service: the current context's cluster server
	// URL and certificate authority, and its user's client certificate or token.
	ConfigFile string
	// Version is the SubjectAccessReview version sent, v1beta1 (default) or v1.
	Version string
	// AuthorizedTTL and UnauthorizedTTL are how long allowed and other answers are reused; zero
	// does not cache, as upstream (RegisterFlags sets upstream's defaults, 5m and 30s).
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// RequestTimeout bounds one call (zero: DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Backoff retries transient failures (zero: DefaultBackoff).
	Backoff Backoff
	// Log receives failures of the remote service (nil: slog.Default()).
	Log *slog.Logger
}

// RegisterFlags registers kube-apiserver's webhook authorization flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.ConfigFile, "authorization-webhook-config-file", c.ConfigFile,
		"File with webhook configuration in kubeconfig format, used with --authorization-mode=Webhook. The API server will query the remote service to determine access on the API server's secure port.")
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	fs.StringVar(&c.Version, "authorization-webhook-version", c.Version,
		"The API version of the authorization.k8s.io SubjectAccessReview to send to and expect from the webhook (v1 or v1beta1).")
	if c.AuthorizedTTL == 0 {
		c.AuthorizedTTL = DefaultAuthorizedTTL
	}
	fs.DurationVar(&c.AuthorizedTTL, "authorization-webhook-cache-authorized-ttl", c.AuthorizedTTL,
		"The duration to cache 'authorized' responses from the webhook authorizer.")
	if c.UnauthorizedTTL == 0 {
		c.UnauthorizedTTL = DefaultUnauthorizedTTL
	}
	fs.DurationVar(&c.UnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", c.UnauthorizedTTL,
		"The duration to cache 'unauthorized' responses from the webhook authorizer.")
}

// Validate checks the configuration; errors name the flag that fixes them.
func (c *Config) Validate() error {
	var errs []error
	if c.ConfigFile == "" {
		errs = append(errs, errors.New("--authorization-webhook-config-file is required by the Webhook authorization mode"))
	}
	switch c.Version {
	case "", VersionV1, VersionV1beta1:
	default:
		errs = append(errs, fmt.Errorf("--authorization-webhook-version: %q is not v1 or v1beta1", c.Version))
	}
	if c.AuthorizedTTL < 0 {
		errs = append(errs, errors.New("--authorization-webhook-cache-authorized-ttl must not be negative"))
	}
	if c.UnauthorizedTTL < 0 {
		errs = append(errs, errors.New("--authorization-webhook-cache-unauthorized-ttl must not be negative"))
	}
	return errors.Join(errs...)
}

// Authorizer is the Webhook mode. It is safe for concurrent use.
type Authorizer struct {
	url             string
	client          *http.Client
	version         string
	authorizedTTL   time.Duration
	unauthorizedTTL time.Duration
	backoff         Backoff
	log             *slog.Logger
	cache           *decisionCache
	hits, misses    atomic.Int64
}

var (
	_ authorizer.Authorizer = (*Authorizer)(nil)
	_ authorizer.RuleLister = (*Authorizer)(nil)
)

// New reads the kubeconfig and returns the Webhook mode.
func New(cfg Config) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.ConfigFile}, &clientcmd.ConfigOverrides{})
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--authorization-webhook-config-file %s: %w", cfg.ConfigFile, err)
	}
	rc.Timeout = cfg.RequestTimeout
	if rc.Timeout <= 0 {
		rc.Timeout = DefaultRequestTimeout
	}
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("--authorization-webhook-config-file %s: %w", cfg.ConfigFile, err)
	}
	url := rc.Host
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	a := &Authorizer{
		url:             url,
		client:          client,
		version:         cfg.Version,
		authorizedTTL:   cfg.AuthorizedTTL,
		unauthorizedTTL: cfg.UnauthorizedTTL,
		backoff:         cfg.Backoff,
		log:             cfg.Log,
		cache:           newDecisionCache(cacheSize),
	}
	if a.version == "" {
		a.version = DefaultVersion
	}
	if a.backoff.Steps <= 0 {
		a.backoff = DefaultBackoff
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("component", "authorization-webhook")
	return a, nil
}

// Hits returns how many decisions were answered from the cache and how many asked the remote.
func (a *Authorizer) Hits() (hits, misses int64) { return a.hits.Load(), a.misses.Load() }

// status is the part of a SubjectAccessReview answer the mode uses (the same in both versions).
type status struct {
	Allowed, Denied bool
	Reason          string
	EvaluationError string
}

// Authorize asks the remote service, or reuses its answer while that is fresh. Answers: allowed
// is Allow, denied is Deny, neither is NoOpinion with the remote's reason; an answer that is only
// an evaluation error, a transport failure or an HTTP error is NoOpinion with an error and is not
// cached. Every result is Uncacheable for callers: the webhook's own TTLs govern reuse.
func (a *Authorizer) Authorize(ctx context.Context, at authorizer.Attributes) (authorizer.Result, error) {
	spec := specFor(at)
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.Result{Uncacheable: true}, err
	}
	st, ok := a.cache.get(string(key), time.Now())
	if ok {
		a.hits.Add(1)
	} else {
		a.misses.Add(1)
		st, err = a.review(ctx, spec)
		if err != nil {
			a.log.WarnContext(ctx, "webhook authorization failed", "url", a.url, "err", err)
			return authorizer.Result{Decision: authorizer.NoOpinion, Uncacheable: true}, err
		}
		if st.EvaluationError == "" {
			ttl := a.unauthorizedTTL
			if st.Allowed && !st.Denied {
				ttl = a.authorizedTTL
			}
			if ttl > 0 {
				a.cache.add(string(key), st, time.Now().Add(ttl))
			}
		}
	}
	r := authorizer.Result{Decision: authorizer.NoOpinion, Reason: st.Reason, Uncacheable: true}
	switch {
	case st.Denied:
		// Denied wins over a contradictory allowed, as upstream (which also reports the
		// contradiction): failing closed is the safe reading.
		r.Decision = authorizer.Deny
		if st.Allowed {
			a.log.WarnContext(ctx, "webhook answered both allowed and denied; denying", "url", a.url)
		}
	case st.Allowed:
		r.Decision = authorizer.Allow
	case st.EvaluationError != "":
		return r, fmt.Errorf("webhook authorizer evaluation error: %s", st.EvaluationError)
	}
	return r, nil
}

// RulesFor implements authorizer.RuleLister: the remote's rules cannot be listed.
func (a *Authorizer) RulesFor(context.Context, *authorizer.User, string) ([]authorizer.Rule, []authorizer.Rule, bool, error) {
	return nil, nil, true, errors.New("webhook authorizer does not support user rule resolution")
}

// specFor builds the review's spec (v1's shape; v1beta1 differs only in the JSON name of groups).
func specFor(at authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var s authorizationv1.SubjectAccessReviewSpec
	if at.User != nil {
		s.User = at.User.Name
		s.UID = at.User.UID
		s.Groups = at.User.Groups
		if len(at.User.Extra) > 0 {
			s.Extra = make(map[string]authorizationv1.ExtraValue, len(at.User.Extra))
			for k, v := range at.User.Extra {
				s.Extra[k] = v
			}
		}
	}
	if at.ResourceRequest {
		s.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace:   at.Namespace,
			Verb:        at.Verb,
			Group:       at.APIGroup,
			Version:     at.APIVersion,
			Resource:    at.Resource,
			Subresource: at.Subresource,
			Name:        at.Name,
		}
	} else {
		s.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: at.Path, Verb: at.Verb}
	}
	return s
}

// body encodes the review in the configured version.
func (a *Authorizer) body(spec authorizationv1.SubjectAccessReviewSpec) ([]byte, error) {
	if a.version == VersionV1 {
		return json.Marshal(&authorizationv1.SubjectAccessReview{
			TypeMeta: typeMeta(VersionV1),
			Spec:     spec,
		})
	}
	b := &authorizationv1beta1.SubjectAccessReview{
		TypeMeta: typeMeta(VersionV1beta1),
		Spec: authorizationv1beta1.SubjectAccessReviewSpec{
			User:   spec.User,
			UID:    spec.UID,
			Groups: spec.Groups,
		},
	}
	if spec.Extra != nil {
		b.Spec.Extra = make(map[string]authorizationv1beta1.ExtraValue, len(spec.Extra))
		for k, v := range spec.Extra {
			b.Spec.Extra[k] = authorizationv1beta1.ExtraValue(v)
		}
	}
	if r := spec.ResourceAttributes; r != nil {
		b.Spec.ResourceAttributes = &authorizationv1beta1.ResourceAttributes{Namespace: r.Namespace, Verb: r.Verb,
			Group: r.Group, Version: r.Version, Resource: r.Resource, Subresource: r.Subresource, Name: r.Name}
	}
	if n := spec.NonResourceAttributes; n != nil {
		b.Spec.NonResourceAttributes = &authorizationv1beta1.NonResourceAttributes{Path: n.Path, Verb: n.Verb}
	}
	return json.Marshal(b)
}

func typeMeta(version string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: reviewGroup + "/" + version, Kind: "SubjectAccessReview"}
}

// review sends the review, retrying transient failures with backoff, and returns the answer.
func (a *Authorizer) review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (status, error) {
	body, err := a.body(spec)
	if err != nil {
		return status{}, err
	}
	delay := a.backoff.Duration
	var lastErr error
	for attempt := 1; ; attempt++ {
		st, retry, err := a.post(ctx, body)
		if err == nil {
			return st, nil
		}
		lastErr = err
		if !retry || attempt >= a.backoff.Steps {
			break
		}
		wait := delay
		if a.backoff.Jitter > 0 {
			wait += time.Duration(rand.Float64() * a.backoff.Jitter * float64(delay))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return status{}, fmt.Errorf("%w (after %d attempts; last error: %v)", ctx.Err(), attempt, lastErr)
		case <-t.C:
		}
		delay = time.Duration(float64(delay) * a.backoff.Factor)
	}
	return status{}, lastErr
}

// post makes one call. retry says whether the failure is transient, as upstream's
// DefaultShouldRetry decides: a reset or lost connection, HTTP 500, 504 or 429, or any error
// answer carrying Retry-After.
func (a *Authorizer) post(ctx context.Context, body []byte) (status, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return status{}, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return status{}, isConnectionLost(err), fmt.Errorf("calling the authorization webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return status{}, isConnectionLost(err), fmt.Errorf("reading the authorization webhook's answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		retry := resp.StatusCode == http.StatusInternalServerError || resp.StatusCode == http.StatusGatewayTimeout ||
			resp.StatusCode == http.StatusTooManyRequests || resp.Header.Get("Retry-After") != ""
		return status{}, retry, fmt.Errorf("the authorization webhook answered HTTP %d: %s", resp.StatusCode, snippet(data))
	}
	st, err := a.decode(data)
	return st, false, err
}

// decode reads an answer, which must be a SubjectAccessReview of the version sent.
func (a *Authorizer) decode(data []byte) (status, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return status{}, fmt.Errorf("decoding the authorization webhook's answer: %w", err)
	}
	want := typeMeta(a.version)
	if (tm.APIVersion != "" && tm.APIVersion != want.APIVersion) || (tm.Kind != "" && tm.Kind != want.Kind) {
		return status{}, fmt.Errorf("the authorization webhook answered %s %s, want %s %s", tm.APIVersion, tm.Kind, want.APIVersion, want.Kind)
	}
	var s struct {
		Status struct {
			Allowed         bool   `json:"allowed"`
			Denied          bool   `json:"denied"`
			Reason          string `json:"reason"`
			EvaluationError string `json:"evaluationError"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return status{}, fmt.Errorf("decoding the authorization webhook's answer: %w", err)
	}
	return status{Allowed: s.Status.Allowed, Denied: s.Status.Denied, Reason: s.Status.Reason, EvaluationError: s.Status.EvaluationError}, nil
}

// isConnectionLost: the failures upstream retries at the transport level.
func isConnectionLost(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "http2: client connection lost")
}

// snippet keeps an error body short and printable.
func snippet(b []byte) string {
	const max = 256
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
