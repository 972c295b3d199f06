// Package policy is the ValidatingAdmissionPolicy plugin: it enforces the stored
// ValidatingAdmissionPolicies through their ValidatingAdmissionPolicyBindings with upstream's
// own library (k8s.io/apiserver, release 1.33): its CEL compilers and environment, its matcher
// (matchConstraints and binding matchResources: resourceRules, excludeResourceRules,
// namespaceSelector, objectSelector, matchPolicy), matchConditions, variables, validations with
// message, messageExpression and reason, auditAnnotations, params (paramKind, paramRef name,
// namespace, selector, parameterNotFoundAction), validationActions Deny, Warn and Audit,
// failurePolicy, and its errors.
//
// What is the service's own is the glue: the policies, bindings and params come from the
// service's storage watches instead of informers (source), the request is upstream's
// admission.Attributes over the service's (adapters), rules written with upstream's group names
// match the resources served under Platform's, the plugin declares the bound policies' rules as
// its interest (so writes no policy matches skip the admission hop), and upstream's
// validation-failure audit annotation is spelled with Platform's group suffix.
package policy

import (
	"bytes"
	"context"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/warning"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// PollInterval is how often the plugin looks for changed policies and bindings to signal a
// changed interest (the listers are kept current by watches).
const PollInterval = 200 * time.Millisecond

// Register adds the ValidatingAdmissionPolicy plugin.
func Register(r *admission.Registry) {
	r.Register(admission.ValidatingAdmissionPolicy, func(deps admission.Deps, config []byte) (admission.Plugin, error) {
		return New(deps, config), nil
	})
}

// Plugin is the ValidatingAdmissionPolicy plugin.
type Plugin struct {
	source     *source
	dispatcher generic.Dispatcher[validating.PolicyHook]
	interest   *interestWatch
}

var (
	_ admission.Validator       = (*Plugin)(nil)
	_ admission.Interested      = (*Plugin)(nil)
	_ admission.DynamicInterest = (*Plugin)(nil)
)

// New builds the plugin. It takes no configuration (as upstream's).
func New(deps admission.Deps, config []byte) *Plugin {
	if c := bytes.TrimSpace(config); len(c) > 0 && string(c) != "null" && string(c) != "{}" {
		deps.Log.Warn("admission plugin takes no configuration; ignoring it", "plugin", admission.ValidatingAdmissionPolicy)
	}
	matcher := matching.NewMatcher(namespaceLister{deps.Objects.Namespaces()}, namespaceClient{store: deps.Store})
	src := newSource(deps)
	p := &Plugin{
		source:     src,
		dispatcher: validating.NewDispatcher(authz{deps.Authorizer}, generic.NewPolicyMatcher(matcher)),
		interest:   newInterestWatch(src),
	}
	runtime.AddCleanup(p, func(stop chan struct{}) { close(stop) }, p.interest.stop)
	return p
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return admission.ValidatingAdmissionPolicy }

// exemptResources are never subject to policies, as upstream's plugin excludes them (a broken
// policy cannot lock out the objects that would fix it).
var exemptResources = map[string]bool{
	"validatingadmissionpolicies":       true,
	"validatingadmissionpolicybindings": true,
	"mutatingadmissionpolicies":         true,
	"mutatingadmissionpolicybindings":   true,
}

var admissionRegistrationGroup = naming.Group(admissionregistrationv1.GroupName)

// Validate evaluates the bound policies that match the request.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.Group == admissionRegistrationGroup && exemptResources[a.Resource.Resource] {
		return nil
	}
	set := p.source.get()
	if len(set.hooks) == 0 {
		return nil
	}
	ctx = warning.WithWarningRecorder(ctx, warnings{a})
	return p.dispatcher.Dispatch(ctx, newAttributes(a), objectInterfaces{}, set.hooks)
}

// interestWatch derives the plugin's interest from the bound policies and signals changes.
type interestWatch struct {
	src *source

	mu      sync.Mutex
	gen     uint64
	cached  []admission.Interest
	key     string
	changed chan struct{}

	once sync.Once
	stop chan struct{}
}

func newInterestWatch(src *source) *interestWatch {
	return &interestWatch{src: src, changed: make(chan struct{}), stop: make(chan struct{})}
}

// current returns the interest of the policies as they are now, and its key.
func (w *interestWatch) current() ([]admission.Interest, string) {
	set := w.src.get()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cached != nil && w.gen == set.generation {
		return w.cached, w.key
	}
	interests, key := interestsOf(set)
	w.gen, w.cached = set.generation, interests
	if w.key == "" {
		w.key = key
	}
	return interests, key
}

func (w *interestWatch) poll() {
	_, key := w.current()
	w.mu.Lock()
	defer w.mu.Unlock()
	if key != w.key {
		w.key = key
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

func (w *interestWatch) run() {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.poll()
		}
	}
}

// interestsOf translates the bound policies' resource rules into interests (operations,
// Platform's groups, resources, scope), without duplicates, in a stable order. A bound policy
// without resource rules is interested in every write.
func interestsOf(set *hookSet) ([]admission.Interest, string) {
	if set.all {
		all := admission.Interest{Operations: []admission.Operation{"*"}, APIGroups: []string{"*"}, Resources: []string{"*/*"}}
		return []admission.Interest{all}, "v1;*"
	}
	seen := map[string]admission.Interest{}
	for _, r := range set.rules {
		in := admission.Interest{APIGroups: r.APIGroups, Resources: r.Resources}
		for _, op := range r.Operations {
			in.Operations = append(in.Operations, admission.Operation(op))
		}
		if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
			in.Scope = string(*r.Scope)
		}
		if len(in.Operations) == 0 || len(in.APIGroups) == 0 || len(in.Resources) == 0 {
			continue // matches nothing
		}
		seen[interestKey(in)] = in
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]admission.Interest, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out, "v1;" + strings.Join(keys, "\n")
}

func interestKey(in admission.Interest) string {
	ops := make([]string, len(in.Operations))
	for i, o := range in.Operations {
		ops[i] = string(o)
	}
	return strings.Join(ops, ",") + "|" + strings.Join(in.APIGroups, ",") + "|" + strings.Join(in.Resources, ",") + "|" + in.Scope
}

// Interests is the union of the bound policies' resource rules.
func (p *Plugin) Interests() []admission.Interest {
	in, _ := p.interest.current()
	return append([]admission.Interest(nil), in...)
}

// Namespaces is empty: policies declare their interest by rules.
func (p *Plugin) Namespaces() []string { return nil }

// OwnerReferences is false: policies declare their interest by rules.
func (p *Plugin) OwnerReferences() bool { return false }

// Changed is closed when the bound policies' interest changes (checked every PollInterval);
// call it again for the next change.
func (p *Plugin) Changed() <-chan struct{} {
	w := p.interest
	w.once.Do(func() {
		w.current()
		go w.run()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}
