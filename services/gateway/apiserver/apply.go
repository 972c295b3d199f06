package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// applyObject is server-side apply: the body is the applier's whole intent for the fields it
// manages. The store's transform merges it into the current object (or into an empty one,
// creating the object) with the field manager, which records ownership and refuses, unless force
// is set, to change a field another manager owns (409 naming each field and its manager).
func (a *API) applyObject(ctx context.Context, info *requestInfo, body []byte, manager string, force bool, fv fieldValidation, dry bool) (runtime.Object, bool, []string, error) {
	res := info.res
	patch, warnings, err := a.parseApplyBody(info, body, fv)
	if err != nil {
		return nil, false, nil, err
	}
	fm, err := res.Strategy().FieldManager(info.subresource)
	if err != nil {
		return nil, false, nil, apierrors.NewInternalError(err)
	}
	obj, created, err := a.gen.Update(ctx, &generic.Update{
		Res: res, Namespace: info.namespace, Name: info.name, Subresource: info.subresource,
		Manager: manager, Owned: true, Create: true, DryRun: dry,
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			live := cur
			if live == nil {
				live = res.Strategy().New()
				live.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
				m := mustMeta(live)
				m.SetName(info.name)
				m.SetNamespace(info.namespace)
			}
			merged, err := fm.Apply(live, patch.DeepCopy(), manager, force)
			if err != nil {
				var status apierrors.APIStatus
				if errors.As(err, &status) {
					return nil, err
				}
				return nil, apierrors.NewBadRequest(err.Error())
			}
			obj, err := a.typed(res, merged)
			if err != nil {
				return nil, err
			}
			applyDefaults(res, obj)
			if err := checkRequired(res, obj); err != nil {
				return nil, err
			}
			return obj, nil
		},
	})
	if err != nil {
		return nil, false, nil, err
	}
	return obj, created, warnings, nil
}

// parseApplyBody reads an apply body (YAML or JSON) and checks it is an object of the resource's
// kind and name, without managedFields; unknown and duplicate fields follow fieldValidation and
// wrong types are 400, as for every write.
func (a *API) parseApplyBody(info *requestInfo, body []byte, fv fieldValidation) (*unstructured.Unstructured, []string, error) {
	res := info.res
	data, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("the apply body is not valid YAML or JSON: " + err.Error())
	}
	var content map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &content); err != nil || content == nil {
		return nil, nil, apierrors.NewBadRequest("the apply body must be an object")
	}
	u := &unstructured.Unstructured{Object: content}
	bodyGV, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	if !sameGroup(bodyGV, res.GroupVersion()) || u.GetKind() != res.Kind {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the apply body must have apiVersion %q and kind %q, not %q and %q",
			res.GroupVersion().String(), res.Kind, u.GetAPIVersion(), u.GetKind()))
	}
	// An apply under upstream's group name continues under the served one.
	u.SetAPIVersion(res.GroupVersion().String())
	if u.GetName() != info.name {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), info.name))
	}
	if ns := u.GetNamespace(); ns != "" && ns != info.namespace {
		return nil, nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(content, "metadata", "managedFields"); found {
		return nil, nil, apierrors.NewBadRequest("metadata.managedFields must be nil: an apply body may not carry managedFields")
	}
	st := res.Strategy()
	strict, err := decodeJSON(data, st.New(), false)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	// The applier's fields the kind does not know (a custom resource's schema) are pruned (and
	// reported) before the merge, so nobody comes to own them.
	unknown, err := st.Normalize(u)
	if err != nil {
		return nil, nil, err
	}
	strict = append(strict, unknown...)
	if yamlStrict, err := yaml.YAMLToJSONStrict(body); err != nil && yamlStrict == nil {
		strict = append(strict, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	switch {
	case len(strict) > 0 && fv == validationStrict:
		return nil, nil, strictDecodingError(res, strict)
	case fv == validationIgnore:
		strict = nil
	}
	return u, strict, nil
}

// typed converts the field manager's result to the resource's object form.
func (a *API) typed(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	return res.Strategy().Typed(obj)
}
