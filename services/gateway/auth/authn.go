package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authnv1 "platform.io/proto/authn/v1"
)

// UnauthorizedError is a request whose credentials were refused (HTTP 401). Reason is for the
// log only: upstream answers every 401 with the same message.
type UnauthorizedError struct{ Reason string }

func (e *UnauthorizedError) Error() string { return "Unauthorized: " + e.Reason }

// UnavailableError is a decision that could not be made because a service did not answer
// (HTTP 503).
type UnavailableError struct {
	Service string
	Err     error
}

func (e *UnavailableError) Error() string { return e.Service + " is unavailable: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Authenticator identifies the caller of a request: the user (system:anonymous for a request
// without credentials when anonymous requests are allowed), or an *UnauthorizedError or
// *UnavailableError.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (*User, error)
}

// Remote authenticates through the authentication service. It caches successful decisions for
// the time the service allows (keyed by a hash of the credentials, never the credentials), answers
// requests without credentials itself (anonymous or 401, as the service describes), and removes
// the credentials and proxy identity headers from the request once they are used.
type Remote struct {
	client authnv1.AuthenticationClient
	log    *slog.Logger
	now    func() time.Time

	describeMu sync.Mutex
	describe   *authnv1.DescribeResponse
	describeAt time.Time
	headers    []string // canonical proxy header names
	prefixes   []string // canonical proxy header prefixes

	cache   *ttlCache[*authnResult]
	metrics *authnMetrics
}

type authnResult struct {
	user      *User
	audiences []string
}

// describeRefresh is how often the service's description is re-read (its flags change only with
// a restart; the refresh picks up a restarted service's new settings).
const describeRefresh = 30 * time.Second

// NewRemote builds the authenticator over a connection to the authentication service.
func NewRemote(conn grpc.ClientConnInterface, log *slog.Logger, reg prometheus.Registerer) *Remote {
	return &Remote{
		client:  authnv1.NewAuthenticationClient(conn),
		log:     log,
		now:     time.Now,
		cache:   newTTLCache[*authnResult](20000),
		metrics: newAuthnMetrics(reg),
	}
}

// Describe returns the authentication service's description, read at most every 30 seconds.
func (a *Remote) Describe(ctx context.Context) (*authnv1.DescribeResponse, error) {
	a.describeMu.Lock()
	defer a.describeMu.Unlock()
	if a.describe != nil && a.now().Sub(a.describeAt) < describeRefresh {
		return a.describe, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := a.client.Describe(ctx, &authnv1.DescribeRequest{})
	if err != nil {
		if a.describe != nil {
			// Keep serving with what the service said last; Authenticate itself will fail
			// while it is down.
			return a.describe, nil
		}
		return nil, &UnavailableError{Service: "authentication", Err: err}
	}
	a.describe, a.describeAt = d, a.now()
	a.headers = a.headers[:0]
	for _, h := range d.GetRequestHeaderNames() {
		a.headers = append(a.headers, http.CanonicalHeaderKey(h))
	}
	a.prefixes = a.prefixes[:0]
	for _, p := range d.GetRequestHeaderPrefixes() {
		a.prefixes = append(a.prefixes, http.CanonicalHeaderKey(p))
	}
	return d, nil
}

// AuthenticateRequest identifies the caller of r.
func (a *Remote) AuthenticateRequest(r *http.Request) (*User, error) {
	d, err := a.Describe(r.Context())
	if err != nil {
		return nil, err
	}
	token, hasToken := bearerToken(r)
	var certs [][]byte
	if r.TLS != nil {
		for _, c := range r.TLS.PeerCertificates {
			certs = append(certs, c.Raw)
		}
	}
	headers := a.proxyHeaders(r, len(certs) > 0)
	// The credentials are used here only: they never reach handlers, logs or other services.
	r.Header.Del("Authorization")
	a.stripProxyHeaders(r)
	if !hasToken && len(certs) == 0 {
		if d.GetAnonymous() {
			return &User{Name: Anonymous, Groups: []string{GroupUnauthenticated}}, nil
		}
		return nil, &UnauthorizedError{Reason: "no credentials"}
	}
	res, err := a.Authenticate(r.Context(), &authnv1.AuthenticateRequest{Token: token, PeerCertificates: certs, Headers: headers})
	if err != nil {
		return nil, err
	}
	if res == nil {
		// Credentials nobody recognizes (a client certificate no CA here vouches for).
		if d.GetAnonymous() && !hasToken {
			return &User{Name: Anonymous, Groups: []string{GroupUnauthenticated}}, nil
		}
		return nil, &UnauthorizedError{Reason: "credentials not recognized"}
	}
	return res.user, nil
}

// Authenticate asks the service (or the cache) about a set of credentials. A nil result means
// the request carried nothing any method recognizes.
func (a *Remote) Authenticate(ctx context.Context, req *authnv1.AuthenticateRequest) (*authnResult, error) {
	key := credentialKey(req)
	if res, ok := a.cache.get(key, a.now()); ok {
		a.metrics.cache.WithLabelValues("hit").Inc()
		return res, nil
	}
	a.metrics.cache.WithLabelValues("miss").Inc()
	resp, err := a.client.Authenticate(ctx, req)
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.Unauthenticated:
			return nil, &UnauthorizedError{Reason: st.Message()}
		case codes.InvalidArgument:
			return nil, &UnauthorizedError{Reason: st.Message()}
		case codes.Canceled, codes.DeadlineExceeded:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		return nil, &UnavailableError{Service: "authentication", Err: errors.New(st.Message())}
	}
	if !resp.GetAuthenticated() {
		return nil, nil
	}
	res := &authnResult{user: userFromProto(resp.GetUser()), audiences: resp.GetAudiences()}
	if ttl := time.Duration(resp.GetCacheTtlMs()) * time.Millisecond; ttl > 0 {
		a.cache.put(key, res, a.now().Add(ttl))
	}
	return res, nil
}

// ReviewToken authenticates a token for the TokenReview API: the user and the audiences it is
// valid for, or an *UnauthorizedError with the reason (shown in status.error).
func (a *Remote) ReviewToken(ctx context.Context, token string, audiences []string) (*User, []string, error) {
	res, err := a.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: token, Audiences: audiences})
	if err != nil {
		return nil, nil, err
	}
	if res == nil {
		return nil, nil, &UnauthorizedError{Reason: "invalid bearer token"}
	}
	return res.user, res.audiences, nil
}

// IssueServiceAccountToken signs a bound service account token (the TokenRequest API).
func (a *Remote) IssueServiceAccountToken(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (*authnv1.IssueServiceAccountTokenResponse, error) {
	resp, err := a.client.IssueServiceAccountToken(ctx, req)
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.InvalidArgument, codes.FailedPrecondition:
			return nil, fmt.Errorf("%s", st.Message())
		}
		return nil, &UnavailableError{Service: "authentication", Err: errors.New(st.Message())}
	}
	return resp, nil
}

// bearerToken reads "Authorization: Bearer <token>" (the scheme is case-insensitive, as upstream).
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// proxyHeaders collects the proxy identity headers the service named (only when a client
// certificate could vouch for them).
func (a *Remote) proxyHeaders(r *http.Request, hasCert bool) map[string]*authnv1.Values {
	if !hasCert {
		return nil
	}
	a.describeMu.Lock()
	names, prefixes := a.headers, a.prefixes
	a.describeMu.Unlock()
	var out map[string]*authnv1.Values
	add := func(k string, v []string) {
		if out == nil {
			out = map[string]*authnv1.Values{}
		}
		out[k] = &authnv1.Values{Values: append([]string(nil), v...)}
	}
	for _, n := range names {
		if v := r.Header.Values(n); len(v) > 0 {
			add(n, v)
		}
	}
	if len(prefixes) > 0 {
		for k, v := range r.Header {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					add(k, v)
				}
			}
		}
	}
	return out
}

// stripProxyHeaders removes the proxy identity headers, so nothing downstream trusts them.
func (a *Remote) stripProxyHeaders(r *http.Request) {
	a.describeMu.Lock()
	names, prefixes := a.headers, a.prefixes
	a.describeMu.Unlock()
	for _, n := range names {
		r.Header.Del(n)
	}
	if len(prefixes) > 0 {
		for k := range r.Header {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					r.Header.Del(k)
				}
			}
		}
	}
}

// credentialKey hashes everything a decision depends on, so the cache holds no credential.
func credentialKey(req *authnv1.AuthenticateRequest) [32]byte {
	h := sha256.New()
	h.Write([]byte(req.GetToken()))
	h.Write([]byte{0})
	for _, c := range req.GetPeerCertificates() {
		h.Write(c)
		h.Write([]byte{0})
	}
	if hs := req.GetHeaders(); len(hs) > 0 {
		keys := make([]string, 0, len(hs))
		for k := range hs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h.Write([]byte(k))
			h.Write([]byte{1})
			for _, v := range hs[k].GetValues() {
				h.Write([]byte(v))
				h.Write([]byte{2})
			}
		}
	}
	h.Write([]byte{0})
	for _, aud := range req.GetAudiences() {
		h.Write([]byte(aud))
		h.Write([]byte{0})
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func userFromProto(u *authnv1.User) *User {
	out := &User{Name: u.GetName(), UID: u.GetUid(), Groups: u.GetGroups()}
	if len(u.GetExtra()) > 0 {
		out.Extra = make(map[string][]string, len(u.GetExtra()))
		for k, v := range u.GetExtra() {
			out.Extra[k] = v.GetValues()
		}
	}
	return out
}

type authnMetrics struct {
	cache *prometheus.CounterVec
}

func newAuthnMetrics(reg prometheus.Registerer) *authnMetrics {
	m := &authnMetrics{cache: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_authentication_cache_total", Help: "Authentication decisions answered from the gateway's cache (hit) or by the authentication service (miss).",
	}, []string{"result"})}
	if reg != nil {
		reg.MustRegister(m.cache)
	}
	return m
}
