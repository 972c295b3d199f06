// Package quota is the ResourceQuota admission plugin (upstream's ResourceQuota, validating): a
// create or update in a namespace with ResourceQuotas is measured (package evaluator), checked
// against every quota that constrains it, and charged to the quotas' status.used before it is
// stored, with compare-and-swap writes so that concurrent requests never overcommit a quota.
//
// Only writes in namespaces that have a ResourceQuota reach the plugin (DynamicInterest), plus
// the creates and deletes of ResourceQuotas themselves (so that a namespace's first quota is
// noticed at once). Deletes release nothing here: the quota controller recomputes status.used
// from what exists, as upstream's does. A dry-run request is checked but charges nothing.
//
// Within one admission replica the charges of a namespace are serialised, and the quota as this
// replica last stored it is reused for the next charge, so that a burst of creates in one
// namespace costs one compare-and-swap each instead of conflicting with itself; across replicas
// (and against the controller) conflicts are resolved by reading the quota again and
// re-checking, up to maxAttempts times.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/admission/admission"
	"platform.io/services/admission/plugins/quota/evaluator"
)

const (
	// maxAttempts bounds the compare-and-swap rounds of one charge (upstream tries 3 times, but
	// batches a namespace's requests; across replicas we need a few more).
	maxAttempts = 8
	// evaluationTimeout bounds how long a request waits for its namespace's earlier charges, as
	// upstream's evaluator does.
	evaluationTimeout = 10 * time.Second
)

// Register registers the ResourceQuota plugin.
func Register(r *admission.Registry) {
	r.Register(admission.ResourceQuota, New)
}

// Plugin is the ResourceQuota admission plugin.
type Plugin struct {
	objects admission.Objects
	store   admission.Store
	now     func() time.Time
	log     *slog.Logger
	limited []LimitedResource

	locks  namespaceLocks
	mu     sync.Mutex
	latest map[string]*corev1.ResourceQuota // ns/name: the quota as this plugin last stored it
	// expected are namespaces whose first quota was admitted a moment ago (until the deadline):
	// of interest at once, and read from storage while the lister has not seen the quota yet.
	expected map[string]time.Time
	changes  changes
}

var (
	_ admission.Validator       = (*Plugin)(nil)
	_ admission.Interested      = (*Plugin)(nil)
	_ admission.DynamicInterest = (*Plugin)(nil)
)

// New builds the plugin from its configuration (Configuration; nil for none).
func New(deps admission.Deps, config []byte) (admission.Plugin, error) {
	c, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plugin{objects: deps.Objects, store: deps.Store, now: now, log: log, limited: c.LimitedResources,
		latest: map[string]*corev1.ResourceQuota{}, expected: map[string]time.Time{}}, nil
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return admission.ResourceQuota }

// Interests: the creates and deletes of ResourceQuotas (which change the namespaces of interest)
// and, with limitedResources configured, every create and update of those resources (they are
// refused where no quota covers them, so namespaces without quotas matter too). Everything else
// comes through Namespaces.
func (p *Plugin) Interests() []admission.Interest {
	out := []admission.Interest{{
		Operations: []admission.Operation{admission.Create, admission.Delete},
		APIGroups:  []string{""}, Resources: []string{"resourcequotas"}, Scope: "Namespaced",
	}}
	for _, lr := range p.limited {
		out = append(out, admission.Interest{
			Operations: []admission.Operation{admission.Create, admission.Update},
			APIGroups:  []string{lr.APIGroup}, Resources: []string{lr.Resource}, Scope: "Namespaced",
		})
	}
	return out
}

// Namespaces are the namespaces that have a ResourceQuota, or had one admitted a moment ago:
// every write there may be charged.
func (p *Plugin) Namespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, q := range p.objects.ResourceQuotas().List("") {
		if !seen[q.Namespace] {
			seen[q.Namespace] = true
			out = append(out, q.Namespace)
		}
	}
	p.mu.Lock()
	now := p.now()
	for ns, deadline := range p.expected {
		switch {
		case now.After(deadline):
			delete(p.expected, ns)
		case !seen[ns]:
			seen[ns] = true
			out = append(out, ns)
		}
	}
	p.mu.Unlock()
	sort.Strings(out)
	return out
}

// expectWindow is how long a namespace whose quota was just admitted stays of interest without
// the lister showing the quota (the create may still fail after admission; upstream's live
// lookups are cached as long).
const expectWindow = 30 * time.Second

// expect makes ns of interest at once (the quota being created is not stored yet) and signals
// the change synchronously, so that the answer to this very request carries it.
func (p *Plugin) expect(ns string) {
	p.mu.Lock()
	_, known := p.expected[ns]
	p.expected[ns] = p.now().Add(expectWindow)
	p.mu.Unlock()
	if !known {
		p.changes.signal()
	}
}

// isExpected tells whether a quota was admitted in ns a moment ago.
func (p *Plugin) isExpected(ns string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	deadline, ok := p.expected[ns]
	return ok && !p.now().After(deadline)
}

// OwnerReferences is false: owner references cost nothing.
func (p *Plugin) OwnerReferences() bool { return false }

// Changed is signalled shortly after a ResourceQuota is created or deleted (once the write has
// had time to reach the listers).
func (p *Plugin) Changed() <-chan struct{} { return p.changes.channel() }

// Validate checks the request against the namespace's quotas and charges it.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Is("", "resourcequotas", "") && (a.Operation == admission.Create || a.Operation == admission.Delete) {
		if a.Operation == admission.Create && !a.DryRun && a.Subresource == "" {
			p.expect(a.Namespace)
		}
		p.changes.soon()
	}
	if a.Operation != admission.Create && a.Operation != admission.Update {
		return nil
	}
	// Subresources (status, scale, eviction, ...) and cluster-scoped objects cost nothing.
	if a.Subresource != "" || a.Namespace == "" || isNil(a.Object) {
		return nil
	}
	if a.Kind.Group == "" && a.Kind.Kind == "Namespace" {
		return nil
	}
	ev := evaluator.For(a.GroupResource(), p.now)
	if ev == nil || !ev.Handles(string(a.Operation)) {
		return nil
	}
	if len(p.objects.ResourceQuotas().List(a.Namespace)) == 0 && len(p.limited) == 0 && !p.isExpected(a.Namespace) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, evaluationTimeout)
	defer cancel()
	unlock, err := p.locks.lock(ctx, a.Namespace)
	if err != nil {
		return apierrors.NewInternalError(errors.New("resource quota evaluation timed out"))
	}
	defer unlock()
	quotas, err := p.current(ctx, a.Namespace)
	if err != nil {
		return statusError(err)
	}
	return p.charge(ctx, a, ev, quotas)
}

// current returns the namespace's quotas: the lister's, replaced by what this plugin stored
// last where it did (the lister may not have seen that write yet); read from storage when the
// lister has none but a quota was admitted there a moment ago (as upstream's live lookup).
func (p *Plugin) current(ctx context.Context, ns string) ([]corev1.ResourceQuota, error) {
	listed := p.objects.ResourceQuotas().List(ns)
	if len(listed) == 0 && p.isExpected(ns) {
		live, err := p.store.ListResourceQuotas(ctx, ns)
		if err != nil {
			return nil, err
		}
		sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
		return live, nil
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].Name < listed[j].Name })
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]corev1.ResourceQuota, 0, len(listed))
	for _, q := range listed {
		if mine, ok := p.latest[ns+"/"+q.Name]; ok && mine.UID == q.UID {
			out = append(out, *mine.DeepCopy())
			continue
		}
		delete(p.latest, ns+"/"+q.Name)
		out = append(out, *q.DeepCopy())
	}
	return out, nil
}

func (p *Plugin) remember(q *corev1.ResourceQuota) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest[q.Namespace+"/"+q.Name] = q.DeepCopy()
}

func (p *Plugin) forget(ns, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.latest, ns+"/"+name)
}

// charge checks the request against quotas and stores the new usage of every quota it changes;
// quotas whose write conflicted are read again and checked again (only those: the others are
// charged already).
func (p *Plugin) charge(ctx context.Context, a *admission.Attributes, ev evaluator.Evaluator, quotas []corev1.ResourceQuota) error {
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		next, err := check(quotas, a, ev, p.limited)
		if err != nil {
			return err
		}
		if a.DryRun {
			return nil
		}
		var failed []string
		for i := range next {
			if evaluator.Equals(quotas[i].Status.Used, next[i].Status.Used) {
				continue
			}
			stored, err := p.store.UpdateResourceQuotaStatus(ctx, &next[i])
			switch {
			case err == nil:
				p.remember(stored)
			case apierrors.IsNotFound(err):
				// Deleted meanwhile: nothing left to charge.
				p.forget(next[i].Namespace, next[i].Name)
			case apierrors.IsConflict(err):
				p.forget(next[i].Namespace, next[i].Name)
				failed = append(failed, next[i].Name)
				lastErr = err
			default:
				return statusError(err)
			}
		}
		if len(failed) == 0 {
			return nil
		}
		quotas = quotas[:0:0]
		for _, name := range failed {
			q, err := p.store.GetResourceQuota(ctx, a.Namespace, name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return statusError(err)
			}
			quotas = append(quotas, *q)
		}
		if len(quotas) == 0 {
			return nil
		}
	}
	p.log.WarnContext(ctx, "resource quota charge gave up after conflicts", "namespace", a.Namespace, "attempts", maxAttempts)
	return lastErr
}

// isNil tells whether obj is nil or a nil pointer (odd requests must not panic the plugin).
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// statusError keeps API errors (they carry their code) and makes anything else a 500.
func statusError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// check is upstream's quota check of one request: it returns the quotas with the request's usage
// added to every quota that constrains it, or the rejection.
func check(quotas []corev1.ResourceQuota, a *admission.Attributes, ev evaluator.Evaluator, limited []LimitedResource) ([]corev1.ResourceQuota, error) {
	obj := a.Object
	gr := a.GroupResource()
	var limitedScopes []corev1.ScopedResourceSelectorRequirement
	var limitedNames []corev1.ResourceName
	for _, lr := range limited {
		if lr.APIGroup != gr.Group || lr.Resource != gr.Resource {
			continue
		}
		scopes, err := ev.MatchingScopes(obj, lr.MatchScopes)
		if err != nil {
			return quotas, nil
		}
		limitedScopes = append(limitedScopes, scopes...)
		usage, err := ev.Usage(obj)
		if err != nil {
			return quotas, err
		}
		limitedNames = append(limitedNames, limitedByDefault(usage, lr.MatchContains)...)
	}

	var interesting []int
	restricted := map[corev1.ResourceName]bool{}
	var restrictedScopes []corev1.ScopedResourceSelectorRequirement
	for i := range quotas {
		q := &quotas[i]
		local, err := ev.MatchingScopes(obj, evaluator.ScopeSelectors(q))
		if err != nil {
			return nil, admission.Forbidden(a, fmt.Errorf("error matching scopes of quota %s, err: %v", q.Name, err))
		}
		restrictedScopes = append(restrictedScopes, local...)
		match, err := ev.Matches(q, obj)
		if err != nil {
			return quotas, err
		}
		if !match {
			continue
		}
		names := ev.MatchingResources(evaluator.Names(q.Status.Hard))
		if err := ev.Constraints(names, obj); err != nil {
			return nil, admission.Forbidden(a, fmt.Errorf("failed quota: %s: %v", q.Name, err))
		}
		if !hasUsageStats(q, names) {
			return nil, admission.Forbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, evaluator.FormatNames(names)))
		}
		interesting = append(interesting, i)
		for _, n := range names {
			restricted[n] = true
		}
	}

	delta, err := ev.Usage(obj)
	if err != nil {
		return quotas, err
	}
	if negative := evaluator.Negative(delta); len(negative) > 0 {
		return nil, admission.Forbidden(a, fmt.Errorf("quota usage is negative for resource(s): %s", evaluator.FormatNames(negative)))
	}
	if a.Operation == admission.Update {
		if isNil(a.OldObject) {
			return nil, admission.Forbidden(a, fmt.Errorf("unable to get previous usage since prior version of object was not found"))
		}
		// Charge the growth only, unless this is a create through an update (no stored version).
		if m := admission.Accessor(a.OldObject); m != nil && m.GetResourceVersion() != "" {
			prev, err := ev.Usage(a.OldObject)
			if err != nil {
				return quotas, err
			}
			delta = evaluator.SubtractNonNegative(delta, prev)
		}
	}
	delta = evaluator.RemoveZeros(delta)
	if len(delta) == 0 {
		return quotas, nil
	}

	var uncovered []string
	for _, n := range limitedNames {
		if !restricted[n] {
			uncovered = append(uncovered, string(n))
		}
	}
	if len(uncovered) > 0 {
		sort.Strings(uncovered)
		return quotas, admission.Forbidden(a, fmt.Errorf("insufficient quota to consume: %v", strings.Join(dedupe(uncovered), ",")))
	}
	if scopes := ev.UncoveredScopes(limitedScopes, restrictedScopes); len(scopes) > 0 {
		// A plain error upstream, which its chain answers as a 500.
		return quotas, apierrors.NewInternalError(fmt.Errorf("insufficient quota to match these scopes: %v", scopes))
	}
	if len(interesting) == 0 {
		return quotas, nil
	}

	out := make([]corev1.ResourceQuota, len(quotas))
	for i := range quotas {
		out[i] = *quotas[i].DeepCopy()
	}
	for _, i := range interesting {
		q := &out[i]
		requested := evaluator.Mask(delta, evaluator.Names(q.Status.Hard))
		used := evaluator.Add(q.Status.Used, requested)
		if ok, exceeded := evaluator.LessThanOrEqual(evaluator.Mask(used, evaluator.Names(requested)), q.Status.Hard); !ok {
			return nil, admission.Forbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s", q.Name,
				evaluator.Format(evaluator.Mask(requested, exceeded)),
				evaluator.Format(evaluator.Mask(q.Status.Used, exceeded)),
				evaluator.Format(evaluator.Mask(q.Status.Hard, exceeded))))
		}
		q.Status.Used = used
	}
	return out, nil
}

// hasUsageStats tells whether the quota's status has a usage for every constrained resource it
// limits (the controller has measured it).
func hasUsageStats(q *corev1.ResourceQuota, names []corev1.ResourceName) bool {
	for _, n := range names {
		if _, limited := q.Status.Hard[n]; !limited {
			continue
		}
		if _, ok := q.Status.Used[n]; !ok {
			return false
		}
	}
	return true
}

// limitedByDefault returns the consumed names of usage that contain one of matchContains.
func limitedByDefault(usage corev1.ResourceList, matchContains []string) []corev1.ResourceName {
	var out []corev1.ResourceName
	for n, q := range usage {
		if q.Sign() != 1 {
			continue
		}
		for _, m := range matchContains {
			if strings.Contains(string(n), m) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

func dedupe(sorted []string) []string {
	out := sorted[:0:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// namespaceLocks serialises the charges of each namespace within this process.
type namespaceLocks struct {
	mu sync.Mutex
	m  map[string]*namespaceLock
}

type namespaceLock struct {
	ch   chan struct{}
	refs int
}

// lock takes the namespace's lock, or gives up when ctx ends; the returned function releases it.
func (l *namespaceLocks) lock(ctx context.Context, ns string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*namespaceLock{}
	}
	e := l.m[ns]
	if e == nil {
		e = &namespaceLock{ch: make(chan struct{}, 1)}
		l.m[ns] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, ns)
		}
		l.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// changes is a broadcast: channel returns the current channel, signal closes it (waking every
// waiter) and starts a new one.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) channel() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
	}
	c.ch = make(chan struct{})
}

// settle are the delays after an admitted write at which its effect is looked for: the write is
// stored a few milliseconds after admission and reaches the listers a few after that.
var settle = []time.Duration{20 * time.Millisecond, 200 * time.Millisecond, time.Second}

// soon signals after each of settle.
func (c *changes) soon() {
	for _, d := range settle {
		time.AfterFunc(d, c.signal)
	}
}
