// Package admissionregistration holds the rules of webhook configurations: upstream's validation
// (libs/admissionregistration/validation, which the admission service shares).
package admissionregistration

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	webhookvalidation "platform.io/libs/admissionregistration/validation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy is the strategy of mutating and validating webhook configurations.
type Strategy struct{ *builtin.Strategy }

// New returns the strategy of a webhook configuration kind over its default one.
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
	}
	return nil
}
