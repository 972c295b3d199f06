package resourcequota

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Replenishment of the object counts (count/<resource>.<group>): upstream's quota monitor
// watches every resource a quota may count and recounts the quotas of a namespace when one of
// its objects is deleted. The resources with rules of their own (pods, services, claims) and the
// core ones counted most are watched by the controller's informers from the start; any other
// resource gets a monitor, an informer of its own, once a quota names it, kept while some quota
// does (checked every sync period). Without a monitor a deleted ReplicaSet stayed charged until
// the next periodic recount.

// monitor is the informer of one monitored resource.
type monitor struct {
	gvr  schema.GroupVersionResource
	stop context.CancelFunc
}

// informerCovered are the resources the controller's own informers replenish.
var informerCovered = map[schema.GroupResource]bool{}

func init() {
	for _, r := range coreCounted {
		informerCovered[schema.GroupResource{Resource: r}] = true
	}
}

// countedResources are the resources a quota's spec.hard counts by object count that no informer
// of the controller covers.
func countedResources(q *corev1.ResourceQuota) []schema.GroupResource {
	var out []schema.GroupResource
	for n := range q.Spec.Hard {
		rest, ok := strings.CutPrefix(string(n), "count/")
		if !ok || rest == "" {
			continue
		}
		res, group, _ := strings.Cut(rest, ".")
		gr := schema.GroupResource{Group: group, Resource: res}
		if !informerCovered[gr] {
			out = append(out, gr)
		}
	}
	return out
}

// ensureMonitors starts a monitor for every resource q counts that has none yet and is served
// (a resource not served yet is looked for again at the quota's next sync).
func (c *Controller) ensureMonitors(q *corev1.ResourceQuota) {
	for _, gr := range countedResources(q) {
		c.monitorsMu.Lock()
		_, running := c.monitors[gr]
		c.monitorsMu.Unlock()
		if running {
			continue
		}
		gvr, ok, err := c.resolve(gr)
		if err != nil || !ok {
			continue
		}
		c.startMonitor(gr, gvr)
	}
}

// startMonitor runs an informer of gvr whose deletes replenish the quotas of their namespace.
func (c *Controller) startMonitor(gr schema.GroupResource, gvr schema.GroupVersionResource) {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	if _, running := c.monitors[gr]; running || c.runCtx == nil {
		return
	}
	ctx, stop := context.WithCancel(c.runCtx)
	inf := dynamicinformer.NewFilteredDynamicInformer(c.dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.replenish(gr, obj) },
	}); err != nil {
		stop()
		return
	}
	c.monitors[gr] = &monitor{gvr: gvr, stop: stop}
	go inf.Run(ctx.Done())
	// An object deleted before the monitor watched is missing from its list: recount once it
	// has listed, so nothing deleted meanwhile stays charged.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			c.recountCounting(gr)
		}
	}()
	c.log.Info("monitoring a counted resource for quota replenishment", "resource", gvr.String())
}

// pruneMonitors stops the monitors of resources no quota counts any more.
func (c *Controller) pruneMonitors() {
	quotas, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	wanted := map[schema.GroupResource]bool{}
	for _, q := range quotas {
		for _, gr := range countedResources(q) {
			wanted[gr] = true
		}
	}
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	for gr, m := range c.monitors {
		if !wanted[gr] {
			m.stop()
			delete(c.monitors, gr)
		}
	}
}

// Monitored lists the resources monitored for replenishment (tests).
func (c *Controller) Monitored() []schema.GroupVersionResource {
	c.monitorsMu.Lock()
	defer c.monitorsMu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(c.monitors))
	for _, m := range c.monitors {
		out = append(out, m.gvr)
	}
	return out
}

// recountCounting enqueues every quota that counts gr.
func (c *Controller) recountCounting(gr schema.GroupResource) {
	quotas, err := c.quotas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		for _, counted := range countedResources(q) {
			if counted == gr {
				c.enqueue(q)
				break
			}
		}
	}
}
