package builtin

import (
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	cgtesting "k8s.io/client-go/testing"
	"k8s.io/kube-openapi/pkg/util"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
	"sigs.k8s.io/structured-merge-diff/v4/value"
)

// typeConverter is client-go's type converter of the built-in kinds' schemas
// (applyconfigurations.NewTypeConverter), except for one call: a typed Go object converted with
// typed.AllowDuplicates, as the field manager converts the live and the new object of every
// update, is wrapped without the validating walk.
//
// That walk (a third of the field manager's CPU per create) checks a value against its schema,
// which a typed object of the kind conforms to by construction (the Go types and the schemas are
// generated from the same API), and associative lists' keys, of which AllowDuplicates leaves
// only the check that each element has its key fields. The field manager's next step, comparing
// the two objects, walks the same lists and fails on an element without its key fields too, so
// such an update still ends as upstream's does: without managed fields (UpdateNoErrors), or with
// an error (an apply onto such a live object). Everything else (unstructured objects, and
// conversions that must reject duplicates, such as an applied configuration) goes to client-go's
// converter. TestBuiltinTypeConverterMatchesClientGo compares the two on every built-in kind.
type typeConverter struct {
	inner *cgtesting.TypeConverter
	// names caches each kind's schema name (client-go derives it from the Go type the scheme
	// makes for the kind, on every call).
	names sync.Map // schema.GroupVersionKind -> typed.ParseableType
}

func newTypeConverter(scheme *runtime.Scheme) *typeConverter {
	return &typeConverter{inner: applyconfigurations.NewTypeConverter(scheme)}
}

var _ managedfields.TypeConverter = (*typeConverter)(nil)

func (c *typeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(*unstructured.Unstructured); ok || !slices.Equal(opts, []typed.ValidationOptions{typed.AllowDuplicates}) {
		return c.inner.ObjectToTyped(obj, opts...)
	}
	pt, ok := c.parseableType(obj.GetObjectKind().GroupVersionKind())
	if !ok {
		return c.inner.ObjectToTyped(obj, opts...) // client-go's error
	}
	v, err := value.NewValueReflect(obj)
	if err != nil {
		return c.inner.ObjectToTyped(obj, opts...)
	}
	return typed.AsTypedUnvalidated(v, pt.Schema, pt.TypeRef), nil
}

func (c *typeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.inner.TypedToObject(v)
}

// parseableType resolves gvk's schema type as client-go does: the name of the Go type the scheme
// makes for gvk, in OpenAPI's form (k8s.io/api/core/v1.ConfigMap is io.k8s.api.core.v1.ConfigMap).
func (c *typeConverter) parseableType(gvk schema.GroupVersionKind) (typed.ParseableType, bool) {
	if pt, ok := c.names.Load(gvk); ok {
		return pt.(typed.ParseableType), true
	}
	example, err := c.inner.Scheme.New(gvk)
	if err != nil {
		return typed.ParseableType{}, false
	}
	rt := reflect.TypeOf(example).Elem()
	pt := c.inner.TypeResolver.Type(util.ToRESTFriendlyName(rt.PkgPath() + "." + rt.Name()))
	if !pt.IsValid() {
		return typed.ParseableType{}, false
	}
	c.names.Store(gvk, pt)
	return pt, true
}
