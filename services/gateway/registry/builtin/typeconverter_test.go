package builtin

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

// apiTestdata is k8s.io/api's round-trip corpus: one object of every built-in kind, every field
// set (fuzzed values, managed fields included).
func apiTestdata(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(moduleDir(t, "k8s.io/api"), "testdata", "HEAD")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 50 {
		t.Fatalf("k8s.io/api's testdata: %d files in %s, %v", len(files), dir, err)
	}
	return files
}

// fieldManagerResult is what an update or an apply made, comparable between converters: the
// object's JSON with the managed fields' times cleared, or the error.
func fieldManagerResult(t *testing.T, obj runtime.Object, err error) string {
	t.Helper()
	if err != nil {
		return "error"
	}
	obj = obj.DeepCopyObject()
	if m, merr := meta.Accessor(obj); merr == nil {
		mf := m.GetManagedFields()
		for i := range mf {
			mf[i].Time = nil
		}
		m.SetManagedFields(mf)
	}
	b, jerr := json.Marshal(obj)
	if jerr != nil {
		t.Fatal(jerr)
	}
	return string(b)
}

// The built-in kinds' type converter gives the field manager the same results as client-go's on
// every built-in kind of k8s.io/api's corpus: a create (from an empty object), the same object
// created with the managed fields it carries, an update of a label, an apply of a label, and an
// update in which a container has no name or two containers share one (associative lists with a
// missing or a duplicate key).
func TestBuiltinTypeConverterMatchesClientGo(t *testing.T) {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	fast, slow := newTypeConverter(scheme.Scheme), applyconfigurations.NewTypeConverter(scheme.Scheme)
	fieldManagers := func(gvk schema.GroupVersionKind) (a, b *managedfields.FieldManager) {
		mk := func(tc managedfields.TypeConverter) *managedfields.FieldManager {
			fm, err := managedfields.NewDefaultFieldManager(tc, runtime.UnsafeObjectConvertor(scheme.Scheme), scheme.Scheme, scheme.Scheme, gvk, gvk.GroupVersion(), "", nil)
			if err != nil {
				t.Fatalf("%s: %v", gvk, err)
			}
			return fm
		}
		return mk(fast), mk(slow)
	}
	compared := 0
	for _, file := range apiTestdata(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			continue // a kind client-go's scheme does not serve
		}
		if _, err := slow.ObjectToTyped(obj, typed.AllowDuplicates); err != nil && strings.Contains(err.Error(), "no corresponding type") {
			continue // no schema (not a resource)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			continue // lists, options, reviews without metadata
		}
		fmFast, fmSlow := fieldManagers(*gvk)
		name := filepath.Base(file)
		empty, _ := scheme.Scheme.New(*gvk)
		empty.GetObjectKind().SetGroupVersionKind(*gvk)

		check := func(step string, run func(fm *managedfields.FieldManager) (runtime.Object, error)) runtime.Object {
			t.Helper()
			a, aerr := run(fmFast)
			b, berr := run(fmSlow)
			if ga, gb := fieldManagerResult(t, a, aerr), fieldManagerResult(t, b, berr); ga != gb {
				t.Errorf("%s, %s: our converter gave\n%.600s\nclient-go's\n%.600s", name, step, ga, gb)
			}
			return b
		}
		// Created with the managed fields it carries, then from none.
		check("create with its managed fields", func(fm *managedfields.FieldManager) (runtime.Object, error) {
			return fm.UpdateNoErrors(empty.DeepCopyObject(), obj.DeepCopyObject(), "creator"), nil
		})
		m.SetManagedFields(nil)
		live := check("create", func(fm *managedfields.FieldManager) (runtime.Object, error) {
			return fm.UpdateNoErrors(empty.DeepCopyObject(), obj.DeepCopyObject(), "creator"), nil
		})
		changed := live.DeepCopyObject()
		lm, _ := meta.Accessor(changed)
		lm.SetLabels(map[string]string{"changed": "yes"})
		check("update", func(fm *managedfields.FieldManager) (runtime.Object, error) {
			return fm.UpdateNoErrors(live.DeepCopyObject(), changed.DeepCopyObject(), "updater"), nil
		})
		patch := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"name": lm.GetName(), "namespace": lm.GetNamespace(), "labels": map[string]any{"applied": "yes"}},
		}}
		check("apply", func(fm *managedfields.FieldManager) (runtime.Object, error) {
			return fm.Apply(live.DeepCopyObject(), patch.DeepCopyObject(), "applier", true)
		})
		compared++
	}
	t.Logf("compared %d kinds", compared)
	if compared < 40 {
		t.Errorf("compared %d kinds", compared)
	}

	// Associative lists whose keys are missing or repeated.
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	fmFast, fmSlow := fieldManagers(gvk)
	pod := func(names ...string) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		live, next *corev1.Pod
	}{
		{"a container without a name", pod("a"), pod("a", "")},
		{"two containers named alike", pod("a"), pod("a", "a")},
		{"a live object with a repeated name", pod("a", "a"), pod("a", "a", "b")},
		{"a live object without a name", pod(""), pod("", "b")},
	} {
		a := fmFast.UpdateNoErrors(tc.live.DeepCopy(), tc.next.DeepCopy(), "updater")
		b := fmSlow.UpdateNoErrors(tc.live.DeepCopy(), tc.next.DeepCopy(), "updater")
		if ga, gb := fieldManagerResult(t, a, nil), fieldManagerResult(t, b, nil); ga != gb {
			t.Errorf("update, %s: our converter gave\n%s\nclient-go's\n%s", tc.name, ga, gb)
		}
		patch := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "default", "labels": map[string]any{"x": "y"}}}}
		ra, aerr := fmFast.Apply(tc.live.DeepCopy(), patch.DeepCopy(), "applier", true)
		rb, berr := fmSlow.Apply(tc.live.DeepCopy(), patch.DeepCopy(), "applier", true)
		if ga, gb := fieldManagerResult(t, ra, aerr), fieldManagerResult(t, rb, berr); ga != gb {
			t.Errorf("apply onto %s: our converter gave %s (%v), client-go's %s (%v)", tc.name, ga, aerr, gb, berr)
		}
	}
}

// moduleDir is where the go command keeps module path (of this module's build list).
func moduleDir(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// BenchmarkFieldManagerCreate: the field manager's work for a created ConfigMap (~300 bytes of
// data), with client-go's type converter and with the built-in kinds' one.
func BenchmarkFieldManagerCreate(b *testing.B) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	for _, bc := range []struct {
		name string
		tc   managedfields.TypeConverter
	}{{"client-go", applyconfigurations.NewTypeConverter(scheme.Scheme)}, {"builtin", newTypeConverter(scheme.Scheme)}} {
		b.Run(bc.name, func(b *testing.B) {
			fm, err := managedfields.NewDefaultFieldManager(bc.tc, runtime.UnsafeObjectConvertor(scheme.Scheme), scheme.Scheme, scheme.Scheme, gvk, gvk.GroupVersion(), "", nil)
			if err != nil {
				b.Fatal(err)
			}
			cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", Labels: map[string]string{"app": "load"}},
				Data:       map[string]string{"a": strings.Repeat("x", 100), "b": strings.Repeat("y", 100), "c": strings.Repeat("z", 100)}}
			empty := &corev1.ConfigMap{TypeMeta: cm.TypeMeta}
			b.ReportAllocs()
			for b.Loop() {
				fm.UpdateNoErrors(empty.DeepCopy(), cm.DeepCopy(), "apiload")
			}
		})
	}
}
