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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/warning"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

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
	interest   *admission.InterestWatch[*hookSet]
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
		interest:   admission.NewInterestWatch(src.get, func(s *hookSet) uint64 { return s.generation }, interestsOf),
	}
	admission.StopWhenUnreachable(p.interest, p)
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

// interestsOf translates the bound policies' resource rules into interests (operations,
// Platform's groups, resources, scope), without duplicates, in a stable order. A bound policy
// without resource rules is interested in every write.
func interestsOf(set *hookSet) ([]admission.Interest, string) {
	if set.all {
		all := admission.Interest{Operations: []admission.Operation{"*"}, APIGroups: []string{"*"}, Resources: []string{"*/*"}}
		return []admission.Interest{all}, "v1;*"
	}
	seen := admission.InterestSet{}
	for _, r := range set.rules {
		in := admission.Interest{APIGroups: r.APIGroups, Resources: r.Resources}
		for _, op := range r.Operations {
			in.Operations = append(in.Operations, admission.Operation(op))
		}
		if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
			in.Scope = string(*r.Scope)
		}
		seen.Add(in)
	}
	return seen.Sorted()
}

// Interests is the union of the bound policies' resource rules.
func (p *Plugin) Interests() []admission.Interest { return p.interest.Interests() }

// Namespaces is empty: policies declare their interest by rules.
func (p *Plugin) Namespaces() []string { return nil }

// OwnerReferences is false: policies declare their interest by rules.
func (p *Plugin) OwnerReferences() bool { return false }

// Changed is closed when the bound policies' interest changes (checked every
// admission.InterestPollInterval); call it again for the next change.
func (p *Plugin) Changed() <-chan struct{} { return p.interest.Changed() }
