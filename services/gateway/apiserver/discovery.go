package apiserver

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
)

// discoveryOptions: discovery documents are JSON or YAML (kubectl asks for aggregated discovery
// first and falls back to these).
var discoveryOptions = negotiation.Options{YAML: true}

// rootDiscoveryOptions are /api's and /apis's: the unaggregated documents, or aggregated
// discovery (v2, and v2beta1 while AggregatedDiscoveryRemoveBetaType is off) in JSON, YAML or
// Protobuf.
func (a *API) rootDiscoveryOptions() negotiation.Options {
	return negotiation.Options{YAML: true, Discovery: true, DiscoveryV2Beta1: a.cfg.DiscoveryV2Beta1}
}

func (a *API) writeDiscovery(w http.ResponseWriter, r *http.Request, obj runtime.Object) {
	out, err := negotiation.Negotiate(r, discoveryOptions)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body, err := a.enc.Encode(obj, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.MediaType, body)
}

// serveAPIVersions answers /api: the core group's versions, or the core group's aggregated
// discovery.
func (a *API) serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	out, err := negotiation.Negotiate(r, a.rootDiscoveryOptions())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out.IsDiscovery() {
		a.writeAggregated(w, r, a.discoveryDocs().api, out)
		return
	}
	v := &metav1.APIVersions{
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
	}
	v.Kind = "APIVersions"
	a.writeDiscovery(w, r, v)
}

// apiGroup is the discovery document of one named group.
func apiGroup(g *registry.Group) metav1.APIGroup {
	out := metav1.APIGroup{Name: g.Name}
	for _, v := range g.Versions {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v.GroupVersion.String(), Version: v.Version})
	}
	if len(out.Versions) > 0 {
		out.PreferredVersion = out.Versions[0]
	}
	return out
}

// serveGroupList answers /apis: every named group, or every named group's aggregated
// discovery.
func (a *API) serveGroupList(w http.ResponseWriter, r *http.Request) {
	out, err := negotiation.Negotiate(r, a.rootDiscoveryOptions())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out.IsDiscovery() {
		a.writeAggregated(w, r, a.discoveryDocs().apis, out)
		return
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range a.reg.Groups() {
		if g.Name != "" {
			list.Groups = append(list.Groups, apiGroup(g))
		}
	}
	list.Groups = mergeGroups(list.Groups, a.remoteDiscovery())
	a.writeDiscovery(w, r, list)
}

// serveGroup answers /apis/<group>.
func (a *API) serveGroup(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["group"]
	var local []metav1.APIGroup
	if g, ok := a.reg.Group(name); ok && g.Name != "" {
		local = append(local, apiGroup(g))
	}
	var doc metav1.APIGroup
	for _, g := range mergeGroups(local, a.remoteDiscovery()) {
		if g.Name == name && name != "" {
			doc = g
		}
	}
	if doc.Name == "" {
		a.writeError(w, r, notFoundPath())
		return
	}
	doc.Kind, doc.APIVersion = "APIGroup", "v1"
	a.writeDiscovery(w, r, &doc)
}

// serveResourceList answers /api/v1 and /apis/<group>/<version>: the resources of one group
// version with their subresources.
func (a *API) serveResourceList(w http.ResponseWriter, r *http.Request) {
	gv := schema.GroupVersion{Version: "v1"}
	if strings.HasPrefix(r.URL.Path, "/apis/") {
		vars := mux.Vars(r)
		gv = schema.GroupVersion{Group: vars["group"], Version: vars["version"]}
	}
	served, ok := a.reg.GroupVersion(gv)
	if !ok {
		a.writeError(w, r, notFoundType(gv.WithResource("")))
		return
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(),
		APIResources: resourceList(served)}
	a.writeDiscovery(w, r, list)
}

// resourceList is the resources of one served group version with their subresources, as
// /api/v1 and /apis/<group>/<version> list them.
func resourceList(served *registry.GroupVersion) []metav1.APIResource {
	var list []metav1.APIResource
	for _, res := range served.Resources {
		list = append(list, metav1.APIResource{
			Name: res.Resource, SingularName: res.Singular, Namespaced: res.Namespaced, Kind: res.Kind,
			Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories,
		})
		for _, sub := range res.Subresources {
			entry := metav1.APIResource{Name: res.Resource + "/" + sub, Namespaced: res.Namespaced, Kind: res.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}}
			switch sub {
			case "finalize":
				entry.Verbs = metav1.Verbs{"update"}
			case "scale":
				entry.Group, entry.Version, entry.Kind = registry.ScaleGroupVersionKind.Group, registry.ScaleGroupVersionKind.Version, registry.ScaleGroupVersionKind.Kind
			case "token":
				entry.Verbs = metav1.Verbs{"create"}
				entry.Group, entry.Version, entry.Kind = registry.TokenRequestGroupVersionKind.Group, registry.TokenRequestGroupVersionKind.Version, registry.TokenRequestGroupVersionKind.Kind
			}
			list = append(list, entry)
		}
	}
	return list
}

// serveVersion answers /version.
func (a *API) serveVersion(w http.ResponseWriter, r *http.Request) {
	out, err := negotiation.Negotiate(r, discoveryOptions)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body, err := negotiation.JSONOrYAML(a.cfg.Version, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.MediaType, body)
}
