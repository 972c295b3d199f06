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
//
// Field validation follows upstream's apply patcher, not the decoder of create and update: the
// body is handed to the field manager as it is, so a field its kind's schema does not declare
// (a built-in kind's, or a custom resource's outside x-kubernetes-preserve-unknown-fields;
// metadata, an embedded resource's metadata included, is ObjectMeta) is refused whatever
// fieldValidation says, with the field manager's message naming the full path: "failed to
// create typed patch object (<ns>/<name>; <group/version>, Kind=<kind>): .spec.extra: field not
// declared in schema" (400: upstream answers 500, kubernetes#118476). Keys set twice are
// checked after a successful merge, as upstream: Strict refuses them ("error strict decoding
// YAML: ... line 9: key "foo" already set in map"), Warn (the default) sends one warning per
// line, Ignore neither.
func (a *API) applyObject(ctx context.Context, info *requestInfo, body []byte, manager string, force bool, fv fieldValidation, dry bool) (runtime.Object, bool, []string, error) {
	res := info.res
	patch, duplicates, err := a.parseApplyBody(info, body)
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
			if duplicates != "" && fv == validationStrict {
				return nil, apierrors.NewBadRequest("error strict decoding YAML: " + duplicates)
			}
			// What the kind allows of the merged object (a custom resource's nulls of fields
			// that are not nullable); unknown fields never got past the field manager.
			if _, err := res.Strategy().Normalize(merged); err != nil {
				return nil, err
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
	var warnings []string
	if duplicates != "" && fv == validationWarn {
		warnings = yamlWarnings(duplicates)
	}
	return obj, created, warnings, nil
}

// parseApplyBody reads an apply body (YAML or JSON) and checks it is an object of the resource's
// kind and name, without managedFields; wrong types in a built-in kind's fields and in metadata
// are 400, as for every write. duplicates is the strict YAML decoder's message for keys set more
// than once ("" when there are none), for fieldValidation to judge after the merge.
func (a *API) parseApplyBody(info *requestInfo, body []byte) (u *unstructured.Unstructured, duplicates string, err error) {
	res := info.res
	data, jerr := yaml.YAMLToJSON(body)
	if jerr != nil {
		return nil, "", apierrors.NewBadRequest("the apply body is not valid YAML or JSON: " + jerr.Error())
	}
	var content map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &content); err != nil || content == nil {
		return nil, "", apierrors.NewBadRequest("the apply body must be an object")
	}
	u = &unstructured.Unstructured{Object: content}
	bodyGV, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	if !sameGroup(bodyGV, res.GroupVersion()) || u.GetKind() != res.Kind {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("the apply body must have apiVersion %q and kind %q, not %q and %q",
			res.GroupVersion().String(), res.Kind, u.GetAPIVersion(), u.GetKind()))
	}
	// An apply under upstream's group name continues under the served one.
	u.SetAPIVersion(res.GroupVersion().String())
	if u.GetName() != info.name {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), info.name))
	}
	if ns := u.GetNamespace(); ns != "" && ns != info.namespace {
		return nil, "", apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(content, "metadata", "managedFields"); found {
		return nil, "", apierrors.NewBadRequest("metadata.managedFields must be nil: an apply body may not carry managedFields")
	}
	st := res.Strategy()
	// Wrong types are the decoder's 400; unknown fields are left to the field manager.
	if _, err := decodeJSON(data, st.New(), false); err != nil {
		return nil, "", apierrors.NewBadRequest(err.Error())
	}
	// The same for what the kind itself reads strictly (a custom resource's metadata), on a
	// copy: the body goes to the field manager unpruned.
	if _, err := st.Normalize(u.DeepCopy()); err != nil {
		return nil, "", err
	}
	if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
		duplicates = err.Error()
	}
	return u, duplicates, nil
}

// yamlWarnings splits a strict YAML decoding error into one warning per problem (`line 9: key
// "foo" already set in map`), as upstream warns; other messages are one warning.
func yamlWarnings(msg string) []string {
	rest, ok := strings.CutPrefix(msg, "error converting YAML to JSON: ")
	if !ok {
		rest = msg
	}
	lines, ok := strings.CutPrefix(rest, "yaml: unmarshal errors:\n")
	if !ok {
		return []string{msg}
	}
	var out []string
	for _, l := range strings.Split(lines, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// typed converts the field manager's result to the resource's object form.
func (a *API) typed(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	return res.Strategy().Typed(obj)
}
