package builtin

import (
	"net/http"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
)

// Required fields. k8s.io/api marks a field optional with `omitempty` in its JSON tag (and an
// +optional comment that does not survive compilation); a field without omitempty is required.
// Presence is read from the decoded Go value: a nil pointer, slice or map or an empty string is
// missing. Booleans, numbers and structs cannot tell "absent" from "zero" and are not checked.
// The few fields upstream documents as optional but tags without omitempty are listed here.

// optionalWithoutOmitempty names fields (Go type name and JSON name) that are optional although
// their JSON tag has no omitempty.
var optionalWithoutOmitempty = map[string]bool{
	"ClusterRole.rules":           true,
	"Role.rules":                  true,
	"Event.reportingComponent":    true,
	"Event.reportingInstance":     true,
	"ContainerImage.names":        true,
	"StatefulSetSpec.serviceName": true,
	// The API server's audiences are the default.
	"TokenRequestSpec.audiences":         true,
	"TokenRequestSpec.expirationSeconds": true,
	"TokenRequestSpec.boundObjectRef":    true,
}

// requiredField is one required field of a struct type.
type requiredField struct {
	index []int
	name  string
}

// typeShape is what the check needs to know about a struct type: its required fields and the
// fields that may hold further structs.
type typeShape struct {
	required []requiredField
	nested   []requiredField
}

var shapes sync.Map // reflect.Type -> *typeShape

func shapeOf(t reflect.Type) *typeShape {
	if s, ok := shapes.Load(t); ok {
		return s.(*typeShape)
	}
	s := &typeShape{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			// Inline (TypeMeta, ObjectMeta are not inline; embedded spec structs are).
			if f.Type.Kind() == reflect.Struct && f.Type.Name() != "TypeMeta" {
				s.nested = append(s.nested, requiredField{index: f.Index})
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == "metadata" || name == "status" {
			// Metadata has its own rules; status is written by controllers through its subresource.
			continue
		}
		if !strings.Contains(opts, "omitempty") && !optionalWithoutOmitempty[t.Name()+"."+name] {
			switch f.Type.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map, reflect.String:
				s.required = append(s.required, requiredField{index: f.Index, name: name})
			}
		}
		if holdsStructs(f.Type) {
			s.nested = append(s.nested, requiredField{index: f.Index, name: name})
		}
	}
	actual, _ := shapes.LoadOrStore(t, s)
	return actual.(*typeShape)
}

// holdsStructs tells whether values of t can contain structs worth walking into.
func holdsStructs(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return t.PkgPath() != "k8s.io/apimachinery/pkg/apis/meta/v1" && t.PkgPath() != "k8s.io/apimachinery/pkg/api/resource" && t.PkgPath() != "k8s.io/apimachinery/pkg/util/intstr"
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Array:
		return holdsStructs(t.Elem())
	}
	return false
}

// CheckRequiredFields reports every missing required field of a built-in object as one 400.
func CheckRequiredFields(res *registry.Resource, obj runtime.Object) error {
	var errs field.ErrorList
	walkRequired(reflect.ValueOf(obj).Elem(), nil, &errs)
	if len(errs) == 0 {
		return nil
	}
	return RequiredError(res, registry.Meta(obj).GetName(), errs)
}

// RequiredError is the 400 for missing required fields: the spec lists them with wrong types as
// decoding errors, not as 422 validation failures.
func RequiredError(res *registry.Resource, name string, errs field.ErrorList) error {
	se := apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), name, errs)
	se.ErrStatus.Code = http.StatusBadRequest
	se.ErrStatus.Reason = metav1.StatusReasonBadRequest
	return se
}

func walkRequired(v reflect.Value, path *field.Path, errs *field.ErrorList) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkRequired(v.Elem(), path, errs)
		}
		return
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkRequired(v.Index(i), path.Index(i), errs)
		}
		return
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			walkRequired(iter.Value(), path.Key(iter.Key().String()), errs)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	if !holdsStructs(v.Type()) {
		return
	}
	shape := shapeOf(v.Type())
	for _, f := range shape.required {
		fv := v.FieldByIndex(f.index)
		if fv.IsZero() || (fv.Kind() == reflect.String && fv.Len() == 0) {
			*errs = append(*errs, field.Required(child(path, f.name), ""))
		}
	}
	for _, f := range shape.nested {
		fv := v.FieldByIndex(f.index)
		if f.name == "" {
			walkRequired(fv, path, errs)
			continue
		}
		walkRequired(fv, child(path, f.name), errs)
	}
}

func child(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}
