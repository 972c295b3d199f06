package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
)

// Aggregated discovery (upstream's apidiscovery v2, GA in 1.30): /api and /apis answer an
// APIGroupDiscoveryList, every group with its versions and each version's resources, when the
// client asks for it (as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2, or the profile's
// group), so kubectl and client-go learn the whole API in two requests. The documents are built
// once per change of what is served (the registry's generation: custom resources; the remote
// APIServices' generation) and kept with their ETag and encodings; a request that names the
// ETag in If-None-Match is answered 304.

// RemoteDiscovery is what the aggregator adds to aggregated discovery: the groups served by
// extension API servers, in discovery order (versions preferred first, each with its
// freshness), and a generation that changes whenever they do.
type RemoteDiscovery interface {
	AggregatedGroups() []apidiscoveryv2.APIGroupDiscovery
	DiscoveryGeneration() uint64
}

// SetAggregatedDiscoveryExtension adds the groups of remote APIServices to the aggregated /apis.
func (a *API) SetAggregatedDiscoveryExtension(rd RemoteDiscovery) {
	a.remoteAggregated.Store(&rd)
}

// aggregatedState is the aggregated discovery documents of one generation of what is served.
type aggregatedState struct {
	registryGen, remoteGen uint64
	api, apis              *discoveryDoc
}

// discoveryDoc is one aggregated discovery document with its ETag and its encodings.
type discoveryDoc struct {
	list *apidiscoveryv2.APIGroupDiscoveryList
	// etag is the quoted ETag: the SHA-512 of the document's v2 JSON, as upstream computes it.
	etag string
	mu   sync.Mutex
	// encoded holds each encoding asked for so far.
	encoded map[docEncoding][]byte
}

type docEncoding struct {
	format negotiation.Format
	gv     schema.GroupVersion
	pretty bool
}

// aggregatedDiscovery holds the current documents (rebuilt when the generations change).
type aggregatedDiscovery struct {
	mu    sync.Mutex
	state atomic.Pointer[aggregatedState]
}

// discoveryDocs returns the aggregated documents of what is served now.
func (a *API) discoveryDocs() *aggregatedState {
	var rd RemoteDiscovery
	if p := a.remoteAggregated.Load(); p != nil {
		rd = *p
	}
	// The generations are read before what they describe: a change in between is built again
	// by the next request.
	regGen, remoteGen := a.reg.Generation(), uint64(0)
	if rd != nil {
		remoteGen = rd.DiscoveryGeneration()
	}
	if s := a.aggregated.state.Load(); s != nil && s.registryGen == regGen && s.remoteGen == remoteGen {
		return s
	}
	a.aggregated.mu.Lock()
	defer a.aggregated.mu.Unlock()
	if s := a.aggregated.state.Load(); s != nil && s.registryGen == regGen && s.remoteGen == remoteGen {
		return s
	}
	var remote []apidiscoveryv2.APIGroupDiscovery
	if rd != nil {
		remote = rd.AggregatedGroups()
	}
	s := &aggregatedState{registryGen: regGen, remoteGen: remoteGen}
	var core, named []apidiscoveryv2.APIGroupDiscovery
	for _, g := range a.reg.Groups() {
		if g.Name == "" {
			core = append(core, GroupDiscovery(g))
		} else {
			named = append(named, GroupDiscovery(g))
		}
	}
	s.api = newDiscoveryDoc(core)
	s.apis = newDiscoveryDoc(mergeAggregated(named, remote))
	a.aggregated.state.Store(s)
	return s
}

func newDiscoveryDoc(groups []apidiscoveryv2.APIGroupDiscovery) *discoveryDoc {
	if groups == nil {
		groups = []apidiscoveryv2.APIGroupDiscovery{}
	}
	list := &apidiscoveryv2.APIGroupDiscoveryList{Items: groups}
	data, _ := json.Marshal(list)
	return &discoveryDoc{list: list, etag: fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(data))), encoded: map[docEncoding][]byte{}}
}

// mergeAggregated adds the remote groups to the local ones: a remote version replaces a local
// version of the same name (requests for it are routed to the extension server) or follows the
// local versions; a remote group follows the local groups.
func mergeAggregated(local, remote []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	out := local
	for _, rg := range remote {
		i := 0
		for i < len(out) && out[i].Name != rg.Name {
			i++
		}
		if i == len(out) {
			out = append(out, rg)
			continue
		}
		merged := out[i]
		merged.Versions = append([]apidiscoveryv2.APIVersionDiscovery(nil), merged.Versions...)
	versions:
		for _, rv := range rg.Versions {
			for j := range merged.Versions {
				if merged.Versions[j].Version == rv.Version {
					merged.Versions[j] = rv
					continue versions
				}
			}
			merged.Versions = append(merged.Versions, rv)
		}
		out[i] = merged
	}
	return out
}

// GroupDiscovery is the aggregated discovery of one served group: its versions, preferred
// first, each with the resources /api/v1 or /apis/<group>/<version> lists.
func GroupDiscovery(g *registry.Group) apidiscoveryv2.APIGroupDiscovery {
	out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
	for _, v := range g.Versions {
		out.Versions = append(out.Versions, apidiscoveryv2.APIVersionDiscovery{
			Version:   v.Version,
			Resources: ResourcesDiscovery(resourceList(v)),
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		})
	}
	return out
}

// ResourcesDiscovery turns the resources of an unaggregated resource list (main resources and
// "<resource>/<subresource>" entries) into aggregated form: each main resource with its
// subresources. client-go turns it back into the same list.
func ResourcesDiscovery(list []metav1.APIResource) []apidiscoveryv2.APIResourceDiscovery {
	out := []apidiscoveryv2.APIResourceDiscovery{}
	index := map[string]int{}
	scope := func(namespaced bool) apidiscoveryv2.ResourceScope {
		if namespaced {
			return apidiscoveryv2.ScopeNamespace
		}
		return apidiscoveryv2.ScopeCluster
	}
	for _, r := range list {
		if strings.Contains(r.Name, "/") {
			continue
		}
		index[r.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: scope(r.Namespaced),
			ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:        r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		})
	}
	for _, r := range list {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, found := index[parent]
		if !found {
			// A subresource whose parent is not listed (an extension server may do that): the
			// parent is listed without a kind, which clients skip.
			i = len(out)
			index[parent] = i
			out = append(out, apidiscoveryv2.APIResourceDiscovery{Resource: parent, Scope: scope(r.Namespaced), ResponseKind: &metav1.GroupVersionKind{}})
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  sub,
			ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:        r.Verbs,
		})
	}
	return out
}

// writeAggregated answers an aggregated discovery document in the negotiated group version and
// encoding, or 304 when the client already has it (If-None-Match names its ETag).
func (a *API) writeAggregated(w http.ResponseWriter, r *http.Request, doc *discoveryDoc, out negotiation.Output) {
	h := w.Header()
	h.Set("ETag", doc.etag)
	h.Set("Vary", "Accept")
	h.Set("Cache-Control", "public")
	if etagMatches(r.Header.Get("If-None-Match"), doc.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body, err := doc.encode(a.enc, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.MediaType, body)
}

// etagMatches tells whether an If-None-Match header names etag (or is "*").
func etagMatches(header, etag string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

// encode returns the document in out's encoding and group version, encoding it once.
func (d *discoveryDoc) encode(enc *negotiation.Encoder, out negotiation.Output) ([]byte, error) {
	key := docEncoding{format: out.Format, gv: out.Discovery, pretty: out.Pretty}
	d.mu.Lock()
	defer d.mu.Unlock()
	if body, ok := d.encoded[key]; ok {
		return body, nil
	}
	var obj runtime.Object
	typeMeta := metav1.TypeMeta{Kind: negotiation.KindAPIGroupDiscoveryList, APIVersion: out.Discovery.String()}
	if out.Discovery.Version == "v2beta1" {
		// v2beta1 has v2's fields under the same names.
		data, err := json.Marshal(d.list)
		if err != nil {
			return nil, err
		}
		var beta apidiscoveryv2beta1.APIGroupDiscoveryList
		if err := json.Unmarshal(data, &beta); err != nil {
			return nil, err
		}
		beta.TypeMeta = typeMeta
		obj = &beta
	} else {
		list := *d.list
		list.TypeMeta = typeMeta
		obj = &list
	}
	body, err := enc.Encode(obj, out)
	if err != nil {
		return nil, err
	}
	d.encoded[key] = body
	return body, nil
}
