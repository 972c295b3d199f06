// Package custom is the strategy of custom resources (registry.Strategy for the kinds of
// CustomResourceDefinitions): unstructured objects ruled by their definition's schema.
package custom

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/typed"

	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/defaults"
	"platform.io/services/gateway/printers"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy is the strategy of custom resources (kinds defined by
// CustomResourceDefinitions): their objects are *unstructured.Unstructured. Their rules come
// from the definition's version: the structural schema prunes unknown fields (reported like a
// built-in kind's unknown fields, so fieldValidation treats them alike), supplies defaults and
// validates values; metadata is ObjectMeta, decoded as strictly as a built-in kind's. They are
// stored as JSON, in the storage version's apiVersion; with conversion strategy None every
// served version reads and writes the same objects (EncodeStored and DecodeStored rewrite
// apiVersion only). They have no Protobuf encoding and no strategic merge patches; generation
// counts every change outside metadata (and status, when status is a subresource).
type Strategy struct {
	res *registry.Resource
	fms builtin.FieldManagers
	// printer is built from the version's columns on first use.
	printer atomic.Pointer[printers.Printer]
	// rules are the version's x-kubernetes-validations, compiled on first use: once per
	// definition version (a changed definition gets new strategies).
	rules func() (*crd.Rules, error)
}

var _ registry.Strategy = (*Strategy)(nil)

// New returns the strategy of res, a resource of a definition.
func New(res *registry.Resource) *Strategy {
	return &Strategy{res: res, rules: sync.OnceValues(func() (*crd.Rules, error) {
		return crd.CompileRules(res.Custom.Schema)
	})}
}

func (s *Strategy) New() runtime.Object { return s.res.New() }

func (s *Strategy) NewList(items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	return customList(s.res, items, lm)
}

func (s *Strategy) Protobuf() bool { return false }

// StrategicMerge is false: strategic merge needs Go struct tags; custom resources have none, as
// upstream says.
func (s *Strategy) StrategicMerge() bool { return false }

// Normalize prunes what the schema does not know (normalizeCustom).
func (s *Strategy) Normalize(obj runtime.Object) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	return normalizeCustom(s.res.Custom.Schema, u)
}

func (s *Strategy) Typed(obj runtime.Object) (runtime.Object, error) { return obj, nil }

// EncodeStored writes the object's JSON in the storage version.
func (s *Strategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	gvk := s.res.GroupVersionKind()
	gvk.Version = s.res.Custom.StorageVersion
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	defer obj.GetObjectKind().SetGroupVersionKind(s.res.GroupVersionKind())
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not a custom object", obj)
	}
	return json.Marshal(u.Object)
}

// DecodeStored reads the stored JSON as an object of the served version.
func (s *Strategy) DecodeStored(value []byte) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(value, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding a stored %s: %w", s.res.Kind, err)
	}
	if u.Object == nil {
		return nil, fmt.Errorf("decoding a stored %s: not an object", s.res.Kind)
	}
	defaultStored(s.res, u) // readdefaults.go
	u.SetGroupVersionKind(s.res.GroupVersionKind())
	return u, nil
}

// Default applies the schema's defaults.
func (s *Strategy) Default(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		crd.Default(s.res.Custom.Schema, u.Object)
		return
	}
	defaults.Apply(obj)
}

// CheckRequired is part of the schema's validation (Validate).
func (s *Strategy) CheckRequired(runtime.Object) error { return nil }

func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	return validateCustom(s.res, s.rules, u, old)
}

func (s *Strategy) ValidateName(name string) []string {
	return validation.IsDNS1123Subdomain(name)
}

// PrepareForCreate: custom objects always count generations; status is the status
// subresource's to set.
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	u.SetGeneration(1)
	if s.res.HasStatus {
		setUnstructuredStatus(u, nil, false)
	}
}

// PrepareForUpdate: the status subresource changes only status (keeping the managedFields the
// write computed); the main resource keeps the stored status when status is a subresource.
func (s *Strategy) PrepareForUpdate(subresource string, newObj, cur runtime.Object) (runtime.Object, error) {
	res := s.res
	next, curU := newObj.(*unstructured.Unstructured), cur.(*unstructured.Unstructured)
	if subresource == "status" {
		out := curU.DeepCopy()
		out.SetManagedFields(next.GetManagedFields())
		status, ok := unstructuredStatus(next)
		setUnstructuredStatus(out, status, ok)
		return out, nil
	}
	builtin.CopySystemFields(next, curU)
	if res.HasStatus {
		status, ok := unstructuredStatus(curU)
		setUnstructuredStatus(next, status, ok)
	}
	if customSpecChanged(res, next, curU) {
		next.SetGeneration(curU.GetGeneration() + 1)
	}
	if err := builtin.CheckNewFinalizers(res, next, curU); err != nil {
		return nil, err
	}
	return next, nil
}

// PrepareForDelete leaves custom objects to the generic rules (finalizers).
func (s *Strategy) PrepareForDelete(runtime.Object, metav1.Time) (bool, error) {
	return false, nil
}

// Finalizing: an object being deleted stays while metadata.finalizers hold it.
func (s *Strategy) Finalizing(obj runtime.Object) bool {
	return len(registry.Meta(obj).GetFinalizers()) > 0
}

// CheckWrite: custom objects' rules are their schema's (Validate).
func (s *Strategy) CheckWrite(context.Context, runtime.Object, runtime.Object) error { return nil }

// FieldManager uses a type converter built from every version's schema, and converter,
// defaulter and creater for unstructured objects.
func (s *Strategy) FieldManager(subresource string) (*managedfields.FieldManager, error) {
	return s.fms.Get(subresource, func() (*managedfields.FieldManager, error) {
		res := s.res
		tc, convertor, def, creater, err := customFieldManagerParts(res)
		if err != nil {
			return nil, err
		}
		var reset []fieldpath.Path
		switch {
		case subresource == "" && res.HasStatus:
			reset = append(reset, fieldpath.MakePathOrDie("status"))
		case subresource == "status":
			for _, p := range []string{"apiVersion", "kind", "metadata", "spec"} {
				reset = append(reset, fieldpath.MakePathOrDie(p))
			}
		}
		return managedfields.NewDefaultFieldManager(tc, convertor, def, creater,
			res.GroupVersionKind(), res.GroupVersion(), subresource, builtin.ResetFields(res, reset))
	})
}

// Replicas reads the scale subresource through the definition's paths.
func (s *Strategy) Replicas(obj runtime.Object) (spec, status int32, selector string, err error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || s.res.Custom.Scale == nil {
		return 0, 0, "", fmt.Errorf("%T has no scale subresource", obj)
	}
	return customReplicas(s.res.Custom.Scale, u)
}

func (s *Strategy) SetReplicas(obj runtime.Object, n int32) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || s.res.Custom.Scale == nil {
		return nil
	}
	return unstructured.SetNestedField(u.Object, int64(n), jsonPathFields(s.res.Custom.Scale.SpecReplicasPath)...)
}

func (s *Strategy) Fields(obj runtime.Object) map[string]string { return s.res.Fields(obj) }

// Printer builds the version's additionalPrinterColumns on first use.
func (s *Strategy) Printer(runtime.Object) (*printers.Printer, error) {
	if p := s.printer.Load(); p != nil {
		return p, nil
	}
	p, err := printers.ForCustom(s.res.Custom.Columns)
	if err != nil {
		return nil, err
	}
	s.printer.Store(p)
	return p, nil
}

func (s *Strategy) Definition() *apiextensionsv1.CustomResourceDefinition {
	return s.res.Custom.CRD
}

// DecodeUnstructured decodes a JSON object into u, keeping integers as int64, and returns the
// duplicate fields it saw.
func DecodeUnstructured(data []byte, u *unstructured.Unstructured) ([]string, error) {
	var content map[string]any
	strictErrs, err := kjson.UnmarshalStrict(data, &content)
	if err != nil {
		return nil, err
	}
	if content == nil {
		return nil, fmt.Errorf("the request body must be a JSON object")
	}
	u.Object = content
	var strict []string
	for _, e := range strictErrs {
		strict = append(strict, e.Error())
	}
	return strict, nil
}

// normalizeCustom makes a decoded custom object what the schema allows: metadata decoded as
// ObjectMeta (its unknown fields dropped), fields the schema does not know pruned, and nulls of
// non-nullable fields dropped. It returns the unknown fields, as strict-decoding messages.
func normalizeCustom(schema *apiextensionsv1.JSONSchemaProps, u *unstructured.Unstructured) ([]string, error) {
	var unknown []string
	if raw, ok := u.Object["metadata"]; ok && raw != nil {
		if _, isObject := raw.(map[string]any); !isObject {
			return nil, apierrors.NewBadRequest("metadata must be an object")
		}
		data, err := json.Marshal(raw)
		if err != nil {
			return nil, apierrors.NewBadRequest("metadata: " + err.Error())
		}
		var om metav1.ObjectMeta
		strictErrs, err := kjson.UnmarshalStrict(data, &om, kjson.DisallowUnknownFields)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata: %v", err))
		}
		for _, e := range strictErrs {
			unknown = append(unknown, prefixFieldError(e.Error(), "metadata."))
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&om)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if m["creationTimestamp"] == nil {
			delete(m, "creationTimestamp")
		}
		u.Object["metadata"] = m
	}
	unknown = append(unknown, crd.Prune(schema, u.Object)...)
	crd.PruneNulls(schema, u.Object)
	return unknown, nil
}

// prefixFieldError puts prefix before the field name of a strict decoding message
// (`unknown field "foo"` becomes `unknown field "metadata.foo"`).
func prefixFieldError(msg, prefix string) string {
	if i := strings.Index(msg, `field "`); i >= 0 {
		at := i + len(`field "`)
		return msg[:at] + prefix + msg[at:]
	}
	return msg
}

// validateCustom checks a custom object against its schema and then its x-kubernetes-validations
// rules (unless the schema's violations keep them from running, as upstream): every violation,
// as a 422. On update (old set) violations at values the update did not change are not reported
// (ratcheting), nor rules failing on unchanged values unless they are transition rules.
func validateCustom(res *registry.Resource, rules func() (*crd.Rules, error), u *unstructured.Unstructured, old runtime.Object) field.ErrorList {
	errs := crd.ValidateValue(res.Custom.Schema, u.Object)
	var prevObj map[string]any
	if prev, ok := old.(*unstructured.Unstructured); ok {
		prevObj = prev.Object
		if len(errs) > 0 {
			errs = crd.Ratchet(errs, u.Object, prev.Object)
		}
	}
	r, err := rules()
	if err != nil {
		return append(errs, field.InternalError(nil, fmt.Errorf("the x-kubernetes-validations rules of %s: %w", res.GroupVersionKind(), err)))
	}
	// Strategies see no request context: the rules' runtime is bounded by their cost budget.
	return append(errs, r.Validate(context.TODO(), u.Object, prevObj, errs)...)
}

// customSpecChanged tells whether an update changes more than metadata (and status, when status
// is a subresource): what counts as a spec change, bumping metadata.generation, for custom kinds.
func customSpecChanged(res *registry.Resource, next, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			switch k {
			case "metadata", "apiVersion", "kind":
				continue
			case "status":
				if res.HasStatus {
					continue
				}
			}
			m[k] = v
		}
		return m
	}
	return !equality.Semantic.DeepEqual(strip(next), strip(cur))
}

// customList builds the <Kind>List of custom objects.
func customList(res *registry.Resource, items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetGroupVersionKind(res.GroupVersion().WithKind(res.ListKind))
	list.SetResourceVersion(lm.ResourceVersion)
	list.SetContinue(lm.Continue)
	list.SetRemainingItemCount(lm.RemainingItemCount)
	list.Items = make([]unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		u, ok := it.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%T is not a custom object", it)
		}
		list.Items = append(list.Items, *u)
	}
	return list, nil
}

// customFieldManagerParts are what a FieldManager needs for a custom resource: a type converter
// that knows every version's schema, and converter, defaulter and creater for unstructured
// objects (versions differ only in apiVersion: conversion strategy None).
func customFieldManagerParts(res *registry.Resource) (managedfields.TypeConverter, runtime.ObjectConvertor, runtime.ObjectDefaulter, runtime.ObjectCreater, error) {
	def := res.Custom.CRD
	byVersion := map[string]managedfields.TypeConverter{}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for i := range def.Spec.Versions {
		v := &def.Spec.Versions[i]
		var openAPI *apiextensionsv1.JSONSchemaProps
		if v.Schema != nil {
			openAPI = v.Schema.OpenAPIV3Schema
		}
		tc, err := crd.TypeConverter(openAPI, schema.GroupVersionKind{Group: res.Group, Version: v.Name, Kind: res.Kind}, def.Spec.PreserveUnknownFields)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		byVersion[v.Name] = tc
		schemas[v.Name] = openAPI
	}
	return versionedConverter{byVersion: byVersion, group: res.Group},
		unstructuredConvertor{},
		customDefaulter{schemas: schemas},
		unstructuredCreater{}, nil
}

// versionedConverter dispatches to the type converter of an object's version.
type versionedConverter struct {
	group     string
	byVersion map[string]managedfields.TypeConverter
}

func (c versionedConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	tc, ok := c.byVersion[gvk.Version]
	if !ok || gvk.Group != c.group {
		return nil, fmt.Errorf("no schema for %s", gvk)
	}
	return tc.ObjectToTyped(obj, opts...)
}

func (c versionedConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	for _, tc := range c.byVersion {
		return tc.TypedToObject(v)
	}
	return nil, fmt.Errorf("no schema")
}

// unstructuredConvertor converts custom objects between versions by rewriting apiVersion.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	gvk := dst.GroupVersionKind()
	dst.Object = src.DeepCopy().Object
	if !gvk.Empty() {
		dst.SetGroupVersionKind(gvk)
	}
	return nil
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("cannot convert %s to %v", u.GroupVersionKind(), target)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (unstructuredConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// customDefaulter applies the schema defaults of an object's version.
type customDefaulter struct {
	schemas map[string]*apiextensionsv1.JSONSchemaProps
}

func (d customDefaulter) Default(obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if s, ok := d.schemas[u.GroupVersionKind().Version]; ok {
		crd.Default(s, u.Object)
	}
}

// unstructuredCreater makes empty custom objects.
type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// unstructuredStatus returns the status of a custom object (nil when it has none).
func unstructuredStatus(u *unstructured.Unstructured) (any, bool) {
	v, ok := u.Object["status"]
	return v, ok
}

// setUnstructuredStatus sets (or, when ok is false, removes) a custom object's status.
func setUnstructuredStatus(u *unstructured.Unstructured, v any, ok bool) {
	if ok {
		u.Object["status"] = runtime.DeepCopyJSONValue(v)
	} else {
		delete(u.Object, "status")
	}
}

// customReplicas reads a custom object's scale through the definition's paths; a missing
// value is 0 and a missing selector empty, as upstream.
func customReplicas(sc *apiextensionsv1.CustomResourceSubresourceScale, u *unstructured.Unstructured) (spec, status int32, selector string, err error) {
	num := func(path string) (int32, error) {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, jsonPathFields(path)...)
		if err != nil || !found || v == nil {
			return 0, nil
		}
		switch n := v.(type) {
		case int64:
			return int32(n), nil
		case float64:
			return int32(n), nil
		}
		return 0, fmt.Errorf("%s is %T, not an integer", path, v)
	}
	if spec, err = num(sc.SpecReplicasPath); err != nil {
		return 0, 0, "", err
	}
	if status, err = num(sc.StatusReplicasPath); err != nil {
		return 0, 0, "", err
	}
	if sc.LabelSelectorPath != nil {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, jsonPathFields(*sc.LabelSelectorPath)...); found {
			selector, _ = v.(string)
		}
	}
	return spec, status, selector, nil
}

// jsonPathFields splits a simple JSON path (".spec.replicas") into its fields.
func jsonPathFields(path string) []string {
	return strings.Split(strings.TrimPrefix(path, "."), ".")
}
