package apiserver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
)

// A kind's rules are its strategy's (registry/builtin, registry/custom and the packages of kinds
// with rules of their own): the store and the verb handlers call them through res.Strategy() and
// never ask which kind they serve.

// admitWrite runs a kind's own rules on a write, after decoding, defaulting and its metadata's
// rules: its validation (422 Invalid, listing every violation), then its checks that need the
// caller or other objects (RBAC's escalation prevention). old is nil on create.
func (a *API) admitWrite(ctx context.Context, res *registry.Resource, obj, old runtime.Object) error {
	st := res.Strategy()
	if errs := st.Validate(obj, old); len(errs) > 0 {
		return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), mustMeta(obj).GetName(), errs)
	}
	return st.CheckWrite(ctx, obj, old)
}

// checkRequired reports every missing required field of obj as one 400, as its kind's strategy
// finds them.
func checkRequired(res *registry.Resource, obj runtime.Object) error {
	return res.Strategy().CheckRequired(obj)
}

// applyDefaults applies the defaults of res's kind.
func applyDefaults(res *registry.Resource, obj runtime.Object) { res.Strategy().Default(obj) }

// prepareUpdate builds the object to store from the client's object and the current one (the
// kind's update rules).
func prepareUpdate(res *registry.Resource, subresource string, newObj, cur runtime.Object) (runtime.Object, error) {
	return res.Strategy().PrepareForUpdate(subresource, newObj, cur)
}
