package webhook

import (
	"context"
	"fmt"
	"sync"

	"platform.io/services/admission/admission"
)

// Validating is the ValidatingAdmissionWebhook plugin: it calls the matching validating webhooks
// in parallel; any rejection rejects the request.
type Validating struct {
	*dispatcher
}

var (
	_ admission.Validator       = (*Validating)(nil)
	_ admission.Interested      = (*Validating)(nil)
	_ admission.DynamicInterest = (*Validating)(nil)
)

// NewValidating builds the ValidatingAdmissionWebhook plugin from its configuration (a
// WebhookAdmissionConfiguration, or nil).
func NewValidating(deps admission.Deps, config []byte) (*Validating, error) {
	return newValidating(deps, config, nil)
}

func newValidating(deps admission.Deps, config []byte, bs *budgets) (*Validating, error) {
	d, err := newDispatcher(admission.ValidatingAdmissionWebhook, false, deps, config, validatingSource(deps.Objects.ValidatingWebhookConfigurations()), bs)
	if err != nil {
		return nil, err
	}
	v := &Validating{dispatcher: d}
	stopWhenUnreachable(d.interest, v)
	return v, nil
}

// Name is the plugin's name.
func (v *Validating) Name() string { return admission.ValidatingAdmissionWebhook }

// Validate calls the matching webhooks in parallel and waits for all; of several rejections,
// the one of the first webhook in order is returned.
func (v *Validating) Validate(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	set := v.hooks.get()
	if len(set.hooks) == 0 {
		return nil
	}
	st := &requestState{a: a, d: v.dispatcher}
	var relevant []int
	for i, h := range set.hooks {
		call, err := v.shouldCall(ctx, h, a, st)
		if err != nil {
			return err
		}
		if call {
			relevant = append(relevant, i)
		}
	}
	if len(relevant) == 0 {
		return nil
	}
	if ctx.Err() != nil {
		return timeoutError()
	}
	// Encode once and fix the budget before the calls share the state.
	if err := st.encode(); err != nil {
		return err
	}
	st.timeBudget()
	errs := make([]error, len(relevant))
	var wg sync.WaitGroup
	for k, i := range relevant {
		wg.Add(1)
		go func(k, i int) {
			defer wg.Done()
			h := set.hooks[i]
			started := v.now()
			_, callErr := v.call(ctx, h, st)
			errs[k] = v.outcome(ctx, h, a.Operation, started, callErr, func() {
				a.AddAnnotation(fmt.Sprintf("%sround_0_index_%d", validatingFailedOpenPrefix, i), h.name)
			})
		}(k, i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
