package registry

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func definition(group, plural, kind string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ShortNames: []string{"x" + plural[:1]}, Categories: []string{"all"}},
		},
	}
	for i, v := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema:           &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			Subresources:     &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.color"}},
		})
	}
	return c
}

// Custom resources join and leave the served set: versions by priority, groups after the
// built-in ones, lookups and Generation follow every change; built-in names always win.
func TestCustomResources(t *testing.T) {
	r := mustNew(t, "")
	g0 := r.Generation()
	builtins := len(r.Groups())
	r.PutCustom("widgets.example.com", CustomResources(definition("example.com", "widgets", "Widget", "v1beta1", "v1", "v2alpha1")))
	if r.Generation() == g0 {
		t.Error("generation unchanged after PutCustom")
	}
	g, ok := r.Group("example.com")
	if !ok || len(r.Groups()) != builtins+1 || r.Groups()[builtins] != g {
		t.Fatalf("example.com not served after the built-in groups")
	}
	var order []string
	for _, v := range g.Versions {
		order = append(order, v.Version)
	}
	if len(order) != 3 || order[0] != "v1" || order[1] != "v1beta1" || order[2] != "v2alpha1" {
		t.Errorf("version order %v, want v1 v1beta1 v2alpha1", order)
	}
	res, ok := r.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	if !ok || res.Kind != "Widget" || res.ListKind != "WidgetList" || res.Singular != "widget" || !res.Namespaced || !res.HasSubresource("status") ||
		res.Custom.StorageVersion != "v1beta1" || len(res.ShortNames) != 1 || res.Categories[0] != "all" {
		t.Fatalf("resource: %+v", res)
	}
	obj := res.New().(*unstructured.Unstructured)
	if obj.GetAPIVersion() != "example.com/v1" || obj.GetKind() != "Widget" {
		t.Errorf("New: %v", obj.Object)
	}
	obj.Object["spec"] = map[string]any{"color": "red"}
	obj.SetName("w")
	obj.SetNamespace("ns")
	if f := res.Fields(obj); f["spec.color"] != "red" || f["metadata.name"] != "w" || f["metadata.namespace"] != "ns" || !res.FieldSelectable("spec.color") {
		t.Errorf("fields %v", f)
	}

	// A definition in a built-in group, or naming a built-in resource, adds nothing.
	r.PutCustom("pods.apps", CustomResources(definition("apps", "deployments", "Fake", "v1")))
	if d, _ := r.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}); d.Custom != nil {
		t.Error("a custom resource replaced a built-in one")
	}

	// Conversion webhooks are not called: only the storage version is served.
	hooked := definition("hooks.example.org", "hooks", "Hook", "v1", "v2")
	hooked.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	r.PutCustom("hooks.hooks.example.org", CustomResources(hooked))
	if hg, ok := r.Group("hooks.example.org"); !ok || len(hg.Versions) != 1 || hg.Versions[0].Version != "v1" {
		t.Errorf("webhook definition served in %v", hg)
	}

	g1 := r.Generation()
	r.DeleteCustom("widgets.example.com")
	if _, ok := r.Group("example.com"); ok || r.Generation() == g1 {
		t.Error("example.com still served after DeleteCustom")
	}
	if _, ok := r.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); ok {
		t.Error("widgets still resolvable")
	}
}
