package registry

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Custom is what a served custom resource takes from its CustomResourceDefinition. It is a
// snapshot: a changed definition is registered again as new Resources.
type Custom struct {
	// CRD is the definition as registered; read-only.
	CRD *apiextensionsv1.CustomResourceDefinition
	// Version is the definition's entry for this resource's version.
	Version *apiextensionsv1.CustomResourceDefinitionVersion
	// StorageVersion is the version objects are stored in. With conversion strategy None every
	// served version reads and writes the same objects, with apiVersion rewritten.
	StorageVersion string
	// Schema is the version's structural schema (spec.versions[].schema.openAPIV3Schema).
	Schema *apiextensionsv1.JSONSchemaProps
	// Scale is the scale subresource's paths, when it is enabled.
	Scale *apiextensionsv1.CustomResourceSubresourceScale
	// Columns are the version's additionalPrinterColumns.
	Columns []apiextensionsv1.CustomResourceColumnDefinition
}

// CustomResources derives the served Resources of a definition: one per served version.
func CustomResources(crd *apiextensionsv1.CustomResourceDefinition) []*Resource {
	crd = crd.DeepCopy()
	names := crd.Status.AcceptedNames
	if names.Plural == "" {
		names = crd.Spec.Names
	}
	singular := names.Singular
	if singular == "" {
		singular = strings.ToLower(names.Kind)
	}
	listKind := names.ListKind
	if listKind == "" {
		listKind = names.Kind + "List"
	}
	storageVersion := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storageVersion = v.Name
		}
	}
	// Versions are served with conversion strategy None (apiVersion rewritten). Conversion
	// webhooks are not called yet, so a definition that asks for them is served in its storage
	// version only: other versions would show objects unconverted.
	webhook := crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
	var out []*Resource
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if !v.Served || (webhook && !v.Storage) {
			continue
		}
		c := &Custom{CRD: crd, Version: v, StorageVersion: storageVersion, Columns: v.AdditionalPrinterColumns}
		if v.Schema != nil {
			c.Schema = v.Schema.OpenAPIV3Schema
		}
		res := &Resource{
			GroupVersionResource: schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: names.Plural},
			Kind:                 names.Kind,
			ListKind:             listKind,
			Singular:             singular,
			Namespaced:           crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			Verbs:                []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
			ShortNames:           names.ShortNames,
			Categories:           names.Categories,
			Custom:               c,
		}
		if sub := v.Subresources; sub != nil {
			if sub.Status != nil {
				res.HasStatus = true
				res.Subresources = append(res.Subresources, "status")
			}
			if sub.Scale != nil {
				c.Scale = sub.Scale
				res.Subresources = append(res.Subresources, "scale")
			}
		}
		var paths [][]string
		for _, f := range v.SelectableFields {
			key := strings.TrimPrefix(f.JSONPath, ".")
			res.SelectableFields = append(res.SelectableFields, key)
			paths = append(paths, strings.Split(key, "."))
		}
		if len(paths) > 0 {
			keys := res.SelectableFields
			res.fields = func(obj runtime.Object) map[string]string {
				m := map[string]string{}
				u, ok := obj.(*unstructured.Unstructured)
				if !ok {
					return m
				}
				for i, p := range paths {
					if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, p...); found {
						m[keys[i]] = fieldString(v)
					} else {
						m[keys[i]] = ""
					}
				}
				return m
			}
		}
		out = append(out, res)
	}
	return out
}

// fieldString formats a selectable field's value as upstream does for custom resources.
func fieldString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

// PutCustom serves the resources of one definition (from CustomResources), replacing what the
// definition served before. Resources whose group version and plural a built-in type already
// serves are ignored.
func (r *Registry) PutCustom(crdName string, resources []*Resource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.custom == nil {
		r.custom = map[string][]*Resource{}
	}
	for _, res := range resources {
		r.chooseStrategy(res)
	}
	r.custom[crdName] = resources
	r.rebuildLocked()
}

// DeleteCustom stops serving the resources of one definition.
func (r *Registry) DeleteCustom(crdName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.custom[crdName]; !ok {
		return
	}
	delete(r.custom, crdName)
	r.rebuildLocked()
}

// CustomResource returns the resource a definition serves in one version, if it is served.
func (r *Registry) CustomResource(crdName, version string) (*Resource, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range r.custom[crdName] {
		if res.Version == version {
			return res, true
		}
	}
	return nil, false
}

// rebuildLocked publishes a new view: the built-in groups unchanged, then the custom groups by
// name, each with its versions by Kubernetes version priority (preferred first) and resources by
// name.
func (r *Registry) rebuildLocked() {
	old := r.current()
	v := &view{generation: old.generation + 1, groups: append([]*Group(nil), r.groups...), byGVR: make(map[schema.GroupVersionResource]*Resource, len(r.byGVR))}
	for k, res := range r.byGVR {
		v.byGVR[k] = res
	}
	byGroup := map[string]map[string][]*Resource{}
	for _, list := range r.custom {
		for _, res := range list {
			if r.BuiltinGroup(res.Group) {
				continue
			}
			if _, taken := v.byGVR[res.GroupVersionResource]; taken {
				continue
			}
			v.byGVR[res.GroupVersionResource] = res
			if byGroup[res.Group] == nil {
				byGroup[res.Group] = map[string][]*Resource{}
			}
			byGroup[res.Group][res.Version] = append(byGroup[res.Group][res.Version], res)
		}
	}
	names := make([]string, 0, len(byGroup))
	for g := range byGroup {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, name := range names {
		g := &Group{Name: name}
		versions := make([]string, 0, len(byGroup[name]))
		for ver := range byGroup[name] {
			versions = append(versions, ver)
		}
		sort.Slice(versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0
		})
		for _, ver := range versions {
			list := byGroup[name][ver]
			sort.Slice(list, func(i, j int) bool { return list[i].Resource < list[j].Resource })
			g.Versions = append(g.Versions, &GroupVersion{GroupVersion: schema.GroupVersion{Group: name, Version: ver}, Resources: list})
		}
		v.groups = append(v.groups, g)
	}
	r.view.Store(v)
}
