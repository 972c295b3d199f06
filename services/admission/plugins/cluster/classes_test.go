package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func attrs(op admission.Operation, group, res, sub, ns, name string, obj, old runtime.Object) *admission.Attributes {
	return &admission.Attributes{Operation: op, Namespace: ns, Name: name, Subresource: sub, Object: obj, OldObject: old,
		Resource: schema.GroupVersionResource{Group: group, Version: "v1", Resource: res}}
}

// statusOf returns the Status of a rejection (failing the test when it is not one).
func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error %T (%v) is not a Status", err, err)
	}
	return se.Status()
}

// expect checks a plugin's answer: "" admits, anything else is the 403 message.
func expect(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("admitted; want %q", want)
	}
	st := statusOf(t, err)
	if st.Message != want || st.Code != 403 {
		t.Fatalf("got %d %q\nwant 403 %q", st.Code, st.Message, want)
	}
}

func storageClass(name string, created time.Time, annotations map[string]string, expand *bool) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Annotations: annotations},
		Provisioner: "example.com/disk", AllowVolumeExpansion: expand}
}

func claim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestDefaultStorageClass(t *testing.T) {
	isDefault := map[string]string{naming.IsDefaultStorageClassAnnotation: "true"}
	betaDefault := map[string]string{naming.BetaIsDefaultStorageClassAnnotation: "true"}
	cases := []struct {
		name    string
		classes []*storagev1.StorageClass
		op      admission.Operation
		claim   *corev1.PersistentVolumeClaim
		want    *string
	}{
		{name: "upstream: without a default class the claim is left alone", classes: []*storagev1.StorageClass{storageClass("slow", t0, nil, nil)}, claim: claim()},
		{name: "upstream: a claim without a class gets the default", classes: []*storagev1.StorageClass{storageClass("slow", t0, nil, nil), storageClass("fast", t0, isDefault, nil)}, claim: claim(), want: ptr("fast")},
		{name: "upstream: the beta annotation marks a default too", classes: []*storagev1.StorageClass{storageClass("beta", t0, betaDefault, nil)}, claim: claim(), want: ptr("beta")},
		{name: "upstream: only the value true marks a default", classes: []*storagev1.StorageClass{storageClass("no", t0, map[string]string{naming.IsDefaultStorageClassAnnotation: "false"}, nil)}, claim: claim()},
		{name: "upstream 1.33: with several defaults the newest wins",
			classes: []*storagev1.StorageClass{storageClass("old", t0, isDefault, nil), storageClass("new", t0.Add(time.Hour), isDefault, nil)}, claim: claim(), want: ptr("new")},
		{name: "upstream 1.33: defaults created at the same time are ordered by name",
			classes: []*storagev1.StorageClass{storageClass("b", t0, isDefault, nil), storageClass("a", t0, isDefault, nil)}, claim: claim(), want: ptr("a")},
		{name: "upstream: an explicitly empty class is kept (no dynamic provisioning)", classes: []*storagev1.StorageClass{storageClass("fast", t0, isDefault, nil)},
			claim: claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr("") }), want: ptr("")},
		{name: "upstream: the beta class annotation counts as a class", classes: []*storagev1.StorageClass{storageClass("fast", t0, isDefault, nil)},
			claim: claim(func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{naming.BetaStorageClassAnnotation: "x"}
			})},
		{name: "upstream: updates are not defaulted", classes: []*storagev1.StorageClass{storageClass("fast", t0, isDefault, nil)}, op: admission.Update, claim: claim()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := &admissiontest.Objects{}
			objs.StorageClassList.Add(tc.classes...)
			p, err := NewDefaultStorageClass(admissiontest.Deps(objs, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			op := tc.op
			if op == "" {
				op = admission.Create
			}
			expect(t, p.(admission.Mutator).Admit(context.Background(), attrs(op, "", "persistentvolumeclaims", "", "ns", "data", tc.claim, nil)), "")
			got := tc.claim.Spec.StorageClassName
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("storageClassName %v, want %v", deref(got), deref(tc.want))
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestDefaultIngressClass(t *testing.T) {
	def := map[string]string{naming.IsDefaultIngressClassAnnotation: "true"}
	class := func(name string, created time.Time, a map[string]string) *networkingv1.IngressClass {
		return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Annotations: a}}
	}
	ingress := func(mutate ...func(*networkingv1.Ingress)) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
		for _, m := range mutate {
			m(i)
		}
		return i
	}
	cases := []struct {
		name    string
		classes []*networkingv1.IngressClass
		ingress *networkingv1.Ingress
		want    *string
		wantErr string
	}{
		{name: "upstream: an Ingress without a class gets the default", classes: []*networkingv1.IngressClass{class("nginx", t0, def), class("other", t0, nil)}, ingress: ingress(), want: ptr("nginx")},
		{name: "upstream: without a default nothing is set", classes: []*networkingv1.IngressClass{class("other", t0, nil)}, ingress: ingress()},
		{name: "upstream: an Ingress naming its class keeps it", classes: []*networkingv1.IngressClass{class("nginx", t0, def)},
			ingress: ingress(func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr("mine") }), want: ptr("mine")},
		{name: "upstream: the deprecated class annotation counts as a class", classes: []*networkingv1.IngressClass{class("nginx", t0, def)},
			ingress: ingress(func(i *networkingv1.Ingress) {
				i.Annotations = map[string]string{naming.IngressClassAnnotation: "legacy"}
			})},
		{name: "the spec: more than one default rejects the creation (upstream's earlier message)",
			classes: []*networkingv1.IngressClass{class("a", t0, def), class("b", t0.Add(time.Hour), def)}, ingress: ingress(),
			wantErr: `ingresses.` + naming.Group("networking.k8s.io") + ` "web" is forbidden: Internal error occurred: 2 default IngressClasses were found, only 1 allowed`},
		{name: "the spec, as upstream read it: an Ingress that names its class needs no default and passes",
			classes: []*networkingv1.IngressClass{class("a", t0, def), class("b", t0, def)},
			ingress: ingress(func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr("a") }), want: ptr("a")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := &admissiontest.Objects{}
			objs.IngressClassList.Add(tc.classes...)
			p, _ := NewDefaultIngressClass(admissiontest.Deps(objs, nil), nil)
			err := p.(admission.Mutator).Admit(context.Background(), attrs(admission.Create, naming.Group("networking.k8s.io"), "ingresses", "", "ns", "web", tc.ingress, nil))
			expect(t, err, tc.wantErr)
			got := tc.ingress.Spec.IngressClassName
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("ingressClassName %v, want %v", deref(got), deref(tc.want))
			}
		})
	}
}

func TestStorageObjectInUseProtection(t *testing.T) {
	cases := []struct {
		name string
		res  string
		op   admission.Operation
		obj  metav1.Object
		want []string
	}{
		{name: "upstream: a new claim gets the pvc-protection finalizer", res: "persistentvolumeclaims", op: admission.Create, obj: claim(), want: []string{naming.PVCProtectionFinalizer}},
		{name: "upstream: a new volume gets the pv-protection finalizer", res: "persistentvolumes", op: admission.Create,
			obj: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: []string{"example.com/keep"}}}, want: []string{"example.com/keep", naming.PVProtectionFinalizer}},
		{name: "upstream: a finalizer already present is not added twice", res: "persistentvolumeclaims", op: admission.Create,
			obj: claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{naming.PVCProtectionFinalizer} }), want: []string{naming.PVCProtectionFinalizer}},
		{name: "upstream: updates are left alone", res: "persistentvolumeclaims", op: admission.Update, obj: claim()},
	}
	p, _ := NewStorageObjectInUseProtection(admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, p.(admission.Mutator).Admit(context.Background(), attrs(tc.op, "", tc.res, "", tc.obj.GetNamespace(), tc.obj.GetName(), tc.obj.(runtime.Object), nil)), "")
			if got := tc.obj.GetFinalizers(); len(got) != len(tc.want) || (len(got) > 0 && got[len(got)-1] != tc.want[len(tc.want)-1]) {
				t.Errorf("finalizers %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTaintNodesByCondition(t *testing.T) {
	notReady := corev1.Taint{Key: naming.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name   string
		taints []corev1.Taint
		want   int
	}{
		{name: "upstream: a new node gets the not-ready NoSchedule taint", want: 1},
		{name: "upstream: a node that has it already keeps one", taints: []corev1.Taint{notReady}, want: 1},
		{name: "upstream: the same key with another effect is another taint", taints: []corev1.Taint{{Key: naming.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}, want: 2},
	}
	p, _ := NewTaintNodesByCondition(admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: tc.taints}}
			expect(t, p.(admission.Mutator).Admit(context.Background(), attrs(admission.Create, "", "nodes", "", "", "n1", node, nil)), "")
			matching := 0
			for _, tt := range node.Spec.Taints {
				if tt.MatchTaint(&notReady) {
					matching++
				}
			}
			if len(node.Spec.Taints) != tc.want || matching != 1 {
				t.Errorf("taints %v: want %d taints, exactly one %s:NoSchedule", node.Spec.Taints, tc.want, naming.TaintNodeNotReady)
			}
		})
	}
}

func TestPersistentVolumeClaimResize(t *testing.T) {
	size := func(s string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s)}
		}
	}
	bound := func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimBound }
	class := func(n string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr(n) }
	}
	const cannot = `persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`
	cases := []struct {
		name     string
		old, new *corev1.PersistentVolumeClaim
		wantErr  string
	}{
		{name: "upstream: the same size passes", old: claim(class("grow"), size("1Gi")), new: claim(class("grow"), size("1Gi"))},
		{name: "upstream: shrinking is not this plugin's business", old: claim(class("fixed"), bound, size("2Gi")), new: claim(class("fixed"), size("1Gi"))},
		{name: "upstream: only bound claims can grow", old: claim(class("grow"), size("1Gi")), new: claim(class("grow"), size("2Gi")),
			wantErr: `persistentvolumeclaims "data" is forbidden: Only bound persistent volume claims can be expanded`},
		{name: "upstream: a bound claim of a class allowing expansion grows", old: claim(class("grow"), bound, size("1Gi")), new: claim(class("grow"), size("2Gi"))},
		{name: "upstream: a class without allowVolumeExpansion refuses", old: claim(class("fixed"), bound, size("1Gi")), new: claim(class("fixed"), size("2Gi")), wantErr: cannot},
		{name: "upstream: allowVolumeExpansion unset refuses", old: claim(class("unset"), bound, size("1Gi")), new: claim(class("unset"), size("2Gi")), wantErr: cannot},
		{name: "upstream: a claim without a class refuses", old: claim(bound, size("1Gi")), new: claim(size("2Gi")), wantErr: cannot},
		{name: "upstream: a missing class refuses", old: claim(class("gone"), bound, size("1Gi")), new: claim(class("gone"), size("2Gi")), wantErr: cannot},
	}
	objs := &admissiontest.Objects{}
	objs.StorageClassList.Add(storageClass("grow", t0, nil, ptr(true)), storageClass("fixed", t0, nil, ptr(false)), storageClass("unset", t0, nil, nil))
	p, _ := NewPersistentVolumeClaimResize(admissiontest.Deps(objs, nil), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, p.(admission.Validator).Validate(context.Background(), attrs(admission.Update, "", "persistentvolumeclaims", "", "ns", "data", tc.new, tc.old)), tc.wantErr)
		})
	}
}

// Every plugin registers under its name, in upstream's phase, with a precise interest.
func TestRegister(t *testing.T) {
	r := admission.NewRegistry()
	Register(r)
	objs := &admissiontest.Objects{}
	deps := admissiontest.Deps(objs, nil)
	for name, phase := range map[string]string{
		admission.DefaultStorageClass: "mutating", admission.DefaultIngressClass: "mutating", admission.StorageObjectInUseProtection: "mutating",
		admission.TaintNodesByCondition: "mutating", admission.PersistentVolumeClaimResize: "validating", admission.NodeRestriction: "mutating",
		admission.OwnerReferencesPermissionEnforcement: "validating",
	} {
		f, ok := r.Factory(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		p, err := f(deps, []byte(`{"ignored":true}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, m := p.(admission.Mutator)
		_, v := p.(admission.Validator)
		if (phase == "mutating") != m || (phase == "validating") != v || p.Name() != name {
			t.Errorf("%s: mutator %v validator %v name %s, want %s", name, m, v, p.Name(), phase)
		}
		if _, ok := p.(admission.Interested); !ok {
			t.Errorf("%s does not declare its interest", name)
		}
	}
}
