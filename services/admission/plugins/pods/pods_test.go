package pods

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		User:        &admission.User{Name: "alice", Groups: []string{"system:authenticated"}},
	}
	a.RequestKind, a.RequestResource, a.RequestSubresource = a.Kind, a.Resource, sub
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

// podReq is a request on the pods resource (or a subresource) in namespace "ns".
func podReq(op admission.Operation, sub string, pod, old *corev1.Pod) *admission.Attributes {
	var o, oo runtime.Object
	if pod != nil {
		o = pod
	}
	if old != nil {
		oo = old
	}
	return req(op, "", "pods", sub, "Pod", "ns", o, oo)
}

// pod returns a pod named name in "ns" with one container per image.
func pod(name string, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Image: img})
	}
	return p
}

// build makes plugin name from this package's registry with config over objects.
func build(t *testing.T, name string, objects *admissiontest.Objects, config string) admission.Plugin {
	t.Helper()
	r := admission.NewRegistry()
	Register(r)
	f, ok := r.Factory(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	var cfg []byte
	if config != "" {
		cfg = []byte(config)
	}
	p, err := f(admissiontest.Deps(objects, nil), cfg)
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return p
}

// admit runs the plugin's mutating half (if any) and then its validating half, as the chain
// does.
func admit(p admission.Plugin, a *admission.Attributes) error {
	ctx := context.Background()
	if m, ok := p.(admission.Mutator); ok {
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
	}
	if v, ok := p.(admission.Validator); ok {
		return v.Validate(ctx, a)
	}
	return nil
}

// wantStatus checks err against an expected HTTP code and message ("" code 0: no error).
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
	opOK := false
	for _, op := range in.Operations {
		if op == "*" || op == a.Operation {
			opOK = true
		}
	}
	groupOK := false
	for _, g := range in.APIGroups {
		if g == "*" || g == a.Resource.Group {
			groupOK = true
		}
	}
	resOK := false
	for _, r := range in.Resources {
		res, sub, _ := strings.Cut(r, "/")
		if (res == "*" || res == a.Resource.Resource) && (sub == a.Subresource || (sub == "*" && a.Subresource != "")) {
			resOK = true
		}
		if r == "*/*" {
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

// TestRegisterAndInterests: every plugin of the package registers under its name, builds
// without configuration (as a default-enabled plugin must), declares an interest, and that
// interest covers exactly the requests the plugin acts on in these samples (upstream's
// Handles plus resource checks).
func TestRegisterAndInterests(t *testing.T) {
	create := func(res, sub string) *admission.Attributes {
		return req(admission.Create, "", res, sub, "X", "ns", nil, nil)
	}
	update := func(group, res, sub string) *admission.Attributes {
		return req(admission.Update, group, res, sub, "X", "ns", nil, nil)
	}
	del := req(admission.Delete, "", "pods", "", "Pod", "ns", nil, nil)
	status := update("", "pods", "status")
	cases := []struct {
		plugin string
		yes    []*admission.Attributes
		no     []*admission.Attributes
	}{
		{admission.AlwaysPullImages, []*admission.Attributes{create("pods", ""), update("", "pods", "")}, []*admission.Attributes{del, status, create("services", "")}},
		{admission.DefaultTolerationSeconds, []*admission.Attributes{create("pods", ""), update("", "pods", "")}, []*admission.Attributes{del, status}},
		{admission.ExtendedResourceToleration, []*admission.Attributes{create("pods", "")}, []*admission.Attributes{update("", "pods", ""), del}},
		{admission.LimitPodHardAntiAffinityTopology, []*admission.Attributes{create("pods", ""), update("", "pods", "")}, []*admission.Attributes{del, status}},
		{admission.PodNodeSelector, []*admission.Attributes{create("pods", "")}, []*admission.Attributes{update("", "pods", ""), del}},
		{admission.PodTolerationRestriction, []*admission.Attributes{create("pods", ""), update("", "pods", "")}, []*admission.Attributes{del, status}},
		{admission.SecurityContextDeny, []*admission.Attributes{create("pods", ""), update("", "pods", "")}, []*admission.Attributes{del, status}},
		{admission.Priority, []*admission.Attributes{create("pods", ""), update("", "pods", ""), update(schedulingGroup, "priorityclasses", "")}, []*admission.Attributes{del, status, update("", "priorityclasses", "")}},
		{admission.RuntimeClass, []*admission.Attributes{create("pods", "")}, []*admission.Attributes{update("", "pods", ""), del}},
		{admission.ServiceAccount, []*admission.Attributes{create("pods", ""), update("", "pods", "ephemeralcontainers")}, []*admission.Attributes{update("", "pods", ""), del, status}},
		{admission.LimitRanger, []*admission.Attributes{create("pods", ""), update("", "pods", "resize"), create("persistentvolumeclaims", ""), update("", "persistentvolumeclaims", "")}, []*admission.Attributes{update("", "pods", ""), del, status}},
		{admission.PodSecurity, []*admission.Attributes{create("pods", ""), update("", "pods", ""), update("", "pods", "ephemeralcontainers"), update("", "namespaces", ""), create("podtemplates", ""), update("apps", "deployments", ""), update("batch", "cronjobs", "")}, []*admission.Attributes{del, status, update("apps", "deployments", "scale"), create("services", "")}},
	}
	for _, c := range cases {
		t.Run(c.plugin, func(t *testing.T) {
			p := build(t, c.plugin, &admissiontest.Objects{}, "")
			if p.Name() != c.plugin {
				t.Errorf("Name() = %q", p.Name())
			}
			for _, a := range c.yes {
				if !interested(p, a) {
					t.Errorf("not interested in %s %s/%s/%s", a.Operation, a.Resource.Group, a.Resource.Resource, a.Subresource)
				}
			}
			for _, a := range c.no {
				if interested(p, a) {
					t.Errorf("interested in %s %s/%s/%s", a.Operation, a.Resource.Group, a.Resource.Resource, a.Subresource)
				}
			}
		})
	}
}

// TestPluginsIgnoreOddObjects: no plugin panics on objects it does not expect (nil objects,
// unstructured objects, other kinds under the pods resource) and none acts on other resources.
func TestPluginsIgnoreOddObjects(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	names := []string{
		admission.AlwaysPullImages, admission.DefaultTolerationSeconds, admission.ExtendedResourceToleration,
		admission.LimitPodHardAntiAffinityTopology, admission.PodNodeSelector, admission.PodTolerationRestriction,
		admission.SecurityContextDeny, admission.Priority, admission.RuntimeClass, admission.ServiceAccount,
		admission.LimitRanger, admission.PodSecurity,
	}
	odd := []*admission.Attributes{
		req(admission.Create, "", "configmaps", "", "ConfigMap", "ns", &corev1.ConfigMap{}, nil),
		req(admission.Delete, "", "pods", "", "Pod", "ns", nil, pod("p")),
		req(admission.Update, "", "pods", "status", "Pod", "ns", pod("p"), pod("p")),
		req(admission.Create, "", "pods", "", "Pod", "ns", nil, nil),
		req(admission.Create, "", "pods", "", "Pod", "ns", &corev1.Service{}, nil),
		req(admission.Create, "", "namespaces", "", "Namespace", "", nil, nil),
		req(admission.Update, "apps", "deployments", "", "Deployment", "ns", &corev1.ConfigMap{}, nil),
		req(admission.Create, "apps", "deployments", "", "Deployment", "ns", (*appsv1.Deployment)(nil), nil),
		req(admission.Create, "", "pods", "", "Pod", "ns", (*corev1.Pod)(nil), nil),
		req(admission.Update, "", "pods", "ephemeralcontainers", "Pod", "ns", (*corev1.Pod)(nil), (*corev1.Pod)(nil)),
		req(admission.Create, "", "persistentvolumeclaims", "", "PersistentVolumeClaim", "ns", (*corev1.PersistentVolumeClaim)(nil), nil),
	}
	for _, name := range names {
		p := build(t, name, objects, "")
		for _, a := range odd {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s panicked on %s %s/%s: %v", name, a.Operation, a.Resource.Resource, a.Subresource, r)
					}
				}()
				_ = admit(p, a)
			}()
		}
	}
}
