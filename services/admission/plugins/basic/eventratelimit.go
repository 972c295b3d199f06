package basic

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// eventRateLimit is EventRateLimit: it bounds the rate of Event writes, so a misbehaving
// component flooding events cannot swamp storage. Each configured limit keeps token buckets
// (qps refill, burst capacity): one for the whole server, or one per namespace, per user, or per
// event source and involved object, the last three in a least-recently-used cache of cacheSize
// buckets. A write every applicable bucket cannot pay for is refused with 429. Dry runs are not
// counted, since they store nothing.
type eventRateLimit struct {
	enforcers []*limitEnforcer
}

// EventRateLimitConfig is the plugin's configuration: kind Configuration in
// eventratelimit.admission.<suffix>/v1alpha1 (upstream's eventratelimit.admission.k8s.io is read
// as the same group).
type EventRateLimitConfig struct {
	// APIVersion and Kind, when given, must name the configuration kind.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Limits are the limits to enforce; at least one.
	Limits []EventRateLimitLimit `json:"limits"`
}

// EventRateLimitLimit is one limit.
type EventRateLimitLimit struct {
	// Type is what a bucket is kept for: Server, Namespace, User or SourceAndObject.
	Type string `json:"type"`
	// QPS is the sustained rate of writes a bucket allows per second.
	QPS int32 `json:"qps"`
	// Burst is how many writes a full bucket allows at once.
	Burst int32 `json:"burst"`
	// CacheSize bounds the buckets kept (not for Server); 0 means 4096.
	CacheSize int32 `json:"cacheSize,omitempty"`
}

// The limit types.
const (
	limitServer          = "Server"
	limitNamespace       = "Namespace"
	limitUser            = "User"
	limitSourceAndObject = "SourceAndObject"
)

// defaultCacheSize is upstream's number of buckets a keyed limit keeps when not configured.
const defaultCacheSize = 4096

var eventRateLimitGroupVersion = naming.Group("eventratelimit.admission.k8s.io") + "/v1alpha1"

func newEventRateLimit(deps admission.Deps, config []byte) (admission.Plugin, error) {
	var c EventRateLimitConfig
	if len(config) > 0 {
		if err := decodeJSON(config, &c); err != nil {
			return nil, fmt.Errorf("%s: reading the configuration: %w", admission.EventRateLimit, err)
		}
		if err := checkKind(c.APIVersion, c.Kind, "Configuration", eventRateLimitGroupVersion); err != nil {
			return nil, fmt.Errorf("%s: %w", admission.EventRateLimit, err)
		}
	}
	if errs := validateEventRateLimit(&c); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", admission.EventRateLimit, errs.ToAggregate())
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	p := &eventRateLimit{}
	for _, l := range c.Limits {
		p.enforcers = append(p.enforcers, newLimitEnforcer(l, now))
	}
	return p, nil
}

// validateEventRateLimit checks the configuration as upstream does.
func validateEventRateLimit(c *EventRateLimitConfig) field.ErrorList {
	var errs field.ErrorList
	limits := field.NewPath("limits")
	if len(c.Limits) == 0 {
		errs = append(errs, field.Invalid(limits, nil, "must not be empty"))
	}
	for i, l := range c.Limits {
		p := limits.Index(i)
		switch l.Type {
		case limitServer, limitNamespace, limitUser, limitSourceAndObject:
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), l.Type, []string{limitNamespace, limitServer, limitSourceAndObject, limitUser}))
		}
		if l.Burst <= 0 {
			errs = append(errs, field.Invalid(p.Child("burst"), l.Burst, "must be positive"))
		}
		if l.QPS <= 0 {
			errs = append(errs, field.Invalid(p.Child("qps"), l.QPS, "must be positive"))
		}
		if l.Type != limitServer && l.CacheSize < 0 {
			errs = append(errs, field.Invalid(p.Child("cacheSize"), l.CacheSize, "must not be negative"))
		}
	}
	return errs
}

func (*eventRateLimit) Name() string { return admission.EventRateLimit }

// Interests: creates and updates (kubelets and controllers patch events to count repeats) of
// core Events. Events written through the events group are not limited, as upstream.
func (*eventRateLimit) Interests() []admission.Interest {
	return []admission.Interest{{Operations: []admission.Operation{admission.Create, admission.Update}, APIGroups: []string{""}, Resources: []string{"events"}, Scope: "Namespaced"}}
}

func (p *eventRateLimit) Validate(_ context.Context, a *admission.Attributes) error {
	if a.Kind.Group != "" || a.Kind.Kind != "Event" || a.DryRun {
		return nil
	}
	// Every limit is charged, even after one refused, as upstream does.
	var refusals []string
	for _, e := range p.enforcers {
		if err := e.accept(a); err != nil {
			refusals = append(refusals, err.Error())
		}
	}
	switch len(refusals) {
	case 0:
		return nil
	case 1:
		return apierrors.NewTooManyRequestsError(refusals[0])
	}
	return apierrors.NewTooManyRequestsError("[" + strings.Join(refusals, ", ") + "]")
}

// limitEnforcer keeps the buckets of one limit.
type limitEnforcer struct {
	limitType  string
	qps, burst float64
	now        func() time.Time
	key        func(a *admission.Attributes) string

	mu      sync.Mutex
	server  *tokenBucket       // the Server limit's one bucket
	buckets *lru[*tokenBucket] // the keyed limits' buckets
}

func newLimitEnforcer(l EventRateLimitLimit, now func() time.Time) *limitEnforcer {
	e := &limitEnforcer{limitType: l.Type, qps: float64(l.QPS), burst: float64(l.Burst), now: now}
	switch l.Type {
	case limitServer:
		e.key = func(*admission.Attributes) string { return "" }
		e.server = newTokenBucket(e.qps, e.burst, now())
		return e
	case limitNamespace:
		e.key = func(a *admission.Attributes) string { return a.Namespace }
	case limitUser:
		e.key = func(a *admission.Attributes) string {
			if a.User == nil {
				return ""
			}
			return a.User.Name
		}
	case limitSourceAndObject:
		e.key = sourceAndObjectKey
	}
	size := int(l.CacheSize)
	if size == 0 {
		size = defaultCacheSize
	}
	e.buckets = newLRU[*tokenBucket](size)
	return e
}

// accept takes a token from the request's bucket, or says which limit refused.
func (e *limitEnforcer) accept(a *admission.Attributes) error {
	key := e.key(a)
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.server
	if b == nil {
		var ok bool
		if b, ok = e.buckets.get(key, now); !ok {
			b = newTokenBucket(e.qps, e.burst, now)
			e.buckets.add(key, b, time.Time{})
		}
	}
	if !b.take(now) {
		return apierrors.NewTooManyRequestsError(fmt.Sprintf("limit reached on type %v for key %v", e.limitType, key))
	}
	return nil
}

// sourceAndObjectKey keys an event by its source (component, host) and involved object.
func sourceAndObjectKey(a *admission.Attributes) string {
	ev, ok := a.Object.(*corev1.Event)
	if !ok || ev == nil {
		return ""
	}
	return strings.Join([]string{
		ev.Source.Component, ev.Source.Host,
		ev.InvolvedObject.Kind, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name,
		string(ev.InvolvedObject.UID), ev.InvolvedObject.APIVersion,
	}, "")
}

// tokenBucket starts full (burst tokens) and refills at qps tokens per second up to burst.
type tokenBucket struct {
	qps, burst, tokens float64
	last               time.Time
}

func newTokenBucket(qps, burst float64, now time.Time) *tokenBucket {
	return &tokenBucket{qps: qps, burst: burst, tokens: burst, last: now}
}

// take spends one token if there is one at now.
func (b *tokenBucket) take(now time.Time) bool {
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(b.burst, b.tokens+elapsed*b.qps)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
