package custom

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"platform.io/services/gateway/registry"
)

// A stored object is defaulted with the schema of the version it was stored in, as upstream's
// storage decoder defaults before converting to the version asked for.
func TestDecodeStoredDefaultsWithTheStoredVersionsSchema(t *testing.T) {
	schema := func(def string) *apiextensionsv1.CustomResourceValidation {
		s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"color": {Type: "string"}}},
		}}
		if def != "" {
			c := s.Properties["spec"].Properties["color"]
			c.Default = &apiextensionsv1.JSON{Raw: []byte(`"` + def + `"`)}
			s.Properties["spec"].Properties["color"] = c
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s}
	}
	def := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", Served: true, Storage: true, Schema: schema("red")},
			{Name: "v2", Served: true, Schema: schema("blue")},
			{Name: "v3", Served: true, Schema: schema("")},
		},
	}}
	byVersion := map[string]*registry.Resource{}
	for _, res := range registry.CustomResources(def) {
		byVersion[res.Version] = res
	}
	for _, c := range []struct{ stored, served, want string }{
		{"v1", "v1", "red"}, {"v1", "v2", "red"}, {"v2", "v1", "blue"}, {"v3", "v1", ""}, {"v9", "v1", ""}, {"", "v2", "blue"},
	} {
		value := `{"kind":"Thing","metadata":{"name":"a"},"spec":{}}`
		if c.stored != "" {
			value = `{"apiVersion":"example.com/` + c.stored + `","kind":"Thing","metadata":{"name":"a"},"spec":{}}`
		}
		obj, err := New(byVersion[c.served]).DecodeStored([]byte(value))
		if err != nil {
			t.Fatal(err)
		}
		u := obj.(*unstructured.Unstructured)
		got, _, _ := unstructured.NestedString(u.Object, "spec", "color")
		if got != c.want || u.GetAPIVersion() != "example.com/"+c.served {
			t.Errorf("stored as %q, read as %s: color %q, apiVersion %s; want %q", c.stored, c.served, got, u.GetAPIVersion(), c.want)
		}
	}
}
