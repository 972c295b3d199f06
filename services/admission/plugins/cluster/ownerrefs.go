package cluster

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// ResourceMapping is one resource serving a kind, and whether it is namespaced.
type ResourceMapping struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
}

// KindResolver resolves a kind (Platform's group name) to the resources that serve it. An
// admission.Objects implementation that knows the served resources (custom ones included) may
// implement it; OwnerReferencesPermissionEnforcement then uses it for owner references. Without
// it, the built-in kinds resolve from the Go types and a table of cluster-scoped kinds, and other
// kinds do not resolve (setting blockOwnerDeletion on them is then refused, as upstream refuses
// a kind it cannot map).
type KindResolver interface {
	ResourcesFor(gvk schema.GroupVersionKind) ([]ResourceMapping, error)
}

// OwnerReferencesPermissionEnforcement: changing an object's owner references needs the
// permission to delete the object (the garbage collector would delete it for the owner), and
// making a reference block the owner's deletion needs the permission to update the owner's
// finalizers.
type OwnerReferencesPermissionEnforcement struct {
	authz    admission.Authorizer
	resolver KindResolver
	never    chan struct{}
}

var (
	_ admission.Validator       = (*OwnerReferencesPermissionEnforcement)(nil)
	_ admission.Interested      = (*OwnerReferencesPermissionEnforcement)(nil)
	_ admission.DynamicInterest = (*OwnerReferencesPermissionEnforcement)(nil)
)

// NewOwnerReferencesPermissionEnforcement builds the plugin.
func NewOwnerReferencesPermissionEnforcement(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.OwnerReferencesPermissionEnforcement, config)
	p := &OwnerReferencesPermissionEnforcement{authz: deps.Authorizer, resolver: builtinKinds{}, never: make(chan struct{})}
	if r, ok := deps.Objects.(KindResolver); ok {
		p.resolver = r
	}
	return p, nil
}

// Name is the plugin's name.
func (p *OwnerReferencesPermissionEnforcement) Name() string {
	return admission.OwnerReferencesPermissionEnforcement
}

// Interests: none by resource; every write that sets or changes owner references comes through
// OwnerReferences.
func (p *OwnerReferencesPermissionEnforcement) Interests() []admission.Interest { return nil }

// Namespaces: none.
func (p *OwnerReferencesPermissionEnforcement) Namespaces() []string { return nil }

// OwnerReferences is true: the plugin acts on writes that set or change owner references.
func (p *OwnerReferencesPermissionEnforcement) OwnerReferences() bool { return true }

// Changed never fires: the interest is fixed.
func (p *OwnerReferencesPermissionEnforcement) Changed() <-chan struct{} { return p.never }

// Validate checks the permissions of a write that changes owner references.
func (p *OwnerReferencesPermissionEnforcement) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create && a.Operation != admission.Update {
		return nil
	}
	// Pod status updates are exempt, as upstream (the kubelet writes them).
	if a.Is("", "pods", "status") {
		return nil
	}
	if !changesOwnerReferences(a.Object, a.OldObject) {
		return nil
	}
	// Whoever creates an object could have not created it: setting references on create needs
	// no delete permission. Blocking an owner's deletion is another matter (below).
	if a.Operation != admission.Create {
		allowed, reason, err := p.authz.Authorize(ctx, admission.AuthorizationAttributes{
			User: a.User, Verb: "delete", ResourceRequest: true, Namespace: a.Namespace,
			APIGroup: a.Resource.Group, APIVersion: a.Resource.Version, Resource: a.Resource.Resource,
			Subresource: a.Subresource, Name: a.Name,
		})
		if !allowed {
			return admission.Forbidden(a, fmt.Errorf("cannot set an ownerRef on a resource you can't delete: %v, %v", reason, err))
		}
	}
	blocking := newBlockingRefs(a.Object, a.OldObject)
	if len(blocking) == 0 {
		return nil
	}
	// One check first: whoever may update every finalizer needs no per-owner check (and no kind
	// resolution, which may fail for kinds that are not served yet).
	if allowed, _, _ := p.authz.Authorize(ctx, admission.AuthorizationAttributes{
		User: a.User, Verb: "update", ResourceRequest: true, APIGroup: "*", APIVersion: "*", Resource: "*",
		Subresource: "finalizers", Name: "*", Namespace: "*",
	}); allowed {
		return nil
	}
	for _, ref := range blocking {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		var mappings []ResourceMapping
		if err == nil {
			mappings, err = p.resolver.ResourcesFor(schema.GroupVersionKind{Group: naming.Group(gv.Group), Version: gv.Version, Kind: ref.Kind})
		}
		if err != nil {
			return admission.Forbidden(a, fmt.Errorf("cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion %s Kind %s: %v", ref.APIVersion, ref.Kind, err))
		}
		for _, m := range mappings {
			attrs := admission.AuthorizationAttributes{
				User: a.User, Verb: "update", ResourceRequest: true,
				APIGroup: m.Resource.Group, APIVersion: m.Resource.Version, Resource: m.Resource.Resource,
				Subresource: "finalizers", Name: ref.Name,
			}
			if m.Namespaced {
				// A namespaced owner is in the dependent's namespace.
				attrs.Namespace = a.Namespace
			}
			allowed, reason, err := p.authz.Authorize(ctx, attrs)
			if !allowed {
				return admission.Forbidden(a, fmt.Errorf("cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: %v, %v", reason, err))
			}
		}
	}
	return nil
}

func ownerRefs(obj runtime.Object) ([]metav1.OwnerReference, bool) {
	if isNil(obj) {
		return nil, false
	}
	m := admission.Accessor(obj)
	if m == nil {
		return nil, false
	}
	return m.GetOwnerReferences(), true
}

// changesOwnerReferences tells whether the write sets references (create) or changes them.
func changesOwnerReferences(obj, old runtime.Object) bool {
	refs, ok := ownerRefs(obj)
	if !ok {
		return false
	}
	if isNil(old) {
		return len(refs) > 0
	}
	oldRefs, ok := ownerRefs(old)
	if !ok {
		return false
	}
	if len(refs) != len(oldRefs) {
		return true
	}
	for i := range refs {
		if !apiequality.Semantic.DeepEqual(refs[i], oldRefs[i]) {
			return true
		}
	}
	return false
}

// newBlockingRefs returns the references that block their owner's deletion now and did not
// before (new references, or blockOwnerDeletion turned on).
func newBlockingRefs(obj, old runtime.Object) []metav1.OwnerReference {
	refs, ok := ownerRefs(obj)
	if !ok {
		return nil
	}
	var blocking []metav1.OwnerReference
	for _, r := range refs {
		if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			blocking = append(blocking, r)
		}
	}
	if len(blocking) == 0 || isNil(old) {
		return blocking
	}
	oldRefs, ok := ownerRefs(old)
	if !ok {
		return blocking
	}
	before := map[types.UID]metav1.OwnerReference{}
	for _, r := range oldRefs {
		before[r.UID] = r
	}
	var out []metav1.OwnerReference
	for _, r := range blocking {
		o, existed := before[r.UID]
		if !existed || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
			out = append(out, r)
		}
	}
	return out
}

// builtinKinds resolves the kinds the platform serves as built in (admission.BuiltinMapping).
type builtinKinds struct{}

// ResourcesFor resolves a built-in kind; other kinds are not found.
func (builtinKinds) ResourcesFor(gvk schema.GroupVersionKind) ([]ResourceMapping, error) {
	m, err := admission.BuiltinMapping(gvk)
	if err != nil {
		return nil, err
	}
	return []ResourceMapping{{Resource: m.Resource, Namespaced: m.Namespaced}}, nil
}
