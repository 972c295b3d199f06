package admission_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Upstream's admission.NewForbidden: 403 naming the resource and the request's name, else the
// object's name, else its generateName (names are generated after admission), else "Unknown".
func TestForbidden(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	roles := schema.GroupVersionResource{Group: naming.Group("rbac.authorization.k8s.io"), Version: "v1", Resource: "roles"}
	cause := errors.New("no way")
	cases := []struct {
		rule    string
		a       *admission.Attributes
		message string
	}{
		{
			rule:    "the request's name first",
			a:       &admission.Attributes{Resource: pods, Name: "req", Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "obj"}}},
			message: `pods "req" is forbidden: no way`,
		},
		{
			rule:    "else the object's name",
			a:       &admission.Attributes{Resource: pods, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "obj", GenerateName: "gen-"}}},
			message: `pods "obj" is forbidden: no way`,
		},
		{
			rule:    "else the object's generateName",
			a:       &admission.Attributes{Resource: pods, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}}},
			message: `pods "gen-" is forbidden: no way`,
		},
		{
			rule:    "else Unknown",
			a:       &admission.Attributes{Resource: pods, Object: &corev1.Pod{}},
			message: `pods "Unknown" is forbidden: no way`,
		},
		{
			rule:    "no object (DELETE of a collection): Unknown",
			a:       &admission.Attributes{Resource: pods},
			message: `pods "Unknown" is forbidden: no way`,
		},
		{
			rule:    "a typed nil object does not panic",
			a:       &admission.Attributes{Resource: pods, Object: (*corev1.Pod)(nil)},
			message: `pods "Unknown" is forbidden: no way`,
		},
		{
			rule: "custom resources' names",
			a: &admission.Attributes{Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
				Object: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generateName": "w-"}}}},
			message: `widgets.example.com "w-" is forbidden: no way`,
		},
		{
			rule:    "the group is part of the resource",
			a:       &admission.Attributes{Resource: roles, Namespace: "ns", Name: "admin"},
			message: `roles.` + naming.Group("rbac.authorization.k8s.io") + ` "admin" is forbidden: no way`,
		},
		{
			rule:    "the subresource is not part of the resource",
			a:       &admission.Attributes{Resource: pods, Subresource: "status", Name: "p"},
			message: `pods "p" is forbidden: no way`,
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			err := admission.Forbidden(c.a, cause)
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Forbidden = %T, want a StatusError", err)
			}
			st := se.Status()
			if st.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != c.message {
				t.Fatalf("status %d %s %q, want 403 Forbidden %q", st.Code, st.Reason, st.Message, c.message)
			}
			if st.Details == nil || st.Details.Kind != c.a.Resource.Resource || st.Details.Group != c.a.Resource.Group {
				t.Errorf("details %+v", st.Details)
			}
		})
	}
	t.Run("a Forbidden error is not wrapped twice", func(t *testing.T) {
		inner := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("node says no"))
		if got := admission.Forbidden(&admission.Attributes{Resource: pods, Name: "p"}, inner); got != inner {
			t.Fatalf("Forbidden = %v, want the inner error", got)
		}
	})
}

// Warnings accumulate in order; audit annotations keep the first value of a key (upstream's
// AddAnnotation refuses to overwrite); both are copies and safe to add from parallel webhooks.
func TestWarningsAndAnnotations(t *testing.T) {
	a := &admission.Attributes{}
	if len(a.Warnings()) != 0 || len(a.Annotations()) != 0 {
		t.Fatal("a new request has warnings or annotations")
	}
	a.AddWarning("first")
	a.AddWarning("second")
	a.AddWarning("first")
	a.AddAnnotation("k", "v1")
	a.AddAnnotation("k", "v2")
	a.AddAnnotation("other", "x")
	if w := a.Warnings(); !slices.Equal(w, []string{"first", "second", "first"}) {
		t.Errorf("Warnings() = %q", w)
	}
	ann := a.Annotations()
	if ann["k"] != "v1" || ann["other"] != "x" || len(ann) != 2 {
		t.Errorf("Annotations() = %v, want the first value of k", ann)
	}
	ann["k"] = "changed"
	a.Warnings()[0] = "changed"
	if a.Annotations()["k"] != "v1" || a.Warnings()[0] != "first" {
		t.Error("the returned map or slice aliases the request's")
	}

	// Validating webhooks run in parallel and record concurrently.
	p := &admission.Attributes{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.AddWarning(fmt.Sprint("w", i))
			p.AddAnnotation(fmt.Sprint("k", i%5), fmt.Sprint(i))
			p.RequestReinvocation()
			_ = p.Warnings()
			_ = p.Annotations()
		}()
	}
	wg.Wait()
	if len(p.Warnings()) != 50 || len(p.Annotations()) != 5 || !p.ReinvocationRequested() {
		t.Fatalf("%d warnings, %d annotations, reinvocation %v", len(p.Warnings()), len(p.Annotations()), p.ReinvocationRequested())
	}
}

func TestUserAndResource(t *testing.T) {
	var nobody *admission.User
	if nobody.InGroup("system:authenticated") {
		t.Error("a nil user is in a group")
	}
	u := &admission.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	if !u.InGroup("system:nodes") || u.InGroup("system:masters") || u.InGroup("system:node") {
		t.Error("InGroup")
	}
	a := &admission.Attributes{Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Subresource: "status"}
	if !a.Is("", "pods", "status") || a.Is("", "pods", "") || a.Is("apps", "pods", "status") {
		t.Error("Is")
	}
	if a.GroupResource() != (schema.GroupResource{Resource: "pods"}) {
		t.Errorf("GroupResource() = %v", a.GroupResource())
	}
}
