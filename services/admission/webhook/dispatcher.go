package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"

	"platform.io/libs/admissionregistration/matchconditions"
	"platform.io/libs/naming"
	"platform.io/libs/serviceaccount"
	"platform.io/services/admission/admission"
)

// Audit annotation prefixes (upstream's, with Platform's group suffix).
var (
	mutationAnnotationPrefix           = "mutation.webhook.admission." + naming.GroupSuffix + "/"
	patchAnnotationPrefix              = "patch.webhook.admission." + naming.GroupSuffix + "/"
	mutationFailedOpenAnnotationPrefix = "failed-open." + mutationAnnotationPrefix
	validatingFailedOpenPrefix         = "failed-open.validating.webhook.admission." + naming.GroupSuffix + "/"
)

// dispatcher is what the mutating and validating plugins share: the configurations, the
// clients, the time budgets and the matching.
type dispatcher struct {
	plugin   string
	typ      string // metric type: admit or validating
	mutating bool
	deps     admission.Deps
	hooks    *hookCache
	clients  *clients
	budgets  *budgets
	warnings warningAdder
	interest *admission.InterestWatch[*hookSet]
}

func newDispatcher(plugin string, mutating bool, deps admission.Deps, config []byte, src source, bs *budgets) (*dispatcher, error) {
	kubeconfig, deprecated, err := parseConfig(config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", plugin, err)
	}
	if deprecated {
		deps.Log.Warn("webhook admission configuration uses a deprecated version", "plugin", plugin, "use", configGroupVersion)
	}
	creds, err := loadCredentials(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", plugin, err)
	}
	if bs == nil {
		bs = newBudgets()
	}
	d := &dispatcher{plugin: plugin, typ: typeValidating, mutating: mutating, deps: deps, hooks: newHookCache(src),
		clients: newClients(deps.Objects, creds, deps.Log), budgets: bs}
	if mutating {
		d.typ = typeAdmit
	}
	d.interest = newInterestWatch(d.hooks)
	return d, nil
}

// now is the wall clock: deadlines and latencies are about real network calls, so the
// dependencies' clock (which tests may fake) is not used.
func (d *dispatcher) now() time.Time { return time.Now() }

// requestState is one phase's view of a request: the objects' JSON (encoded once, and again
// after each patch), the matchConditions' input, and the request's time budget.
type requestState struct {
	a       *admission.Attributes
	d       *dispatcher
	objJSON []byte
	oldJSON []byte
	encoded bool
	cel     *matchconditions.Input
	budget  *budget
}

func (st *requestState) encode() error {
	if st.encoded {
		return nil
	}
	var err error
	if st.objJSON, err = admission.Encode(st.a.Object, st.a.Kind); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("encoding the object: %w", err))
	}
	if st.oldJSON, err = admission.Encode(st.a.OldObject, st.a.Kind); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("encoding the old object: %w", err))
	}
	st.encoded = true
	return nil
}

// setObject records the object a patch produced.
func (st *requestState) setObject(data []byte) {
	st.objJSON = data
	st.cel = nil
}

// celInput is the matchConditions' view of the request (built on first use).
func (st *requestState) celInput() matchconditions.Input {
	if st.cel != nil {
		return *st.cel
	}
	a := st.a
	in := matchconditions.Input{Request: celRequest(a), Authorize: st.d.authorize(a),
		RequestResource: matchconditions.RequestResource{Group: a.Resource.Group, Resource: a.Resource.Resource, Subresource: a.Subresource,
			Namespace: a.Namespace, Name: a.Name}}
	if err := st.encode(); err == nil {
		in.Object = jsonValue(st.objJSON)
		in.OldObject = jsonValue(st.oldJSON)
	}
	st.cel = &in
	return in
}

func (st *requestState) timeBudget() *budget {
	if st.budget == nil {
		st.budget = st.d.budgets.forRequest(st.a.UID, st.d.now())
	}
	return st.budget
}

func jsonValue(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	var v any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v); err != nil {
		return nil
	}
	return v
}

// authorize answers matchConditions' authorization checks through the authorization service, for
// the request's user (or the service account a condition names). Groups written with upstream's
// names are asked under Platform's.
func (d *dispatcher) authorize(a *admission.Attributes) matchconditions.Authorize {
	if d.deps.Authorizer == nil {
		return nil
	}
	return func(ctx context.Context, c matchconditions.Check) (bool, string, error) {
		user := a.User
		if c.ServiceAccountName != "" {
			user = &admission.User{Name: serviceaccount.UserName(c.ServiceAccountNamespace, c.ServiceAccountName),
				Groups: serviceaccount.Groups(c.ServiceAccountNamespace)}
		}
		return d.deps.Authorizer.Authorize(ctx, admission.AuthorizationAttributes{User: user, Verb: c.Verb, ResourceRequest: c.ResourceRequest,
			APIGroup: naming.Group(c.Group), APIVersion: "*", Resource: c.Resource, Subresource: c.Subresource, Namespace: c.Namespace, Name: c.Name, Path: c.Path})
	}
}

// celRequest is the request variable of matchConditions: the AdmissionRequest's fields as
// upstream declares them (every field present, so conditions need no has()).
func celRequest(a *admission.Attributes) map[string]any {
	gvk := func(group, version, kind string) map[string]any {
		return map[string]any{"group": group, "version": version, "kind": kind}
	}
	gvr := func(group, version, resource string) map[string]any {
		return map[string]any{"group": group, "version": version, "resource": resource}
	}
	reqKind, reqRes, reqSub := a.RequestKind, a.RequestResource, a.RequestSubresource
	if reqKind.Empty() {
		reqKind = a.Kind
	}
	if reqRes.Empty() {
		reqRes, reqSub = a.Resource, a.Subresource
	}
	user := map[string]any{"username": "", "uid": "", "groups": []any{}, "extra": map[string]any{}}
	if a.User != nil {
		groups := make([]any, 0, len(a.User.Groups))
		for _, g := range a.User.Groups {
			groups = append(groups, g)
		}
		extra := map[string]any{}
		for k, vs := range a.User.Extra {
			l := make([]any, 0, len(vs))
			for _, v := range vs {
				l = append(l, v)
			}
			extra[k] = l
		}
		user = map[string]any{"username": a.User.Name, "uid": a.User.UID, "groups": groups, "extra": extra}
	}
	return map[string]any{
		"kind":               gvk(a.Kind.Group, a.Kind.Version, a.Kind.Kind),
		"resource":           gvr(a.Resource.Group, a.Resource.Version, a.Resource.Resource),
		"subResource":        a.Subresource,
		"requestKind":        gvk(reqKind.Group, reqKind.Version, reqKind.Kind),
		"requestResource":    gvr(reqRes.Group, reqRes.Version, reqRes.Resource),
		"requestSubResource": reqSub,
		"name":               a.Name,
		"namespace":          a.Namespace,
		"operation":          string(a.Operation),
		"userInfo":           user,
		"dryRun":             a.DryRun,
		"options":            jsonValue(a.Options),
	}
}

// call sends the AdmissionReview to one webhook and returns its verified answer; a denial is a
// *rejectionError (with the answer), a failure to get a usable answer a *callingError, and a
// dry run the webhook cannot take a 400.
func (d *dispatcher) call(ctx context.Context, h *hook, st *requestState) (*response, error) {
	a := st.a
	if a.DryRun {
		if h.sideEffects == nil {
			return nil, &callingError{webhook: h.name, reason: errors.New("Webhook SideEffects is nil"), status: apierrors.NewBadRequest("Webhook SideEffects is nil")}
		}
		if *h.sideEffects != admissionregistrationv1.SideEffectClassNone && *h.sideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
		}
	}
	if err := st.encode(); err != nil {
		return nil, err
	}
	uid := types.UID(uuid.NewString())
	if h.reviewVersion == "" {
		return nil, &callingError{webhook: h.name, reason: errors.New("could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"),
			status: apierrors.NewBadRequest("error creating admission objects")}
	}
	body, err := buildReview(h.reviewVersion, a, reviewInput{uid: uid, object: st.objJSON, oldObject: st.oldJSON})
	if err != nil {
		return nil, &callingError{webhook: h.name, reason: fmt.Errorf("could not create admission objects: %w", err), status: apierrors.NewBadRequest("error creating admission objects")}
	}
	client, err := d.clients.get(&h.clientConfig)
	if err != nil {
		return nil, &callingError{webhook: h.name, reason: fmt.Errorf("could not get REST client: %w", err), status: apierrors.NewInternalError(err)}
	}
	b := st.timeBudget()
	now := d.now()
	deadline, byChain := b.deadline(now, h.timeout)
	if !deadline.After(now) {
		return nil, &callingError{webhook: h.name, reason: fmt.Errorf("the time budget of the request's webhook calls (%s) is used up", b.total()),
			status: apierrors.NewServiceUnavailable("error calling webhook")}
	}
	data, err := client.post(ctx, h.name, body, deadline)
	if err != nil {
		var ce *callingError
		if byChain && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && errors.As(err, &ce) {
			ce.reason = fmt.Errorf("%w (the time budget of the request's webhook calls, %s, ran out)", ce.reason, b.total())
		}
		return nil, err
	}
	resp, err := verifyResponse(h.reviewVersion, data, uid, d.mutating)
	if err != nil {
		var de errDecode
		if errors.As(err, &de) {
			return nil, &callingError{webhook: h.name, reason: fmt.Errorf("failed to call webhook: %w", err), status: apierrors.NewServiceUnavailable("error calling webhook")}
		}
		return nil, &callingError{webhook: h.name, reason: fmt.Errorf("received invalid webhook response: %w", err), status: apierrors.NewServiceUnavailable("error validating webhook response")}
	}
	for k, v := range resp.auditAnnotations {
		a.AddAnnotation(h.name+"/"+k, v)
	}
	d.warnings.add(a, resp.warnings)
	if !resp.allowed {
		return resp, &rejectionError{status: denial(h.name, resp.result)}
	}
	return resp, nil
}

// outcome records a call's metrics and turns its error into the request's: nil when the request
// goes on (success, or a failure under failurePolicy Ignore), else the rejection. failedOpen is
// called for a failure that was ignored.
func (d *dispatcher) outcome(ctx context.Context, h *hook, op admission.Operation, started time.Time, err error, failedOpen func()) error {
	elapsed := d.now().Sub(started)
	opLabel := string(op)
	var ce *callingError
	var re *rejectionError
	switch {
	case err == nil:
		observeCall(h.name, d.typ, opLabel, elapsed, false, 200)
		return nil
	case errors.As(err, &ce):
		code := int(ce.status.ErrStatus.Code)
		rejected := !h.ignoreFailure
		if rejected && !errors.Is(ce.reason, context.Canceled) {
			observeRejection(h.name, d.typ, opLabel, errorTypeCallingWebhook, code)
		}
		observeCall(h.name, d.typ, opLabel, elapsed, rejected, code)
		if h.ignoreFailure {
			if !errors.Is(ce.reason, context.Canceled) {
				d.deps.Log.WarnContext(ctx, "failed calling webhook, failing open", "webhook", h.name, "err", ce.Error())
				failOpenCount.WithLabelValues(h.name, d.typ).Inc()
				failedOpen()
			}
			return nil
		}
		d.deps.Log.WarnContext(ctx, "failed calling webhook, failing closed", "webhook", h.name, "err", ce.Error())
		return apierrors.NewInternalError(ce)
	case errors.As(err, &re):
		code := int(re.status.ErrStatus.Code)
		observeRejection(h.name, d.typ, opLabel, errorTypeNone, code)
		observeCall(h.name, d.typ, opLabel, elapsed, true, code)
		return re.status
	default:
		observeRejection(h.name, d.typ, opLabel, errorTypeInternal, 0)
		observeCall(h.name, d.typ, opLabel, elapsed, true, 0)
		return err
	}
}

// timeoutError is upstream's answer when the request's own deadline passed during the chain.
func timeoutError() error {
	return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
}

// annotationValue encodes an audit annotation's JSON value.
func annotationValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeObject reads a patched object: it must stay a JSON object of the same apiVersion and
// kind, and decode into the kind's type.
func decodeObject(a *admission.Attributes, original, patched []byte) (runtime.Object, error) {
	type head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	var before, after head
	_ = json.Unmarshal(original, &before)
	if err := json.Unmarshal(patched, &after); err != nil {
		return nil, fmt.Errorf("the patched object is not a JSON object: %v", err)
	}
	if before != after {
		return nil, fmt.Errorf("the patch changes apiVersion/kind from %s/%s to %s/%s", before.APIVersion, before.Kind, after.APIVersion, after.Kind)
	}
	if obj, ok := admission.NewObject(a.Kind); ok {
		if err := kjson.UnmarshalCaseSensitivePreserveInts(patched, obj); err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(a.Kind)
		return obj, nil
	}
	return admission.Decode(a.Kind, patched)
}
