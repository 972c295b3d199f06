package webhook

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/libs/admissionregistration/matchconditions"
)

// DefaultTimeout is a webhook's timeout when timeoutSeconds is not set.
const DefaultTimeout = 10 * time.Second

// hook is one webhook of a configuration, mutating or validating, with its selectors parsed and
// its matchConditions compiled.
type hook struct {
	// uid identifies the webhook across rounds: configuration, webhook name and position.
	uid           string
	configuration string
	name          string
	rules         []admissionregistrationv1.RuleWithOperations
	ignoreFailure bool
	exact         bool // matchPolicy Exact
	nsSelector    labels.Selector
	objSelector   labels.Selector
	selectorErr   error
	sideEffects   *admissionregistrationv1.SideEffectClass
	timeout       time.Duration
	reviewVersion string // "" when none of admissionReviewVersions is supported
	clientConfig  admissionregistrationv1.WebhookClientConfig
	reinvoke      bool // reinvocationPolicy IfNeeded (mutating only)
	conditions    *matchconditions.Matcher
}

func newHook(configuration string, idx int, name string, rules []admissionregistrationv1.RuleWithOperations,
	failure *admissionregistrationv1.FailurePolicyType, match *admissionregistrationv1.MatchPolicyType,
	nsSel, objSel *metav1.LabelSelector, side *admissionregistrationv1.SideEffectClass, timeout *int32,
	versions []string, cc admissionregistrationv1.WebhookClientConfig, conds []admissionregistrationv1.MatchCondition) *hook {
	h := &hook{
		uid:           configuration + "/" + name + "/" + strconv.Itoa(idx),
		configuration: configuration,
		name:          name,
		rules:         rules,
		ignoreFailure: failure != nil && *failure == admissionregistrationv1.Ignore,
		exact:         match != nil && *match == admissionregistrationv1.Exact,
		sideEffects:   side,
		timeout:       DefaultTimeout,
		clientConfig:  cc,
		conditions:    matchconditions.NewMatcher(conds),
	}
	if timeout != nil && *timeout > 0 {
		h.timeout = time.Duration(*timeout) * time.Second
	}
	h.reviewVersion, _ = reviewVersion(versions)
	var err error
	if h.nsSelector, err = parseSelector(nsSel); err != nil {
		h.selectorErr = err
	}
	if h.objSelector, err = parseSelector(objSel); err != nil {
		h.selectorErr = err
	}
	return h
}

func parseSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// source lists one kind of configuration and turns one into hooks.
type source struct {
	list  func() []configuration
	build func(obj any) []*hook
}

// configuration is a stored configuration's identity for the cache: its name, the object (the
// listers return the same pointer until it is updated), resourceVersion and generation.
type configuration struct {
	name string
	obj  any
	rv   string
	gen  int64
}

func mutatingSource(l interface {
	List(string) []*admissionregistrationv1.MutatingWebhookConfiguration
}) source {
	return source{
		list: func() []configuration {
			items := l.List("")
			out := make([]configuration, 0, len(items))
			for _, c := range items {
				if c != nil {
					out = append(out, configuration{name: c.Name, obj: c, rv: c.ResourceVersion, gen: c.Generation})
				}
			}
			return out
		},
		build: func(obj any) []*hook {
			c := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
			hs := make([]*hook, 0, len(c.Webhooks))
			for i := range c.Webhooks {
				w := &c.Webhooks[i]
				h := newHook(c.Name, i, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
					w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.ClientConfig, w.MatchConditions)
				h.reinvoke = w.ReinvocationPolicy != nil && *w.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
				hs = append(hs, h)
			}
			return hs
		},
	}
}

func validatingSource(l interface {
	List(string) []*admissionregistrationv1.ValidatingWebhookConfiguration
}) source {
	return source{
		list: func() []configuration {
			items := l.List("")
			out := make([]configuration, 0, len(items))
			for _, c := range items {
				if c != nil {
					out = append(out, configuration{name: c.Name, obj: c, rv: c.ResourceVersion, gen: c.Generation})
				}
			}
			return out
		},
		build: func(obj any) []*hook {
			c := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			hs := make([]*hook, 0, len(c.Webhooks))
			for i := range c.Webhooks {
				w := &c.Webhooks[i]
				hs = append(hs, newHook(c.Name, i, w.Name, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
					w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.ClientConfig, w.MatchConditions))
			}
			return hs
		},
	}
}

// hookSet is the webhooks to consult, in order: configurations sorted by name, each one's
// webhooks in their order (as upstream).
type hookSet struct {
	hooks []*hook
	// generation changes whenever the set is rebuilt.
	generation uint64
}

// hookCache keeps compiled hooks per configuration, so a request compiles nothing unless a
// configuration changed (the listers return the same object until it is updated).
type hookCache struct {
	src source

	mu      sync.Mutex
	byName  map[string]cachedConfig
	current *hookSet
	keys    []configuration
}

type cachedConfig struct {
	configuration
	hooks []*hook
}

func newHookCache(src source) *hookCache {
	return &hookCache{src: src, byName: map[string]cachedConfig{}, current: &hookSet{}}
}

// get returns the current set, rebuilding what changed. The configurations are listed under the
// lock: a caller that listed before a change and stored its set after a caller that listed after
// it would put back a set without the change, with a newer generation (the interest derived from
// it would skip writes the changed configuration wants to see).
func (c *hookCache) get() *hookSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	configs := c.src.list()
	slices.SortFunc(configs, func(x, y configuration) int { return strings.Compare(x.name, y.name) })
	if len(configs) == len(c.keys) {
		same := true
		for i := range configs {
			if configs[i] != c.keys[i] {
				same = false
				break
			}
		}
		if same {
			return c.current
		}
	}
	next := &hookSet{generation: c.current.generation + 1}
	byName := make(map[string]cachedConfig, len(configs))
	for _, cfg := range configs {
		cached, ok := c.byName[cfg.name]
		if !ok || cached.configuration != cfg {
			cached = cachedConfig{configuration: cfg, hooks: c.src.build(cfg.obj)}
		}
		byName[cfg.name] = cached
		next.hooks = append(next.hooks, cached.hooks...)
	}
	keys := configs
	c.byName, c.keys, c.current = byName, keys, next
	return next
}
