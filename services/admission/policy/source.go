package policy

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// retryInterval is how often a set with configuration errors that may go away by themselves (a
// param kind not served yet) is rebuilt, as upstream's policy source retries its refresh.
const retryInterval = time.Second

// hookSet is what the plugin dispatches: the bound policies in name order, each with its
// bindings in name order, and the rules of those policies (the plugin's interest).
type hookSet struct {
	hooks []validating.PolicyHook
	// rules are the resource rules of the bound policies, groups in Platform's names; all is
	// true when some bound policy matches every request (no resource rules).
	rules []admissionregistrationv1.NamedRuleWithOperations
	all   bool
	// generation changes whenever the set is rebuilt.
	generation uint64
	// retry asks for a rebuild after retryInterval: a param kind did not resolve.
	retry bool
	built time.Time
}

// version identifies a stored object for the cache (the listers return the same object until
// it changes).
type version struct{ name, rv string }

// compiledPolicy is a policy's evaluator and its copy with Platform's group names, kept until
// the policy changes.
type compiledPolicy struct {
	rv        string
	policy    *admissionregistrationv1.ValidatingAdmissionPolicy
	evaluator validating.Validator
}

// paramWatch is the watch of one param kind's objects.
type paramWatch struct {
	mapping admission.Mapping
	params  params
	release func()
}

// source builds the hooks from the stored policies and bindings, compiling each policy once
// per resourceVersion and watching the param kinds in use (upstream's policy source, over the
// service's listers).
type source struct {
	policies  admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicy]
	bindings  admission.Lister[*admissionregistrationv1.ValidatingAdmissionPolicyBinding]
	resources admission.Resources
	log       *slog.Logger

	mu       sync.Mutex
	policyVs []version
	bindVs   []version
	current  *hookSet
	compiled map[string]compiledPolicy
	watches  map[schema.GroupVersionKind]*paramWatch
}

func newSource(deps admission.Deps) *source {
	return &source{policies: deps.Objects.ValidatingAdmissionPolicies(), bindings: deps.Objects.ValidatingAdmissionPolicyBindings(),
		resources: deps.Resources, log: deps.Log, current: &hookSet{},
		compiled: map[string]compiledPolicy{}, watches: map[schema.GroupVersionKind]*paramWatch{}}
}

func versionsOf[T interface {
	GetName() string
	GetResourceVersion() string
}](items []T) []version {
	out := make([]version, 0, len(items))
	for _, it := range items {
		out = append(out, version{it.GetName(), it.GetResourceVersion()})
	}
	slices.SortFunc(out, func(a, b version) int { return strings.Compare(a.name, b.name) })
	return out
}

// get returns the current set, rebuilt when a policy or binding changed. The objects are
// listed under the lock, so a set built from older lists never replaces a newer one.
func (s *source) get() *hookSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	policies := s.policies.List("")
	bindings := s.bindings.List("")
	pv, bv := versionsOf(policies), versionsOf(bindings)
	if slices.Equal(pv, s.policyVs) && slices.Equal(bv, s.bindVs) && !(s.current.retry && time.Since(s.current.built) >= retryInterval) {
		return s.current
	}
	s.policyVs, s.bindVs = pv, bv
	s.current = s.build(policies, bindings, s.current.generation+1)
	return s.current
}

func (s *source) build(policies []*admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, gen uint64) *hookSet {
	set := &hookSet{generation: gen, built: time.Now()}
	byPolicy := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, b := range bindings {
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], platformBinding(b))
	}
	policies = slices.Clone(policies)
	slices.SortFunc(policies, func(a, b *admissionregistrationv1.ValidatingAdmissionPolicy) int {
		return strings.Compare(a.Name, b.Name)
	})
	usedParams := map[schema.GroupVersionKind]bool{}
	compiled := map[string]compiledPolicy{}
	for _, p := range policies {
		bound := byPolicy[p.Name]
		if len(bound) == 0 {
			continue
		}
		slices.SortFunc(bound, func(a, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) int {
			return strings.Compare(a.Name, b.Name)
		})
		c, ok := s.compiled[p.Name]
		if !ok || c.rv != p.ResourceVersion {
			c = compiledPolicy{rv: p.ResourceVersion, policy: platformPolicy(p), evaluator: compile(p)}
		}
		compiled[p.Name] = c
		hook := validating.PolicyHook{Policy: c.policy, Bindings: bound, Evaluator: c.evaluator}
		if pk := p.Spec.ParamKind; pk != nil {
			gv, err := schema.ParseGroupVersion(pk.APIVersion)
			if err != nil {
				// As upstream: a policy whose paramKind cannot be parsed is left out.
				s.log.Warn("ValidatingAdmissionPolicy left out: its paramKind apiVersion does not parse", "policy", p.Name, "err", err)
				continue
			}
			written := gv.WithKind(pk.Kind)
			gvk := schema.GroupVersionKind{Group: naming.Group(gv.Group), Version: gv.Version, Kind: pk.Kind}
			w, err := s.watch(gvk)
			if err != nil {
				hook.ConfigurationError = fmt.Errorf("failed to find resource referenced by paramKind: '%v'", written)
				set.retry = true
			} else {
				usedParams[gvk] = true
				hook.ParamInformer = w.params
				hook.ParamScope = meta.RESTScopeRoot
				if w.mapping.Namespaced {
					hook.ParamScope = meta.RESTScopeNamespace
				}
			}
		}
		set.hooks = append(set.hooks, hook)
		if mc := c.policy.Spec.MatchConstraints; mc == nil || len(mc.ResourceRules) == 0 {
			set.all = true
		} else {
			set.rules = append(set.rules, mc.ResourceRules...)
		}
	}
	s.compiled = compiled
	for gvk, w := range s.watches {
		if !usedParams[gvk] {
			w.release()
			delete(s.watches, gvk)
		}
	}
	return set
}

// watch returns the watch of a param kind, starting it on first use.
func (s *source) watch(gvk schema.GroupVersionKind) (*paramWatch, error) {
	if w, ok := s.watches[gvk]; ok {
		return w, nil
	}
	m, err := s.resources.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	c, release := s.resources.Watch(m)
	w := &paramWatch{mapping: m, params: params{c: c, group: m.Resource.GroupResource()}, release: release}
	s.watches[gvk] = w
	return w, nil
}

// platformPolicy is a copy of p whose rules name Platform's groups (rules written with
// upstream's group names match the resources served under Platform's).
func platformPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
	out := p.DeepCopy()
	platformRules(out.Spec.MatchConstraints)
	return out
}

func platformBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	if b.Spec.MatchResources == nil {
		return b
	}
	out := b.DeepCopy()
	platformRules(out.Spec.MatchResources)
	return out
}

func platformRules(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			for j, g := range rules[i].APIGroups {
				if g != "*" {
					rules[i].APIGroups[j] = naming.Group(g)
				}
			}
		}
	}
}
