package auth

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "platform.io/proto/authz/v1"
)

// decisionTTL bounds how long a cached decision is reused even while the policy generation
// stands still; the generation stream is what keeps decisions fresh, this is a safety net.
const decisionTTL = time.Minute

// maxDecisions bounds the decision cache.
const maxDecisions = 50000

// RemoteAuthorizer decides through the authorization service. Members of system:masters are
// allowed without asking (upstream's privileged group). Decisions are cached only while the
// service's policy-generation stream is connected, and all of them are dropped whenever the
// generation moves, so a change to RBAC is enforced as soon as the service has compiled it (well
// within the one-second bound); while the stream is down nothing is cached.
type RemoteAuthorizer struct {
	client authzv1.AuthorizationClient
	log    *slog.Logger

	mu   sync.Mutex
	live bool
	gen  uint64
	m    map[string]decisionEntry

	metrics *authzMetrics
}

type decisionEntry struct {
	decision Decision
	reason   string
	expires  time.Time
}

// NewRemoteAuthorizer builds the authorizer over a connection to the authorization service; Run
// keeps its cache in step with the policy.
func NewRemoteAuthorizer(conn grpc.ClientConnInterface, log *slog.Logger, reg prometheus.Registerer) *RemoteAuthorizer {
	return &RemoteAuthorizer{client: authzv1.NewAuthorizationClient(conn), log: log, m: map[string]decisionEntry{}, metrics: newAuthzMetrics(reg)}
}

// Run follows the policy generation until ctx ends, reconnecting when the stream breaks.
func (a *RemoteAuthorizer) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	// An outage is logged once, at its start (a stream that was live, or the first attempt);
	// the retries while it lasts are debug lines.
	reported := false
	for ctx.Err() == nil {
		if err := a.follow(ctx); err != nil && ctx.Err() == nil {
			if a.isLive() || !reported {
				a.log.Warn("authorization policy stream failing: decisions are not cached until it is back", "service", "authorization", "err", err)
				reported = true
			} else {
				a.log.Debug("policy generation stream ended", "err", err)
			}
		}
		a.setLive(false, 0)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (a *RemoteAuthorizer) follow(ctx context.Context) error {
	stream, err := a.client.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
	if err != nil {
		return err
	}
	for {
		g, err := stream.Recv()
		if err != nil {
			return err
		}
		a.setLive(true, g.GetGeneration())
	}
}

func (a *RemoteAuthorizer) isLive() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.live
}

// setLive records the stream's state and generation; any change empties the cache.
func (a *RemoteAuthorizer) setLive(live bool, gen uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if live != a.live || gen != a.gen {
		if len(a.m) > 0 {
			a.m = map[string]decisionEntry{}
		}
		a.live, a.gen = live, gen
	}
}

// Authorize decides a request.
func (a *RemoteAuthorizer) Authorize(ctx context.Context, attrs Attributes) (Decision, string, error) {
	if attrs.User == nil {
		return DecisionDeny, "no user", nil
	}
	for _, g := range attrs.User.Groups {
		if g == GroupMasters {
			return DecisionAllow, "", nil
		}
	}
	key, anyName := decisionKeys(attrs)
	now := time.Now()
	a.mu.Lock()
	e, ok := a.m[key]
	if !ok && anyName != "" {
		e, ok = a.m[anyName]
	}
	live, gen := a.live, a.gen
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		a.metrics.cache.WithLabelValues("hit").Inc()
		return e.decision, e.reason, nil
	}
	a.metrics.cache.WithLabelValues("miss").Inc()
	resp, err := a.client.Authorize(ctx, &authzv1.AuthorizeRequest{Attributes: toProtoAttributes(attrs)})
	if err != nil {
		return DecisionNoOpinion, "", remoteError("authorization", ctx, err)
	}
	d := Decision(resp.GetDecision())
	if live && resp.GetCacheable() && resp.GetGeneration() == gen {
		k := key
		if resp.GetNameIndependent() && anyName != "" {
			k = anyName
		}
		a.mu.Lock()
		// Store only if nothing moved meanwhile: a decision made at an older generation must not
		// outlive the change that superseded it.
		if a.live && a.gen == gen {
			if len(a.m) >= maxDecisions {
				a.m = map[string]decisionEntry{}
			}
			a.m[k] = decisionEntry{decision: d, reason: resp.GetReason(), expires: now.Add(decisionTTL)}
		}
		a.mu.Unlock()
	}
	return d, resp.GetReason(), nil
}

// RulesFor lists what u may do in namespace (SelfSubjectRulesReview).
func (a *RemoteAuthorizer) RulesFor(ctx context.Context, u *User, namespace string) (*authzv1.ReviewRulesResponse, error) {
	resp, err := a.client.ReviewRules(ctx, &authzv1.ReviewRulesRequest{User: toProtoUser(u), Namespace: namespace})
	if err != nil {
		return nil, remoteError("authorization", ctx, err)
	}
	return resp, nil
}

// CheckEscalation reports the rules u does not hold in namespace through RBAC.
func (a *RemoteAuthorizer) CheckEscalation(ctx context.Context, u *User, namespace string, rules []*authzv1.PolicyRule) (*authzv1.CheckEscalationResponse, error) {
	resp, err := a.client.CheckEscalation(ctx, &authzv1.CheckEscalationRequest{User: toProtoUser(u), Namespace: namespace, Rules: rules})
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			// RBAC is not a mode: there are no RBAC permissions to escalate.
			return &authzv1.CheckEscalationResponse{Covered: true}, nil
		}
		return nil, remoteError("authorization", ctx, err)
	}
	return resp, nil
}

// remoteError turns a failed call into the caller's context error or an *UnavailableError.
func remoteError(service string, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st := status.Convert(err)
	if st.Code() == codes.InvalidArgument || st.Code() == codes.Internal {
		return errors.New(service + ": " + st.Message())
	}
	return &UnavailableError{Service: service, Err: errors.New(st.Message())}
}

// decisionKeys returns the cache key of attrs and, for a named resource request, the key shared by
// every name (used when the service says the decision does not depend on the name).
func decisionKeys(at Attributes) (key, anyName string) {
	var b strings.Builder
	u := at.User
	b.WriteString(u.Name)
	b.WriteByte(0)
	b.WriteString(u.UID)
	b.WriteByte(0)
	for _, g := range u.Groups {
		b.WriteString(g)
		b.WriteByte(1)
	}
	b.WriteByte(0)
	if len(u.Extra) > 0 {
		ks := make([]string, 0, len(u.Extra))
		for k := range u.Extra {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			b.WriteString(k)
			b.WriteByte(2)
			for _, v := range u.Extra[k] {
				b.WriteString(v)
				b.WriteByte(1)
			}
		}
	}
	b.WriteByte(0)
	b.WriteString(at.Verb)
	b.WriteByte(0)
	if !at.ResourceRequest {
		b.WriteString(at.Path)
		return b.String(), ""
	}
	for _, s := range []string{at.APIGroup, at.APIVersion, at.Resource, at.Subresource, at.Namespace} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	prefix := b.String()
	if at.Name == "" {
		return prefix + "\x01", ""
	}
	return prefix + "\x02" + at.Name, prefix + "\x03"
}

func toProtoUser(u *User) *authzv1.User {
	pu := &authzv1.User{Name: u.Name, Uid: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		pu.Extra = make(map[string]*authzv1.Values, len(u.Extra))
		for k, v := range u.Extra {
			pu.Extra[k] = &authzv1.Values{Values: v}
		}
	}
	return pu
}

func toProtoAttributes(at Attributes) *authzv1.Attributes {
	return &authzv1.Attributes{
		User: toProtoUser(at.User), Verb: at.Verb, ResourceRequest: at.ResourceRequest,
		ApiGroup: at.APIGroup, ApiVersion: at.APIVersion, Resource: at.Resource, Subresource: at.Subresource,
		Namespace: at.Namespace, Name: at.Name, Path: at.Path,
	}
}

type authzMetrics struct {
	cache *prometheus.CounterVec
}

func newAuthzMetrics(reg prometheus.Registerer) *authzMetrics {
	m := &authzMetrics{cache: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gateway_authorization_cache_total", Help: "Authorization decisions answered from the gateway's cache (hit) or by the authorization service (miss).",
	}, []string{"result"})}
	if reg != nil {
		reg.MustRegister(m.cache)
	}
	return m
}
