package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"

	"platform.io/services/gateway/defaults"
	"platform.io/services/gateway/registry"
)

// Field ownership (metadata.managedFields) and server-side apply come from structured-merge-diff
// through apimachinery's managedfields.FieldManager, as upstream's do. Built-in kinds use their
// real schemas: client-go's applyconfigurations type converter, which finds a kind's schema by
// its Go type, so Platform's renamed groups resolve to the same schemas as upstream's.

// maxFieldManagerLength is upstream's bound on a fieldManager name.
const maxFieldManagerLength = 128

// fieldManagers holds one FieldManager per resource and subresource, built on first use.
type fieldManagers struct {
	mu        sync.Mutex
	converter managedfields.TypeConverter
	byKey     map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	res         *registry.Resource
	subresource string
}

// defaulter applies upstream's defaults, so that a field an applier stops setting is reset to its
// default when it has one.
type defaulter struct{}

func (defaulter) Default(obj runtime.Object) { defaults.Apply(obj) }

func (a *API) fieldManager(res *registry.Resource, subresource string) (*managedfields.FieldManager, error) {
	fms := &a.fieldManagers
	fms.mu.Lock()
	defer fms.mu.Unlock()
	if fms.byKey == nil {
		fms.byKey = map[fieldManagerKey]*managedfields.FieldManager{}
		fms.converter = applyconfigurations.NewTypeConverter(a.reg.Scheme)
	}
	k := fieldManagerKey{res, subresource}
	if fm, ok := fms.byKey[k]; ok {
		return fm, nil
	}
	if isCustom(res) {
		tc, convertor, def, creater, err := customFieldManagerParts(res)
		if err != nil {
			return nil, err
		}
		fm, err := managedfields.NewDefaultFieldManager(tc, convertor, def, creater,
			res.GroupVersionKind(), res.GroupVersion(), subresource, resetFields(res, subresource))
		if err != nil {
			return nil, err
		}
		fms.byKey[k] = fm
		return fm, nil
	}
	converter := fms.converter
	probe := res.New()
	probe.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
	if _, err := converter.ObjectToTyped(probe); err != nil {
		// Kinds outside k8s.io/api (CustomResourceDefinition) have no schema in client-go's
		// models: their ownership is tracked on the schema deduced from the object, as upstream
		// does for objects without one (structs are granular, lists atomic).
		converter = managedfields.NewDeducedTypeConverter()
	}
	fm, err := managedfields.NewDefaultFieldManager(converter, runtime.UnsafeObjectConvertor(a.reg.Scheme), defaulter{}, a.reg.Scheme,
		res.GroupVersionKind(), res.GroupVersion(), subresource, resetFields(res, subresource))
	if err != nil {
		return nil, err
	}
	fms.byKey[k] = fm
	return fm, nil
}

// resetFields are the fields a write through (sub)resource may not change, so nobody owns them
// through it: status through the main resource, spec through the status subresource.
func resetFields(res *registry.Resource, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	var paths []fieldpath.Path
	switch {
	case subresource == "" && res.HasStatus:
		paths = append(paths, fieldpath.MakePathOrDie("status"))
	case subresource == "status" && isCustom(res):
		for _, p := range []string{"apiVersion", "kind", "metadata", "spec"} {
			paths = append(paths, fieldpath.MakePathOrDie(p))
		}
	case subresource == "status":
		if hasSpec(res.New()) {
			paths = append(paths, fieldpath.MakePathOrDie("spec"))
		}
	}
	if len(paths) == 0 {
		return nil
	}
	return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(res.GroupVersion().String()): fieldpath.NewSet(paths...),
	})
}

// fieldManagerName reads ?fieldManager, or derives the manager from the user agent (the part
// before the first "/", as upstream does) for writes that name none.
func fieldManagerName(r *http.Request, required bool) (string, error) {
	name := r.URL.Query().Get("fieldManager")
	if name == "" {
		if required {
			return "", apierrors.NewBadRequest("fieldManager is required for apply requests (PatchOptions.fieldManager: Required value)")
		}
		ua := r.UserAgent()
		if i := strings.Index(ua, "/"); i >= 0 {
			ua = ua[:i]
		}
		if len(ua) > maxFieldManagerLength {
			ua = ua[:maxFieldManagerLength]
		}
		return ua, nil
	}
	if len(name) > maxFieldManagerLength {
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldManager must be at most %d characters", maxFieldManagerLength))
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return "", apierrors.NewBadRequest("fieldManager must contain printable characters only")
		}
	}
	return name, nil
}

// trackUpdate records a non-apply write in obj's managedFields: the manager takes every field the
// write changed (updates never conflict). live is the stored object (an empty object on create).
// managedFields set to [{}] clears every entry first; an empty list leaves them as they are.
func (a *API) trackUpdate(res *registry.Resource, subresource string, live, obj runtime.Object, manager string) (runtime.Object, error) {
	fm, err := a.fieldManager(res, subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m := mustMeta(obj)
	if mf := m.GetManagedFields(); mf != nil && len(mf) == 0 {
		m.SetManagedFields(nil)
	}
	return fm.UpdateNoErrors(live, obj, manager), nil
}
