// Package admissionregistration holds the rules of webhook configurations and admission
// policies: upstream's validation (libs/admissionregistration/validation, which the admission
// service shares), and the type checking of ValidatingAdmissionPolicies written to their status.
package admissionregistration

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	webhookvalidation "platform.io/libs/admissionregistration/validation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy is the strategy of mutating and validating webhook configurations, validating
// admission policies and their bindings.
type Strategy struct{ *builtin.Strategy }

// New returns the strategy of a webhook configuration kind or a policy binding over its default
// one.
func New(b *builtin.Strategy) registry.Strategy { return &Strategy{Strategy: b} }

// Validate applies upstream's rules (old is nil on create).
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.MutatingWebhookConfiguration)
		return webhookvalidation.ValidateMutatingWebhookConfiguration(o, prev)
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		prev, _ := old.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		return webhookvalidation.ValidateValidatingWebhookConfiguration(o, prev)
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		prev, _ := old.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		return webhookvalidation.ValidateValidatingAdmissionPolicy(o, prev)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return webhookvalidation.ValidateValidatingAdmissionPolicyBinding(o)
	}
	return nil
}

// PolicyStrategy is the strategy of ValidatingAdmissionPolicies: it validates them and, where
// upstream's controller manager runs a status controller, type-checks their expressions on
// every write that changes the spec (a new generation), setting status.observedGeneration and
// status.typeChecking with the write itself.
type PolicyStrategy struct {
	*Strategy
	types *typeChecker
	log   func(msg string, args ...any)
}

// NewPolicy returns the strategy of ValidatingAdmissionPolicy over its default one; the kinds
// and schemas its expressions are checked against come from reg.
func NewPolicy(b *builtin.Strategy, reg *registry.Registry, warn func(msg string, args ...any)) registry.Strategy {
	return &PolicyStrategy{Strategy: &Strategy{Strategy: b}, types: newTypeChecker(reg), log: warn}
}

// PrepareForCreate clears what the client sent as status, then writes the type checking of
// generation 1.
func (s *PolicyStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
		s.typeCheck(p)
	}
}

// PrepareForUpdate keeps the stored status through the main resource, and type-checks again
// when the spec changed (the generation moved past status.observedGeneration).
func (s *PolicyStrategy) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	out, err := s.Strategy.PrepareForUpdate(subresource, obj, cur)
	if err != nil || subresource != "" {
		return out, err
	}
	if p, ok := out.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && p.Generation > p.Status.ObservedGeneration {
		s.typeCheck(p)
	}
	return out, nil
}

func (s *PolicyStrategy) typeCheck(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	warnings, err := s.types.check(p)
	if err != nil {
		// Not a reason to refuse the policy: it is enforced all the same (upstream's controller
		// would retry; the next spec change does here).
		s.log("type checking a ValidatingAdmissionPolicy", "policy", p.Name, "err", err)
		return
	}
	p.Status.ObservedGeneration = p.Generation
	p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: warnings}
}
