package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// recorder is an authorizer that allows what allow says and records every question.
type recorder struct {
	mu    sync.Mutex
	asked []string
	allow func(admission.AuthorizationAttributes) bool
}

func (r *recorder) Authorize(_ context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, describe(a))
	if r.allow(a) {
		return true, "", nil
	}
	return false, "RBAC: not allowed", nil
}

// describe is "verb group/resource/subresource ns/name".
func describe(a admission.AuthorizationAttributes) string {
	return fmt.Sprintf("%s %s/%s/%s %s/%s", a.Verb, a.APIGroup, a.Resource, a.Subresource, a.Namespace, a.Name)
}

func ref(apiVersion, kind, name string, block *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), BlockOwnerDeletion: block}
}

func cm(refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", ResourceVersion: "4", OwnerReferences: refs}}
}

// resolverObjects is a KindResolver on the objects (as the admission service may offer one).
type resolverObjects struct {
	*admissiontest.Objects
}

func (resolverObjects) ResourcesFor(gvk schema.GroupVersionKind) ([]ResourceMapping, error) {
	if gvk.Group == "example.com" && gvk.Kind == "Widget" {
		return []ResourceMapping{{Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Namespaced: true}}, nil
	}
	return builtinKinds{}.ResourcesFor(gvk)
}

func TestOwnerReferencesPermissionEnforcement(t *testing.T) {
	yes := ptr(true)
	allowAll := func(admission.AuthorizationAttributes) bool { return true }
	noDelete := func(a admission.AuthorizationAttributes) bool { return a.Verb != "delete" }
	noFinalizers := func(a admission.AuthorizationAttributes) bool { return a.Subresource != "finalizers" }
	onlyDeploymentFinalizers := func(a admission.AuthorizationAttributes) bool {
		return a.Subresource != "finalizers" || (a.Resource == "deployments" && a.Name == "web" && a.Namespace == "ns")
	}
	const forbiddenBlock = `configmaps "c" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: RBAC: not allowed, <nil>`
	cases := []struct {
		name      string
		op        admission.Operation
		sub       string
		obj, old  *corev1.ConfigMap
		allow     func(admission.AuthorizationAttributes) bool
		resolver  bool
		wantErr   string
		wantAsked []string
	}{
		{name: "upstream: unchanged references need nothing", op: admission.Update, obj: cm(ref("apps/v1", "Deployment", "web", nil)), old: cm(ref("apps/v1", "Deployment", "web", nil)), allow: noDelete},
		{name: "upstream: setting references on create needs no delete permission", op: admission.Create, obj: cm(ref("apps/v1", "Deployment", "web", nil)), allow: noDelete},
		{name: "upstream: changing references needs delete on the object", op: admission.Update, obj: cm(ref("apps/v1", "Deployment", "web", nil)), old: cm(), allow: noDelete,
			wantErr:   `configmaps "c" is forbidden: cannot set an ownerRef on a resource you can't delete: RBAC: not allowed, <nil>`,
			wantAsked: []string{"delete /configmaps/ ns/c"}},
		{name: "upstream: removing references is a change too", op: admission.Update, obj: cm(), old: cm(ref("apps/v1", "Deployment", "web", nil)), allow: noDelete,
			wantErr: `configmaps "c" is forbidden: cannot set an ownerRef on a resource you can't delete: RBAC: not allowed, <nil>`},
		{name: "upstream: whoever may update every finalizer may block any owner", op: admission.Create, obj: cm(ref("apps/v1", "Deployment", "web", yes)), allow: allowAll,
			wantAsked: []string{"update */*/finalizers */*"}},
		{name: "upstream: blocking an owner needs update on its finalizers, in the dependent's namespace", op: admission.Create,
			obj: cm(ref("apps/v1", "Deployment", "web", yes)), allow: onlyDeploymentFinalizers,
			wantAsked: []string{"update */*/finalizers */*", "update apps/deployments/finalizers ns/web"}},
		{name: "upstream: refused without it", op: admission.Create, obj: cm(ref("apps/v1", "Deployment", "db", yes)), allow: onlyDeploymentFinalizers, wantErr: forbiddenBlock},
		{name: "upstream: a cluster-scoped owner is checked without a namespace", op: admission.Create, obj: cm(ref("v1", "Node", "n1", yes)), allow: noFinalizers,
			wantErr: forbiddenBlock, wantAsked: []string{"update */*/finalizers */*", "update /nodes/finalizers /n1"}},
		{name: "renamed groups: an owner of an upstream group is checked under Platform's name", op: admission.Create, obj: cm(ref("networking.k8s.io/v1", "Ingress", "web", yes)), allow: noFinalizers,
			wantErr: forbiddenBlock, wantAsked: []string{"update */*/finalizers */*", "update " + naming.Group("networking.k8s.io") + "/ingresses/finalizers ns/web"}},
		{name: "upstream: irregular plurals resolve (Endpoints)", op: admission.Create, obj: cm(ref("v1", "Endpoints", "e", yes)), allow: noFinalizers,
			wantErr: forbiddenBlock, wantAsked: []string{"update */*/finalizers */*", "update /endpoints/finalizers ns/e"}},
		{name: "upstream: an owner kind that cannot be mapped is refused", op: admission.Create, obj: cm(ref("example.com/v1", "Widget", "w", yes)), allow: noFinalizers,
			wantErr: `configmaps "c" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion example.com/v1 Kind Widget: no matches for kind "Widget" in version "example.com/v1"`},
		{name: "with a resolver from the service, custom kinds resolve", op: admission.Create, obj: cm(ref("example.com/v1", "Widget", "w", yes)), allow: noFinalizers, resolver: true,
			wantErr: forbiddenBlock, wantAsked: []string{"update */*/finalizers */*", "update example.com/widgets/finalizers ns/w"}},
		{name: "upstream: a reference that was blocking already needs no finalizers permission", op: admission.Update,
			obj: cm(ref("apps/v1", "Deployment", "db", yes), ref("v1", "Pod", "p", nil)), old: cm(ref("apps/v1", "Deployment", "db", yes)), allow: noFinalizers,
			wantAsked: []string{"delete /configmaps/ ns/c"}},
		{name: "upstream: turning blockOwnerDeletion on needs it", op: admission.Update,
			obj: cm(ref("apps/v1", "Deployment", "db", yes)), old: cm(ref("apps/v1", "Deployment", "db", nil)), allow: noFinalizers, wantErr: forbiddenBlock},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{allow: tc.allow}
			deps := admissiontest.Deps(&admissiontest.Objects{}, rec)
			if tc.resolver {
				deps.Objects = resolverObjects{&admissiontest.Objects{}}
			}
			p, err := NewOwnerReferencesPermissionEnforcement(deps, nil)
			if err != nil {
				t.Fatal(err)
			}
			a := attrs(tc.op, "", "configmaps", tc.sub, "ns", "c", tc.obj, nil)
			if tc.old != nil {
				a.OldObject = tc.old
			}
			a.User = &admission.User{Name: "alice"}
			expect(t, p.(admission.Validator).Validate(context.Background(), a), tc.wantErr)
			if tc.wantAsked != nil && strings.Join(rec.asked, "; ") != strings.Join(tc.wantAsked, "; ") {
				t.Errorf("asked\n %s\nwant\n %s", strings.Join(rec.asked, "; "), strings.Join(tc.wantAsked, "; "))
			}
		})
	}
}

// Upstream rule: pod status updates are exempt (the kubelet writes them); and the plugin's
// interest is the writes that change owner references, nothing by resource.
func TestOwnerReferencesExemptionsAndInterest(t *testing.T) {
	rec := &recorder{allow: func(admission.AuthorizationAttributes) bool { return false }}
	p, _ := NewOwnerReferencesPermissionEnforcement(admissiontest.Deps(&admissiontest.Objects{}, rec), nil)
	pod := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: refs}}
	}
	a := attrs(admission.Update, "", "pods", "status", "ns", "p", pod(ref("apps/v1", "ReplicaSet", "rs", ptr(true))), pod())
	if err := p.(admission.Validator).Validate(context.Background(), a); err != nil || len(rec.asked) != 0 {
		t.Errorf("pods/status: %v, asked %v", err, rec.asked)
	}
	d := p.(admission.DynamicInterest)
	if !d.OwnerReferences() || len(d.Namespaces()) != 0 || len(p.(admission.Interested).Interests()) != 0 {
		t.Errorf("interest: ownerReferences %v, namespaces %v, rules %v", d.OwnerReferences(), d.Namespaces(), p.(admission.Interested).Interests())
	}
	select {
	case <-d.Changed():
		t.Error("Changed fired for a fixed interest")
	default:
	}
}
