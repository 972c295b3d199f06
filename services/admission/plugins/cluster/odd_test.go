package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// The framework's rule: no plugin panics on odd objects (missing, nil pointers, unstructured
// objects of unknown kinds, objects of another kind than the resource's).
func TestOddObjectsDoNotPanic(t *testing.T) {
	r := admission.NewRegistry()
	Register(r)
	objs := &admissiontest.Objects{}
	deps := admissiontest.Deps(objs, nil)
	odd := []runtime.Object{nil, (*corev1.Pod)(nil), (*corev1.Node)(nil), &unstructured.Unstructured{}, &unstructured.Unstructured{Object: map[string]any{"spec": "x"}}, &corev1.ConfigMap{}}
	resources := []struct{ group, resource, sub string }{
		{"", "pods", ""}, {"", "pods", "status"}, {"", "pods", "eviction"}, {"", "nodes", ""}, {"", "persistentvolumeclaims", ""},
		{"", "persistentvolumeclaims", "status"}, {"", "persistentvolumes", ""}, {"", "serviceaccounts", "token"},
		{coordinationGroup, "leases", ""}, {storageGroup, "csinodes", ""}, {resourceGroup, "resourceslices", ""},
		{certificatesGroup, "certificatesigningrequests", ""}, {ingressGroup, "ingresses", ""}, {"example.com", "widgets", ""},
	}
	for _, name := range []string{admission.DefaultStorageClass, admission.DefaultIngressClass, admission.StorageObjectInUseProtection,
		admission.TaintNodesByCondition, admission.PersistentVolumeClaimResize, admission.NodeRestriction, admission.OwnerReferencesPermissionEnforcement} {
		f, _ := r.Factory(name)
		p, err := f(deps, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range resources {
			for _, op := range []admission.Operation{admission.Create, admission.Update, admission.Delete, admission.Connect} {
				for _, obj := range odd {
					for _, old := range odd {
						a := attrs(op, res.group, res.resource, res.sub, "ns", "n1", obj, old)
						a.User = node1
						func() {
							defer func() {
								if v := recover(); v != nil {
									t.Fatalf("%s panicked on %s %s/%s/%s with %T and %T: %v", name, op, res.group, res.resource, res.sub, obj, old, v)
								}
							}()
							if m, ok := p.(admission.Mutator); ok {
								_ = m.Admit(context.Background(), a)
							}
							if v, ok := p.(admission.Validator); ok {
								_ = v.Validate(context.Background(), a)
							}
						}()
					}
				}
			}
		}
	}
}
