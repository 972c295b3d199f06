package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/transport"

	"platform.io/libs/naming"
	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/apiserver"
	"platform.io/services/gateway/auth"
)

// Aggregated discovery of remote APIServices, as upstream's discovery manager keeps it: the
// gateway asks each extension server for its aggregated discovery (/apis with the v2 and v2beta1
// Accept types, If-None-Match with the ETag it has), falls back to the unaggregated
// /apis/<group>/<version> of an older server, and lists each remote group version with its
// resources and freshness: Current when this fetch succeeded, Stale when it failed (the last
// resources fetched are kept, or none). A remote APIService that is not Available is Stale, as
// upstream's fetch through its proxy gets a 503. Every remote APIService is fetched again when
// it changes, every minute, and while Stale at every availability check interval.

// discoveryRefresh is how often the discovery of every remote APIService is fetched again.
const discoveryRefresh = time.Minute

// Accept types of the fetch, as upstream's discovery manager sends them.
var aggregatedAccept = discovery.AcceptV2 + "," + discovery.AcceptV2Beta1

var (
	v2GVK      = schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"}
	v2beta1GVK = schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2beta1", Kind: "APIGroupDiscoveryList"}
)

// serviceKey identifies an extension server: APIServices naming the same Service and port share
// one fetch.
type serviceKey struct {
	namespace, name string
	port            int32
}

func serviceKeyOf(svc *apiregistration.APIService) serviceKey {
	port := apiregistration.DefaultPort
	if svc.Spec.Service.Port != nil {
		port = *svc.Spec.Service.Port
	}
	return serviceKey{namespace: svc.Spec.Service.Namespace, name: svc.Spec.Service.Name, port: port}
}

// fetchedDiscovery is one extension server's discovery as last fetched.
type fetchedDiscovery struct {
	versions map[schema.GroupVersion]apidiscoveryv2.APIVersionDiscovery
	etag     string
}

// remoteVersion is what aggregated discovery lists for one remote APIService.
type remoteVersion struct {
	version apidiscoveryv2.APIVersionDiscovery
	// state is what it was fetched for (the spec and availability): a change fetches again.
	state string
	at    time.Time
}

// discoveryState is the aggregated discovery of the remote APIServices.
type discoveryState struct {
	mu sync.Mutex
	// byService is each extension server's last fetched discovery.
	byService map[serviceKey]*fetchedDiscovery
	// versions is each remote APIService's entry, by name.
	versions map[string]remoteVersion
	// generation counts changes of versions and of the remote APIServices.
	generation uint64
	wake       chan struct{}
}

func newDiscoveryState() *discoveryState {
	return &discoveryState{byService: map[serviceKey]*fetchedDiscovery{}, versions: map[string]remoteVersion{}, wake: make(chan struct{}, 1)}
}

// changed counts a change of what aggregated discovery lists and wakes the fetcher.
func (d *discoveryState) changed() {
	d.mu.Lock()
	d.generation++
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// DiscoveryGeneration changes whenever the remote groups of aggregated discovery do.
func (ag *Aggregator) DiscoveryGeneration() uint64 {
	ag.disc.mu.Lock()
	defer ag.disc.mu.Unlock()
	return ag.disc.generation
}

// AggregatedGroups lists the remote groups in aggregated form, in the order of the unaggregated
// /apis (group priority, then name; versions by priority, then kube-aware version order), each
// version with its resources and freshness; an APIService not fetched yet is Stale.
func (ag *Aggregator) AggregatedGroups() []apidiscoveryv2.APIGroupDiscovery {
	ag.disc.mu.Lock()
	defer ag.disc.mu.Unlock()
	var out []apidiscoveryv2.APIGroupDiscovery
	for _, g := range sortedRemoteGroups(ag.current().all) {
		group := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, svc := range g.versions {
			v, ok := ag.disc.versions[svc.Name]
			if !ok {
				v.version = apidiscoveryv2.APIVersionDiscovery{Version: svc.Spec.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
			}
			group.Versions = append(group.Versions, v.version)
		}
		out = append(out, group)
	}
	return out
}

// runDiscovery keeps the remote APIServices' aggregated discovery: it fetches each one that
// changed at once, every one every minute, and the stale ones at every check interval.
func (ag *Aggregator) runDiscovery(ctx context.Context) {
	tick := time.NewTicker(ag.cfg.CheckInterval)
	defer tick.Stop()
	for {
		ag.syncDiscovery(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-ag.disc.wake:
		}
	}
}

// syncDiscovery fetches the discovery of the remote APIServices that need it: changed since
// their last fetch (spec or availability), stale, or fetched more than a minute ago. Each
// extension server is asked once per round.
func (ag *Aggregator) syncDiscovery(ctx context.Context) {
	snap := ag.current()
	now := time.Now()
	type job struct {
		svc   *apiregistration.APIService
		rem   *remote
		state string
	}
	byService := map[serviceKey][]job{}
	ag.disc.mu.Lock()
	for name := range ag.disc.versions {
		if svc := snap.all[name]; svc == nil || svc.Spec.Service == nil {
			delete(ag.disc.versions, name)
			ag.disc.generation++
		}
	}
	for _, svc := range snap.all {
		if svc.Spec.Service == nil {
			continue
		}
		state := fmt.Sprintf("%s/%t", specKey(svc), svc.IsAvailable())
		v, ok := ag.disc.versions[svc.Name]
		if ok && v.state == state && v.version.Freshness == apidiscoveryv2.DiscoveryFreshnessCurrent && now.Sub(v.at) < discoveryRefresh {
			continue
		}
		key := serviceKeyOf(svc)
		byService[key] = append(byService[key], job{svc: svc, rem: snap.remote[svc.GroupVersion()], state: state})
	}
	used := map[serviceKey]bool{}
	for _, svc := range snap.all {
		if svc.Spec.Service != nil {
			used[serviceKeyOf(svc)] = true
		}
	}
	for key := range ag.disc.byService {
		if !used[key] {
			delete(ag.disc.byService, key)
		}
	}
	ag.disc.mu.Unlock()

	var wg sync.WaitGroup
	for key, jobs := range byService {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ag.disc.mu.Lock()
			cached := ag.disc.byService[key]
			ag.disc.mu.Unlock()
			// Any of the APIServices' proxies reaches the server; the first one's decides.
			first := jobs[0]
			fetched, err := ag.fetchDiscovery(ctx, first.svc, first.rem, cached)
			if ctx.Err() != nil {
				return
			}
			ag.disc.mu.Lock()
			defer ag.disc.mu.Unlock()
			if err == nil {
				ag.disc.byService[key] = fetched
			} else {
				ag.log.DebugContext(ctx, "fetching an extension server's discovery", "service", key.namespace+"/"+key.name, "error", err)
				fetched = cached
			}
			for _, j := range jobs {
				gv := j.svc.GroupVersion()
				entry := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version}
				if fetched != nil {
					if v, ok := fetched.versions[gv]; ok {
						entry = v
						entry.Version = gv.Version
					}
				}
				entry.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
				if err != nil {
					entry.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
				}
				old, had := ag.disc.versions[j.svc.Name]
				ag.disc.versions[j.svc.Name] = remoteVersion{version: entry, state: j.state, at: now}
				if !had || !reflect.DeepEqual(old.version, entry) {
					ag.disc.generation++
				}
			}
		}()
	}
	wg.Wait()
}

// fetchDiscovery asks an extension server for its discovery, as the aggregator user in
// system:masters: aggregated first (304 keeps what was fetched), else the unaggregated document
// of the APIService's group version.
func (ag *Aggregator) fetchDiscovery(ctx context.Context, svc *apiregistration.APIService, rem *remote, cached *fetchedDiscovery) (*fetchedDiscovery, error) {
	switch {
	case rem == nil:
		return nil, errors.New("no proxy for the APIService")
	case rem.buildErr != nil:
		return nil, rem.buildErr
	case !svc.IsAvailable():
		// Upstream fetches through its proxy, which answers 503 while the APIService is not
		// available.
		return nil, errors.New("service unavailable")
	}
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	etag := ""
	if cached != nil {
		etag = cached.etag
	}
	code, header, body, err := discoveryGet(ctx, rem, "/apis", aggregatedAccept, etag)
	if err != nil {
		return nil, err
	}
	contentType := header.Get("Content-Type")
	isV2, _ := discovery.ContentTypeIsGVK(contentType, v2GVK)
	isV2Beta1, _ := discovery.ContentTypeIsGVK(contentType, v2beta1GVK)
	switch {
	case code == http.StatusNotModified && cached != nil:
		return cached, nil
	case code == http.StatusOK && (isV2 || isV2Beta1):
		// v2beta1 has v2's fields under the same names.
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("decoding the aggregated discovery of %s: %w", rem.host, err)
		}
		out := &fetchedDiscovery{versions: map[schema.GroupVersion]apidiscoveryv2.APIVersionDiscovery{}, etag: header.Get("ETag")}
		for _, g := range list.Items {
			for _, v := range g.Versions {
				for i := range v.Resources {
					// Clients before 0.26.4 panic on a missing responseKind (upstream fills it).
					if v.Resources[i].ResponseKind == nil {
						v.Resources[i].ResponseKind = &metav1.GroupVersionKind{}
					}
					for j := range v.Resources[i].Subresources {
						if v.Resources[i].Subresources[j].ResponseKind == nil {
							v.Resources[i].Subresources[j].ResponseKind = &metav1.GroupVersionKind{}
						}
					}
				}
				out.versions[schema.GroupVersion{Group: g.Name, Version: v.Version}] = v
			}
		}
		return out, nil
	}
	// An older server: its unaggregated document of this group version.
	gv := svc.GroupVersion()
	code, _, body, err = discoveryGet(ctx, rem, "/apis/"+gv.Group+"/"+gv.Version, "application/json", "")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("bad status from %s/apis/%s: %d", rem.host, gv, code)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decoding the discovery of %s from %s: %w", gv, rem.host, err)
	}
	return &fetchedDiscovery{versions: map[schema.GroupVersion]apidiscoveryv2.APIVersionDiscovery{
		gv: {Version: gv.Version, Resources: apiserver.ResourcesDiscovery(list.APIResources)},
	}}, nil
}

// discoveryGet makes one discovery request of an extension server.
func discoveryGet(ctx context.Context, rem *remote, path, accept, etag string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+rem.host+path, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", userAgent)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	transport.SetAuthProxyHeaders(req, naming.AggregatorUser, "", []string{auth.GroupMasters}, nil)
	resp, err := rem.transport.RoundTrip(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

// remoteGroup is one remote group with its APIServices in discovery order.
type remoteGroup struct {
	name     string
	priority int32
	versions []*apiregistration.APIService
}

// sortedRemoteGroups orders the remote APIServices as upstream's discovery does: groups by their
// highest groupPriorityMinimum (highest first, then by name), versions by versionPriority
// (highest first, then kube-aware version order).
func sortedRemoteGroups(all map[string]*apiregistration.APIService) []remoteGroup {
	byGroup := map[string][]*apiregistration.APIService{}
	for _, svc := range all {
		if svc.Spec.Service == nil {
			continue
		}
		byGroup[svc.Spec.Group] = append(byGroup[svc.Spec.Group], svc)
	}
	var out []remoteGroup
	for name, list := range byGroup {
		g := remoteGroup{name: name, versions: list}
		for _, s := range list {
			if s.Spec.GroupPriorityMinimum > g.priority {
				g.priority = s.Spec.GroupPriorityMinimum
			}
		}
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i].Spec, list[j].Spec
			if a.VersionPriority != b.VersionPriority {
				return a.VersionPriority > b.VersionPriority
			}
			return compareVersions(a.Version, b.Version) > 0
		})
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority > out[j].priority
		}
		return out[i].name < out[j].name
	})
	return out
}
