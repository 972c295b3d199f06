package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"weak"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/services/admission/admission"
)

// Mutating is the MutatingAdmissionWebhook plugin: it calls the matching mutating webhooks one
// after another, applying each one's JSON patch before calling the next, and asks for the
// reinvocation round when a webhook changed the object.
type Mutating struct {
	*dispatcher
	// rounds keeps, between the two rounds of one request's mutating phase, which webhooks ran
	// and what the object looked like after them (upstream's reinvocation context), keyed by the
	// request's attributes and dropped when they are garbage.
	rounds sync.Map // weak.Pointer[admission.Attributes] -> *reinvocation
}

var (
	_ admission.Mutator         = (*Mutating)(nil)
	_ admission.Interested      = (*Mutating)(nil)
	_ admission.DynamicInterest = (*Mutating)(nil)
)

// NewMutating builds the MutatingAdmissionWebhook plugin from its configuration (a
// WebhookAdmissionConfiguration, or nil).
func NewMutating(deps admission.Deps, config []byte) (*Mutating, error) {
	return newMutating(deps, config, nil)
}

func newMutating(deps admission.Deps, config []byte, bs *budgets) (*Mutating, error) {
	d, err := newDispatcher(admission.MutatingAdmissionWebhook, true, deps, config, mutatingSource(deps.Objects.MutatingWebhookConfigurations()), bs)
	if err != nil {
		return nil, err
	}
	m := &Mutating{dispatcher: d}
	admission.StopWhenUnreachable(d.interest, m)
	return m, nil
}

// Name is the plugin's name.
func (m *Mutating) Name() string { return admission.MutatingAdmissionWebhook }

// reinvocation is upstream's webhook reinvocation context for one request.
type reinvocation struct {
	// lastOutput is the object (JSON) after the webhook plugin last ran.
	lastOutput []byte
	// previous are the IfNeeded webhooks called since the last change of the object.
	previous map[string]bool
	// reinvoke are the webhooks to call in the reinvocation round.
	reinvoke map[string]bool
}

// requirePrevious marks the IfNeeded webhooks that ran before a change for reinvocation.
func (r *reinvocation) requirePrevious() {
	if len(r.previous) == 0 {
		return
	}
	if r.reinvoke == nil {
		r.reinvoke = map[string]bool{}
	}
	for uid := range r.previous {
		r.reinvoke[uid] = true
	}
	r.previous = nil
}

func (r *reinvocation) addPrevious(uid string) {
	if r.previous == nil {
		r.previous = map[string]bool{}
	}
	r.previous[uid] = true
}

// Admit runs the mutating webhooks. In the reinvocation round only the IfNeeded webhooks that ran
// before a later change of the object (and did not make it themselves) are called again; if the
// built-in plugins changed the object in that round, every IfNeeded webhook that ran is.
func (m *Mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	if exempt(a) {
		return nil
	}
	set := m.hooks.get()
	if len(set.hooks) == 0 {
		return nil
	}
	key := weak.Make(a)
	rc := &reinvocation{}
	round := 0
	if a.Reinvocation {
		round = 1
		if v, ok := m.rounds.LoadAndDelete(key); ok {
			rc = v.(*reinvocation)
		}
	}
	st := &requestState{a: a, d: m.dispatcher}
	if a.Reinvocation && rc.lastOutput != nil {
		if err := st.encode(); err != nil {
			return err
		}
		if !bytes.Equal(rc.lastOutput, st.objJSON) {
			rc.requirePrevious()
		}
	}
	err := m.admit(ctx, a, set, st, rc, round)
	if round == 0 && err == nil && (len(rc.previous) > 0 || len(rc.reinvoke) > 0) {
		if st.encode() == nil {
			rc.lastOutput = st.objJSON
			m.rounds.Store(key, rc)
			runtime.AddCleanup(a, func(k weak.Pointer[admission.Attributes]) { m.rounds.Delete(k) }, key)
		}
	}
	return err
}

func (m *Mutating) admit(ctx context.Context, a *admission.Attributes, set *hookSet, st *requestState, rc *reinvocation, round int) error {
	for i, h := range set.hooks {
		call, err := m.shouldCall(ctx, h, a, st)
		if err != nil {
			return err
		}
		if !call {
			continue
		}
		// In the reinvocation round a webhook is never called for the first time (one skipped in
		// the first round because its selectors did not match stays skipped).
		if round == 1 && !rc.reinvoke[h.uid] {
			continue
		}
		started := m.now()
		changed, callErr := m.callMutating(ctx, h, i, round, st)
		if changed {
			rc.requirePrevious()
			a.RequestReinvocation()
		}
		if h.reinvoke {
			rc.addPrevious(h.uid)
		}
		err = m.outcome(ctx, h, a.Operation, started, callErr, func() {
			a.AddAnnotation(fmt.Sprintf("%sround_%d_index_%d", mutationFailedOpenAnnotationPrefix, round, i), h.name)
		})
		if err != nil {
			return err
		}
		if callErr != nil && ctx.Err() != nil {
			// The request's own deadline passed: no point in calling further webhooks.
			return timeoutError()
		}
	}
	return nil
}

// mutationAnnotation and patchAnnotation are upstream's audit annotation values.
type mutationAnnotation struct {
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook"`
	Mutated       bool   `json:"mutated"`
}

type patchAnnotation struct {
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook"`
	Patch         any    `json:"patch,omitempty"`
	PatchType     string `json:"patchType,omitempty"`
}

// callMutating calls one webhook and applies its patch; it reports whether the object changed.
func (m *Mutating) callMutating(ctx context.Context, h *hook, idx, round int, st *requestState) (changed bool, err error) {
	a := st.a
	defer func() {
		a.AddAnnotation(fmt.Sprintf("%sround_%d_index_%d", mutationAnnotationPrefix, round, idx),
			annotationValue(mutationAnnotation{Configuration: h.configuration, Webhook: h.name, Mutated: changed}))
	}()
	resp, err := m.call(ctx, h, st)
	if err != nil {
		return false, err
	}
	if len(resp.patch) == 0 {
		return false, nil
	}
	patch, err := jsonpatch.DecodePatch(resp.patch)
	if err != nil {
		return false, &callingError{webhook: h.name, reason: fmt.Errorf("received undecodable patch in webhook response: %w", err),
			status: apierrors.NewServiceUnavailable("error decoding patch in webhook response")}
	}
	if len(patch) == 0 {
		return false, nil
	}
	if a.Object == nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.name))
	}
	if resp.patchType != string(admissionv1.PatchTypeJSONPatch) {
		return false, &callingError{webhook: h.name, reason: fmt.Errorf("unsupported patch type %q", resp.patchType), status: denial(h.name, resp.result)}
	}
	patched, err := applyPatch(patch, st.objJSON)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q returned a patch that cannot be applied: %v", h.name, err))
	}
	obj, err := decodeObject(a, st.objJSON, patched)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q returned a patch that makes an invalid object: %v", h.name, err))
	}
	changed = !apiequality.Semantic.DeepEqual(a.Object, obj)
	var ops any
	_ = json.Unmarshal(resp.patch, &ops)
	a.AddAnnotation(fmt.Sprintf("%sround_%d_index_%d", patchAnnotationPrefix, round, idx),
		annotationValue(patchAnnotation{Configuration: h.configuration, Webhook: h.name, Patch: ops, PatchType: string(admissionv1.PatchTypeJSONPatch)}))
	a.Object = obj
	encoded, err := admission.Encode(obj, a.Kind)
	if err != nil {
		return changed, apierrors.NewInternalError(fmt.Errorf("admission webhook %q: encoding the patched object: %v", h.name, err))
	}
	st.setObject(encoded)
	return changed, nil
}

// applyPatch applies a webhook's JSON patch. The patch library panics on some patches (a
// replace with a null value, for one); a webhook must not be able to crash the service, so a
// panic is a patch that cannot be applied.
func applyPatch(patch jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("invalid patch: %v", r)
		}
	}()
	return patch.Apply(doc)
}
