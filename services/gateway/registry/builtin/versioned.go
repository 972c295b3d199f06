package builtin

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/printers"
	"platform.io/services/gateway/registry"
)

// versionStrategy serves a second version of a kind whose objects storage holds in another
// version of the same group (the storage version): autoscaling/v1
// HorizontalPodAutoscalers are autoscaling/v2 ones seen through upstream's conversion. It is the
// shape decision 30 promised and the events strategy first used: the served version's own
// built-in strategy decodes, checks required fields, owns the field manager (managedFields
// record the version a manager wrote in) and builds lists; everything about the object's meaning
// runs on the storage version's form, through its strategy, so both versions obey one set of
// rules: defaults, create and update rules (status kept, generation), validation, the fields
// storage indexes and the Table columns. Upstream runs them on its internal version, which is
// what the storage version is here.
type versionStrategy struct {
	*Strategy
	stored *registry.Resource
	conv   Conversion
}

// Conversion converts the objects of a served version to and from its storage version. Both
// directions return new objects and never change their argument.
type Conversion struct {
	ToStored   func(runtime.Object) (runtime.Object, error)
	FromStored func(runtime.Object) (runtime.Object, error)
}

// NewVersioned returns the strategy of a second served version of a kind (b's resource, whose
// StorageVersion names the version storage holds: stored), converting with conv.
func NewVersioned(b *Strategy, stored *registry.Resource, conv Conversion) registry.Strategy {
	return &versionStrategy{Strategy: b, stored: stored, conv: conv}
}

// hub is the storage version's strategy (looked up on use: the registry hands strategies out in
// no particular order).
func (s *versionStrategy) hub() registry.Strategy { return s.stored.Strategy() }

func (s *versionStrategy) toStored(obj runtime.Object) (runtime.Object, error) {
	out, err := s.conv.ToStored(obj)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(s.stored.GroupVersionKind())
	return out, nil
}

func (s *versionStrategy) fromStored(obj runtime.Object) (runtime.Object, error) {
	out, err := s.conv.FromStored(obj)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(s.Res.GroupVersionKind())
	return out, nil
}

// replace sets *dst to *src (two objects of the served version), for the rules that change an
// object in place.
func replace(dst, src runtime.Object) {
	kind := dst.GetObjectKind().GroupVersionKind()
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
	dst.GetObjectKind().SetGroupVersionKind(kind)
}

// inStored runs f on obj's storage-version form and brings the result back into obj.
func (s *versionStrategy) inStored(obj runtime.Object, f func(runtime.Object)) {
	st, err := s.toStored(obj)
	if err != nil {
		return // Normalize has refused objects that do not convert
	}
	f(st)
	if back, err := s.fromStored(st); err == nil {
		replace(obj, back)
	}
}

// Normalize refuses an object (or apply body) that does not convert (a malformed round-trip
// annotation) as a bad request, as upstream's decoding does; every later rule can then convert it.
func (s *versionStrategy) Normalize(obj runtime.Object) ([]string, error) {
	unknown, err := s.Strategy.Normalize(obj)
	if err != nil {
		return nil, err
	}
	typed, err := s.Strategy.Typed(obj) // an apply body is unstructured
	if err != nil {
		return nil, err
	}
	if _, err := s.toStored(typed); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("converting %s %s to %s: %v", s.Res.GroupVersion(), s.Res.Kind, s.stored.GroupVersion(), err))
	}
	return unknown, nil
}

func (s *versionStrategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	st, err := s.toStored(obj)
	if err != nil {
		return nil, err
	}
	return s.hub().EncodeStored(st)
}

func (s *versionStrategy) DecodeStored(value []byte) (runtime.Object, error) {
	st, err := s.hub().DecodeStored(value)
	if err != nil {
		return nil, err
	}
	return s.fromStored(st)
}

// Default applies the served version's defaults, then the storage version's (upstream defaults
// what it decodes from storage, so a v1 object reads back with v2's defaults converted).
func (s *versionStrategy) Default(obj runtime.Object) {
	s.Strategy.Default(obj)
	s.inStored(obj, s.hub().Default)
}

func (s *versionStrategy) Validate(obj, old runtime.Object) field.ErrorList {
	st, err := s.toStored(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), nil, err.Error())}
	}
	var stOld runtime.Object
	if old != nil {
		if stOld, err = s.toStored(old); err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
	}
	return s.hub().Validate(st, stOld)
}

func (s *versionStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.inStored(obj, func(st runtime.Object) { s.hub().PrepareForCreate(ctx, st) })
}

// PrepareForUpdate runs the storage version's update rules on both objects converted, so what a
// write through one version may change is what it may change through the other: the status the
// v1 annotations carry is kept from the stored object on a write of the main resource.
func (s *versionStrategy) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	st, err := s.toStored(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	stCur, err := s.toStored(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := s.hub().PrepareForUpdate(subresource, st, stCur)
	if err != nil {
		return nil, err
	}
	return s.fromStored(out)
}

func (s *versionStrategy) PrepareForDelete(next runtime.Object, now metav1.Time) (bool, error) {
	st, err := s.toStored(next)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	held, err := s.hub().PrepareForDelete(st, now)
	if held && err == nil {
		back, cerr := s.fromStored(st)
		if cerr != nil {
			return false, apierrors.NewInternalError(cerr)
		}
		replace(next, back)
	}
	return held, err
}

// Finalizing and CheckWrite are the storage version's rules, on the converted objects.
func (s *versionStrategy) Finalizing(obj runtime.Object) bool {
	st, err := s.toStored(obj)
	if err != nil {
		return s.Strategy.Finalizing(obj)
	}
	return s.hub().Finalizing(st)
}

func (s *versionStrategy) CheckWrite(ctx context.Context, obj, old runtime.Object) error {
	st, err := s.toStored(obj)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	var stOld runtime.Object
	if old != nil {
		if stOld, err = s.toStored(old); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	return s.hub().CheckWrite(ctx, st, stOld)
}

// Fields are the storage version's, so storage indexes every object alike.
func (s *versionStrategy) Fields(obj runtime.Object) map[string]string {
	st, err := s.toStored(obj)
	if err != nil {
		return s.Strategy.Fields(obj)
	}
	return s.hub().Fields(st)
}

// Printer prints the storage version's columns of the converted objects, as upstream prints
// every version from its internal one.
func (s *versionStrategy) Printer(runtime.Object) (*printers.Printer, error) {
	p, err := s.hub().Printer(s.stored.New())
	if err != nil {
		return nil, err
	}
	return &printers.Printer{Columns: p.Columns, Cells: func(obj runtime.Object, now time.Time) ([]any, error) {
		st, err := s.toStored(obj)
		if err != nil {
			return nil, err
		}
		return p.Cells(st, now)
	}}, nil
}
