package basic

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// req builds the attributes of a request on group/resource[/subresource] of kind in namespace
// ns, named after obj (or old).
func req(op admission.Operation, group, resource, sub, kind, ns string, obj, old runtime.Object) *admission.Attributes {
	a := &admission.Attributes{
		Operation:   op,
		Kind:        schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
		Resource:    schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource},
		Subresource: sub,
		Namespace:   ns,
		Object:      obj,
		OldObject:   old,
		User:        &admission.User{Name: "alice"},
	}
	for _, o := range []runtime.Object{obj, old} {
		if o == nil || reflect.ValueOf(o).IsNil() {
			continue
		}
		if m := admission.Accessor(o); m != nil && m.GetName() != "" {
			a.Name = m.GetName()
			break
		}
	}
	return a
}

func build(t *testing.T, name string, deps admission.Deps, config string) admission.Plugin {
	t.Helper()
	p, err := buildErr(name, deps, config)
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return p
}

func buildErr(name string, deps admission.Deps, config string) (admission.Plugin, error) {
	r := admission.NewRegistry()
	Register(r)
	f, ok := r.Factory(name)
	if !ok {
		panic(name + " is not registered")
	}
	var cfg []byte
	if config != "" {
		cfg = []byte(config)
	}
	return f(deps, cfg)
}

func deps() admission.Deps { return admissiontest.Deps(&admissiontest.Objects{}, nil) }

// run calls the mutating then the validating half, as the chain does.
func run(p admission.Plugin, a *admission.Attributes) error {
	if m, ok := p.(admission.Mutator); ok {
		if err := m.Admit(context.Background(), a); err != nil {
			return err
		}
	}
	if v, ok := p.(admission.Validator); ok {
		return v.Validate(context.Background(), a)
	}
	return nil
}

func wantStatus(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Fatalf("unexpected rejection: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("admitted; want %d %q", code, msg)
	}
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("error %T %v is not a Status", err, err)
	}
	if got := se.Status().Code; got != code {
		t.Errorf("code %d, want %d (%v)", got, code, err)
	}
	if got := se.Status().Message; got != msg {
		t.Errorf("message\n got %q\nwant %q", got, msg)
	}
}

// matches is the webhook-rule reading of an interest the gateway applies.
func matches(in admission.Interest, a *admission.Attributes) bool {
	opOK, groupOK, resOK := false, false, false
	for _, op := range in.Operations {
		opOK = opOK || op == "*" || op == a.Operation
	}
	for _, g := range in.APIGroups {
		groupOK = groupOK || g == "*" || g == a.Resource.Group
	}
	for _, r := range in.Resources {
		res, sub, _ := strings.Cut(r, "/")
		if r == "*/*" || ((res == "*" || res == a.Resource.Resource) && (sub == a.Subresource || (sub == "*" && a.Subresource != ""))) {
			resOK = true
		}
	}
	return opOK && groupOK && resOK
}

func interested(p admission.Plugin, a *admission.Attributes) bool {
	for _, in := range p.(admission.Interested).Interests() {
		if matches(in, a) {
			return true
		}
	}
	return false
}

func TestAlwaysAdmitAndAlwaysDeny(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}
	writes := []*admission.Attributes{
		req(admission.Create, "", "configmaps", "", "ConfigMap", "ns", cm, nil),
		func() *admission.Attributes {
			a := req(admission.Delete, "apps", "deployments", "", "Deployment", "ns", nil, nil)
			a.Name = "web"
			return a
		}(),
		req(admission.Update, "apps", "deployments", "scale", "Scale", "ns", nil, nil),
		req(admission.Connect, "", "pods", "exec", "PodExecOptions", "ns", nil, nil),
	}
	admit := build(t, admission.AlwaysAdmit, deps(), "")
	deny := build(t, admission.AlwaysDeny, deps(), "")
	if len(admit.(admission.Interested).Interests()) != 0 {
		t.Error("AlwaysAdmit needs no hop")
	}
	for _, a := range writes {
		if err := run(admit, a); err != nil {
			t.Errorf("AlwaysAdmit rejected %v", err)
		}
		if !interested(deny, a) {
			t.Errorf("AlwaysDeny not interested in %s %s/%s", a.Operation, a.Resource.Resource, a.Subresource)
		}
	}
	// upstream: 403 naming the object, in both phases.
	wantStatus(t, run(deny, writes[0]), 403, `configmaps "cm" is forbidden: admission control is denying all modifications`)
	wantStatus(t, deny.(admission.Validator).Validate(context.Background(), writes[1]), 403, `deployments.apps "web" is forbidden: admission control is denying all modifications`)
}

func TestDenyServiceExternalIPs(t *testing.T) {
	p := build(t, admission.DenyServiceExternalIPs, deps(), "")
	svc := func(ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.ServiceSpec{ExternalIPs: ips}}
	}
	const denied = `services "web" is forbidden: Use of external IPs is denied by admission control`
	cases := []struct {
		name     string
		op       admission.Operation
		sub      string
		new, old *corev1.Service
		code     int32
	}{
		{"upstream: create without external IPs", admission.Create, "", svc(), nil, 0},
		{"upstream: create with external IPs", admission.Create, "", svc("1.2.3.4"), nil, 403},
		{"upstream: update adding an IP", admission.Update, "", svc("1.2.3.4", "5.6.7.8"), svc("1.2.3.4"), 403},
		{"upstream: update keeping the same IPs", admission.Update, "", svc("1.2.3.4"), svc("1.2.3.4"), 0},
		{"upstream: update removing IPs", admission.Update, "", svc("1.2.3.4"), svc("1.2.3.4", "5.6.7.8"), 0},
		{"upstream: update replacing an IP", admission.Update, "", svc("9.9.9.9"), svc("1.2.3.4"), 403},
		{"upstream: subresources are not checked", admission.Update, "status", svc("9.9.9.9"), svc(), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var old runtime.Object
			if c.old != nil {
				old = c.old
			}
			msg := ""
			if c.code != 0 {
				msg = denied
			}
			wantStatus(t, run(p, req(c.op, "", "services", c.sub, "Service", "ns", c.new, old)), c.code, msg)
		})
	}
	if !interested(p, req(admission.Update, "", "services", "", "Service", "ns", nil, nil)) || interested(p, req(admission.Update, "", "services", "status", "Service", "ns", nil, nil)) {
		t.Error("interest: Service creates and updates only")
	}
}

// TestPluginsIgnoreOddObjects: no plugin panics on objects it does not expect (none, typed
// nils, unstructured objects, other kinds under its resource).
func TestPluginsIgnoreOddObjects(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
	odd := []*admission.Attributes{
		req(admission.Create, "example.com", "widgets", "", "Widget", "ns", u, nil),
		req(admission.Delete, "", "services", "", "Service", "ns", nil, nil),
		req(admission.Create, "", "services", "", "Service", "ns", (*corev1.Service)(nil), nil),
		req(admission.Update, "", "services", "", "Service", "ns", &corev1.Service{}, (*corev1.Service)(nil)),
		req(admission.Create, "", "services", "", "Service", "ns", u, nil),
		req(admission.Create, "", "events", "", "Event", "ns", nil, nil),
		req(admission.Create, "", "events", "", "Event", "ns", (*corev1.Event)(nil), nil),
		req(admission.Create, "", "events", "", "Event", "ns", u, nil),
		req(admission.Create, "", "pods", "", "Pod", "ns", (*corev1.Pod)(nil), nil),
		req(admission.Create, "", "pods", "", "Pod", "ns", u, nil),
	}
	for _, a := range odd {
		a.User = nil
	}
	b := newPolicyBackend(t)
	imagePolicy, _ := b.plugin(t, "")
	plugins := []admission.Plugin{
		build(t, admission.AlwaysAdmit, deps(), ""),
		build(t, admission.DenyServiceExternalIPs, deps(), ""),
		build(t, admission.EventRateLimit, deps(), `{"limits": [{"type": "User", "qps": 1, "burst": 100}, {"type": "SourceAndObject", "qps": 1, "burst": 100}]}`),
		imagePolicy,
	}
	for _, p := range plugins {
		for _, a := range odd {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s panicked on %s %s: %v", p.Name(), a.Operation, a.Resource.Resource, r)
					}
				}()
				_ = run(p, a)
			}()
		}
	}
	if b.calls() != 0 {
		t.Errorf("the image policy backend was asked about %d odd requests", b.calls())
	}
}
