// Package resourcequota is the resource quota controller (upstream's "resourcequota"): it keeps
// every ResourceQuota's status current, status.hard copied from spec.hard and status.used
// measured from the objects in the quota's namespace, with the same evaluators the
// ResourceQuota admission plugin charges with (package evaluator), so that both agree.
//
// Admission charges creates and updates as they happen; this controller is what gives usage
// back: it recounts a namespace's quotas when a counted object is deleted or changes its cost (a
// pod that finished, a claim that was expanded), when a quota's spec changes, and every sync
// period (--resource-quota-sync-period, 5 minutes as upstream), which also repairs charges of
// requests that a later step refused. Pods, services, claims, config maps, secrets and
// replication controllers are read from informers; other object counts (count/<resource>.<group>)
// are listed from the gateway when a quota is recounted, and their deletes are followed by a
// monitor (an informer of the resource, started once a quota counts it) that recounts at once.
//
// As upstream's, a recount races with requests admitted while it runs: an object charged by
// admission but not yet in the informer when the recount lists is left out of status.used until
// the next recount.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/services/admission/plugins/quota/evaluator"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "resourcequota"

const (
	// DefaultSyncPeriod is how often every quota is recounted (upstream's
	// --resource-quota-sync-period).
	DefaultSyncPeriod = 5 * time.Minute
	// DefaultWorkers is upstream's --concurrent-resource-quota-syncs.
	DefaultWorkers = 5
	// discoveryRefresh bounds how often an unknown resource makes the controller ask discovery
	// again.
	discoveryRefresh = 30 * time.Second
	// listPage is the page size of the lists of other object counts.
	listPage = 500
	// conflictRetries bounds the status writes of one sync that conflict with admission's.
	conflictRetries = 3
)

// Options configure the controller.
type Options struct {
	// SyncPeriod is how often every quota is recounted (default DefaultSyncPeriod).
	SyncPeriod time.Duration
	// Now is the clock (pods stuck terminating stop counting after their grace period).
	Now     func() time.Time
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller keeps ResourceQuota status current.
type Controller struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	disc    discovery.DiscoveryInterface
	opts    Options

	quotas   corelisters.ResourceQuotaLister
	pods     corelisters.PodLister
	services corelisters.ServiceLister
	claims   corelisters.PersistentVolumeClaimLister
	cms      corelisters.ConfigMapLister
	secrets  corelisters.SecretLister
	rcs      corelisters.ReplicationControllerLister
	synced   []cache.InformerSynced
	queue    *runner.Queue
	log      *slog.Logger

	mu          sync.Mutex
	discovered  map[schema.GroupResource]schema.GroupVersionResource
	discoveryAt time.Time

	// monitors replenish the object counts of resources no informer covers (monitors.go);
	// runCtx bounds them.
	monitorsMu sync.Mutex
	monitors   map[schema.GroupResource]*monitor
	runCtx     context.Context
}

// New builds the controller over informers of f (quotas, pods, services, claims, config maps,
// secrets, replication controllers) and registers its event handlers; it acts once Run is called.
func New(client kubernetes.Interface, dyn dynamic.Interface, disc discovery.DiscoveryInterface, f informers.SharedInformerFactory, opts Options) (*Controller, error) {
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	core := f.Core().V1()
	c := &Controller{
		client: client, dynamic: dyn, disc: disc, opts: opts, log: opts.Log,
		quotas: core.ResourceQuotas().Lister(), pods: core.Pods().Lister(), services: core.Services().Lister(),
		claims: core.PersistentVolumeClaims().Lister(), cms: core.ConfigMaps().Lister(), secrets: core.Secrets().Lister(),
		rcs: core.ReplicationControllers().Lister(), monitors: map[schema.GroupResource]*monitor{},
	}
	c.queue = runner.New(runner.Options{Controller: Name, Name: "resourcequota_primary", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})

	quotaInformer := core.ResourceQuotas().Informer()
	if _, err := quotaInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		// A deleted quota is itself a counted object (count/resourcequotas).
		DeleteFunc: func(obj any) { c.replenish(schema.GroupResource{Resource: "resourcequotas"}, obj) },
		// Status changes are this controller's and admission's own; only a changed spec, or a
		// status that no longer reflects it, needs a recount.
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.ResourceQuota)
			cur, _ := newObj.(*corev1.ResourceQuota)
			if old == nil || cur == nil {
				return
			}
			if !evaluator.Equals(old.Spec.Hard, cur.Spec.Hard) || !evaluator.Equals(cur.Spec.Hard, cur.Status.Hard) {
				c.enqueue(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, quotaInformer.HasSynced)
	for gr, inf := range map[string]cache.SharedIndexInformer{
		"pods": core.Pods().Informer(), "services": core.Services().Informer(), "persistentvolumeclaims": core.PersistentVolumeClaims().Informer(),
		"configmaps": core.ConfigMaps().Informer(), "secrets": core.Secrets().Informer(), "replicationcontrollers": core.ReplicationControllers().Informer(),
	} {
		gr := schema.GroupResource{Resource: gr}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { c.replenish(gr, obj) },
			UpdateFunc: func(oldObj, newObj any) { c.costChanged(gr, oldObj, newObj) },
		}); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, inf.HasSynced)
	}
	return c, nil
}

// Run waits for the informers, then works until ctx ends, recounting every quota each sync
// period.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.monitorsMu.Lock()
	c.runCtx = ctx
	c.monitorsMu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.queue.ShutDown()
		return
	}
	go func() {
		t := time.NewTicker(c.opts.SyncPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.pruneMonitors()
				c.enqueueAll()
			}
		}
	}()
	c.queue.Run(ctx, workers)
}

func (c *Controller) enqueue(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if q, ok := obj.(*corev1.ResourceQuota); ok {
		c.queue.Add(q.Namespace + "/" + q.Name)
	}
}

func (c *Controller) enqueueAll() {
	quotas, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		c.enqueue(q)
	}
}

// replenish recounts the quotas of the namespace of a deleted object that count its resource.
func (c *Controller) replenish(gr schema.GroupResource, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ev := evaluator.For(gr, c.opts.Now)
	if ev == nil {
		return
	}
	quotas, err := c.quotas.ResourceQuotas(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		if len(ev.MatchingResources(evaluator.Names(q.Spec.Hard))) > 0 {
			c.enqueue(q)
		}
	}
}

// costChanged recounts when an update changed what an object costs (a pod that finished, a
// service that changed type, a claim that grew).
func (c *Controller) costChanged(gr schema.GroupResource, oldObj, newObj any) {
	ev := evaluator.For(gr, c.opts.Now)
	o, ok1 := oldObj.(runtime.Object)
	n, ok2 := newObj.(runtime.Object)
	if ev == nil || !ok1 || !ok2 {
		return
	}
	before, err1 := ev.Usage(o)
	after, err2 := ev.Usage(n)
	if err1 != nil || err2 != nil || evaluator.Equals(before, after) {
		return
	}
	c.replenish(gr, newObj)
}

// sync brings one quota's status up to date.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// Deletes of what the quota counts replenish it from now on.
	c.ensureMonitors(q)
	for attempt := 0; ; attempt++ {
		next, dirty, measureErr := c.status(ctx, q)
		if !dirty {
			return measureErr
		}
		_, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return measureErr
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt+1 >= conflictRetries:
			return err
		}
		// Admission charged the quota meanwhile (or the lister lagged): read it and recount.
		if q, err = c.client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
}

// status returns the quota with its status recomputed, and whether that differs from what is
// stored. A resource that could not be measured keeps its last observed usage (and the error is
// returned, so the quota is retried).
func (c *Controller) status(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, bool, error) {
	hard := evaluator.Add(nil, q.Spec.Hard)
	used := evaluator.Add(nil, q.Status.Used)
	measured, err := c.usage(ctx, q)
	for k, v := range measured {
		used[k] = v
	}
	used = evaluator.Mask(used, evaluator.Names(hard))
	dirty := q.Status.Hard == nil || q.Status.Used == nil || !evaluator.Equals(q.Spec.Hard, q.Status.Hard) || !evaluator.Equals(used, q.Status.Used)
	next := q.DeepCopy()
	next.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
	return next, dirty, err
}

// usage measures what the objects of the quota's namespace that its scopes select use, for the
// resources its spec.hard names.
func (c *Controller) usage(ctx context.Context, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	names := evaluator.Names(q.Spec.Hard)
	scopes := evaluator.ScopeSelectors(q)
	out := corev1.ResourceList{}
	var errs []error
	for _, gr := range measuredResources(names, c.opts.Now) {
		ev := evaluator.For(gr, c.opts.Now)
		matched := ev.MatchingResources(names)
		sum := corev1.ResourceList{}
		for _, n := range matched {
			sum[n] = resource.Quantity{Format: resource.DecimalSI}
		}
		items, err := c.objects(ctx, q.Namespace, gr)
		if err != nil {
			errs = append(errs, fmt.Errorf("measuring %s: %w", gr, err))
			continue
		}
		for _, item := range items {
			if !inScopes(ev, item, scopes) {
				continue
			}
			u, err := ev.Usage(item)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			sum = evaluator.Add(sum, u)
		}
		out = evaluator.Add(out, evaluator.Mask(sum, matched))
	}
	return evaluator.Mask(out, names), errors.Join(errs...)
}

// inScopes tells whether an object is in every one of the quota's scopes (a quota without scopes
// takes everything; resources without scopes are never in a scoped quota).
func inScopes(ev evaluator.Evaluator, obj runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) bool {
	if len(scopes) == 0 {
		return true
	}
	matched, err := ev.MatchingScopes(obj, scopes)
	return err == nil && len(matched) == len(scopes)
}

// coreCounted are the resources measured from informers.
var coreCounted = []string{"pods", "services", "persistentvolumeclaims", "configmaps", "secrets", "replicationcontrollers", "resourcequotas"}

// measuredResources are the resources whose objects count in some of names.
func measuredResources(names []corev1.ResourceName, now func() time.Time) []schema.GroupResource {
	seen := map[schema.GroupResource]bool{}
	var out []schema.GroupResource
	add := func(gr schema.GroupResource) {
		ev := evaluator.For(gr, now)
		if seen[gr] || ev == nil || len(ev.MatchingResources(names)) == 0 {
			return
		}
		seen[gr] = true
		out = append(out, gr)
	}
	for _, r := range coreCounted {
		add(schema.GroupResource{Resource: r})
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(string(n), "count/")
		if !ok || rest == "" {
			continue
		}
		res, group, _ := strings.Cut(rest, ".")
		add(schema.GroupResource{Group: group, Resource: res})
	}
	return out
}

// objects lists a namespace's objects of one resource: from an informer for the core resources
// counted most, else from the gateway.
func (c *Controller) objects(ctx context.Context, ns string, gr schema.GroupResource) ([]runtime.Object, error) {
	if gr.Group == "" {
		var out []runtime.Object
		var err error
		switch gr.Resource {
		case "pods":
			var l []*corev1.Pod
			l, err = c.pods.Pods(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "services":
			var l []*corev1.Service
			l, err = c.services.Services(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "persistentvolumeclaims":
			var l []*corev1.PersistentVolumeClaim
			l, err = c.claims.PersistentVolumeClaims(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "configmaps":
			var l []*corev1.ConfigMap
			l, err = c.cms.ConfigMaps(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "secrets":
			var l []*corev1.Secret
			l, err = c.secrets.Secrets(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "replicationcontrollers":
			var l []*corev1.ReplicationController
			l, err = c.rcs.ReplicationControllers(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		case "resourcequotas":
			var l []*corev1.ResourceQuota
			l, err = c.quotas.ResourceQuotas(ns).List(labels.Everything())
			for _, o := range l {
				out = append(out, o)
			}
		default:
			return c.list(ctx, ns, gr)
		}
		return out, err
	}
	return c.list(ctx, ns, gr)
}

// list lists a namespace's objects of any resource through the dynamic client, page by page. A
// resource that is not served has no objects.
func (c *Controller) list(ctx context.Context, ns string, gr schema.GroupResource) ([]runtime.Object, error) {
	gvr, ok, err := c.resolve(gr)
	if err != nil || !ok {
		return nil, err
	}
	var out []runtime.Object
	opts := metav1.ListOptions{Limit: listPage}
	for {
		l, err := c.dynamic.Resource(gvr).Namespace(ns).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if l.GetContinue() == "" {
			return out, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// resolve finds the served version of a namespaced resource through discovery (cached; asked
// again for an unknown resource at most every discoveryRefresh).
func (c *Controller) resolve(gr schema.GroupResource) (schema.GroupVersionResource, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gvr, ok := c.discovered[gr]; ok {
		return gvr, true, nil
	}
	if c.discovered != nil && c.opts.Now().Sub(c.discoveryAt) < discoveryRefresh {
		return schema.GroupVersionResource{}, false, nil
	}
	lists, err := c.disc.ServerPreferredNamespacedResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return schema.GroupVersionResource{}, false, err
	}
	found := map[schema.GroupResource]schema.GroupVersionResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				found[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = gv.WithResource(r.Name)
			}
		}
	}
	c.discovered, c.discoveryAt = found, c.opts.Now()
	gvr, ok := found[gr]
	return gvr, ok, nil
}
