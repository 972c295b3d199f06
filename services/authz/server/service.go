package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/authz/authorizer"
	"platform.io/services/authz/rbac"
)

// privilegedGroup is always allowed, before any mode is consulted (upstream's
// system:masters).
const privilegedGroup = "system:masters"

// mode is one configured authorization mode.
type mode struct {
	name string
	authorizer.Authorizer
}

// Service implements proto/authz/v1 over the configured modes.
type Service struct {
	authzv1.UnimplementedAuthorizationServer

	modes   []mode
	rbac    *rbac.Authorizer // nil when RBAC is not a mode
	gen     *generation
	ready   func() bool
	log     *slog.Logger
	metrics *metrics
}

// Authorize decides one request: system:masters is allowed; otherwise the modes in order, the
// first allow or deny wins; none is no opinion (the caller's 403).
func (s *Service) Authorize(ctx context.Context, req *authzv1.AuthorizeRequest) (*authzv1.AuthorizeResponse, error) {
	if !s.ready() {
		return nil, status.Error(codes.Unavailable, "the authorization policy is not loaded yet")
	}
	attrs := fromProto(req.GetAttributes())
	if attrs.User == nil {
		return nil, status.Error(codes.InvalidArgument, "attributes.user is required")
	}
	gen := s.gen.current()
	start := time.Now()
	res, evalErr := s.decide(ctx, attrs)
	s.metrics.attempt(attemptResult(res.Decision, evalErr), time.Since(start))
	resp := &authzv1.AuthorizeResponse{
		Decision:        authzv1.Decision(res.Decision),
		Reason:          res.Reason,
		NameIndependent: res.NameIndependent,
		Cacheable:       !res.Uncacheable && evalErr == nil,
		Generation:      gen,
	}
	if evalErr != nil {
		resp.EvaluationError = evalErr.Error()
	}
	return resp, nil
}

// decide runs the chain. The result is name independent and cacheable only when every mode
// consulted said so.
func (s *Service) decide(ctx context.Context, attrs authorizer.Attributes) (authorizer.Result, error) {
	for _, g := range attrs.User.Groups {
		if g == privilegedGroup {
			s.metrics.decision("Privileged", "allow")
			return authorizer.Result{Decision: authorizer.Allow, NameIndependent: true}, nil
		}
	}
	out := authorizer.Result{NameIndependent: true}
	var reasons []string
	var errs []error
	for _, m := range s.modes {
		start := time.Now()
		r, err := m.Authorize(ctx, attrs)
		s.metrics.duration.WithLabelValues(m.name).Observe(time.Since(start).Seconds())
		out.NameIndependent = out.NameIndependent && r.NameIndependent
		out.Uncacheable = out.Uncacheable || r.Uncacheable
		if err != nil {
			errs = append(errs, err)
			out.Uncacheable = true
			s.log.WarnContext(ctx, "authorization mode failed", "mode", m.name, "err", err)
			continue
		}
		if r.Decision != authorizer.NoOpinion {
			s.metrics.decision(m.name, r.Decision.String())
			out.Decision, out.Reason = r.Decision, r.Reason
			return out, errors.Join(errs...)
		}
		if r.Reason != "" {
			reasons = append(reasons, r.Reason)
		}
	}
	s.metrics.decision("", "no-opinion")
	out.Reason = strings.Join(reasons, "\n")
	return out, errors.Join(errs...)
}

// ReviewRules lists what a user may do in a namespace (SelfSubjectRulesReview): RBAC lists its
// rules; modes that cannot list theirs make the answer incomplete.
func (s *Service) ReviewRules(ctx context.Context, req *authzv1.ReviewRulesRequest) (*authzv1.ReviewRulesResponse, error) {
	if !s.ready() {
		return nil, status.Error(codes.Unavailable, "the authorization policy is not loaded yet")
	}
	u := fromProtoUser(req.GetUser())
	if u == nil {
		return nil, status.Error(codes.InvalidArgument, "user is required")
	}
	resp := &authzv1.ReviewRulesResponse{}
	var errs []string
	for _, m := range s.modes {
		lister, ok := m.Authorizer.(authorizer.RuleLister)
		if !ok {
			if m.name != ModeAlwaysDeny {
				resp.Incomplete = true
			}
			continue
		}
		res, nonRes, incomplete, err := lister.RulesFor(ctx, u, req.GetNamespace())
		if err != nil {
			errs = append(errs, err.Error())
		}
		resp.Incomplete = resp.Incomplete || incomplete
		for _, r := range res {
			resp.ResourceRules = append(resp.ResourceRules, toProtoRule(r))
		}
		for _, r := range nonRes {
			resp.NonResourceRules = append(resp.NonResourceRules, toProtoRule(r))
		}
	}
	resp.EvaluationError = strings.Join(errs, "; ")
	return resp, nil
}

// CheckEscalation reports the rules a user does not hold through RBAC (upstream checks escalation
// against RBAC's own rules, whatever the other modes would allow).
func (s *Service) CheckEscalation(ctx context.Context, req *authzv1.CheckEscalationRequest) (*authzv1.CheckEscalationResponse, error) {
	if s.rbac == nil {
		return nil, status.Error(codes.FailedPrecondition, "RBAC is not an authorization mode")
	}
	if !s.ready() {
		return nil, status.Error(codes.Unavailable, "the authorization policy is not loaded yet")
	}
	u := fromProtoUser(req.GetUser())
	if u == nil {
		return nil, status.Error(codes.InvalidArgument, "user is required")
	}
	rules := make([]authorizer.Rule, 0, len(req.GetRules()))
	for _, r := range req.GetRules() {
		rules = append(rules, fromProtoRule(r))
	}
	missing, err := s.rbac.Covers(ctx, u, req.GetNamespace(), rules)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "checking escalation: %v", err)
	}
	resp := &authzv1.CheckEscalationResponse{Covered: len(missing) == 0}
	for _, r := range missing {
		resp.Missing = append(resp.Missing, toProtoRule(r))
	}
	if len(missing) > 0 {
		resp.Message = rbac.EscalationMessage(u, missing)
	}
	return resp, nil
}

// WatchPolicy streams the policy generation: now, then after every change, until the client
// goes or the service stops.
func (s *Service) WatchPolicy(_ *authzv1.WatchPolicyRequest, stream authzv1.Authorization_WatchPolicyServer) error {
	ctx := stream.Context()
	for {
		gen, changed := s.gen.watch()
		if err := stream.Send(&authzv1.PolicyGeneration{Generation: gen}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.gen.stopped:
			return status.Error(codes.Unavailable, "the authorization service is shutting down")
		case <-changed:
		}
	}
}

// generation counts changes of anything decisions depend on (RBAC data, the node graph) and
// wakes the watchers of each change.
type generation struct {
	mu      sync.Mutex
	n       uint64
	changed chan struct{}
	stopped chan struct{}
}

func newGeneration() *generation {
	return &generation{n: 1, changed: make(chan struct{}), stopped: make(chan struct{})}
}

func (g *generation) current() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func (g *generation) watch() (uint64, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n, g.changed
}

func (g *generation) bump() {
	g.mu.Lock()
	g.n++
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *generation) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.stopped:
	default:
		close(g.stopped)
	}
}

func fromProtoUser(u *authzv1.User) *authorizer.User {
	if u == nil {
		return nil
	}
	out := &authorizer.User{Name: u.GetName(), UID: u.GetUid(), Groups: u.GetGroups()}
	if len(u.GetExtra()) > 0 {
		out.Extra = make(map[string][]string, len(u.GetExtra()))
		for k, v := range u.GetExtra() {
			out.Extra[k] = v.GetValues()
		}
	}
	return out
}

func fromProto(a *authzv1.Attributes) authorizer.Attributes {
	return authorizer.Attributes{
		User:            fromProtoUser(a.GetUser()),
		Verb:            a.GetVerb(),
		ResourceRequest: a.GetResourceRequest(),
		APIGroup:        a.GetApiGroup(),
		APIVersion:      a.GetApiVersion(),
		Resource:        a.GetResource(),
		Subresource:     a.GetSubresource(),
		Namespace:       a.GetNamespace(),
		Name:            a.GetName(),
		Path:            a.GetPath(),
	}
}

func toProtoRule(r authorizer.Rule) *authzv1.PolicyRule {
	return &authzv1.PolicyRule{Verbs: r.Verbs, ApiGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, NonResourceUrls: r.NonResourceURLs}
}

func fromProtoRule(r *authzv1.PolicyRule) authorizer.Rule {
	return authorizer.Rule{Verbs: r.GetVerbs(), APIGroups: r.GetApiGroups(), Resources: r.GetResources(), ResourceNames: r.GetResourceNames(), NonResourceURLs: r.GetNonResourceUrls()}
}

// metrics are upstream's authorization metrics.
type metrics struct {
	decisions *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	// attempts and latency are upstream's authorization_attempts_total and
	// authorization_duration_seconds: one per Authorize call, by result.
	attempts *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	compile  prometheus.Histogram
	gen      prometheus.GaugeFunc
}

func newMetrics(reg prometheus.Registerer, gen *generation) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_authorization_decisions_total", Help: "Authorization decisions by the mode that decided and the decision.",
		}, []string{"type", "decision"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "authorization_mode_duration_seconds", Help: "Time each authorization mode took per request.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
		}, []string{"type"}),
		compile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "authorization_policy_compile_duration_seconds", Help: "Time to rebuild the RBAC policy data after a change.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		gen: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authorization_policy_generation", Help: "Generation of the policy decisions are made at.",
		}, func() float64 { return float64(gen.current()) }),
	}
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authorization_attempts_total", Help: "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
	}, []string{"result"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "authorization_duration_seconds", Help: "Authorization duration in seconds broken out by result.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
	}, []string{"result"})
	reg.MustRegister(m.decisions, m.duration, m.compile, m.gen, m.attempts, m.latency)
	return m
}

// attemptResult is the result label of one Authorize call. Upstream's filter, which sees only
// allow or not, counts no opinion as denied; this service answers the three decisions, so it
// keeps them apart ("no-opinion" is what the caller turns into a 403). "error" is a call whose
// modes failed without any deciding.
func attemptResult(d authorizer.Decision, err error) string {
	switch {
	case d == authorizer.Allow:
		return "allowed"
	case d == authorizer.Deny:
		return "denied"
	case err != nil:
		return "error"
	}
	return "no-opinion"
}

func (m *metrics) attempt(result string, d time.Duration) {
	m.attempts.WithLabelValues(result).Inc()
	m.latency.WithLabelValues(result).Observe(d.Seconds())
}

func (m *metrics) decision(mode, decision string) {
	m.decisions.WithLabelValues(mode, decision).Inc()
}
