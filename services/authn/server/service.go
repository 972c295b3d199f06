package server

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/authn/authenticator"
)

// invalidBearerToken is upstream's answer for a token no method accepts.
const invalidBearerToken = "invalid bearer token"

// Issuer signs bound service account tokens (the TokenRequest API).
type Issuer interface {
	IssueBound(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (token string, exp time.Time, err error)
}

// Service implements proto/authn/v1 over the configured identity methods.
type Service struct {
	authnv1.UnimplementedAuthenticationServer

	// request methods look at the connection and headers (authenticating proxy, client
	// certificate); token methods at the bearer token. Both in the order they are tried.
	requestMethods []authenticator.Method
	tokenMethods   []authenticator.Method
	issuer         Issuer
	describe       *authnv1.DescribeResponse
	cacheTTL       time.Duration
	log            *slog.Logger
	metrics        *metrics
}

// Authenticate identifies the caller of one request: the first method that accepts its
// credentials wins; if none does and one refused them, the request is refused (UNAUTHENTICATED with
// the refusals); if it carried none, it is not authenticated (the caller decides on anonymous).
func (s *Service) Authenticate(ctx context.Context, req *authnv1.AuthenticateRequest) (*authnv1.AuthenticateResponse, error) {
	start := time.Now()
	r := &authenticator.Request{Token: req.GetToken(), Audiences: req.GetAudiences()}
	for i, der := range req.GetPeerCertificates() {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "peer certificate %d: %v", i, err)
		}
		r.PeerCertificates = append(r.PeerCertificates, c)
	}
	if len(req.GetHeaders()) > 0 {
		r.Header = http.Header{}
		for k, v := range req.GetHeaders() {
			r.Header[http.CanonicalHeaderKey(k)] = v.GetValues()
		}
	}
	resp, method, err := s.authenticate(ctx, r)
	result := "success"
	switch {
	case err != nil:
		result = "error"
	case resp == nil:
		result = "none"
	}
	s.metrics.observe(method, result, time.Since(start))
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return &authnv1.AuthenticateResponse{}, nil
	}
	return &authnv1.AuthenticateResponse{
		Authenticated: true,
		User:          toProtoUser(withAuthenticatedGroup(resp.User)),
		Audiences:     resp.Audiences,
		Method:        method,
		CacheTtlMs:    s.cacheTTL.Milliseconds(),
	}, nil
}

func (s *Service) authenticate(ctx context.Context, r *authenticator.Request) (*authenticator.Response, string, error) {
	var refusals []string
	var unavailable error
	try := func(m authenticator.Method) (*authenticator.Response, bool) {
		resp, err := m.Authenticate(ctx, r)
		if err == nil && resp != nil && resp.User != nil {
			return resp, true
		}
		if err != nil && !errors.Is(err, authenticator.ErrNotMine) {
			if ctx.Err() != nil {
				return nil, false
			}
			if authenticator.IsUnavailable(err) {
				unavailable = err
				s.log.WarnContext(ctx, "authentication method could not decide", "method", m.Name(), "err", err)
				return nil, false
			}
			refusals = append(refusals, err.Error())
			s.log.DebugContext(ctx, "credentials refused", "method", m.Name(), "err", err)
		}
		return nil, false
	}
	for _, m := range s.requestMethods {
		if resp, ok := try(m); ok {
			return resp, m.Name(), nil
		}
	}
	if r.Token != "" {
		for _, m := range s.tokenMethods {
			if resp, ok := try(m); ok {
				return resp, m.Name(), nil
			}
		}
		if len(refusals) == 0 && unavailable == nil {
			// A token nobody recognizes is refused, never anonymous (upstream's bearer token rule).
			refusals = append(refusals, invalidBearerToken)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", status.FromContextError(err).Err()
	}
	if unavailable != nil {
		// A method that could have accepted the credentials could not decide: refusing them would
		// tell the client its credentials are bad.
		return nil, "", status.Error(codes.Unavailable, unavailable.Error())
	}
	if len(refusals) > 0 {
		return nil, "", status.Error(codes.Unauthenticated, strings.Join(refusals, ", "))
	}
	return nil, "", nil
}

// Describe tells the gateway how to call Authenticate.
func (s *Service) Describe(context.Context, *authnv1.DescribeRequest) (*authnv1.DescribeResponse, error) {
	return s.describe, nil
}

// IssueServiceAccountToken signs a bound token (the caller checked the account and bound object).
func (s *Service) IssueServiceAccountToken(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (*authnv1.IssueServiceAccountTokenResponse, error) {
	if s.issuer == nil {
		return nil, status.Error(codes.FailedPrecondition, "service account tokens cannot be issued: --service-account-signing-key-file is not set")
	}
	if req.GetNamespace() == "" || req.GetName() == "" || req.GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "namespace, name and uid of the service account are required")
	}
	token, exp, err := s.issuer.IssueBound(ctx, req)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "issuing a token: %v", err)
	}
	return &authnv1.IssueServiceAccountTokenResponse{Token: token, ExpirationUnix: exp.Unix()}, nil
}

// withAuthenticatedGroup adds system:authenticated, which every authenticated user has.
func withAuthenticatedGroup(u *authenticator.User) *authenticator.User {
	for _, g := range u.Groups {
		if g == authenticator.GroupAuthenticated {
			return u
		}
	}
	out := *u
	out.Groups = append(append([]string(nil), u.Groups...), authenticator.GroupAuthenticated)
	return &out
}

func toProtoUser(u *authenticator.User) *authnv1.User {
	pu := &authnv1.User{Name: u.Name, Uid: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		pu.Extra = make(map[string]*authnv1.Values, len(u.Extra))
		for k, v := range u.Extra {
			pu.Extra[k] = &authnv1.Values{Values: v}
		}
	}
	return pu
}

// metrics are upstream's authentication metrics, with the method that decided.
type metrics struct {
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_attempts", Help: "Authentication attempts by result (success, error: credentials refused, none: no credentials) and the method that decided.",
		}, []string{"result", "method"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "authentication_duration_seconds", Help: "Authentication duration by result.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"result"}),
	}
	reg.MustRegister(m.attempts, m.duration)
	return m
}

func (m *metrics) observe(method, result string, d time.Duration) {
	m.attempts.WithLabelValues(result, method).Inc()
	m.duration.WithLabelValues(result).Observe(d.Seconds())
}
