// Package registry knows every resource type the gateway serves: the Go types of k8s.io/api
// registered under Platform's group names, and for each resource its scope, kind, list kind,
// verbs, short names, categories, subresources and selectable fields. Discovery, routing and
// the handlers all read it; nothing else decides what exists.
package registry

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

// Resource describes one served resource type (one group, version and resource name).
type Resource struct {
	// GroupVersionResource is the type's address in URLs, under Platform's group name.
	schema.GroupVersionResource
	// Kind is the object kind; ListKind the kind of its collections.
	Kind, ListKind string
	// Singular is the lower-case singular name (discovery's singularName).
	Singular string
	// Namespaced is true for namespace-scoped types.
	Namespaced bool
	// Verbs are the API verbs the main resource supports.
	Verbs []string
	// ShortNames and Categories are advertised in discovery (kubectl's "po", "all").
	ShortNames, Categories []string
	// Subresources are the subresource names served below an item ("status").
	Subresources []string
	// Virtual types are operations, not stored objects (create only, nothing persisted).
	Virtual bool
	// Deprecation is set for deprecated resources: requests get upstream's deprecation signals.
	Deprecation *Deprecation
	// StoredAs is set when the objects live in another resource's storage (its strategy converts
	// them): events.k8s.io Events are stored as core Events.
	StoredAs *schema.GroupResource
	// StorageVersion is set on a second served version of a kind: its objects are stored as the
	// objects of this version of the same group (StorageResource), and its strategy converts to
	// and from them. autoscaling/v1 HorizontalPodAutoscalers are stored as autoscaling/v2 ones.
	StorageVersion string
	// Computed resources are read-only views the gateway computes on each request (get, list),
	// never stored: core componentstatuses.
	Computed bool
	// HasStatus is true when the kind has a status that the main resource's writes do not change.
	HasStatus bool
	// SelectableFields are the field selector keys beyond metadata.name and metadata.namespace.
	SelectableFields []string
	// fields extracts SelectableFields from an object.
	fields func(runtime.Object) map[string]string
	// goType is the Go type of one object (a pointer type); nil for custom resources.
	goType reflect.Type
	// Custom is set for resources served from a CustomResourceDefinition: their objects are
	// unstructured and their rules come from the definition.
	Custom *Custom
	// strategy is what differs between kinds (Strategy), chosen when the resource is registered.
	strategy Strategy
}

// GroupVersionKind returns the kind's full name under Platform's group.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion().WithKind(r.Kind)
}

// GroupResource is the type's storage identity: one per group and resource, whatever the version.
func (r *Resource) GroupResource() schema.GroupResource {
	return r.GroupVersionResource.GroupResource()
}

// New returns an empty object of the kind (an *unstructured.Unstructured with apiVersion and
// kind set for custom resources).
func (r *Resource) New() runtime.Object {
	if r.Custom != nil {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGroupVersionKind(r.GroupVersionKind())
		return u
	}
	return reflect.New(r.goType.Elem()).Interface().(runtime.Object)
}

// HasSubresource tells whether name is served below items of this type.
func (r *Resource) HasSubresource(name string) bool {
	for _, s := range r.Subresources {
		if s == name {
			return true
		}
	}
	return false
}

// Fields returns the selectable fields of obj: metadata.name, metadata.namespace (for
// namespaced types) and the kind's own selectable fields. Storage indexes them for field selectors.
func (r *Resource) Fields(obj runtime.Object) map[string]string {
	m := map[string]string{}
	if r.fields != nil {
		m = r.fields(obj)
	}
	if a, err := meta.Accessor(obj); err == nil {
		m["metadata.name"] = a.GetName()
		if r.Namespaced {
			m["metadata.namespace"] = a.GetNamespace()
		}
	}
	return m
}

// FieldSelectable tells whether key may be used in a field selector for this type.
func (r *Resource) FieldSelectable(key string) bool {
	if key == "metadata.name" || (key == "metadata.namespace" && r.Namespaced) {
		return true
	}
	for _, f := range r.SelectableFields {
		if f == key {
			return true
		}
	}
	return false
}

// GroupVersion is one served group version with its resources in discovery order.
type GroupVersion struct {
	schema.GroupVersion
	Resources []*Resource
}

// Group is one served API group with its versions, preferred first.
type Group struct {
	Name     string
	Versions []*GroupVersion
}

// Registry is the set of served resource types and the scheme that encodes and decodes them.
//
// Built-in types are fixed at start; custom resources come and go with their definitions
// (PutCustom, DeleteCustom). Readers see immutable snapshots, so lookups take no lock.
type Registry struct {
	// Scheme knows every built-in kind under Platform's group names, plus the meta kinds.
	Scheme *runtime.Scheme
	groups []*Group
	byGVR  map[schema.GroupVersionResource]*Resource
	// byType finds the resource of an object by its Go type.
	byType map[reflect.Type]*Resource

	// mu serializes changes to custom; view is rebuilt from groups and custom on each change.
	mu     sync.Mutex
	custom map[string][]*Resource // by definition name
	view   atomic.Pointer[view]
	// factory builds the resources' strategies (UseStrategies).
	factory atomic.Pointer[StrategyFactory]
	// unserved are the resources of storage versions --runtime-config turned off while a second
	// version of their kind is served (StorageResource): built for the conversion, never routed.
	unserved map[schema.GroupVersionResource]*Resource
}

// view is one immutable snapshot of everything served.
type view struct {
	generation uint64
	groups     []*Group
	byGVR      map[schema.GroupVersionResource]*Resource
}

// Generation counts changes of the served set; it grows whenever a custom resource is added,
// changed or removed, so derived documents (OpenAPI) know when to rebuild.
func (r *Registry) Generation() uint64 { return r.current().generation }

func (r *Registry) current() *view {
	if v := r.view.Load(); v != nil {
		return v
	}
	return &view{groups: r.groups, byGVR: r.byGVR}
}

// Groups returns the served groups: the core group ("") first, the built-in groups in
// registration order, then the custom groups by name.
func (r *Registry) Groups() []*Group { return r.current().groups }

// Group returns a served group by name.
func (r *Registry) Group(name string) (*Group, bool) {
	for _, g := range r.current().groups {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// BuiltinGroup tells whether a group is served by built-in types (custom resources cannot
// join it).
func (r *Registry) BuiltinGroup(name string) bool {
	for _, g := range r.groups {
		if g.Name == name {
			return true
		}
	}
	return name == ""
}

// GroupVersion returns one served group version.
func (r *Registry) GroupVersion(gv schema.GroupVersion) (*GroupVersion, bool) {
	g, ok := r.Group(gv.Group)
	if !ok {
		return nil, false
	}
	for _, v := range g.Versions {
		if v.Version == gv.Version {
			return v, true
		}
	}
	return nil, false
}

// Resource returns the served resource for a group, version and plural name.
func (r *Registry) Resource(gvr schema.GroupVersionResource) (*Resource, bool) {
	res, ok := r.current().byGVR[gvr]
	return res, ok
}

// ForObject returns the resource whose kind obj is (by its Go type).
func (r *Registry) ForObject(obj runtime.Object) (*Resource, bool) {
	res, ok := r.byType[reflect.TypeOf(obj)]
	return res, ok
}

// Resources returns every served resource, sorted by group, version and name.
func (r *Registry) Resources() []*Resource {
	byGVR := r.current().byGVR
	out := make([]*Resource, 0, len(byGVR))
	for _, res := range byGVR {
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GroupVersionResource, out[j].GroupVersionResource
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	return out
}

// TokenRequestGroupVersionKind is the kind of the serviceaccounts/token subresource.
var TokenRequestGroupVersionKind = schema.GroupVersionKind{Group: naming.Group("authentication.k8s.io"), Version: "v1", Kind: "TokenRequest"}

// TokenRequest is the body of the serviceaccounts/token subresource, described as a resource so
// it decodes, validates and encodes like one (it is never stored).
func (r *Registry) TokenRequest() *Resource {
	res := &Resource{
		GroupVersionResource: TokenRequestGroupVersionKind.GroupVersion().WithResource("tokenrequests"),
		Kind:                 TokenRequestGroupVersionKind.Kind,
		Singular:             "tokenrequest",
		Namespaced:           true,
		Virtual:              true,
		Verbs:                []string{"create"},
		goType:               reflect.TypeOf(&authenticationv1.TokenRequest{}),
	}
	r.chooseStrategy(res)
	return res
}

// ScaleGroupVersionKind is the kind of every scale subresource.
var ScaleGroupVersionKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// MetaGroupVersion is meta.platform.io/v1, the group version of Table and PartialObjectMetadata.
var MetaGroupVersion = schema.GroupVersion{Group: naming.MetaGroup, Version: "v1"}

// UpstreamMetaGroupVersion is meta.k8s.io/v1: kubectl asks for Tables in this group, so the gateway
// answers in whichever of the two groups the client named.
var UpstreamMetaGroupVersion = schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"}

// New builds the registry from the catalog, with runtimeConfig applied (see ParseRuntimeConfig).
func New(runtimeConfig RuntimeConfig) (*Registry, error) {
	reg := &Registry{
		Scheme: runtime.NewScheme(),
		byGVR:  map[schema.GroupVersionResource]*Resource{},
		byType: map[reflect.Type]*Resource{},
	}
	for _, gv := range []schema.GroupVersion{MetaGroupVersion, UpstreamMetaGroupVersion} {
		reg.Scheme.AddKnownTypes(gv, &metav1.Table{}, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{}, &metav1.Status{})
		metav1.AddToGroupVersion(reg.Scheme, gv)
	}
	// PartialObjectMetadata is also served in v1beta1 of both meta groups, as upstream serves it
	// (its list there is a type of its own, with other Protobuf field numbers).
	for _, gv := range []schema.GroupVersion{MetaGroupVersion, UpstreamMetaGroupVersion} {
		reg.Scheme.AddKnownTypes(schema.GroupVersion{Group: gv.Group, Version: "v1beta1"}, &metav1beta1.PartialObjectMetadata{}, &metav1beta1.PartialObjectMetadataList{})
	}
	metav1.AddToGroupVersion(reg.Scheme, schema.GroupVersion{Version: "v1"})
	// The scale subresource speaks autoscaling/v1 Scale, whatever group its parent is in.
	reg.Scheme.AddKnownTypes(ScaleGroupVersionKind.GroupVersion(), &autoscalingv1.Scale{})
	if err := runtimeConfig.check(); err != nil {
		return nil, err
	}
	for _, entry := range catalog {
		gv := schema.GroupVersion{Group: naming.Group(entry.upstream.Group), Version: entry.upstream.Version}
		if !runtimeConfig.enabled(gv, entry.defaultOn) {
			continue
		}
		if err := reg.addGroupVersion(entry, gv, runtimeConfig); err != nil {
			return nil, err
		}
	}
	// A resource stored as another is served only with it (its strategy converts to it); when
	// --runtime-config turned the other off, it keeps a storage of its own.
	for _, res := range reg.byGVR {
		if s := res.StoredAs; s != nil && !reg.servesGroupResource(*s) {
			res.StoredAs = nil
		}
	}
	// A second version of a kind converts to its storage version's objects; when --runtime-config
	// turned the storage version off, its resources are still built, unserved, for the conversion
	// (objects keep one stored form whatever is served).
	for _, res := range reg.byGVR {
		stored := schema.GroupVersion{Group: res.Group, Version: res.StorageVersion}
		if res.StorageVersion == "" || reg.servesGroupVersion(stored) || reg.unserved[stored.WithResource(res.Resource)] != nil {
			continue
		}
		for _, entry := range catalog {
			if naming.Group(entry.upstream.Group) != stored.Group || entry.upstream.Version != stored.Version {
				continue
			}
			scratch := &Registry{Scheme: reg.Scheme, byGVR: map[schema.GroupVersionResource]*Resource{}, byType: map[reflect.Type]*Resource{}}
			if err := scratch.addGroupVersion(entry, stored, RuntimeConfig{}); err != nil {
				return nil, err
			}
			if reg.unserved == nil {
				reg.unserved = map[schema.GroupVersionResource]*Resource{}
			}
			for gvr, r := range scratch.byGVR {
				reg.unserved[gvr] = r
			}
		}
		if reg.unserved[stored.WithResource(res.Resource)] == nil {
			return nil, fmt.Errorf("registry: %s %s are stored as %s, which the catalog does not have", res.GroupVersion(), res.Resource, stored)
		}
	}
	return reg, nil
}

// addGroupVersion registers the kinds of one upstream group version under Platform's name for it
// and derives a Resource for every kind that has a list kind.
func (r *Registry) addGroupVersion(entry catalogEntry, gv schema.GroupVersion, rc RuntimeConfig) error {
	upstream := runtime.NewScheme()
	if err := entry.install(upstream); err != nil {
		return fmt.Errorf("registry: installing %s: %w", entry.upstream, err)
	}
	known := upstream.KnownTypes(entry.upstream)
	for kind, t := range known {
		if err := registerKind(r.Scheme, gv.WithKind(kind), t); err != nil {
			return err
		}
	}
	metav1.AddToGroupVersion(r.Scheme, gv)

	served := &GroupVersion{GroupVersion: gv}
	kinds := make([]string, 0, len(known))
	for kind := range known {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		info, isResource := resourceInfo(entry, kind, known)
		if !isResource {
			continue
		}
		res := &Resource{
			GroupVersionResource: gv.WithResource(info.plural),
			Kind:                 kind,
			ListKind:             kind + "List",
			Singular:             strings.ToLower(kind),
			Namespaced:           !clusterScoped[kind],
			ShortNames:           info.shortNames,
			Categories:           info.categories,
			Virtual:              info.virtual,
			Deprecation:          info.deprecated,
			StoredAs:             info.storedAs,
			StorageVersion:       info.storageVersion,
			Computed:             info.computed,
			goType:               reflect.PointerTo(known[kind]),
		}
		if res.Deprecation == nil {
			res.Deprecation = lifecycleDeprecation(known[kind])
		}
		if !rc.resourceEnabled(res.GroupVersionResource) {
			continue
		}
		if f, ok := selectableFields[typeKey{entry.upstream.Group, kind}]; ok {
			res.SelectableFields, res.fields = f.keys, f.extract
		}
		switch {
		case res.Virtual:
			res.Verbs = []string{"create"}
		case res.Computed:
			res.Verbs = []string{"get", "list"}
		default:
			res.Verbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
			if info.noDeleteCollection {
				res.Verbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
			}
			if _, ok := known[kind].FieldByName("Status"); ok && known[kind].Kind() == reflect.Struct {
				if f, _ := known[kind].FieldByName("Status"); f.Type.Kind() == reflect.Struct {
					res.HasStatus = true
					res.Subresources = append(res.Subresources, "status")
				}
			}
		}
		if info.scale {
			res.Subresources = append(res.Subresources, "scale")
		}
		if info.token {
			res.Subresources = append(res.Subresources, "token")
		}
		if info.approval {
			res.Subresources = append(res.Subresources, "approval")
		}
		if info.finalize {
			res.Subresources = append(res.Subresources, "finalize")
		}
		served.Resources = append(served.Resources, res)
		r.byGVR[res.GroupVersionResource] = res
		r.byType[res.goType] = res
	}
	if len(served.Resources) == 0 {
		return nil
	}
	g, ok := r.Group(gv.Group)
	if !ok {
		g = &Group{Name: gv.Group}
		r.groups = append(r.groups, g)
	}
	g.Versions = append(g.Versions, served)
	return nil
}

// registerKind adds one Go type under a Platform group version kind.
func registerKind(s *runtime.Scheme, gvk schema.GroupVersionKind, t reflect.Type) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("registry: registering %s: %v", gvk, p)
		}
	}()
	obj, ok := reflect.New(t).Interface().(runtime.Object)
	if !ok {
		return fmt.Errorf("registry: %s is not a runtime.Object", gvk)
	}
	s.AddKnownTypeWithName(gvk, obj)
	return nil
}

// resourceInfo decides whether a kind of a group version is a served resource, and how it is named.
func resourceInfo(entry catalogEntry, kind string, known map[string]reflect.Type) (kindInfo, bool) {
	info, listed := entry.kinds[kind]
	if info.skip {
		return info, false
	}
	if _, hasList := known[kind+"List"]; !hasList && !info.virtual {
		return info, false
	}
	if !listed && entry.onlyListed {
		return info, false
	}
	if info.plural == "" {
		plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Kind: kind})
		info.plural = plural.Resource
	}
	return info, true
}

// StorageResource returns the resource of a storage version (Resource.StorageVersion), served or
// not.
func (r *Registry) StorageResource(gvr schema.GroupVersionResource) (*Resource, bool) {
	if res, ok := r.byGVR[gvr]; ok {
		return res, true
	}
	res, ok := r.unserved[gvr]
	return res, ok
}

// servesGroupVersion tells whether gv is served.
func (r *Registry) servesGroupVersion(gv schema.GroupVersion) bool {
	for gvr := range r.byGVR {
		if gvr.GroupVersion() == gv {
			return true
		}
	}
	return false
}

// servesGroupResource tells whether some version of gr is served.
func (r *Registry) servesGroupResource(gr schema.GroupResource) bool {
	for gvr := range r.byGVR {
		if gvr.GroupResource() == gr {
			return true
		}
	}
	return false
}

// ServedRelease is the upstream release whose API the gateway serves: deprecations announced up
// to it are signalled.
const ServedRelease = "1.33"

// lifecycleDeprecation reads a kind's deprecation from its Go type's API lifecycle, as upstream's
// API server does (k8s.io/api generates APILifecycleDeprecated, APILifecycleRemoved and
// APILifecycleReplacement from the types' prerelease-lifecycle tags; core ComponentStatus and
// Endpoints carry them by hand): nil unless it was deprecated in ServedRelease or before.
func lifecycleDeprecation(t reflect.Type) *Deprecation {
	obj := reflect.New(t).Interface()
	dep, ok := obj.(interface{ APILifecycleDeprecated() (int, int) })
	if !ok {
		return nil
	}
	major, minor := dep.APILifecycleDeprecated()
	var servedMajor, servedMinor int
	fmt.Sscanf(ServedRelease, "%d.%d", &servedMajor, &servedMinor)
	if (major == 0 && minor == 0) || major > servedMajor || (major == servedMajor && minor > servedMinor) {
		return nil
	}
	d := &Deprecation{In: fmt.Sprintf("%d.%d", major, minor)}
	if rem, ok := obj.(interface{ APILifecycleRemoved() (int, int) }); ok {
		if major, minor := rem.APILifecycleRemoved(); major != 0 || minor != 0 {
			d.RemovedIn = fmt.Sprintf("%d.%d", major, minor)
		}
	}
	if rep, ok := obj.(interface {
		APILifecycleReplacement() schema.GroupVersionKind
	}); ok {
		if gvk := rep.APILifecycleReplacement(); !gvk.Empty() {
			d.Replacement = schema.GroupVersion{Group: naming.Group(gvk.Group), Version: gvk.Version}.String() + " " + gvk.Kind
		}
	}
	return d
}
