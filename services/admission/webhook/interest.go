package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// PollInterval is how often the plugins look for changed configurations to signal a changed
// interest.
const PollInterval = admission.InterestPollInterval

// newInterestWatch watches the interest of the configurations hooks holds.
func newInterestWatch(hooks *hookCache) *admission.InterestWatch[*hookSet] {
	return admission.NewInterestWatch(hooks.get, func(s *hookSet) uint64 { return s.generation }, interestsOf)
}

// interestsOf translates every rule of every webhook into an interest (operations, Platform's
// group names, resources, scope), without duplicates, in a stable order.
func interestsOf(set *hookSet) ([]admission.Interest, string) {
	seen := admission.InterestSet{}
	for _, h := range set.hooks {
		for _, r := range h.rules {
			in := admission.Interest{Resources: append([]string(nil), r.Resources...)}
			for _, op := range r.Operations {
				in.Operations = append(in.Operations, admission.Operation(op))
			}
			for _, g := range r.APIGroups {
				if g != "*" {
					g = naming.Group(g)
				}
				in.APIGroups = append(in.APIGroups, g)
			}
			if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
				in.Scope = string(*r.Scope)
			}
			seen.Add(in)
		}
	}
	return seen.Sorted()
}

// Interests is the union of the rules of every configured webhook.
func (d *dispatcher) Interests() []admission.Interest { return d.interest.Interests() }

// Namespaces is empty: webhooks declare their interest by rules.
func (d *dispatcher) Namespaces() []string { return nil }

// OwnerReferences is false: webhooks declare their interest by rules.
func (d *dispatcher) OwnerReferences() bool { return false }

// Changed is closed when the configurations' interest changes (checked every PollInterval); call
// it again for the next change.
func (d *dispatcher) Changed() <-chan struct{} { return d.interest.Changed() }
