package apiserver

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/bootstrappolicy"
	"platform.io/services/gateway/registry/generic"
	"platform.io/services/gateway/registry/rbac"
)

// bootstrapManager is the field manager of the default policy's writes.
const bootstrapManager = "rbac-bootstrap"

// EnsureBootstrapPolicy creates the default RBAC policy and reconciles it as upstream's
// rbac/bootstrap-roles post-start hook does: missing objects are created; objects that carry the
// autoupdate annotation get missing rules, subjects, labels and annotations added; nothing is
// removed, and objects whose annotation is "false" are left alone. It needs the namespaces of the
// namespaced defaults (EnsureNamespaces first).
func (a *API) EnsureBootstrapPolicy(ctx context.Context) error {
	for _, want := range bootstrappolicy.ClusterRoles() {
		want := want
		if err := a.reconcileDefault(ctx, "clusterroles", "", &want, func(cur runtime.Object) (runtime.Object, bool) {
			return bootstrappolicy.ReconcileClusterRole(cur.(*rbacv1.ClusterRole), &want)
		}); err != nil {
			return err
		}
	}
	for _, want := range bootstrappolicy.ClusterRoleBindings() {
		want := want
		if err := a.reconcileDefault(ctx, "clusterrolebindings", "", &want, func(cur runtime.Object) (runtime.Object, bool) {
			return bootstrappolicy.ReconcileClusterRoleBinding(cur.(*rbacv1.ClusterRoleBinding), &want)
		}); err != nil {
			return err
		}
	}
	for ns, roles := range bootstrappolicy.NamespaceRoles() {
		for _, want := range roles {
			want := want
			want.Namespace = ns
			if err := a.reconcileDefault(ctx, "roles", ns, &want, func(cur runtime.Object) (runtime.Object, bool) {
				return bootstrappolicy.ReconcileRole(cur.(*rbacv1.Role), &want)
			}); err != nil {
				return err
			}
		}
	}
	for ns, bindings := range bootstrappolicy.NamespaceRoleBindings() {
		for _, want := range bindings {
			want := want
			want.Namespace = ns
			if err := a.reconcileDefault(ctx, "rolebindings", ns, &want, func(cur runtime.Object) (runtime.Object, bool) {
				return bootstrappolicy.ReconcileRoleBinding(cur.(*rbacv1.RoleBinding), &want)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// reconcileDefault creates want if it is missing, or stores what reconcile makes of the current
// object when that differs. Concurrent gateways reconcile with compare-and-swap: a conflict is
// retried against the newer object.
func (a *API) reconcileDefault(ctx context.Context, resource, namespace string, want runtime.Object, reconcile func(cur runtime.Object) (runtime.Object, bool)) error {
	res, ok := a.reg.Resource(schema.GroupVersionResource{Group: rbac.Group, Version: "v1", Resource: resource})
	if !ok {
		// RBAC turned off with --runtime-config: nothing to bootstrap.
		return nil
	}
	name := mustMeta(want).GetName()
	for attempt := 0; attempt < generic.MaxAttempts; attempt++ {
		_, _, err := a.gen.Update(ctx, &generic.Update{
			Res: res, Namespace: namespace, Name: name, Manager: bootstrapManager, Create: true,
			Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				if cur == nil {
					return want.DeepCopyObject(), nil
				}
				next, changed := reconcile(cur)
				switch {
				case !changed:
					return nil, errUnchanged
				case roleRefOf(next) != roleRefOf(cur):
					return nil, errReplace
				}
				return next, nil
			},
		})
		switch {
		case errors.Is(err, errUnchanged):
			return nil
		case errors.Is(err, errReplace):
			// A binding's roleRef cannot change in place: upstream deletes and recreates it.
			if _, _, err := a.gen.Delete(ctx, res, namespace, name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("replacing %s %s: %w", resource, name, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("reconciling %s %s: %w", resource, name, err)
		}
		return nil
	}
	return fmt.Errorf("reconciling %s %s: too many concurrent writers", resource, name)
}

// errUnchanged and errReplace end a reconciling transform: the stored object is as wanted, or
// must be deleted and created again.
var (
	errUnchanged = errors.New("unchanged")
	errReplace   = errors.New("replace")
)

// roleRefOf is the role a binding references (the zero value for roles).
func roleRefOf(obj runtime.Object) rbacv1.RoleRef {
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		return b.RoleRef
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef
	}
	return rbacv1.RoleRef{}
}
