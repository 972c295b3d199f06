package crd

import (
	"bytes"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/value"
	"sigs.k8s.io/yaml"
)

// applySchemaYAML exercises every marker the type converter honours.
const applySchemaYAML = `
type: object
properties:
  metadata:
    type: object
    properties:
      name: {type: string, maxLength: 20}
  spec:
    type: object
    properties:
      replicas: {type: integer}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port: {type: integer}
      args:
        type: array
        items: {type: string}
      tags:
        type: array
        x-kubernetes-list-type: set
        items: {type: string}
      pinned:
        type: array
        x-kubernetes-list-type: atomic
        items: {type: string}
      selector:
        type: object
        x-kubernetes-map-type: atomic
        additionalProperties: {type: string}
      settings:
        type: object
        additionalProperties: {type: string}
      size:
        x-kubernetes-int-or-string: true
        anyOf: [{type: integer}, {type: string}]
      config:
        type: object
        x-kubernetes-preserve-unknown-fields: true
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
  status:
    type: object
    properties:
      ready: {type: boolean}
`

var widgetGVK = schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}

func applySchema(t *testing.T) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(applySchemaYAML), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func converter(t *testing.T, s *apiextensionsv1.JSONSchemaProps, preserve bool) managedfields.TypeConverter {
	t.Helper()
	tc, err := TypeConverter(s, widgetGVK, preserve)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// identity is the object convertor of a single version: nothing to convert.
type identity struct{}

func (identity) Convert(in, out, context any) error { return nil }
func (identity) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}
func (identity) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// applier holds one live object and applies configurations to it through a real FieldManager.
type applier struct {
	t    *testing.T
	fm   *managedfields.FieldManager
	live runtime.Object
}

func newApplier(t *testing.T, tc managedfields.TypeConverter) *applier {
	t.Helper()
	fm, err := managedfields.NewDefaultFieldManager(tc, identity{}, noDefaults{}, creater{}, widgetGVK, widgetGVK.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	live, _ := creater{}.New(widgetGVK)
	return &applier{t: t, fm: fm, live: live}
}

// object parses a Widget from YAML (apiVersion, kind and metadata.name are added).
func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(widgetGVK)
	if u.GetName() == "" {
		u.SetName("w")
	}
	return u
}

func (a *applier) apply(manager, y string, force bool) error {
	a.t.Helper()
	out, err := a.fm.Apply(a.live, object(a.t, y), manager, force)
	if err == nil {
		a.live = out
	}
	return err
}

func (a *applier) mustApply(manager, y string) {
	a.t.Helper()
	if err := a.apply(manager, y, false); err != nil {
		a.t.Fatalf("%s applying:\n%s\n%v", manager, y, err)
	}
}

// mustConflict applies and expects a conflict naming field.
func (a *applier) mustConflict(manager, y, field string) {
	a.t.Helper()
	err := a.apply(manager, y, false)
	if !apierrors.IsConflict(err) {
		a.t.Fatalf("%s applying:\n%s\nerror %v, want a conflict", manager, y, err)
	}
	if !strings.Contains(err.Error(), field) {
		a.t.Errorf("conflict %q does not name %s", err, field)
	}
}

func (a *applier) get(path ...string) any {
	a.t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(a.live.(*unstructured.Unstructured).Object, path...)
	if err != nil {
		a.t.Fatal(err)
	}
	return v
}

// owned returns the fields manager owns (by apply).
func (a *applier) owned(manager string) *fieldpath.Set {
	a.t.Helper()
	u := a.live.(*unstructured.Unstructured)
	set := &fieldpath.Set{}
	for _, e := range u.GetManagedFields() {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			a.t.Fatal(err)
		}
		set = set.Union(s)
	}
	return set
}

func (a *applier) mustOwn(manager string, parts ...any) {
	a.t.Helper()
	p := fieldpath.MakePathOrDie(parts...)
	if !a.owned(manager).Has(p) {
		a.t.Errorf("%s does not own %s; owns %s", manager, p, a.owned(manager))
	}
}

func (a *applier) mustNotOwn(manager string, parts ...any) {
	a.t.Helper()
	p := fieldpath.MakePathOrDie(parts...)
	if a.owned(manager).Has(p) {
		a.t.Errorf("%s owns %s", manager, p)
	}
}

func TestTypeConverterListMapIsGranular(t *testing.T) {
	a := newApplier(t, converter(t, applySchema(t), false))
	a.mustApply("alice", "spec: {ports: [{name: http, port: 80}]}")
	a.mustApply("bob", "spec: {ports: [{name: https, port: 443}]}")
	if ports := a.get("spec", "ports").([]any); len(ports) != 2 {
		t.Fatalf("ports %v, want both entries", ports)
	}
	a.mustOwn("alice", "spec", "ports", fieldpath.KeyByFields("name", "http"), "port")
	a.mustOwn("bob", "spec", "ports", fieldpath.KeyByFields("name", "https"), "port")
	a.mustNotOwn("alice", "spec", "ports", fieldpath.KeyByFields("name", "https"))
	// Ownership goes down to the entry's fields: changing alice's port conflicts.
	a.mustConflict("bob", "spec: {ports: [{name: https, port: 443}, {name: http, port: 8080}]}", "port")
	// Alice dropping her entry removes it and leaves bob's.
	a.mustApply("alice", "spec: {replicas: 1}")
	if ports := a.get("spec", "ports").([]any); len(ports) != 1 || ports[0].(map[string]any)["name"] != "https" {
		t.Errorf("ports after alice dropped hers: %v", ports)
	}
}

func TestTypeConverterListsWithoutMarkerAreAtomic(t *testing.T) {
	a := newApplier(t, converter(t, applySchema(t), false))
	a.mustApply("alice", "spec: {args: [a], pinned: [p]}")
	a.mustOwn("alice", "spec", "args")
	a.mustConflict("bob", "spec: {args: [b]}", ".spec.args")
	a.mustConflict("bob", "spec: {pinned: [p, q]}", ".spec.pinned")
	if err := a.apply("bob", "spec: {args: [b]}", true); err != nil {
		t.Fatal(err)
	}
	if args := a.get("spec", "args").([]any); len(args) != 1 || args[0] != "b" {
		t.Errorf("args after a forced apply: %v (an atomic list is replaced)", args)
	}
	a.mustNotOwn("alice", "spec", "args")
	a.mustOwn("bob", "spec", "args")

	// A set is granular: each manager owns its values.
	a.mustApply("alice", "spec: {pinned: [p], tags: [t1]}")
	a.mustApply("bob", "spec: {args: [b], tags: [t2]}")
	if tags := a.get("spec", "tags").([]any); len(tags) != 2 {
		t.Errorf("tags %v, want both values", tags)
	}
	a.mustOwn("bob", "spec", "tags", value.NewValueInterface("t2"))
	a.mustNotOwn("bob", "spec", "tags", value.NewValueInterface("t1"))
}

func TestTypeConverterMapTypes(t *testing.T) {
	a := newApplier(t, converter(t, applySchema(t), false))
	a.mustApply("alice", "spec: {selector: {app: a}, settings: {color: red}}")
	a.mustConflict("bob", "spec: {selector: {tier: b}}", ".spec.selector")
	a.mustApply("bob", "spec: {settings: {size: big}}")
	if s := a.get("spec", "settings").(map[string]any); len(s) != 2 {
		t.Errorf("settings %v, want both keys (granular map)", s)
	}
	a.mustOwn("alice", "spec", "selector")
	a.mustOwn("bob", "spec", "settings", "size")
	a.mustNotOwn("bob", "spec", "settings", "color")
}

func TestTypeConverterMetadataIsObjectMeta(t *testing.T) {
	a := newApplier(t, converter(t, applySchema(t), false))
	a.mustApply("alice", `
metadata:
  labels: {a: "1"}
  annotations: {note: x}
  finalizers: [example.com/a]
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: c1, uid: u1}]
`)
	a.mustApply("bob", `
metadata:
  labels: {b: "2"}
  finalizers: [example.com/b]
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: c2, uid: u2}]
`)
	if l := a.get("metadata", "labels").(map[string]any); len(l) != 2 {
		t.Errorf("labels %v", l)
	}
	if f := a.get("metadata", "finalizers").([]any); len(f) != 2 {
		t.Errorf("finalizers %v (a set)", f)
	}
	if o := a.get("metadata", "ownerReferences").([]any); len(o) != 2 {
		t.Errorf("ownerReferences %v (a map list keyed by uid)", o)
	}
	a.mustOwn("alice", "metadata", "labels", "a")
	a.mustNotOwn("alice", "metadata", "labels", "b")
	a.mustOwn("bob", "metadata", "labels", "b")
	a.mustOwn("bob", "metadata", "finalizers", value.NewValueInterface("example.com/b"))
	// Each owner reference is an atomic struct (as upstream marks it), owned by its uid.
	a.mustOwn("bob", "metadata", "ownerReferences", fieldpath.KeyByFields("uid", "u2"))
	a.mustNotOwn("bob", "metadata", "ownerReferences", fieldpath.KeyByFields("uid", "u1"))
	a.mustConflict("bob", "metadata: {labels: {a: changed}}", ".metadata.labels.a")

	// The schema's own metadata (restricting name) does not hide the rest of ObjectMeta.
	tc := converter(t, applySchema(t), false)
	if _, err := tc.ObjectToTyped(object(t, "metadata: {labels: {a: 1}}")); err == nil {
		t.Error("a label that is not a string was accepted")
	}
	if _, err := tc.ObjectToTyped(object(t, "metadata: {bogus: 1}")); err == nil {
		t.Error("an unknown metadata field was accepted")
	}
}

func TestTypeConverterPreserveUnknownFields(t *testing.T) {
	tc := converter(t, applySchema(t), false)
	obj := object(t, `
spec:
  config: {anything: [1, {deep: true}], nested: {x: y}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: cm, labels: {a: b}}
    data: {k: v}
`)
	if _, err := tc.ObjectToTyped(obj); err != nil {
		t.Fatalf("preserved subtrees: %v", err)
	}
	if _, err := tc.ObjectToTyped(object(t, "spec: {unknown: 1}")); err == nil {
		t.Error("an unknown field outside a preserved subtree was accepted")
	}
	// Preserved maps are granular by deduction.
	a := newApplier(t, tc)
	a.mustApply("alice", "spec: {config: {a: {x: 1}}}")
	a.mustApply("bob", "spec: {config: {b: 2}}")
	a.mustOwn("alice", "spec", "config", "a", "x")
	a.mustOwn("bob", "spec", "config", "b")

	// An embedded resource's metadata is ObjectMeta too.
	if _, err := tc.ObjectToTyped(object(t, "spec: {template: {metadata: {labels: [x]}}}")); err == nil {
		t.Error("embedded metadata.labels as a list was accepted")
	}
	a.mustApply("alice", "spec: {template: {apiVersion: v1, kind: ConfigMap, metadata: {labels: {a: b}}}}")
	a.mustApply("bob", "spec: {template: {metadata: {labels: {c: d}}}}")
	a.mustOwn("bob", "spec", "template", "metadata", "labels", "c")
	a.mustNotOwn("bob", "spec", "template", "metadata", "labels", "a")

	// The definition's preserveUnknownFields keeps unknown fields everywhere.
	if _, err := converter(t, applySchema(t), true).ObjectToTyped(object(t, "spec: {unknown: 1}\nextra: {x: 1}")); err != nil {
		t.Errorf("preserveUnknownFields: %v", err)
	}
}

func TestTypeConverterTypes(t *testing.T) {
	tc := converter(t, applySchema(t), false)
	for _, y := range []string{
		"spec: {replicas: 3, size: 3}",
		"spec: {size: 50%}",
		"status: {ready: true}",
	} {
		if _, err := tc.ObjectToTyped(object(t, y)); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	for _, y := range []string{
		"spec: {replicas: three}",
		"spec: {ports: {name: http}}",
		"spec: {args: [1]}",
		"spec: {settings: {a: [1]}}",
		"status: {ready: {}}",
		"metadata: {finalizers: a}",
	} {
		if _, err := tc.ObjectToTyped(object(t, y)); err == nil {
			t.Errorf("%s: accepted", y)
		}
	}
	// Objects of another kind have no type here.
	other := object(t, "spec: {}")
	other.SetKind("Gadget")
	if _, err := tc.ObjectToTyped(other); err == nil {
		t.Error("an object of another kind was accepted")
	}
	// The typed value converts back to the same object.
	obj := object(t, "spec: {ports: [{name: http, port: 80}], size: 50%}")
	tv, err := tc.ObjectToTyped(obj)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tc.TypedToObject(tv)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.(*unstructured.Unstructured); !equalJSON(t, got.Object, obj.Object) {
		t.Errorf("round trip: %v, want %v", got.Object, obj.Object)
	}
}

func TestTypeConverterNilSchema(t *testing.T) {
	tc := converter(t, nil, false)
	if _, err := tc.ObjectToTyped(object(t, "spec: {anything: [1, a], x: {y: z}}\nstatus: 3")); err != nil {
		t.Fatalf("nil schema: %v", err)
	}
	if _, err := tc.ObjectToTyped(object(t, "metadata: {labels: {a: 1}}")); err == nil {
		t.Error("nil schema: a label that is not a string was accepted")
	}
	a := newApplier(t, tc)
	a.mustApply("alice", "metadata: {labels: {a: x}, finalizers: [f/a]}\nspec: {list: [1], m: {a: 1}}")
	a.mustApply("bob", "metadata: {labels: {b: x}, finalizers: [f/b]}\nspec: {m: {b: 2}}")
	a.mustOwn("bob", "metadata", "labels", "b")
	a.mustNotOwn("bob", "metadata", "labels", "a")
	a.mustOwn("bob", "metadata", "finalizers", value.NewValueInterface("f/b"))
	a.mustOwn("bob", "spec", "m", "b")
	a.mustConflict("bob", "spec: {list: [2]}", ".spec.list") // deduced lists are atomic
}

func TestTypeConverterErrors(t *testing.T) {
	if _, err := TypeConverter(nil, schema.GroupVersionKind{Group: "g.example.com"}, false); err == nil {
		t.Error("no kind: no error")
	}
	bad := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"l": {Type: "array", XListType: ptr("map"), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
	}}
	if _, err := TypeConverter(bad, widgetGVK, false); err == nil {
		t.Error("a map list without keys: no error")
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
