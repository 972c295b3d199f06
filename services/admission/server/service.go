package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionv1 "platform.io/proto/admission/v1"
	"platform.io/services/admission/admission"
)

// Service implements proto/admission/v1 over the chain of enabled plugins.
type Service struct {
	admissionv1.UnimplementedAdmissionServer

	chain    *admission.Chain
	ready    func() bool
	interest *interestState
	log      *slog.Logger
	metrics  *metrics
}

// attributes turns a request into the plugins' attributes (objects decoded to their Go types).
func attributes(req *admissionv1.AdmissionRequest) (*admission.Attributes, error) {
	gvk := func(k *admissionv1.GroupVersionKind) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: k.GetGroup(), Version: k.GetVersion(), Kind: k.GetKind()}
	}
	gvr := func(r *admissionv1.GroupVersionResource) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: r.GetGroup(), Version: r.GetVersion(), Resource: r.GetResource()}
	}
	a := &admission.Attributes{
		Operation: admission.Operation(req.GetOperation()), Kind: gvk(req.GetKind()), Resource: gvr(req.GetResource()),
		Subresource: req.GetSubResource(), RequestKind: gvk(req.GetRequestKind()), RequestResource: gvr(req.GetRequestResource()),
		RequestSubresource: req.GetRequestSubResource(), Namespace: req.GetNamespace(), Name: req.GetName(),
		Options: req.GetOptions(), DryRun: req.GetDryRun(), UID: req.GetUid(),
	}
	switch a.Operation {
	case admission.Create, admission.Update, admission.Delete, admission.Connect:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown operation %q", req.GetOperation())
	}
	if u := req.GetUser(); u != nil {
		a.User = &admission.User{Name: u.GetName(), UID: u.GetUid(), Groups: u.GetGroups()}
		if len(u.GetExtra()) > 0 {
			a.User.Extra = map[string][]string{}
			for k, v := range u.GetExtra() {
				a.User.Extra[k] = v.GetValues()
			}
		}
	}
	var err error
	if a.Object, err = admission.Decode(a.Kind, req.GetObject()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if a.OldObject, err = admission.Decode(a.Kind, req.GetOldObject()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return a, nil
}

// Admit runs the mutating phase and answers the mutated object when it changed.
func (s *Service) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	return s.run(ctx, req, true)
}

// Validate runs the validating phase.
func (s *Service) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	return s.run(ctx, req, false)
}

func (s *Service) run(ctx context.Context, req *admissionv1.AdmissionRequest, mutate bool) (*admissionv1.AdmissionResponse, error) {
	if !s.ready() {
		return nil, status.Error(codes.Unavailable, "the admission service is loading the objects its plugins read")
	}
	a, err := attributes(req)
	if err != nil {
		return nil, err
	}
	signals := s.interest.signals()
	start := time.Now()
	if mutate {
		err = s.chain.Admit(ctx, a)
	} else {
		err = s.chain.Validate(ctx, a)
	}
	s.metrics.step(mutate, a.Operation, err != nil, time.Since(start))
	resp := &admissionv1.AdmissionResponse{Allowed: err == nil, Warnings: a.Warnings(), AuditAnnotations: a.Annotations(),
		InterestGeneration: s.interest.generationAfter(signals)}
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		resp.Rejection = rejection(err)
		if resp.Rejection.Code == http.StatusInternalServerError {
			s.log.WarnContext(ctx, "admission plugin failed", "uid", a.UID, "err", err)
		}
		return resp, nil
	}
	if mutate && a.Object != nil {
		out, err := admission.Encode(a.Object, a.Kind)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encoding the admitted object: %v", err)
		}
		if !jsonEqual(out, req.GetObject()) {
			resp.Object = out
		}
	}
	return resp, nil
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// rejection turns a plugin's error into the rejection the gateway answers: a StatusError keeps
// its code, reason, message and causes; anything else is a 500.
func rejection(err error) *admissionv1.Rejection {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		r := &admissionv1.Rejection{Code: st.Code, Reason: string(st.Reason), Message: st.Message}
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				r.Causes = append(r.Causes, &admissionv1.Cause{Type: string(c.Type), Message: c.Message, Field: c.Field})
			}
			r.RetryAfterSeconds = st.Details.RetryAfterSeconds
		}
		if r.Code == 0 {
			r.Code = http.StatusInternalServerError
		}
		return r
	}
	return &admissionv1.Rejection{Code: http.StatusInternalServerError, Reason: "InternalError", Message: "Internal error occurred: " + err.Error()}
}

// WatchInterest streams the interest set: now, then after every change.
func (s *Service) WatchInterest(_ *admissionv1.WatchInterestRequest, stream admissionv1.Admission_WatchInterestServer) error {
	ctx := stream.Context()
	for {
		set, changed := s.interest.watch()
		if err := stream.Send(set); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.interest.stopped:
			return status.Error(codes.Unavailable, "the admission service is shutting down")
		case <-changed:
		}
	}
}

// interestState is the interest set and its generation, rebuilt when a plugin's dynamic interest
// changes.
type interestState struct {
	chain   *admission.Chain
	mu      sync.Mutex
	set     *admissionv1.InterestSet
	changed chan struct{}
	stopped chan struct{}
}

func newInterestState(chain *admission.Chain) *interestState {
	st := &interestState{chain: chain, changed: make(chan struct{}), stopped: make(chan struct{})}
	st.set = st.build(1)
	return st
}

func (st *interestState) build(gen uint64) *admissionv1.InterestSet {
	set := &admissionv1.InterestSet{Generation: gen}
	for _, in := range st.chain.Interests() {
		r := &admissionv1.InterestRule{ApiGroups: in.APIGroups, Resources: in.Resources, Scope: in.Scope, UserGroups: in.UserGroups, ValidateOnly: in.ValidateOnly}
		for _, op := range in.Operations {
			r.Operations = append(r.Operations, string(op))
		}
		set.Rules = append(set.Rules, r)
	}
	seen := map[string]bool{}
	for _, d := range st.chain.Dynamic() {
		for _, ns := range d.Namespaces() {
			if !seen[ns] {
				seen[ns] = true
				set.Namespaces = append(set.Namespaces, ns)
			}
		}
		set.OwnerReferences = set.OwnerReferences || d.OwnerReferences()
	}
	sort.Strings(set.Namespaces)
	return set
}

// signals are the dynamic plugins' change channels now: generationAfter tells whether a request
// run in between changed the interest.
func (st *interestState) signals() []<-chan struct{} {
	dyn := st.chain.Dynamic()
	if len(dyn) == 0 {
		return nil
	}
	out := make([]<-chan struct{}, len(dyn))
	for i, d := range dyn {
		out[i] = d.Changed()
	}
	return out
}

// generationAfter is the set's generation once the changes signalled since signals were taken
// are in it (rebuilt here, synchronously, so that the answer that caused a change carries it).
func (st *interestState) generationAfter(signals []<-chan struct{}) uint64 {
	for _, ch := range signals {
		select {
		case <-ch:
			st.refresh()
			return st.generation()
		default:
		}
	}
	return st.generation()
}

func (st *interestState) generation() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.set.Generation
}

func (st *interestState) watch() (*admissionv1.InterestSet, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.set, st.changed
}

// refresh rebuilds the set; watchers are woken when it differs.
func (st *interestState) refresh() {
	st.mu.Lock()
	defer st.mu.Unlock()
	next := st.build(st.set.Generation + 1)
	if sameInterest(next, st.set) {
		return
	}
	st.set = next
	close(st.changed)
	st.changed = make(chan struct{})
}

// follow refreshes the set whenever a dynamic plugin signals a change, until ctx ends.
func (st *interestState) follow(ctx context.Context) {
	for _, d := range st.chain.Dynamic() {
		go func(d admission.DynamicInterest) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-d.Changed():
					st.refresh()
				}
			}
		}(d)
	}
	// A safety net for signals missed while a rebuild ran.
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st.refresh()
		}
	}
}

func (st *interestState) stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	select {
	case <-st.stopped:
	default:
		close(st.stopped)
	}
}

func sameInterest(a, b *admissionv1.InterestSet) bool {
	if a.OwnerReferences != b.OwnerReferences || len(a.Rules) != len(b.Rules) || len(a.Namespaces) != len(b.Namespaces) {
		return false
	}
	for i := range a.Namespaces {
		if a.Namespaces[i] != b.Namespaces[i] {
			return false
		}
	}
	for i := range a.Rules {
		x, y := a.Rules[i], b.Rules[i]
		if !equalStrings(x.Operations, y.Operations) || !equalStrings(x.ApiGroups, y.ApiGroups) || !equalStrings(x.Resources, y.Resources) ||
			x.Scope != y.Scope || !equalStrings(x.UserGroups, y.UserGroups) || x.ValidateOnly != y.ValidateOnly {
			return false
		}
	}
	return true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// metrics are upstream's admission metrics: per built-in plugin, and per step (one phase of
// one request: every plugin and webhook of the mutating or the validating chain).
type metrics struct {
	duration *prometheus.HistogramVec
	steps    *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	buckets := []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5}
	m := &metrics{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apiserver_admission_controller_admission_duration_seconds",
		Help:    "Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
		Buckets: buckets,
	}, []string{"name", "type", "operation", "rejected"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_step_admission_duration_seconds",
			Help:    "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
			Buckets: buckets,
		}, []string{"type", "operation", "rejected"})}
	reg.MustRegister(m.duration, m.steps)
	return m
}

// step records one phase of one request; a nil m (tests building a Service by hand) records
// nothing.
func (m *metrics) step(mutate bool, op admission.Operation, rejected bool, d time.Duration) {
	if m == nil {
		return
	}
	typ := "validate"
	if mutate {
		typ = "admit"
	}
	m.steps.WithLabelValues(typ, string(op), strconv.FormatBool(rejected)).Observe(d.Seconds())
}

func (m *metrics) observe(plugin, typ string, op admission.Operation, rejected bool, d time.Duration) {
	r := "false"
	if rejected {
		r = "true"
	}
	m.duration.WithLabelValues(plugin, typ, string(op), r).Observe(d.Seconds())
}
