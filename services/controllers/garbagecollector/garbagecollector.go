// Package garbagecollector is the garbage collector: it deletes objects whose owners are gone,
// as upstream's garbage collector controller does, for every served resource (custom resources
// and aggregated APIs' resources too).
//
// It watches every resource that can be listed, watched and deleted through client-go's metadata
// informers (PartialObjectMetadata: it never decodes whole objects) and keeps the owner graph:
// one node per object, linked to the objects its owner references name (by uid). Owners it has
// not seen are virtual nodes, checked against the API. Two work queues act on the graph:
//
//   - attempt to delete: a dependent whose owners are all gone (the uid named no longer exists, so
//     a re-created owner with the same name adopts nothing) is deleted, with a uid and
//     resourceVersion precondition, so an object changed since the collector last saw it is looked
//     at again instead; a dependent that still has a live owner loses only its references to the
//     gone ones. An owner deleted in the foreground (the foregroundDeletion finalizer) has its
//     dependents deleted, and loses the finalizer once no dependent with blockOwnerDeletion is
//     left.
//   - attempt to orphan: an owner deleted with the orphan policy (the orphan finalizer) has its
//     reference removed from every dependent, then loses the finalizer.
//
// The set of watched resources follows discovery: a resync every ResyncPeriod, and at once when a
// CustomResourceDefinition or APIService changes, starts informers for new resources and stops
// those of resources no longer served.
package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/lru"

	"platform.io/libs/naming"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "garbagecollector"

// DefaultWorkers is upstream's --concurrent-gc-syncs.
const DefaultWorkers = 20

// DefaultResyncPeriod is how often the watched resources are compared with discovery.
const DefaultResyncPeriod = 30 * time.Second

// absentCacheSize bounds the cache of owners known to be gone.
const absentCacheSize = 50000

// Options configure the collector.
type Options struct {
	// ResyncPeriod is the period of discovery resyncs (default DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// Metrics receive the queues' and the graph's figures (nil: none).
	Metrics *metrics.Metrics
	// Registerer, when set, receives the graph's gauges.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// Controller is the garbage collector.
type Controller struct {
	meta   metadata.Interface
	disc   discovery.DiscoveryInterface
	events record.EventRecorder
	stopEv func()
	opts   Options
	log    *slog.Logger

	// changes carries the informers' events to the one goroutine that changes the graph, in order.
	changes chan change

	mu     sync.Mutex
	nodes  map[types.UID]*node
	mapper meta.RESTMapper

	absent *lru.Cache // "namespace/uid" of owners looked up and found gone

	monMu    sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor
	resync   chan struct{}

	attemptToDelete, attemptToOrphan *runner.Queue

	graphNodes, monitored prometheus.Gauge
}

// monitor is the metadata informer of one resource.
type monitor struct {
	gvr      schema.GroupVersionResource
	kind     string
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

type changeType int

const (
	addOrUpdate changeType = iota
	deleted
)

type change struct {
	typ changeType
	gvk schema.GroupVersionKind
	obj *metav1.PartialObjectMetadata
}

// New creates the collector. kube records its events; meta reads and writes objects'
// metadata; disc tells the served resources.
func New(kube kubernetes.Interface, meta metadata.Interface, disc discovery.DiscoveryInterface, opts Options) (*Controller, error) {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	c := &Controller{
		meta:     meta,
		disc:     disc,
		events:   broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "garbage-collector-controller"}),
		stopEv:   broadcaster.Shutdown,
		opts:     opts,
		log:      opts.Log,
		changes:  make(chan change, 4096),
		nodes:    map[types.UID]*node{},
		absent:   lru.New(absentCacheSize),
		monitors: map[schema.GroupVersionResource]*monitor{},
		resync:   make(chan struct{}, 1),
		graphNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "garbagecollector_graph_nodes", Help: "Objects (and owners known only from references) in the garbage collector's owner graph.",
		}),
		monitored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "garbagecollector_monitored_resources", Help: "Resources the garbage collector watches.",
		}),
	}
	if opts.Registerer != nil {
		for _, g := range []prometheus.Collector{c.graphNodes, c.monitored} {
			if err := opts.Registerer.Register(g); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, err
				}
			}
		}
	}
	c.attemptToDelete = runner.New(runner.Options{Controller: Name, Name: "garbage_collector_attempt_to_delete", Sync: c.syncDelete, Metrics: opts.Metrics, Log: opts.Log})
	c.attemptToOrphan = runner.New(runner.Options{Controller: Name, Name: "garbage_collector_attempt_to_orphan", Sync: c.syncOrphan, Metrics: opts.Metrics, Log: opts.Log})
	return c, nil
}

// Run collects garbage until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.stopEv()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.processChanges(ctx)
	}()
	if err := c.sync(ctx); err != nil {
		c.log.Warn("discovery failed; retrying at the next resync", "error", err)
	}
	// The graph is built from the first lists before anything is collected: an owner not listed
	// yet would otherwise be looked up, once per dependent.
	c.waitSynced(ctx, time.Minute)
	wg.Add(2)
	go func() { defer wg.Done(); c.attemptToDelete.Run(ctx, workers) }()
	go func() { defer wg.Done(); c.attemptToOrphan.Run(ctx, workers) }()
	ticker := time.NewTicker(c.opts.ResyncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			c.stopMonitors()
			wg.Wait()
			return
		case <-ticker.C:
		case <-c.resync:
			// Several definitions changing at once cost one discovery.
			select {
			case <-ctx.Done():
				continue
			case <-time.After(time.Second):
			}
		}
		if err := c.sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("discovery failed; retrying at the next resync", "error", err)
		}
	}
}

// waitSynced waits (at most d) for every informer's first list.
func (c *Controller) waitSynced(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c.monMu.Lock()
	var synced []cache.InformerSynced
	for _, m := range c.monitors {
		synced = append(synced, m.informer.HasSynced)
	}
	c.monMu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) && ctx.Err() != nil {
		c.log.Warn("not every resource was listed in time; collecting anyway")
	}
}

// ignored are the resources never collected (upstream's): events are not owned.
var ignored = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:                            true,
	{Group: naming.Group("events.k8s.io"), Resource: "events"}: true,
}

// sync compares the watched resources with discovery: informers start for resources that can be
// listed, watched and deleted, and stop for resources no longer served. The REST mapper (kinds of
// owner references to resources) is rebuilt from the same discovery.
func (c *Controller) sync(ctx context.Context) error {
	if cd, ok := c.disc.(discovery.CachedDiscoveryInterface); ok {
		cd.Invalidate()
	}
	groups, err := restmapper.GetAPIGroupResources(c.disc)
	if err != nil && len(groups) == 0 {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	c.mu.Lock()
	c.mapper = mapper
	c.mu.Unlock()
	lists, perr := discovery.ServerPreferredResources(c.disc)
	if perr != nil && len(lists) == 0 {
		return perr
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists)
	want := map[schema.GroupVersionResource]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || ignored[schema.GroupResource{Group: gv.Group, Resource: r.Name}] {
				continue
			}
			want[gv.WithResource(r.Name)] = r.Kind
		}
	}
	// A group whose discovery failed keeps its informers: its resources are not known gone.
	failed := map[schema.GroupVersion]bool{}
	var gdf *discovery.ErrGroupDiscoveryFailed
	if errors.As(perr, &gdf) {
		for gv := range gdf.Groups {
			failed[gv] = true
		}
	}
	c.monMu.Lock()
	defer c.monMu.Unlock()
	for gvr, m := range c.monitors {
		if _, ok := want[gvr]; !ok && !failed[gvr.GroupVersion()] {
			m.stop()
			delete(c.monitors, gvr)
			c.log.Info("stopped watching a resource no longer served", "resource", gvr.String())
		}
	}
	for gvr, kind := range want {
		if _, ok := c.monitors[gvr]; ok {
			continue
		}
		c.monitors[gvr] = c.startMonitor(ctx, gvr, kind)
	}
	c.monitored.Set(float64(len(c.monitors)))
	if perr != nil {
		return perr
	}
	return nil
}

// startMonitor starts the metadata informer of one resource.
func (c *Controller) startMonitor(ctx context.Context, gvr schema.GroupVersionResource, kind string) *monitor {
	mctx, cancel := context.WithCancel(ctx)
	inf := metadatainformer.NewFilteredMetadataInformer(c.meta, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		// The graph needs no managed fields, labels or annotations.
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.ManagedFields, m.Annotations, m.Labels = nil, nil, nil
		}
		return obj, nil
	})
	gvk := gvr.GroupVersion().WithKind(kind)
	trigger := gvr.Resource == "customresourcedefinitions" || gvr.Resource == "apiservices"
	send := func(typ changeType, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		select {
		case c.changes <- change{typ: typ, gvk: gvk, obj: m}:
		case <-mctx.Done():
		}
		if trigger {
			select {
			case c.resync <- struct{}{}:
			default:
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(addOrUpdate, obj) },
		UpdateFunc: func(_, obj any) { send(addOrUpdate, obj) },
		DeleteFunc: func(obj any) { send(deleted, obj) },
	})
	go inf.Run(mctx.Done())
	c.log.Debug("watching a resource", "resource", gvr.String())
	return &monitor{gvr: gvr, kind: kind, informer: inf, stop: cancel}
}

func (c *Controller) stopMonitors() {
	c.monMu.Lock()
	defer c.monMu.Unlock()
	for gvr, m := range c.monitors {
		m.stop()
		delete(c.monitors, gvr)
	}
}

// processChanges applies the informers' events to the graph, one at a time.
func (c *Controller) processChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-c.changes:
			c.apply(ch)
		}
	}
}

func hasFinalizer(m metav1.Object, f string) bool { return slices.Contains(m.GetFinalizers(), f) }

// apply changes the graph for one event and queues the work it makes.
func (c *Controller) apply(ch change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.graphNodes.Set(float64(len(c.nodes))) }()
	obj := ch.obj
	n := c.nodes[obj.UID]
	if ch.typ == deleted {
		if n == nil {
			return
		}
		// Owners looked up later are known gone; every dependent is looked at again.
		c.absent.Add(absentKey(obj.Namespace, obj.UID), struct{}{})
		c.unlinkOwners(n, n.owners)
		for d := range n.dependents {
			c.attemptToDelete.Add(string(d.id.UID))
		}
		delete(c.nodes, obj.UID)
		return
	}
	apiVersion, kind := ch.gvk.ToAPIVersionAndKind()
	id := identity{APIVersion: apiVersion, Kind: kind, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID}
	isNew := n == nil || n.virtual
	if n == nil {
		n = newNode(id)
		c.nodes[obj.UID] = n
	}
	n.id, n.virtual = id, false
	wasDeletingDependents, wasOrphaning := n.deletingDependents, n.orphaning
	n.deleting = obj.DeletionTimestamp != nil
	n.deletingDependents = n.deleting && hasFinalizer(obj, metav1.FinalizerDeleteDependents)
	n.orphaning = n.deleting && hasFinalizer(obj, metav1.FinalizerOrphanDependents)
	added, removed, changed := ownerDiff(n.owners, obj.OwnerReferences)
	n.owners, n.rv = obj.OwnerReferences, obj.ResourceVersion
	c.unlinkOwners(n, removed)
	for _, r := range added {
		owner := c.nodes[r.UID]
		if owner == nil {
			// An owner not seen: a virtual node, checked against the API.
			owner = newNode(identity{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: obj.Namespace, Name: r.Name, UID: r.UID})
			owner.virtual = true
			c.nodes[r.UID] = owner
			c.attemptToDelete.Add(string(r.UID))
		}
		owner.dependents[n] = struct{}{}
		if owner.deletingDependents {
			// A new dependent of an owner being deleted in the foreground goes too.
			c.attemptToDelete.Add(string(n.id.UID))
		}
	}
	for _, r := range changed {
		if owner := c.nodes[r.UID]; owner != nil && owner.deletingDependents {
			c.attemptToDelete.Add(string(r.UID))
		}
	}
	if n.orphaning && (isNew || !wasOrphaning) {
		c.attemptToOrphan.Add(string(n.id.UID))
	}
	if n.deletingDependents && (isNew || !wasDeletingDependents) {
		for d := range n.dependents {
			c.attemptToDelete.Add(string(d.id.UID))
		}
		c.attemptToDelete.Add(string(n.id.UID))
	}
	if isNew && len(n.owners) > 0 && !n.deleting {
		// A dependent first seen: its owners may be gone already.
		c.attemptToDelete.Add(string(n.id.UID))
	}
}

// unlinkOwners removes n from the dependents of the owners refs name. An owner being deleted in
// the foreground is looked at again (n may have been its last blocking dependent); a virtual
// owner no dependent names any more leaves the graph.
func (c *Controller) unlinkOwners(n *node, refs []metav1.OwnerReference) {
	for _, r := range refs {
		owner := c.nodes[r.UID]
		if owner == nil {
			continue
		}
		delete(owner.dependents, n)
		switch {
		case owner.virtual && len(owner.dependents) == 0:
			delete(c.nodes, r.UID)
		case owner.deletingDependents:
			c.attemptToDelete.Add(string(r.UID))
		}
	}
}

func absentKey(namespace string, uid types.UID) string { return namespace + "/" + string(uid) }

// snapshot is a copy of a node's state taken under the graph's lock.
type snapshot struct {
	id                                    identity
	virtual, deleting, deletingDependents bool
	owners                                []metav1.OwnerReference
	rv                                    string
	dependents                            []identity
	blocking                              []identity
	hasDependents                         bool
}

func (c *Controller) snapshot(uid types.UID) (snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[uid]
	if n == nil {
		return snapshot{}, false
	}
	s := snapshot{id: n.id, virtual: n.virtual, deleting: n.deleting, deletingDependents: n.deletingDependents,
		owners: slices.Clone(n.owners), rv: n.rv, hasDependents: len(n.dependents) > 0}
	for d := range n.dependents {
		s.dependents = append(s.dependents, d.id)
	}
	for _, d := range n.blockingDependents() {
		s.blocking = append(s.blocking, d.id)
	}
	return s, true
}

// resource maps an apiVersion and kind to its resource and whether it is namespaced.
func (c *Controller) resource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	c.mu.Lock()
	mapper := c.mapper
	c.mu.Unlock()
	if mapper == nil {
		return schema.GroupVersionResource{}, false, errors.New("resources not discovered yet")
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// Perhaps a kind defined since the last discovery.
		select {
		case c.resync <- struct{}{}:
		default:
		}
		return schema.GroupVersionResource{}, false, fmt.Errorf("kind %s: %w", gvk, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// client is the metadata client of id's resource and namespace.
func (c *Controller) client(id identity) (metadata.ResourceInterface, error) {
	gvr, namespaced, err := c.resource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	if namespaced {
		return c.meta.Resource(gvr).Namespace(id.Namespace), nil
	}
	return c.meta.Resource(gvr), nil
}

// syncDelete is one attempt to delete: a virtual node's existence is checked; an owner being
// deleted in the foreground loses its finalizer when no blocking dependent is left; a dependent
// whose owners are gone is deleted.
func (c *Controller) syncDelete(ctx context.Context, key string) error {
	s, ok := c.snapshot(types.UID(key))
	if !ok {
		return nil
	}
	switch {
	case s.virtual:
		return c.checkVirtual(ctx, s)
	case s.deletingDependents:
		return c.processDeletingDependents(ctx, s)
	case s.deleting || len(s.owners) == 0:
		return nil
	}
	var solid, dangling, waiting []metav1.OwnerReference
	for _, ref := range s.owners {
		st, err := c.ownerState(ctx, s.id, ref)
		if errors.Is(err, errUnresolvable) {
			// Retrying would not change it.
			return nil
		}
		if err != nil {
			return err
		}
		switch st {
		case ownerSolid:
			solid = append(solid, ref)
		case ownerWaiting:
			waiting = append(waiting, ref)
		default:
			dangling = append(dangling, ref)
		}
	}
	switch {
	case len(solid) > 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// A live owner keeps the object; the references to the gone ones (and to owners being
		// deleted in the foreground, which must not wait for it) are removed.
		var uids []types.UID
		for _, r := range append(dangling, waiting...) {
			uids = append(uids, r.UID)
		}
		return c.removeOwnerRefs(ctx, s.id, uids)
	default:
		// No live owner: the object goes. When an owner waits for it (foreground) and it has
		// dependents of its own, they go first: it is deleted in the foreground too.
		policy := metav1.DeletePropagationBackground
		if len(waiting) > 0 && s.hasDependents {
			policy = metav1.DeletePropagationForeground
		}
		return c.deleteObject(ctx, s, policy)
	}
}

// errUnresolvable is a reference no lookup can resolve (a namespaced owner of a cluster-scoped
// object).
var errUnresolvable = errors.New("a cluster-scoped object cannot have a namespaced owner")

type ownerStateValue int

const (
	ownerAbsent ownerStateValue = iota
	ownerSolid
	ownerWaiting
)

// ownerState tells whether the owner ref names exists (with ref's uid): from the graph when the
// collector has seen it, else from the API (and the cache of owners found gone).
func (c *Controller) ownerState(ctx context.Context, dependent identity, ref metav1.OwnerReference) (ownerStateValue, error) {
	gvr, namespaced, err := c.resource(ref.APIVersion, ref.Kind)
	if err != nil {
		return ownerAbsent, err
	}
	ns := ""
	if namespaced {
		if dependent.Namespace == "" {
			// A cluster-scoped object cannot be owned by a namespaced one: as upstream, the
			// reference cannot be resolved, the object is never collected, and the event says so.
			c.event(dependent, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
				fmt.Sprintf("ownerRef %s does not exist in namespace %q", refString(ref), dependent.Namespace))
			return ownerAbsent, errUnresolvable
		}
		ns = dependent.Namespace
	}
	c.mu.Lock()
	if n := c.nodes[ref.UID]; n != nil && !n.virtual && n.id.Namespace == ns {
		st := ownerSolid
		if n.deletingDependents {
			st = ownerWaiting
		}
		c.mu.Unlock()
		return st, nil
	}
	c.mu.Unlock()
	if _, gone := c.absent.Get(absentKey(ns, ref.UID)); gone {
		return ownerAbsent, nil
	}
	var rc metadata.ResourceInterface = c.meta.Resource(gvr)
	if namespaced {
		rc = c.meta.Resource(gvr).Namespace(ns)
	}
	live, err := rc.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.absent.Add(absentKey(ns, ref.UID), struct{}{})
		return ownerAbsent, nil
	case err != nil:
		return ownerAbsent, err
	case live.UID != ref.UID:
		c.absent.Add(absentKey(ns, ref.UID), struct{}{})
		return ownerAbsent, nil
	case live.DeletionTimestamp != nil && hasFinalizer(live, metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

func refString(r metav1.OwnerReference) string {
	return fmt.Sprintf("[%s/%s, namespace: , name: %s, uid: %s]", r.APIVersion, r.Kind, r.Name, r.UID)
}

// checkVirtual looks up an owner the collector knows only from references: gone (or replaced by
// an object with another uid), it leaves the graph and its dependents are looked at again.
func (c *Controller) checkVirtual(ctx context.Context, s snapshot) error {
	gvr, namespaced, err := c.resource(s.id.APIVersion, s.id.Kind)
	if err != nil {
		return err
	}
	ns := ""
	if namespaced {
		ns = s.id.Namespace
	}
	gone := namespaced && ns == ""
	if !gone {
		if _, ok := c.absent.Get(absentKey(ns, s.id.UID)); ok {
			gone = true
		}
	}
	if !gone {
		var rc metadata.ResourceInterface = c.meta.Resource(gvr)
		if namespaced {
			rc = c.meta.Resource(gvr).Namespace(ns)
		}
		live, err := rc.Get(ctx, s.id.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone = true
		case err != nil:
			return err
		default:
			gone = live.UID != s.id.UID
		}
	}
	if !gone {
		// It exists: its informer will show it to the graph.
		return nil
	}
	c.absent.Add(absentKey(ns, s.id.UID), struct{}{})
	c.mu.Lock()
	n := c.nodes[s.id.UID]
	if n != nil && n.virtual {
		for d := range n.dependents {
			c.attemptToDelete.Add(string(d.id.UID))
		}
		delete(c.nodes, s.id.UID)
		c.graphNodes.Set(float64(len(c.nodes)))
	}
	c.mu.Unlock()
	return nil
}

// processDeletingDependents handles an owner deleted in the foreground: with no blocking
// dependent left it loses the foregroundDeletion finalizer (and is deleted); otherwise its
// blocking dependents are deleted.
func (c *Controller) processDeletingDependents(ctx context.Context, s snapshot) error {
	if len(s.blocking) == 0 {
		return c.removeFinalizer(ctx, s.id, metav1.FinalizerDeleteDependents)
	}
	c.mu.Lock()
	for _, d := range s.blocking {
		if n := c.nodes[d.UID]; n != nil && !n.deletingDependents {
			c.attemptToDelete.Add(string(d.UID))
		}
	}
	c.mu.Unlock()
	return nil
}

// deleteObject deletes the object s shows, only as the collector saw it (uid and resourceVersion
// preconditions): a conflict means it changed, and it is looked at again.
func (c *Controller) deleteObject(ctx context.Context, s snapshot, policy metav1.DeletionPropagation) error {
	rc, err := c.client(s.id)
	if err != nil {
		return err
	}
	uid, rv := s.id.UID, s.rv
	err = rc.Delete(ctx, s.id.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &policy,
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Changed since: look again once the informer has the new version.
		return runner.RequeueAfter(200 * time.Millisecond)
	}
	c.event(s.id, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("the garbage collector could not delete the object: %v", err))
	return err
}

// removeOwnerRefs removes the owner references to uids from the object id names (read fresh,
// written with its resourceVersion as precondition).
func (c *Controller) removeOwnerRefs(ctx context.Context, id identity, uids []types.UID) error {
	return c.patchMeta(ctx, id, func(live *metav1.PartialObjectMetadata) (map[string]any, bool) {
		var keep []metav1.OwnerReference
		for _, r := range live.OwnerReferences {
			if !slices.Contains(uids, r.UID) {
				keep = append(keep, r)
			}
		}
		if len(keep) == len(live.OwnerReferences) {
			return nil, false
		}
		if keep == nil {
			keep = []metav1.OwnerReference{}
		}
		return map[string]any{"ownerReferences": keep}, true
	})
}

// removeFinalizer removes finalizer f from the object id names.
func (c *Controller) removeFinalizer(ctx context.Context, id identity, f string) error {
	return c.patchMeta(ctx, id, func(live *metav1.PartialObjectMetadata) (map[string]any, bool) {
		if !hasFinalizer(live, f) {
			return nil, false
		}
		keep := slices.DeleteFunc(slices.Clone(live.Finalizers), func(s string) bool { return s == f })
		if keep == nil {
			keep = []string{}
		}
		return map[string]any{"finalizers": keep}, true
	})
}

// patchMeta reads the object id names and writes the metadata fields change returns as a JSON
// merge patch carrying the read uid and resourceVersion, so the write applies only to what was
// read; a conflict reads again.
func (c *Controller) patchMeta(ctx context.Context, id identity, change func(*metav1.PartialObjectMetadata) (map[string]any, bool)) error {
	rc, err := c.client(id)
	if err != nil {
		return err
	}
	for range 5 {
		live, err := rc.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if live.UID != id.UID {
			return nil
		}
		fields, ok := change(live)
		if !ok {
			return nil
		}
		fields["uid"] = live.UID
		fields["resourceVersion"] = live.ResourceVersion
		patch, err := json.Marshal(map[string]any{"metadata": fields})
		if err != nil {
			return err
		}
		_, err = rc.Patch(ctx, id.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			continue
		}
		c.event(id, corev1.EventTypeWarning, "FailedUpdate", fmt.Sprintf("the garbage collector could not update the object's metadata: %v", err))
		return err
	}
	return fmt.Errorf("%s %s/%s kept changing", id.Kind, id.Namespace, id.Name)
}

// syncOrphan handles an owner deleted with the orphan policy: every dependent loses its
// reference to it, then it loses the orphan finalizer (and is deleted).
func (c *Controller) syncOrphan(ctx context.Context, key string) error {
	s, ok := c.snapshot(types.UID(key))
	if !ok || s.virtual {
		return nil
	}
	var errs []error
	for _, d := range s.dependents {
		if err := c.removeOwnerRefs(ctx, d, []types.UID{s.id.UID}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.event(s.id, corev1.EventTypeWarning, "FailedOrphan", fmt.Sprintf("the garbage collector could not orphan the dependents: %v", err))
		return err
	}
	return c.removeFinalizer(ctx, s.id, metav1.FinalizerOrphanDependents)
}

// event records an event on the object id names.
func (c *Controller) event(id identity, typ, reason, message string) {
	c.events.Event(&corev1.ObjectReference{APIVersion: id.APIVersion, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, UID: id.UID}, typ, reason, message)
}
