// Package apiserver is the resource API of the spec over the storage service: request parsing,
// the verbs, object metadata rules, field validation, content negotiation (JSON, YAML, Table,
// Protobuf), lists and paging, watches, deletion and finalizers, and discovery.
package apiserver

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"platform.io/libs/naming"
	"platform.io/services/gateway/listcache"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/core"
	"platform.io/services/gateway/registry/generic"
	"platform.io/services/gateway/request"
)

// Config is what the resource API needs from the process that serves it.
type Config struct {
	Registry *registry.Registry
	Storage  Storage
	// Authn reviews tokens and issues service account tokens (the authentication service);
	// Authz decides requests, lists rules and checks RBAC escalation (the authorization service).
	Authn Authenticator
	Authz Authorizer
	// Admission runs the admission plugins and webhooks on writes (the admission service); nil
	// means no admission, with the namespace lifecycle rules of creates and deletes enforced here.
	Admission Admission
	Logger    *slog.Logger
	// MinRequestTimeout bounds watches that name no timeoutSeconds: they end after a random
	// duration in [MinRequestTimeout, 2*MinRequestTimeout), as upstream's --min-request-timeout.
	MinRequestTimeout time.Duration
	// RequestTimeout bounds every other request (upstream's --request-timeout).
	RequestTimeout time.Duration
	// BookmarkInterval is how often watches that allow bookmarks receive one.
	BookmarkInterval time.Duration
	// Version is what /version reports.
	Version version.Info
	// Now is the clock (tests may fix it).
	Now func() time.Time
	// Context bounds the API's background work (shared watches, controllers); it ends at shutdown.
	Context context.Context
	// DisableWatchHub makes every watch open its own storage watch instead of sharing one per
	// type, and every list read storage (no list cache): upstream's --watch-cache=false.
	DisableWatchHub bool
	// Metrics registers the API's own metrics (apiserver_requested_deprecated_apis); nil keeps
	// them unexported.
	Metrics prometheus.Registerer
	// Components are the services behind the gateway whose health core componentstatuses
	// report (componentstatus.go).
	Components []Component
	// DiscoveryV2Beta1 also serves aggregated discovery in apidiscovery v2beta1 (upstream 1.33
	// does with --feature-gates=AggregatedDiscoveryRemoveBetaType=false).
	DiscoveryV2Beta1 bool
}

// API serves the resource API.
type API struct {
	reg   *registry.Registry
	enc   *negotiation.Encoder
	store Storage
	// gen is the generic store every write goes through.
	gen *generic.Store
	// tokens issues service accounts' tokens (their token subresource).
	tokens    *core.TokenIssuer
	authn     Authenticator
	authz     Authorizer
	admission Admission
	log       *slog.Logger
	cfg       Config
	now       func() time.Time
	nsCache   *namespaceCache
	hubs      hubs
	// listCaches keep the types clients list in memory (services/gateway/listcache).
	listCaches *listcache.Caches
	runCtx     context.Context
	jsonCache  *listcache.JSONCache
	// deprecatedAPIs is apiserver_requested_deprecated_apis.
	deprecatedAPIs *prometheus.GaugeVec
	// crds is the state of the custom resource definitions' informer and controller.
	crds crdState
	// customWatches are the direct storage watches of custom resources, ended when their
	// definition changes or goes away.
	customWatches watchCancels
	// remoteGroups lists the groups served by extension API servers (SetDiscoveryExtension).
	remoteGroups atomic.Pointer[func() []metav1.APIGroup]
	// remoteAggregated adds them to aggregated discovery (SetAggregatedDiscoveryExtension);
	// aggregated holds the aggregated documents.
	remoteAggregated atomic.Pointer[RemoteDiscovery]
	aggregated       aggregatedDiscovery
}

// New builds the resource API.
func New(cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MinRequestTimeout <= 0 {
		cfg.MinRequestTimeout = 30 * time.Minute
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = time.Minute
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Minute
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	a := &API{
		runCtx:    cfg.Context,
		jsonCache: listcache.NewJSONCache(),
		reg:       cfg.Registry,
		enc:       negotiation.NewEncoder(cfg.Registry.Scheme),
		store:     cfg.Storage,
		authn:     cfg.Authn,
		authz:     cfg.Authz,
		admission: cfg.Admission,
		log:       cfg.Logger,
		cfg:       cfg,
		now:       cfg.Now,
	}
	a.gen = generic.New(generic.Config{Storage: a.store, Authorizer: a.authz, Admitter: admitter{a}, Log: a.log, Now: a.now,
		CreateGuard: a.crdTerminating})
	a.tokens = &core.TokenIssuer{Signer: a.authn, Now: a.now, Log: a.log,
		Get: func(ctx context.Context, resource, namespace, name string) (runtime.Object, error) {
			return a.getObject(ctx, schema.GroupVersionResource{Version: "v1", Resource: resource}, namespace, name)
		}}
	a.nsCache = newNamespaceCache(a)
	a.deprecatedAPIs = newDeprecatedAPIsGauge(cfg.Metrics)
	a.listCaches = listcache.New(listcache.Config{Storage: a.store, Context: cfg.Context, Now: a.now,
		BookmarkInterval: cfg.BookmarkInterval, Metrics: cfg.Metrics})
	// Every served resource gets its kind's strategy (registry/kinds).
	a.reg.UseStrategies(a.strategies(builtin.NewShared(a.reg.Scheme)))
	return a
}

// Install registers the API's routes: discovery, /version, and every resource URL shape. The
// handler chain has authenticated and authorized every request before it reaches them.
func (a *API) Install(r *mux.Router) {
	get := []string{http.MethodGet, http.MethodHead}
	r.HandleFunc("/version", a.serveVersion).Methods(get...)
	r.HandleFunc(issuerDiscoveryPath, a.serveIssuerDiscovery).Methods(get...)
	r.HandleFunc(issuerJWKSPath, a.serveIssuerJWKS).Methods(get...)
	r.HandleFunc("/api", a.serveAPIVersions).Methods(get...)
	r.HandleFunc("/api/", a.serveAPIVersions).Methods(get...)
	r.HandleFunc("/apis", a.serveGroupList).Methods(get...)
	r.HandleFunc("/apis/", a.serveGroupList).Methods(get...)
	r.HandleFunc("/api/v1", a.serveResourceList).Methods(get...)
	r.HandleFunc("/api/v1/", a.serveResourceList).Methods(get...)
	r.PathPrefix("/api/v1/").Handler(http.HandlerFunc(a.serveResource))
	r.HandleFunc("/apis/{group}", a.serveGroup).Methods(get...)
	r.HandleFunc("/apis/{group}/", a.serveGroup).Methods(get...)
	r.HandleFunc("/apis/{group}/{version}", a.serveResourceList).Methods(get...)
	r.HandleFunc("/apis/{group}/{version}/", a.serveResourceList).Methods(get...)
	r.PathPrefix("/apis/{group}/{version}/").Handler(http.HandlerFunc(a.serveResource))
}

// Resolver is the request info resolver of the handler chain: it serves upstream's names of the
// groups Platform renames (which typed clients hard-code) as those groups, so a request is
// authorized, audited and served under the group that serves it.
func (a *API) Resolver() *request.Resolver {
	return &request.Resolver{Served: a.servedGroupVersion}
}

// servedGroupVersion maps upstream's name of a group version Platform serves under its own name
// (rbac.authorization.k8s.io/v1 for rbac.authorization.platform.io/v1) to the served one; any
// other group version is returned as named.
func (a *API) servedGroupVersion(gv schema.GroupVersion) schema.GroupVersion {
	if _, ok := a.reg.GroupVersion(gv); ok {
		return gv
	}
	served := schema.GroupVersion{Group: naming.Group(gv.Group), Version: gv.Version}
	if served.Group == gv.Group {
		return gv
	}
	if _, ok := a.reg.GroupVersion(served); ok {
		return served
	}
	return gv
}

// ResourcesFirst sends requests for resource URLs (below /api/v1/ or /apis/{group}/{version}/,
// with something after the version) straight to the resource handler, and every other request
// to router, which must be the router Install registered on. It gives the same answers as the
// router: no other route lies below those prefixes, and paths that the router would redirect to
// their clean form (with "//", "/./" or "/../") go to the router. It saves matching the request
// against every route registered before the resource routes (health, metrics, OpenAPI,
// discovery), which cost 3% of the all-in-one's CPU serving gets.
func (a *API) ResourcesFirst(router http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isResourcePath(r.URL.EscapedPath()) {
			a.serveResource(w, r)
			return
		}
		router.ServeHTTP(w, r)
	})
}

// isResourcePath tells whether p (escaped, as the router matches it) is below a group version,
// matched by the router's resource routes, and clean (the router would not redirect it).
func isResourcePath(p string) bool {
	var rest string
	switch {
	case strings.HasPrefix(p, "/api/v1/"):
		rest = p[len("/api/v1/"):]
	case strings.HasPrefix(p, "/apis/"):
		g, after, ok := strings.Cut(p[len("/apis/"):], "/")
		if !ok || g == "" {
			return false
		}
		v, after, ok := strings.Cut(after, "/")
		if !ok || v == "" {
			return false
		}
		rest = after
	default:
		return false
	}
	if rest == "" {
		return false
	}
	// The router's cleanPath: path.Clean, keeping a trailing slash.
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") {
		return clean == p[:len(p)-1]
	}
	return clean == p
}

// NotFound answers URLs no route knows with a Status 404, as upstream does.
func (a *API) NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, notFoundPath())
	})
}

// serveResource handles every request below a group version: it reads the address the chain
// resolved (and authorized), then dispatches on the verb.
func (a *API) serveResource(w http.ResponseWriter, r *http.Request) {
	ri, ok := request.InfoFrom(r.Context())
	if !ok {
		ri = a.Resolver().Resolve(r)
	}
	info, err := a.parseResourcePath(r, ri)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	info.dryRun, _ = parseDryRun(r) // a bad value is the handlers' 400
	if info.res.Deprecation != nil {
		a.signalDeprecation(w, r, info)
	}
	fillLabels(r.Context(), info)
	r = r.WithContext(withRequestInfo(r.Context(), info))
	switch info.subresource {
	case "scale":
		a.serveScale(w, r, info)
		return
	case "token":
		a.serveTokenRequest(w, r, info)
		return
	}
	switch info.verb {
	case "get":
		a.get(w, r, info)
	case "list":
		a.list(w, r, info)
	case "watch":
		a.watch(w, r, info)
	case "create":
		if info.res.Virtual {
			a.review(w, r, info)
			return
		}
		a.create(w, r, info)
	case "update":
		a.update(w, r, info)
	case "patch":
		a.patch(w, r, info)
	case "delete":
		a.delete(w, r, info)
	case "deletecollection":
		a.deleteCollection(w, r, info)
	}
}

// getObject reads the most recent version of a stored object of a served resource (404 for a
// resource not served): what the kinds' rules read of other objects.
func (a *API) getObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	res, ok := a.reg.Resource(gvr)
	if !ok {
		return nil, notFoundType(gvr)
	}
	return a.gen.Get(ctx, res, namespace, name)
}
