package namespaces

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func namespace(name string, phase corev1.NamespacePhase, deleting bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	if deleting {
		ns.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return ns
}

func podCreate(ns string) *admission.Attributes {
	return &admission.Attributes{
		Operation: admission.Create, Namespace: ns, Name: "p",
		Kind:     schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}},
	}
}

func nsDelete(name string) *admission.Attributes {
	return &admission.Attributes{
		Operation: admission.Delete, Name: name,
		Kind:      schema.GroupVersionKind{Version: "v1", Kind: "Namespace"},
		Resource:  schema.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		OldObject: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
	}
}

// env is a lister view and a store that may disagree (the lister lags storage).
type env struct {
	lister, stored *admissiontest.Objects
}

func newEnv() *env { return &env{lister: &admissiontest.Objects{}, stored: &admissiontest.Objects{}} }

// both adds namespaces to the lister and to storage.
func (e *env) both(nss ...*corev1.Namespace) *env {
	e.lister.NamespaceList.Add(nss...)
	e.stored.NamespaceList.Add(nss...)
	return e
}

func (e *env) deps() admission.Deps {
	d := admissiontest.Deps(e.lister, nil)
	d.Store = &admissiontest.Store{Objects: e.stored}
	return d
}

func status(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error %T (%v) is not a Status", err, err)
	}
	return se.Status()
}

func TestLifecycle(t *testing.T) {
	lss := func(ns string) *admission.Attributes {
		return &admission.Attributes{Operation: admission.Create, Namespace: ns,
			Resource: schema.GroupVersionResource{Group: naming.Group("authorization.k8s.io"), Version: "v1", Resource: "localsubjectaccessreviews"}}
	}
	cases := []struct {
		name     string
		env      *env
		attrs    *admission.Attributes
		wantCode int32
		wantMsg  string
		// wantCause is the NamespaceTerminating cause's message.
		wantCause string
	}{
		{name: "upstream: a create in an active namespace passes", env: newEnv().both(namespace("a", corev1.NamespaceActive, false)), attrs: podCreate("a")},
		{name: "upstream: a create in a missing namespace is 404 namespaces not found", env: newEnv(), attrs: podCreate("gone"),
			wantCode: 404, wantMsg: `namespaces "gone" not found`},
		{name: "the brief: a namespace the lister has not seen yet is read from storage before answering missing",
			env: func() *env {
				e := newEnv()
				e.stored.NamespaceList.Add(namespace("fresh", corev1.NamespaceActive, false))
				return e
			}(),
			attrs: podCreate("fresh")},
		{name: "upstream: a create in a terminating namespace is 403 with the NamespaceTerminating cause",
			env: newEnv().both(namespace("t", corev1.NamespaceTerminating, true)), attrs: podCreate("t"),
			wantCode: 403, wantMsg: `pods "p" is forbidden: unable to create new content in namespace t because it is being terminated`,
			wantCause: "namespace t is being terminated"},
		{name: "the gateway's rule: a namespace with a deletion timestamp is terminating before its phase says so",
			env: newEnv().both(namespace("t", corev1.NamespaceActive, true)), attrs: podCreate("t"),
			wantCode: 403, wantMsg: `pods "p" is forbidden: unable to create new content in namespace t because it is being terminated`,
			wantCause: "namespace t is being terminated"},
		{name: "upstream: an update in a terminating namespace passes",
			env: newEnv().both(namespace("t", corev1.NamespaceTerminating, true)),
			attrs: func() *admission.Attributes {
				a := podCreate("t")
				a.Operation, a.OldObject = admission.Update, a.Object
				return a
			}()},
		{name: "upstream: an update in a missing namespace is 404", env: newEnv(),
			attrs: func() *admission.Attributes {
				a := podCreate("gone")
				a.Operation, a.OldObject = admission.Update, a.Object
				return a
			}(), wantCode: 404, wantMsg: `namespaces "gone" not found`},
		{name: "upstream: deleting content of a missing namespace passes", env: newEnv(),
			attrs: &admission.Attributes{Operation: admission.Delete, Namespace: "gone", Name: "p", Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}},
		{name: "upstream: access reviews in a missing namespace pass (the answer must not tell whether it exists)", env: newEnv(), attrs: lss("gone")},
		{name: "upstream: cluster-scoped requests pass", env: newEnv(),
			attrs: &admission.Attributes{Operation: admission.Create, Name: "n", Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Object: &corev1.Node{}}},
		{name: "upstream: default may not be deleted", env: newEnv(), attrs: nsDelete(metav1.NamespaceDefault),
			wantCode: 403, wantMsg: `namespaces "default" is forbidden: this namespace may not be deleted`},
		{name: "upstream: the system namespace may not be deleted", env: newEnv(), attrs: nsDelete(naming.SystemNamespace),
			wantCode: 403, wantMsg: `namespaces "` + naming.SystemNamespace + `" is forbidden: this namespace may not be deleted`},
		{name: "upstream: the public namespace may not be deleted", env: newEnv(), attrs: nsDelete(naming.PublicNamespace),
			wantCode: 403, wantMsg: `namespaces "` + naming.PublicNamespace + `" is forbidden: this namespace may not be deleted`},
		{name: "upstream: other namespaces may be deleted", env: newEnv().both(namespace("x", corev1.NamespaceActive, false)), attrs: nsDelete("x")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewLifecycle(tc.env.deps(), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = p.(*Lifecycle).Admit(context.Background(), tc.attrs)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("admitted")
			}
			st := status(t, err)
			if st.Code != tc.wantCode || st.Message != tc.wantMsg {
				t.Errorf("got %d %q, want %d %q", st.Code, st.Message, tc.wantCode, tc.wantMsg)
			}
			if tc.wantCause != "" {
				if st.Details == nil || len(st.Details.Causes) != 1 {
					t.Fatalf("causes %+v", st.Details)
				}
				c := st.Details.Causes[0]
				if c.Type != corev1.NamespaceTerminatingCause || c.Message != tc.wantCause || c.Field != "metadata.namespace" {
					t.Errorf("cause %+v", c)
				}
			}
		})
	}
}

// Upstream rule: once a namespace's deletion is admitted, creates in it are checked against
// storage even while the lister still shows it active.
func TestLifecycleLiveLookupAfterDelete(t *testing.T) {
	e := newEnv()
	e.lister.NamespaceList.Add(namespace("x", corev1.NamespaceActive, false))
	e.stored.NamespaceList.Add(namespace("x", corev1.NamespaceActive, false))
	p, _ := NewLifecycle(e.deps(), nil)
	l := p.(*Lifecycle)
	if err := l.Admit(context.Background(), podCreate("x")); err != nil {
		t.Fatalf("refused before the deletion: %v", err)
	}
	if err := l.Admit(context.Background(), nsDelete("x")); err != nil {
		t.Fatal(err)
	}
	// Storage has the deletion; the lister has not seen it.
	e.stored.NamespaceList.Add(namespace("x", corev1.NamespaceTerminating, true))
	err := l.Admit(context.Background(), podCreate("x"))
	if err == nil || status(t, err).Code != 403 {
		t.Fatalf("create after the deletion: %v, want 403", err)
	}
}

func TestLifecycleInterest(t *testing.T) {
	e := newEnv().both(namespace("a", corev1.NamespaceActive, false), namespace("t2", corev1.NamespaceTerminating, true),
		namespace("t1", corev1.NamespaceActive, true))
	p, _ := NewLifecycle(e.deps(), nil)
	l := p.(*Lifecycle)
	in := l.Interests()
	if len(in) != 1 || len(in[0].Operations) != 1 || in[0].Operations[0] != admission.Delete || in[0].Resources[0] != "namespaces" || in[0].APIGroups[0] != "" {
		t.Errorf("Interests() = %+v, want the deletion of namespaces only", in)
	}
	if got := strings.Join(l.Namespaces(), ","); got != "t1,t2" {
		t.Errorf("Namespaces() = %s, want the terminating ones", got)
	}
	changed := l.Changed()
	if err := l.Admit(context.Background(), nsDelete("a")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("Changed did not fire after a namespace deletion was admitted")
	}
}

func TestExists(t *testing.T) {
	cases := []struct {
		name    string
		env     *env
		attrs   *admission.Attributes
		wantErr string
	}{
		{name: "upstream: a request in an existing namespace passes", env: newEnv().both(namespace("a", corev1.NamespaceActive, false)), attrs: podCreate("a")},
		{name: "upstream: a request in a missing namespace is 404", env: newEnv(), attrs: podCreate("gone"), wantErr: `namespaces "gone" not found`},
		{name: "the brief: storage is asked before answering missing",
			env: func() *env {
				e := newEnv()
				e.stored.NamespaceList.Add(namespace("fresh", corev1.NamespaceActive, false))
				return e
			}(),
			attrs: podCreate("fresh")},
		{name: "upstream: a namespace's own requests pass", env: newEnv(), attrs: nsDelete("gone")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := NewExists(tc.env.deps(), nil)
			err := p.(*Exists).Validate(context.Background(), tc.attrs)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !apierrors.IsNotFound(err) || err.Error() != tc.wantErr {
				t.Fatalf("got %v, want 404 %q", err, tc.wantErr)
			}
		})
	}
	if in := (&Exists{}).Interests(); len(in) != 0 {
		t.Errorf("Interests() = %+v, want none (the gateway asks about creates in missing namespaces)", in)
	}
}

type failingStore struct{ *admissiontest.Store }

func (failingStore) CreateNamespace(context.Context, string) error {
	return errors.New("storage is down")
}

func TestAutoProvision(t *testing.T) {
	cases := []struct {
		name    string
		attrs   func() *admission.Attributes
		store   func(*admissiontest.Objects) admission.Store
		created bool
		wantErr string
	}{
		{name: "upstream: a create in a missing namespace creates it", attrs: func() *admission.Attributes { return podCreate("auto") }, created: true},
		{name: "upstream: a dry run creates nothing", attrs: func() *admission.Attributes { a := podCreate("auto"); a.DryRun = true; return a }},
		{name: "upstream: updates do not provision", attrs: func() *admission.Attributes { a := podCreate("auto"); a.Operation = admission.Update; return a }},
		{name: "upstream: a failure to create is 403", attrs: func() *admission.Attributes { return podCreate("auto") },
			store:   func(o *admissiontest.Objects) admission.Store { return failingStore{&admissiontest.Store{Objects: o}} },
			wantErr: `pods "p" is forbidden: storage is down`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := &admissiontest.Objects{}
			deps := admissiontest.Deps(objs, nil)
			if tc.store != nil {
				deps.Store = tc.store(objs)
			}
			p, _ := NewAutoProvision(deps, nil)
			err := p.(*AutoProvision).Admit(context.Background(), tc.attrs())
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || status(t, err).Code != 403 {
					t.Fatalf("got %v, want 403 %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, created := objs.NamespaceList.Get("", "auto")
			if created != tc.created {
				t.Errorf("namespace created %v, want %v", created, tc.created)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	r := admission.NewRegistry()
	Register(r)
	deps := admissiontest.Deps(&admissiontest.Objects{}, nil)
	for name, want := range map[string]string{
		admission.NamespaceLifecycle: "mutator", admission.NamespaceExists: "validator", admission.NamespaceAutoProvision: "mutator",
	} {
		f, ok := r.Factory(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		p, err := f(deps, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch p.(type) {
		case admission.Mutator:
			got = "mutator"
		case admission.Validator:
			got = "validator"
		}
		if got != want || p.Name() != name {
			t.Errorf("%s: %s named %s, want a %s (upstream's phase)", name, got, p.Name(), want)
		}
	}
}
