package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/service"
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
	admission.StopWhenUnreachable(d.interest, v)
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
			// The goroutine is the dispatcher's, not the gRPC handler's: a panic on it would kill
			// the service, so none may escape. One while calling the webhook (recovered in
			// callOne) is a failure to call it; one after (recording the outcome) fails the request.
			err := service.Recover(ctx, v.deps.Log, func() error { return v.callOne(ctx, h, i, st) }, "webhook", h.name)
			if errors.Is(err, service.ErrPanicked) {
				err = apierrors.NewInternalError(fmt.Errorf("admission webhook %q: %w", h.name, err))
			}
			errs[k] = err
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

// testHookValidatingCall, when set, is called on a validating webhook's goroutine, with the
// webhook's name, just before the webhook is called: tests make it panic to check that the
// panic is that call's failure. It is nil in production; tests set it before building their
// chain and reset it when done (they do not run in parallel).
var testHookValidatingCall func(webhook string)

// callOne calls one validating webhook, on a goroutine of its own, and returns the request's
// outcome of it (dispatcher.outcome). A panic while calling it is logged with the stack and
// becomes a failure to call it (an internal error): the webhook's failurePolicy decides, as
// for any other failure to get its answer.
func (v *Validating) callOne(ctx context.Context, h *hook, i int, st *requestState) error {
	started := v.now()
	var callErr error
	if err := service.Recover(ctx, v.deps.Log, func() error {
		if testHookValidatingCall != nil {
			testHookValidatingCall(h.name)
		}
		_, callErr = v.call(ctx, h, st)
		return nil
	}, "webhook", h.name); err != nil {
		callErr = &callingError{webhook: h.name, reason: err, status: apierrors.NewInternalError(err)}
	}
	return v.outcome(ctx, h, st.a.Operation, started, callErr, func() {
		st.a.AddAnnotation(fmt.Sprintf("%sround_0_index_%d", validatingFailedOpenPrefix, i), h.name)
	})
}
