package admission_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// encode is how the gateway sends an object: JSON of its Go type.
func encode(t *testing.T, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeTyped(t *testing.T) {
	rbacGroup := naming.Group("rbac.authorization.k8s.io")
	cases := []struct {
		rule string
		gvk  schema.GroupVersionKind
		obj  runtime.Object
		want reflect.Type
	}{
		{
			rule: "core kinds are their k8s.io/api Go types",
			gvk:  schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
			obj: &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}}},
			want: reflect.TypeOf(&corev1.Pod{}),
		},
		{
			rule: "groups upstream keeps short (apps) are typed",
			gvk:  schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			obj:  &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Name: "d"}},
			want: reflect.TypeOf(&appsv1.Deployment{}),
		},
		{
			rule: "renamed groups are typed under Platform's group name",
			gvk:  schema.GroupVersionKind{Group: rbacGroup, Version: "v1", Kind: "Role"},
			obj: &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: rbacGroup + "/v1", Kind: "Role"}, ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
			want: reflect.TypeOf(&rbacv1.Role{}),
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			data := encode(t, c.obj)
			got, err := admission.Decode(c.gvk, data)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(got) != c.want {
				t.Fatalf("Decode gave %T, want %v", got, c.want)
			}
			if got.GetObjectKind().GroupVersionKind() != c.gvk {
				t.Errorf("kind %v, want %v", got.GetObjectKind().GroupVersionKind(), c.gvk)
			}
			if !reflect.DeepEqual(got, c.obj) {
				t.Errorf("decoded %+v\nwant %+v", got, c.obj)
			}
			out, err := admission.Encode(got, c.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != string(data) {
				t.Errorf("round trip changed the JSON:\n in  %s\n out %s", data, out)
			}
			if fresh, ok := admission.NewObject(c.gvk); !ok || reflect.TypeOf(fresh) != c.want {
				t.Errorf("NewObject(%v) = %T, %v", c.gvk, fresh, ok)
			}
			if m := admission.Accessor(got); m == nil || m.GetName() != c.obj.(metav1.Object).GetName() {
				t.Errorf("Accessor(%T) = %v", got, m)
			}
		})
	}
}

// Kinds the gateway serves as custom resources (and upstream's group names, which Platform does
// not serve built-in kinds under) are unstructured; integers stay integers, unknown fields stay.
func TestDecodeCustom(t *testing.T) {
	cases := []struct {
		rule string
		gvk  schema.GroupVersionKind
	}{
		{rule: "a custom resource", gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}},
		{rule: "a built-in kind under upstream's group name is not ours", gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}},
		{rule: "a version the gateway does not serve typed", gvk: schema.GroupVersionKind{Version: "v2", Kind: "Pod"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			data := []byte(`{"apiVersion":"` + c.gvk.GroupVersion().String() + `","kind":"` + c.gvk.Kind + `","metadata":{"name":"w","generateName":"w-"},` +
				`"spec":{"big":9007199254740993,"ratio":0.5,"nested":{"list":[1,"two",null,true]}}}`)
			got, err := admission.Decode(c.gvk, data)
			if err != nil {
				t.Fatal(err)
			}
			u, ok := got.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("Decode gave %T, want *unstructured.Unstructured", got)
			}
			if big, _, _ := unstructured.NestedInt64(u.Object, "spec", "big"); big != 9007199254740993 {
				t.Errorf("spec.big = %v: integers beyond float64 precision must survive", u.Object["spec"])
			}
			if u.GetName() != "w" || u.GetGenerateName() != "w-" || admission.Accessor(u).GetName() != "w" {
				t.Errorf("metadata %v", u.Object["metadata"])
			}
			out, err := admission.Encode(u, c.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonSame(t, out, data) || !strings.Contains(string(out), "9007199254740993") {
				t.Errorf("round trip:\n in  %s\n out %s", data, out)
			}
			if _, ok := admission.NewObject(c.gvk); ok {
				t.Errorf("NewObject(%v) is typed", c.gvk)
			}
		})
	}
}

func TestDecodeEdges(t *testing.T) {
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for _, data := range []string{"", "null"} {
		if obj, err := admission.Decode(pod, []byte(data)); obj != nil || err != nil {
			t.Errorf("Decode(%q) = %v, %v; want nil, nil (no object, as for DELETE)", data, obj, err)
		}
	}
	for _, c := range []struct {
		gvk  schema.GroupVersionKind
		data string
	}{
		{pod, `{"metadata":`},
		{pod, `{"spec":{"containers":"not a list"}}`},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, `[1,2]`},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, `{"a":`},
	} {
		if _, err := admission.Decode(c.gvk, []byte(c.data)); err == nil || !strings.Contains(err.Error(), "decoding "+c.gvk.Kind) {
			t.Errorf("Decode(%v, %s) = %v, want an error naming the kind", c.gvk.Kind, c.data, err)
		}
	}
	if out, err := admission.Encode(nil, pod); out != nil || err != nil {
		t.Errorf("Encode(nil) = %s, %v", out, err)
	}
	// Encode sets the kind a plugin may have left empty.
	out, err := admission.Encode(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if err != nil || !strings.Contains(string(out), `"kind":"ConfigMap","apiVersion":"v1"`) {
		t.Errorf("Encode = %s, %v", out, err)
	}
	if admission.Accessor(&metav1.Status{}) != nil {
		t.Error("Accessor of an object without metadata is not nil")
	}
}
