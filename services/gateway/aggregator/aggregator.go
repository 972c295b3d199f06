// Package aggregator is the gateway's aggregation layer, upstream's kube-aggregator seen from the
// front door: APIServices (apiregistration) say which server serves each group version. Local
// APIServices are kept for every group version the gateway serves itself (built-in and custom
// resources, as upstream's autoregister and CRD registration controllers keep them); a remote
// APIService names a Service whose extension API server gets every request for its group
// version, authenticated and authorized by the gateway's handler chain first and carrying the user in the front-proxy
// headers (X-Remote-User, X-Remote-Group, X-Remote-Extra-*) over TLS with the proxy client
// certificate. Remote group versions join /apis and /apis/<group>; an availability controller
// checks each remote APIService (its Service, Endpoints and discovery) and sets the Available
// condition, and requests for an unavailable one are answered 503.
package aggregator

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/apiserver"
	"platform.io/services/gateway/registry"
)

// Config is what the aggregator needs from the gateway.
type Config struct {
	// API is the resource API: the access-control seams, Status answers, discovery and the stored
	// APIServices, Services and Endpoints.
	API *apiserver.API
	// Registry is what the gateway serves itself (the local APIServices).
	Registry *registry.Registry
	// ProxyClientCertFile and ProxyClientKeyFile are the client certificate the gateway presents
	// to extension API servers (upstream --proxy-client-cert-file, --proxy-client-key-file).
	ProxyClientCertFile, ProxyClientKeyFile string
	// Controllers runs the controllers (local APIServices, availability) in this process.
	Controllers bool
	// EndpointRouting sends requests to an endpoint of the Service instead of its cluster IP
	// (upstream --enable-aggregator-routing).
	EndpointRouting bool
	// CRDsSynced is closed once the custom resources are served (local APIServices of custom
	// resources are not removed before).
	CRDsSynced <-chan struct{}
	// CheckInterval is how often every remote APIService is checked (default 5s).
	CheckInterval time.Duration
	Logger        *slog.Logger
	// Metrics registers aggregator_unavailable_apiservice and its _total (nil: not exported).
	Metrics prometheus.Registerer
}

// Aggregator routes requests for remote group versions and keeps the APIServices' state.
type Aggregator struct {
	cfg   Config
	store *apiserver.Aggregation
	log   *slog.Logger
	cert  *tls.Certificate
	stats *metrics

	// state is the current routing snapshot.
	state atomic.Pointer[snapshot]
	// mu guards proxies (built per APIService spec and reused while the spec stays).
	mu      sync.Mutex
	proxies map[string]*remote
	// changed wakes the controllers when the APIServices change; recheck asks for an
	// availability check of one APIService now (a proxied request failed to reach it).
	changed, changedAvailability chan struct{}
	recheck                      chan string
	// synced is closed once the stored APIServices have been read (routing knows them).
	synced     chan struct{}
	syncedOnce sync.Once
	// disc is the remote APIServices' aggregated discovery.
	disc *discoveryState
	// openAPIV2 are the remote APIServices' OpenAPI v2 documents (openapiv2.go), downloaded
	// again when changedOpenAPI says the APIServices changed.
	openAPIV2      openAPIV2State
	changedOpenAPI chan struct{}
}

// snapshot is one immutable view of the stored APIServices.
type snapshot struct {
	all    map[string]*apiregistration.APIService
	remote map[schema.GroupVersion]*remote
}

// New builds the aggregator; Run starts following the APIServices. It returns nil (and no
// error) when APIServices are not served (--runtime-config turned them off).
func New(cfg Config) (*Aggregator, error) {
	store := cfg.API.Aggregation()
	if store == nil {
		return nil, nil
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 5 * time.Second
	}
	ag := &Aggregator{
		cfg: cfg, store: store, log: cfg.Logger, proxies: map[string]*remote{}, stats: newMetrics(cfg.Metrics),
		changed: make(chan struct{}, 1), changedAvailability: make(chan struct{}, 1), changedOpenAPI: make(chan struct{}, 1), recheck: make(chan string, 16),
		synced: make(chan struct{}), disc: newDiscoveryState(),
	}
	if (cfg.ProxyClientCertFile == "") != (cfg.ProxyClientKeyFile == "") {
		return nil, fmt.Errorf("--proxy-client-cert-file and --proxy-client-key-file go together")
	}
	if cfg.ProxyClientCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.ProxyClientCertFile, cfg.ProxyClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--proxy-client-cert-file/--proxy-client-key-file: %w", err)
		}
		ag.cert = &cert
	}
	ag.state.Store(&snapshot{all: map[string]*apiregistration.APIService{}, remote: map[schema.GroupVersion]*remote{}})
	cfg.API.SetDiscoveryExtension(ag.discoveryGroups)
	cfg.API.SetAggregatedDiscoveryExtension(ag)
	return ag, nil
}

// Run follows the stored APIServices and, with controllers, keeps the local ones and the
// availability of every one. It returns when ctx ends.
func (ag *Aggregator) Run(ctx context.Context) {
	if ag.cfg.Controllers {
		go ag.runLocal(ctx)
		go ag.runAvailability(ctx)
	}
	// Every gateway keeps the aggregated discovery of the remote APIServices it routes to.
	go ag.runDiscovery(ctx)
	go ag.runOpenAPIV2(ctx)
	ag.store.Follow(ctx, ag.update)
}

// update installs a new set of stored APIServices.
func (ag *Aggregator) update(all map[string]*apiregistration.APIService) {
	ag.mu.Lock()
	next := &snapshot{all: all, remote: map[schema.GroupVersion]*remote{}}
	keep := map[string]*remote{}
	for name, svc := range all {
		if svc.Spec.Service == nil {
			continue
		}
		key := specKey(svc)
		rem := ag.proxies[name]
		if rem == nil || rem.key != key {
			if rem != nil {
				rem.close()
			}
			rem = ag.newRemote(svc, key)
		}
		rem.setAPIService(svc)
		keep[name] = rem
		next.remote[svc.GroupVersion()] = rem
	}
	for name, rem := range ag.proxies {
		if keep[name] == nil {
			rem.close()
		}
	}
	ag.proxies = keep
	ag.state.Store(next)
	ag.mu.Unlock()
	ag.syncedOnce.Do(func() { close(ag.synced) })
	ag.disc.changed()
	for _, c := range []chan struct{}{ag.changed, ag.changedAvailability, ag.changedOpenAPI} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (ag *Aggregator) current() *snapshot { return ag.state.Load() }

// Synced is closed once the stored APIServices have been read and are routed (upstream's
// apiservice-registration-controller post-start hook waits for the same).
func (ag *Aggregator) Synced() <-chan struct{} { return ag.synced }

// specKey identifies what a proxy is built from: the spec (service, CA bundle, TLS choice).
func specKey(svc *apiregistration.APIService) string {
	b, _ := json.Marshal(svc.Spec)
	return svc.Name + "\x00" + string(b)
}

// APIServices returns the stored APIServices as last seen (for tests and health).
func (ag *Aggregator) APIServices() map[string]*apiregistration.APIService {
	return ag.current().all
}

// Handler routes requests for the group versions of remote APIServices to their extension API
// servers and everything else to next.
func (ag *Aggregator) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, openAPIPrefix) && ag.serveOpenAPI(w, r, next) {
			return
		}
		gv, ok := groupVersionOf(r.URL.Path)
		if ok {
			if rem := ag.current().remote[gv]; rem != nil {
				ag.serveRemote(w, r, rem)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// groupVersionOf returns the group version of /apis/<group>/<version> and the paths below it
// (the routing of remote group versions, their discovery document included).
func groupVersionOf(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
}
