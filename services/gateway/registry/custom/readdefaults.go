package custom

// Defaulting from storage.
//
// Upstream defaults a custom object every time it is decoded from storage, not only when it is
// written: its storage codec runs the structural defaulting of the object's stored version
// after decoding (apiextensions-apiserver's unstructuredDefaulter). A default added to a
// definition's schema after objects were stored therefore shows in every get, list and watch
// of them, and in the current object an update starts from, while the stored bytes stay as
// they were until the object is next written. DecodeStored is the one place every read path
// (gets, lists, the list cache, watches and the watch hub, the current object of an update)
// decodes stored custom objects, so it calls defaultStored.

import (
	"sync"
	"weak"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/registry"
)

// defaultStored applies the defaults of the schema of the version the object was stored in
// (its apiVersion as stored), as upstream's storage decoder does, before DecodeStored gives it
// the served version. Objects whose stored version the definition no longer has are left as
// they are.
func defaultStored(res *registry.Resource, u *unstructured.Unstructured) {
	if res.Custom == nil || res.Custom.CRD == nil {
		return
	}
	s := storedVersionSchema(res, u)
	if s == nil || !hasDefaults(s) {
		return
	}
	crd.Default(s, u.Object)
}

// storedVersionSchema is the schema of the definition's version named by the stored object's
// apiVersion (the served version's when it names none).
func storedVersionSchema(res *registry.Resource, u *unstructured.Unstructured) *apiextensionsv1.JSONSchemaProps {
	version := res.Version
	if av, _ := u.Object["apiVersion"].(string); av != "" {
		if gv, err := schema.ParseGroupVersion(av); err == nil && gv.Version != "" {
			version = gv.Version
		}
	}
	if version == res.Version {
		return res.Custom.Schema
	}
	for i := range res.Custom.CRD.Spec.Versions {
		v := &res.Custom.CRD.Spec.Versions[i]
		if v.Name == version {
			if v.Schema == nil {
				return nil
			}
			return v.Schema.OpenAPIV3Schema
		}
	}
	return nil
}

// withDefaults remembers, per schema (schemas are read-only snapshots of a registered
// definition), whether it has any default, so that reads of kinds without defaults (most) cost
// nothing. Keys are weak: a schema replaced by a changed definition is not kept alive.
var withDefaults sync.Map // weak.Pointer[apiextensionsv1.JSONSchemaProps] -> bool

func hasDefaults(s *apiextensionsv1.JSONSchemaProps) bool {
	key := weak.Make(s)
	if v, ok := withDefaults.Load(key); ok {
		return v.(bool)
	}
	has := schemaHasDefault(s)
	withDefaults.Store(key, has)
	return has
}

// schemaHasDefault walks the structural nodes of a schema (properties, items,
// additionalProperties: the only places a structural schema may set defaults).
func schemaHasDefault(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if s.Default != nil {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if schemaHasDefault(&p) {
			return true
		}
	}
	if s.Items != nil && schemaHasDefault(s.Items.Schema) {
		return true
	}
	if s.AdditionalProperties != nil && schemaHasDefault(s.AdditionalProperties.Schema) {
		return true
	}
	return false
}
