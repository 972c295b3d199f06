package server_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
	"platform.io/services/admission/server"
)

// TestDeletesPassEveryPlugin: a delete carries no object (the stored one is the old object), and
// no built-in plugin acts on the deletes of pods, claims, services or quotas, as upstream's
// handle only creates and updates of them (NamespaceLifecycle's protected namespaces and
// AlwaysDeny aside). Each plugin, alone and with its default configuration, lets such a delete
// through. The gateway sends deletes to admission in every namespace with a ResourceQuota, so a
// plugin that read the missing object there refused every delete: DefaultTolerationSeconds
// answered "expected *api.Pod but got <nil>", and the namespace controller could never empty such
// a namespace.
func TestDeletesPassEveryPlugin(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	objects.ServiceAccountList.Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"}})
	objects.ResourceQuotaList.Add(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("10")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}})
	olds := map[string]runtime.Object{
		"pods": &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: "5"},
			Spec: corev1.PodSpec{ServiceAccountName: "default", NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
		"persistentvolumeclaims": &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: "5"}},
		"services":               &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: "5"}},
		"resourcequotas":         &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: "5"}},
		"configmaps":             &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", ResourceVersion: "5"}},
	}
	reg := server.Plugins()
	for _, name := range admission.Order {
		if name == admission.AlwaysDeny {
			continue
		}
		if _, ok := reg.Factory(name); !ok {
			continue
		}
		chain, err := admission.Build(reg, []string{name}, nil, admissiontest.Deps(objects, nil), nil)
		if err != nil {
			continue // needs a configuration file (ImagePolicyWebhook, EventRateLimit)
		}
		for resource, old := range olds {
			a := &admission.Attributes{
				Operation: admission.Delete,
				Kind:      schema.GroupVersionKind{Version: "v1", Kind: kindOf(resource)},
				Resource:  schema.GroupVersionResource{Version: "v1", Resource: resource},
				Namespace: "ns", Name: "x", OldObject: old.DeepCopyObject(),
				Options: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","gracePeriodSeconds":0}`),
				User:    &admission.User{Name: "alice", Groups: []string{"system:authenticated"}},
			}
			if err := chain.Admit(context.Background(), a); err != nil {
				t.Errorf("%s, mutating phase of a delete of %s: %v", name, resource, err)
			}
			if err := chain.Validate(context.Background(), a); err != nil {
				t.Errorf("%s, validating phase of a delete of %s: %v", name, resource, err)
			}
		}
	}
}

func kindOf(resource string) string {
	return map[string]string{"pods": "Pod", "persistentvolumeclaims": "PersistentVolumeClaim", "services": "Service",
		"resourcequotas": "ResourceQuota", "configmaps": "ConfigMap"}[resource]
}
