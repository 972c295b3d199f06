package pods_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
	"platform.io/services/admission/plugins/pods"
)

// TestDefaultChainOnPods runs the package's default-enabled plugins as the service does (the
// framework's chain, upstream's order, no configuration) over a pod create: every mutation lands
// and PodSecurity then judges the mutated pod.
func TestDefaultChainOnPods(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locked", Labels: map[string]string{naming.PodSecurityLabelPrefix + "enforce": "restricted"}}},
	)
	for _, ns := range []string{"ns", "locked"} {
		objects.ServiceAccountList.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
		objects.LimitRangeList.Add(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: ns}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}})
	}
	reg := admission.NewRegistry()
	pods.Register(reg)
	var enabled []string
	for _, n := range admission.Order {
		if _, ok := reg.Factory(n); ok && contains(admission.DefaultEnabled, n) {
			enabled = append(enabled, n)
		}
	}
	want := []string{admission.LimitRanger, admission.ServiceAccount, admission.PodSecurity, admission.Priority, admission.DefaultTolerationSeconds, admission.RuntimeClass}
	if !equal(enabled, want) {
		t.Fatalf("default-enabled plugins of this package in order: %v, want %v", enabled, want)
	}
	chain, err := admission.Build(reg, enabled, nil, admissiontest.Deps(objects, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	create := func(ns string) (*corev1.Pod, *admission.Attributes, error) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
		a := &admission.Attributes{
			Operation: admission.Create,
			Kind:      schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  schema.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns,
			Object:    pod,
			User:      &admission.User{Name: "alice"},
		}
		if err := chain.Admit(context.Background(), a); err != nil {
			return pod, a, err
		}
		return pod, a, chain.Validate(context.Background(), a)
	}

	pod, a, err := create("ns")
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("LimitRanger default request: %v", c.Resources.Requests)
	}
	if pod.Spec.ServiceAccountName != "default" || len(pod.Spec.Volumes) != 1 || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != naming.ServiceAccountTokenMountPath {
		t.Errorf("ServiceAccount: %q %+v %+v", pod.Spec.ServiceAccountName, pod.Spec.Volumes, c.VolumeMounts)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 0 || pod.Spec.PreemptionPolicy == nil {
		t.Errorf("Priority: %v %v", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
	if len(pod.Spec.Tolerations) != 2 {
		t.Errorf("DefaultTolerationSeconds: %+v", pod.Spec.Tolerations)
	}
	if a.Annotations()[naming.PodSecurityLabelPrefix+"enforce-policy"] != "privileged:latest" {
		t.Errorf("PodSecurity annotations: %v", a.Annotations())
	}

	// The token volume and defaults do not make a plain pod restricted-compliant.
	_, _, err = create("locked")
	if err == nil {
		t.Fatal("a pod violating the restricted level was admitted")
	}
	if got := err.Error(); !strings.HasPrefix(got, `pods "web-" is forbidden: violates PodSecurity "restricted:latest": `) {
		t.Errorf("rejection %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func equal(a, b []string) bool {
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

// BenchmarkDefaultChainPodCreate measures a pod create through this package's default-enabled
// plugins (mutating and validating phases), the per-create cost they add to the admission hop.
func BenchmarkDefaultChainPodCreate(b *testing.B) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{naming.PodSecurityLabelPrefix + "warn": "restricted"}}})
	objects.ServiceAccountList.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"}})
	reg := admission.NewRegistry()
	pods.Register(reg)
	enabled := []string{admission.LimitRanger, admission.ServiceAccount, admission.PodSecurity, admission.Priority, admission.DefaultTolerationSeconds, admission.RuntimeClass}
	chain, err := admission.Build(reg, enabled, nil, admissiontest.Deps(objects, nil), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
		a := &admission.Attributes{Operation: admission.Create, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ns", Name: "web", Object: pod, User: &admission.User{Name: "alice"}}
		if err := chain.Admit(context.Background(), a); err != nil {
			b.Fatal(err)
		}
		if err := chain.Validate(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}
