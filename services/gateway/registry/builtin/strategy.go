// Package builtin is the default strategy of the kinds of k8s.io/api, served under Platform's
// group names (registry.Strategy): typed Go objects, decoded strictly, stored as their Protobuf
// envelope, defaulted by upstream's defaulters, required fields read from the types, status and
// spec found by reflection, field ownership tracked on client-go's schemas. A kind with rules of
// its own has a package of its own under registry/ whose strategy embeds this one and overrides
// only what the kind needs (upstream's per-kind strategies, registry/<group>/<kind>/strategy.go,
// are the model).
package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"

	"platform.io/libs/naming"
	"platform.io/services/gateway/defaults"
	"platform.io/services/gateway/printers"
	"platform.io/services/gateway/registry"
)

// Shared is what every built-in kind's strategy shares: the scheme, its Protobuf serializer,
// and client-go's type converter of the built-in schemas (built on first use: it is large).
type Shared struct {
	Scheme    *runtime.Scheme
	protobuf  *protobuf.Serializer
	once      sync.Once
	converter managedfields.TypeConverter
}

// NewShared builds what the built-in strategies of scheme's kinds share.
func NewShared(scheme *runtime.Scheme) *Shared {
	return &Shared{Scheme: scheme, protobuf: protobuf.NewSerializer(scheme, scheme)}
}

func (s *Shared) typeConverter() managedfields.TypeConverter {
	s.once.Do(func() { s.converter = newTypeConverter(s.Scheme) })
	return s.converter
}

// EncodeProtobuf serializes obj as gvk in the spec's Protobuf envelope (the stored form of
// built-in kinds, and their binary wire form).
func (s *Shared) EncodeProtobuf(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var buf bytes.Buffer
	if err := s.protobuf.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeProtobuf decodes the spec's Protobuf envelope into a typed object.
func DecodeProtobuf(data []byte, into runtime.Object) error {
	if len(data) < 4 || !bytes.Equal(data[:4], naming.ProtobufMagic[:]) {
		return errors.New("the request body does not start with the Protobuf envelope prefix")
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[4:]); err != nil {
		return fmt.Errorf("the Protobuf envelope is malformed: %w", err)
	}
	if unk.ContentEncoding != "" || (unk.ContentType != "" && unk.ContentType != naming.ProtobufMediaType && unk.ContentType != naming.UpstreamProtobufMediaType) {
		return fmt.Errorf("unsupported Protobuf envelope content type %q / encoding %q", unk.ContentType, unk.ContentEncoding)
	}
	m, ok := into.(interface{ Unmarshal([]byte) error })
	if !ok {
		return errors.New("this kind has no Protobuf encoding")
	}
	if err := m.Unmarshal(unk.Raw); err != nil {
		return fmt.Errorf("the Protobuf object is malformed: %w", err)
	}
	into.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(unk.APIVersion, unk.Kind))
	return nil
}

// Strategy is the default strategy of a built-in kind (registry.Strategy).
type Strategy struct {
	Res    *registry.Resource
	Shared *Shared
	// KeepStatusOnCreate is set for kinds whose creator reports status in the same request (a
	// node registers with its capacity), as upstream allows.
	KeepStatusOnCreate bool
	fms                FieldManagers
}

var _ registry.Strategy = (*Strategy)(nil)

// New returns the default strategy of res.
func New(res *registry.Resource, shared *Shared) *Strategy {
	return &Strategy{Res: res, Shared: shared}
}

func (s *Strategy) New() runtime.Object { return s.Res.New() }

func (s *Strategy) NewList(items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	listGVK := s.Res.GroupVersion().WithKind(s.Res.ListKind)
	list, err := s.Shared.Scheme.New(listGVK)
	if err != nil {
		return nil, err
	}
	list.GetObjectKind().SetGroupVersionKind(listGVK)
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	la, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	return list, nil
}

func (s *Strategy) Protobuf() bool { return true }

func (s *Strategy) StrategicMerge() bool { return true }

// Normalize has nothing to do: the strict decoder already reported unknown fields.
func (s *Strategy) Normalize(runtime.Object) ([]string, error) { return nil, nil }

func (s *Strategy) Typed(obj runtime.Object) (runtime.Object, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := s.Res.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, apierrors.NewBadRequest("the applied object does not fit its kind: " + err.Error())
	}
	return out, nil
}

func (s *Strategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	return s.Shared.EncodeProtobuf(obj, s.Res.GroupVersionKind())
}

func (s *Strategy) DecodeStored(value []byte) (runtime.Object, error) {
	obj := s.Res.New()
	if err := DecodeProtobuf(value, obj); err != nil {
		return nil, fmt.Errorf("decoding a stored %s: %w", s.Res.Kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(s.Res.GroupVersionKind())
	return obj, nil
}

func (s *Strategy) Default(obj runtime.Object) { defaults.Apply(obj) }

// CheckRequired walks the Go type's required fields (required.go).
func (s *Strategy) CheckRequired(obj runtime.Object) error {
	return CheckRequiredFields(s.Res, obj)
}

// Validate: on updates, upstream's immutable fields of the kinds that have no strategy of their
// own (immutable.go); nothing else beyond the metadata's rules.
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	if old == nil {
		return nil
	}
	return validateImmutable(obj, old)
}

// ValidateName: names are DNS subdomains unless the kind says otherwise, as upstream's.
func (s *Strategy) ValidateName(name string) []string {
	return validation.IsDNS1123Subdomain(name)
}

// PrepareForCreate counts generations of kinds with a spec, clears the status of kinds whose
// status is a subresource (unless the kind keeps it) and applies the defaults that depend on
// the name once generateName is resolved.
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if HasSpec(obj) {
		registry.Meta(obj).SetGeneration(1)
	}
	if s.Res.HasStatus && !s.KeepStatusOnCreate {
		setStatus(obj, reflect.Zero(statusValue(obj).Type()))
	}
	defaults.Apply(obj)
}

// PrepareForUpdate: the main resource cannot change status, the status subresource can change
// nothing but status, and generation counts spec changes.
func (s *Strategy) PrepareForUpdate(subresource string, newObj, cur runtime.Object) (runtime.Object, error) {
	if subresource == "status" {
		out := cur.DeepCopyObject()
		setStatus(out, statusValue(newObj))
		return out, nil
	}
	m, curMeta := registry.Meta(newObj), registry.Meta(cur)
	CopySystemFields(m, curMeta)
	if s.Res.HasStatus {
		setStatus(newObj, statusValue(cur))
	}
	if HasSpec(newObj) && !equality.Semantic.DeepEqual(specValue(newObj).Interface(), specValue(cur).Interface()) {
		m.SetGeneration(curMeta.GetGeneration() + 1)
	}
	if err := CheckNewFinalizers(s.Res, m, curMeta); err != nil {
		return nil, err
	}
	return newObj, nil
}

// PrepareForDelete leaves the default kind to the generic rules (finalizers).
func (s *Strategy) PrepareForDelete(runtime.Object, metav1.Time) (bool, error) { return false, nil }

// Finalizing: an object being deleted stays while metadata.finalizers hold it.
func (s *Strategy) Finalizing(obj runtime.Object) bool {
	return len(registry.Meta(obj).GetFinalizers()) > 0
}

// CheckWrite: the default kind has no rules that need the caller or other objects.
func (s *Strategy) CheckWrite(context.Context, runtime.Object, runtime.Object) error { return nil }

// defaulter applies upstream's defaults, so that a field an applier stops setting is reset to
// its default when it has one.
type defaulter struct{}

func (defaulter) Default(obj runtime.Object) { defaults.Apply(obj) }

// FieldManager tracks ownership on the kind's real schema: client-go's applyconfigurations type
// converter, which finds a kind's schema by its Go type, so Platform's renamed groups resolve to
// the same schemas as upstream's.
func (s *Strategy) FieldManager(subresource string) (*managedfields.FieldManager, error) {
	return s.fms.Get(subresource, func() (*managedfields.FieldManager, error) {
		res := s.Res
		converter := s.Shared.typeConverter()
		probe := res.New()
		probe.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
		if _, err := converter.ObjectToTyped(probe); err != nil {
			// Kinds outside k8s.io/api (CustomResourceDefinition) have no schema in client-go's
			// models: their ownership is tracked on the schema deduced from the object, as upstream
			// does for objects without one (structs are granular, lists atomic).
			converter = managedfields.NewDeducedTypeConverter()
		}
		var reset []fieldpath.Path
		switch {
		case subresource == "" && res.HasStatus:
			reset = append(reset, fieldpath.MakePathOrDie("status"))
		case subresource == "status":
			if HasSpec(res.New()) {
				reset = append(reset, fieldpath.MakePathOrDie("spec"))
			}
		}
		return managedfields.NewDefaultFieldManager(converter, runtime.UnsafeObjectConvertor(s.Shared.Scheme), defaulter{}, s.Shared.Scheme,
			res.GroupVersionKind(), res.GroupVersion(), subresource, ResetFields(res, reset))
	})
}

// Replicas: the default kind has no scale subresource.
func (s *Strategy) Replicas(obj runtime.Object) (spec, status int32, selector string, err error) {
	return 0, 0, "", fmt.Errorf("%T has no scale subresource", obj)
}

// SetReplicas: the default kind has no scale subresource.
func (s *Strategy) SetReplicas(obj runtime.Object, _ int32) error {
	return fmt.Errorf("%T has no scale subresource", obj)
}

func (s *Strategy) Fields(obj runtime.Object) map[string]string { return s.Res.Fields(obj) }

// Printer returns the kind's columns (kubectl's for common kinds, Name and Created At for others).
func (s *Strategy) Printer(sample runtime.Object) (*printers.Printer, error) {
	return printers.For(sample), nil
}

func (s *Strategy) Definition() *apiextensionsv1.CustomResourceDefinition { return nil }

// FieldManagers holds a strategy's field managers, one per subresource, built on first use.
type FieldManagers struct {
	mu    sync.Mutex
	bySub map[string]*managedfields.FieldManager
}

// Get returns the field manager of subresource, building it with build the first time.
func (s *FieldManagers) Get(subresource string, build func() (*managedfields.FieldManager, error)) (*managedfields.FieldManager, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fm, ok := s.bySub[subresource]; ok {
		return fm, nil
	}
	fm, err := build()
	if err != nil {
		return nil, err
	}
	if s.bySub == nil {
		s.bySub = map[string]*managedfields.FieldManager{}
	}
	s.bySub[subresource] = fm
	return fm, nil
}

// ResetFields turns the fields a write through a (sub)resource may not change (status through
// the main resource, spec through the status subresource) into the filter that keeps anybody
// from owning them through it.
func ResetFields(res *registry.Resource, paths []fieldpath.Path) map[fieldpath.APIVersion]fieldpath.Filter {
	if len(paths) == 0 {
		return nil
	}
	return fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(res.GroupVersion().String()): fieldpath.NewSet(paths...),
	})
}

// CopySystemFields gives an updated object the fields only the server sets, from the stored one.
func CopySystemFields(m, cur metav1.Object) {
	m.SetUID(cur.GetUID())
	m.SetCreationTimestamp(cur.GetCreationTimestamp())
	m.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	m.SetGeneration(cur.GetGeneration())
	m.SetSelfLink("")
}

// CheckNewFinalizers refuses finalizers added to an object being deleted.
func CheckNewFinalizers(res *registry.Resource, m, curMeta metav1.Object) error {
	if curMeta.GetDeletionTimestamp() == nil {
		return nil
	}
	old := map[string]bool{}
	for _, f := range curMeta.GetFinalizers() {
		old[f] = true
	}
	for _, f := range m.GetFinalizers() {
		if !old[f] {
			return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), m.GetName(), field.ErrorList{
				field.Forbidden(field.NewPath("metadata", "finalizers"), fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %q", f)),
			})
		}
	}
	return nil
}

// The helpers below reach Spec and Status of any built-in kind by reflection: every kind with a
// status subresource keeps it in a struct field named Status.

func structOf(obj runtime.Object) reflect.Value { return reflect.ValueOf(obj).Elem() }

// HasSpec tells whether obj is a typed object with a spec (whose changes count generations).
func HasSpec(obj runtime.Object) bool {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		return false
	}
	f := structOf(obj).FieldByName("Spec")
	return f.IsValid() && f.Kind() == reflect.Struct
}

func specValue(obj runtime.Object) reflect.Value { return structOf(obj).FieldByName("Spec") }

func statusValue(obj runtime.Object) reflect.Value { return structOf(obj).FieldByName("Status") }

func setStatus(obj runtime.Object, v reflect.Value) {
	f := structOf(obj).FieldByName("Status")
	if f.IsValid() && f.CanSet() {
		f.Set(v)
	}
}

// PathSegmentName is the rule for names that only have to be usable as one URL path segment
// (roles and bindings, flow schemas, as upstream's).
func PathSegmentName(name string) []string {
	var msgs []string
	if name == "." || name == ".." {
		msgs = append(msgs, fmt.Sprintf("may not be '%s'", name))
	}
	if strings.ContainsAny(name, "/%") {
		msgs = append(msgs, "may not contain '/' or '%'")
	}
	return msgs
}
