package admission

import (
	"encoding/json"
	"fmt"
	"reflect"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"platform.io/libs/naming"
)

// types maps the kinds the gateway serves (under Platform's group names) to their Go types, so
// plugins see typed objects.
var types = func() map[schema.GroupVersionKind]reflect.Type {
	out := map[schema.GroupVersionKind]reflect.Type{}
	for _, install := range []func(*runtime.Scheme) error{
		admissionregistrationv1.AddToScheme, appsv1.AddToScheme, authenticationv1.AddToScheme, autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme, batchv1.AddToScheme, certificatesv1.AddToScheme, coordinationv1.AddToScheme,
		corev1.AddToScheme, discoveryv1.AddToScheme, eventsv1.AddToScheme, networkingv1.AddToScheme, nodev1.AddToScheme,
		policyv1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme, storagev1.AddToScheme,
	} {
		s := runtime.NewScheme()
		if err := install(s); err != nil {
			panic(err)
		}
		for gvk, t := range s.AllKnownTypes() {
			gvk.Group = naming.Group(gvk.Group)
			out[gvk] = t
		}
	}
	return out
}()

// NewObject returns an empty typed object of a kind the gateway serves as built in, and false for
// other kinds (custom resources).
func NewObject(gvk schema.GroupVersionKind) (runtime.Object, bool) {
	t, ok := types[gvk]
	if !ok {
		return nil, false
	}
	obj, ok := reflect.New(t).Interface().(runtime.Object)
	return obj, ok
}

// Decode reads an object's JSON: typed for built-in kinds, unstructured for others. Empty or null
// data is nil.
func Decode(gvk schema.GroupVersionKind, data []byte) (runtime.Object, error) {
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	if obj, ok := NewObject(gvk); ok {
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", gvk.Kind, err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj, nil
	}
	u := &unstructured.Unstructured{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", gvk.Kind, err)
	}
	return u, nil
}

// Encode writes an object's JSON (with its kind and apiVersion).
func Encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	if obj == nil {
		return nil, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return json.Marshal(u.Object)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(obj)
}

// Accessor returns an object's metadata.
func Accessor(obj runtime.Object) metav1.Object {
	if m, ok := obj.(metav1.Object); ok {
		return m
	}
	return nil
}
