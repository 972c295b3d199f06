package admission_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// journal records what the test plugins did, in order.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// recorder is a test plugin: it notes each call in the journal ("name:admit" or
// "name:validate", with "+re" in the second mutating round) and does what its fields say.
type recorder struct {
	name string
	j    *journal
	// rejectAdmit and rejectValidate are returned by the phases.
	rejectAdmit, rejectValidate error
	// reinvoke asks for a second mutating round (as the webhook plugin does).
	reinvoke bool
	// interests is the static interest.
	interests []admission.Interest
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Interests() []admission.Interest { return r.interests }

// mutator is a recorder in the mutating phase only.
type mutator struct{ *recorder }

func (m mutator) Admit(_ context.Context, a *admission.Attributes) error {
	s := m.name + ":admit"
	if a.Reinvocation {
		s += "+re"
	}
	m.j.add(s)
	if m.reinvoke && !a.Reinvocation {
		a.RequestReinvocation()
	}
	if pod, ok := a.Object.(*corev1.Pod); ok {
		// Mutate, so later plugins see earlier plugins' changes.
		pod.Labels = appendLabel(pod.Labels, m.name)
	}
	return m.rejectAdmit
}

func appendLabel(l map[string]string, name string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	l["seen"] += name + ","
	return l
}

// validator is a recorder in the validating phase only.
type validator struct{ *recorder }

func (v validator) Validate(_ context.Context, a *admission.Attributes) error {
	v.j.add(v.name + ":validate")
	return v.rejectValidate
}

// both is a recorder in both phases.
type both struct{ *recorder }

func (b both) Admit(ctx context.Context, a *admission.Attributes) error {
	return mutator(b).Admit(ctx, a)
}

func (b both) Validate(ctx context.Context, a *admission.Attributes) error {
	return validator(b).Validate(ctx, a)
}

// registry registers each plugin under its name.
func registry(plugins ...admission.Plugin) *admission.Registry {
	reg := admission.NewRegistry()
	for _, p := range plugins {
		reg.Register(p.Name(), func(admission.Deps, []byte) (admission.Plugin, error) { return p, nil })
	}
	return reg
}

func build(t *testing.T, reg *admission.Registry, enabled []string, observe admission.Observer) *admission.Chain {
	t.Helper()
	c, err := admission.Build(reg, enabled, nil, admissiontest.Deps(&admissiontest.Objects{}, nil), observe)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func podAttributes() *admission.Attributes {
	return &admission.Attributes{
		Operation: admission.Create,
		Kind:      schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "default",
		Object:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}},
	}
}

// Spec: mutating plugins run before validating ones, each phase in upstream's order whatever the
// order the flags named them in, and each plugin sees the changes of the ones before it.
func TestChainOrder(t *testing.T) {
	j := &journal{}
	rq := &recorder{name: admission.ResourceQuota, j: j}
	lr := &recorder{name: admission.LimitRanger, j: j}
	nl := &recorder{name: admission.NamespaceLifecycle, j: j}
	mw := &recorder{name: admission.MutatingAdmissionWebhook, j: j}
	vw := &recorder{name: admission.ValidatingAdmissionWebhook, j: j}
	pr := &recorder{name: admission.Priority, j: j}
	reg := registry(validator{rq}, both{lr}, validator{nl}, mutator{mw}, validator{vw}, both{pr})
	enabled, err := admission.Enabled(
		[]string{admission.ValidatingAdmissionWebhook, admission.ResourceQuota, admission.MutatingAdmissionWebhook, admission.Priority, admission.LimitRanger, admission.NamespaceLifecycle},
		disableAllBut(admission.ValidatingAdmissionWebhook, admission.ResourceQuota, admission.MutatingAdmissionWebhook, admission.Priority, admission.LimitRanger, admission.NamespaceLifecycle),
	)
	if err != nil {
		t.Fatal(err)
	}
	var observed []string
	var omu sync.Mutex
	c := build(t, reg, enabled, func(plugin, typ string, op admission.Operation, rejected bool, d time.Duration) {
		omu.Lock()
		defer omu.Unlock()
		observed = append(observed, fmt.Sprintf("%s/%s/%s/%v", plugin, typ, op, rejected))
		if d < 0 {
			t.Errorf("negative duration for %s", plugin)
		}
	})
	if want := []string{"NamespaceLifecycle", "LimitRanger", "Priority", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota"}; !slices.Equal(c.Names(), want) {
		t.Fatalf("Names() = %v, want %v", c.Names(), want)
	}
	a := podAttributes()
	if err := c.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"LimitRanger:admit", "Priority:admit", "MutatingAdmissionWebhook:admit",
		"NamespaceLifecycle:validate", "LimitRanger:validate", "Priority:validate", "ValidatingAdmissionWebhook:validate", "ResourceQuota:validate",
	}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("calls\n got  %v\n want %v", got, want)
	}
	if got := a.Object.(*corev1.Pod).Labels["seen"]; got != "LimitRanger,Priority,MutatingAdmissionWebhook," {
		t.Errorf("mutations = %q: each mutator must see the earlier ones' changes, in order", got)
	}
	if a.ReinvocationRequested() || a.Reinvocation {
		t.Error("no plugin asked for reinvocation")
	}
	wantObserved := []string{
		"LimitRanger/admit/CREATE/false", "Priority/admit/CREATE/false", "MutatingAdmissionWebhook/admit/CREATE/false",
		"NamespaceLifecycle/validate/CREATE/false", "LimitRanger/validate/CREATE/false", "Priority/validate/CREATE/false",
		"ValidatingAdmissionWebhook/validate/CREATE/false", "ResourceQuota/validate/CREATE/false",
	}
	if !slices.Equal(observed, wantObserved) {
		t.Errorf("observer\n got  %v\n want %v", observed, wantObserved)
	}
}

// disableAllBut is --disable-admission-plugins for every default except keep.
func disableAllBut(keep ...string) []string {
	var out []string
	for _, n := range admission.DefaultEnabled {
		if !slices.Contains(keep, n) {
			out = append(out, n)
		}
	}
	return out
}

// Spec: any rejection fails the request; the first one ends the phase, later plugins do not run.
func TestChainFirstRejectionEnds(t *testing.T) {
	j := &journal{}
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no"))
	mk := func(name string, rejectAdmit, rejectValidate error) both {
		return both{&recorder{name: name, j: j, rejectAdmit: rejectAdmit, rejectValidate: rejectValidate}}
	}
	reg := registry(mk(admission.AlwaysAdmit, nil, nil), mk(admission.LimitRanger, denied, denied), mk(admission.ResourceQuota, nil, nil))
	var rejected []string
	c := build(t, reg, []string{admission.AlwaysAdmit, admission.LimitRanger, admission.ResourceQuota}, func(plugin, typ string, _ admission.Operation, r bool, _ time.Duration) {
		if r {
			rejected = append(rejected, plugin+"/"+typ)
		}
	})
	if err := c.Admit(context.Background(), podAttributes()); err != denied {
		t.Fatalf("Admit = %v, want the plugin's error unchanged", err)
	}
	if err := c.Validate(context.Background(), podAttributes()); err != denied {
		t.Fatalf("Validate = %v, want the plugin's error unchanged", err)
	}
	want := []string{"AlwaysAdmit:admit", "LimitRanger:admit", "AlwaysAdmit:validate", "LimitRanger:validate"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("calls\n got  %v\n want %v (ResourceQuota must not run after a rejection)", got, want)
	}
	if !slices.Equal(rejected, []string{"LimitRanger/admit", "LimitRanger/validate"}) {
		t.Errorf("observed rejections %v", rejected)
	}
}

// Spec: when a webhook changed the object, built-in mutating plugins run again (second round,
// Reinvocation true); without a request there is exactly one round; validators are not rerun.
func TestChainReinvocation(t *testing.T) {
	for _, reinvoke := range []bool{false, true} {
		t.Run(fmt.Sprintf("requested=%v", reinvoke), func(t *testing.T) {
			j := &journal{}
			reg := registry(
				mutator{&recorder{name: admission.AlwaysPullImages, j: j}},
				both{&recorder{name: admission.LimitRanger, j: j}},
				mutator{&recorder{name: admission.MutatingAdmissionWebhook, j: j, reinvoke: reinvoke}},
				validator{&recorder{name: admission.ValidatingAdmissionWebhook, j: j}},
			)
			c := build(t, reg, []string{admission.LimitRanger, admission.AlwaysPullImages, admission.MutatingAdmissionWebhook, admission.ValidatingAdmissionWebhook}, nil)
			a := podAttributes()
			if err := c.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			want := []string{"LimitRanger:admit", "AlwaysPullImages:admit", "MutatingAdmissionWebhook:admit"}
			if reinvoke {
				want = append(want, "LimitRanger:admit+re", "AlwaysPullImages:admit+re", "MutatingAdmissionWebhook:admit+re")
			}
			if got := j.get(); !slices.Equal(got, want) {
				t.Fatalf("calls\n got  %v\n want %v", got, want)
			}
			if a.Reinvocation {
				t.Error("Reinvocation stays true after Admit: the validating phase would see it")
			}
			if err := c.Validate(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			want = append(want, "LimitRanger:validate", "ValidatingAdmissionWebhook:validate")
			if got := j.get(); !slices.Equal(got, want) {
				t.Fatalf("validators run once, after the mutating rounds\n got  %v\n want %v", got, want)
			}
		})
	}
}

// A rejection in the second round ends it too.
func TestChainReinvocationRejection(t *testing.T) {
	j := &journal{}
	rejectSecond := errors.New("second round")
	reg := registry(
		secondRoundRejecter{mutator{&recorder{name: admission.LimitRanger, j: j}}, rejectSecond},
		mutator{&recorder{name: admission.MutatingAdmissionWebhook, j: j, reinvoke: true}},
	)
	c := build(t, reg, []string{admission.LimitRanger, admission.MutatingAdmissionWebhook}, nil)
	if err := c.Admit(context.Background(), podAttributes()); err != rejectSecond {
		t.Fatalf("Admit = %v, want the second round's rejection", err)
	}
	if got, want := j.get(), []string{"LimitRanger:admit", "MutatingAdmissionWebhook:admit", "LimitRanger:admit+re"}; !slices.Equal(got, want) {
		t.Fatalf("calls\n got  %v\n want %v", got, want)
	}
}

type secondRoundRejecter struct {
	mutator
	err error
}

func (s secondRoundRejecter) Admit(ctx context.Context, a *admission.Attributes) error {
	if err := s.mutator.Admit(ctx, a); err != nil {
		return err
	}
	if a.Reinvocation {
		return s.err
	}
	return nil
}

// dynamic is a plugin whose interest changes at run time.
type dynamic struct {
	*recorder
	changed chan struct{}
}

func (d *dynamic) Namespaces() []string                                  { return []string{"quota-ns"} }
func (d *dynamic) OwnerReferences() bool                                 { return false }
func (d *dynamic) Changed() <-chan struct{}                              { return d.changed }
func (d *dynamic) Validate(context.Context, *admission.Attributes) error { return nil }

func TestBuild(t *testing.T) {
	j := &journal{}
	static := []admission.Interest{{Operations: []admission.Operation{admission.Create}, APIGroups: []string{""}, Resources: []string{"pods"}}}
	dyn := &dynamic{recorder: &recorder{name: admission.ResourceQuota, j: j, interests: []admission.Interest{{Operations: []admission.Operation{"*"}, APIGroups: []string{""}, Resources: []string{"resourcequotas"}}}}, changed: make(chan struct{})}
	reg := registry(mutator{&recorder{name: admission.AlwaysPullImages, j: j, interests: static}}, dyn)

	t.Run("plugin not built into the binary", func(t *testing.T) {
		_, err := admission.Build(reg, []string{admission.AlwaysPullImages, admission.EventRateLimit}, nil, admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
		if err == nil || err.Error() != "admission plugin EventRateLimit is not built into this binary" {
			t.Fatalf("Build = %v", err)
		}
	})
	t.Run("factory error names the plugin", func(t *testing.T) {
		bad := errors.New("qps must be positive")
		r := admission.NewRegistry()
		r.Register(admission.EventRateLimit, func(admission.Deps, []byte) (admission.Plugin, error) { return nil, bad })
		_, err := admission.Build(r, []string{admission.EventRateLimit}, nil, admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
		if !errors.Is(err, bad) || !strings.HasPrefix(err.Error(), "admission plugin EventRateLimit: ") {
			t.Fatalf("Build = %v", err)
		}
	})
	t.Run("each factory gets its own configuration and the deps", func(t *testing.T) {
		r := admission.NewRegistry()
		got := map[string]string{}
		deps := admissiontest.Deps(&admissiontest.Objects{}, nil)
		for _, n := range []string{admission.EventRateLimit, admission.PodNodeSelector} {
			r.Register(n, func(d admission.Deps, cfg []byte) (admission.Plugin, error) {
				if d.Objects != deps.Objects || d.Store != deps.Store {
					t.Errorf("%s got other deps", n)
				}
				got[n] = string(cfg)
				return &recorder{name: n}, nil
			})
		}
		configs := map[string][]byte{admission.EventRateLimit: []byte(`{"limits":[]}`)}
		if _, err := admission.Build(r, []string{admission.EventRateLimit, admission.PodNodeSelector}, configs, deps, nil); err != nil {
			t.Fatal(err)
		}
		if got[admission.EventRateLimit] != `{"limits":[]}` || got[admission.PodNodeSelector] != "" {
			t.Fatalf("configurations %v", got)
		}
	})
	t.Run("interests", func(t *testing.T) {
		c := build(t, reg, []string{admission.AlwaysPullImages, admission.ResourceQuota}, nil)
		in := c.Interests()
		if len(in) != 2 || in[0].Resources[0] != "pods" || in[1].Resources[0] != "resourcequotas" {
			t.Fatalf("Interests() = %+v", in)
		}
		// A plugin that only validates never needs the mutating phase.
		if in[0].ValidateOnly || !in[1].ValidateOnly {
			t.Errorf("ValidateOnly of a mutator's and a validator's interests: %v %v", in[0].ValidateOnly, in[1].ValidateOnly)
		}
		d := c.Dynamic()
		if len(d) != 1 || d[0].Namespaces()[0] != "quota-ns" {
			t.Fatalf("Dynamic() = %v", d)
		}
	})
	t.Run("no plugins", func(t *testing.T) {
		c := build(t, reg, nil, nil)
		if err := c.Admit(context.Background(), podAttributes()); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(context.Background(), podAttributes()); err != nil {
			t.Fatal(err)
		}
		if len(c.Interests()) != 0 || len(c.Dynamic()) != 0 || len(c.Names()) != 0 {
			t.Fatal("an empty chain has interests")
		}
	})
}
