// Package namespace is the namespace lifecycle controller (upstream's "namespace"): when a
// namespace is deleted it removes everything in it, through the API like any client, then lets
// the namespace go.
//
// For a namespace with a deletionTimestamp and the "kubernetes" entry in spec.finalizers it
// discovers every namespaced resource that supports list and delete (custom resources included),
// deletes the namespace's objects (deletecollection, or list and delete each), and waits while
// objects remain: objects held by finalizers stay until those go. It keeps upstream's namespace
// conditions (NamespaceDeletionDiscoveryFailure, NamespaceDeletionGVParsingFailure,
// NamespaceDeletionContentFailure, NamespaceContentRemaining, NamespaceFinalizersRemaining) up to
// date, then removes "kubernetes" through the finalize subresource and, when no finalizer
// remains, deletes the namespace with a uid precondition.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "namespace"

// Finalizer is the spec.finalizers entry this controller owns (upstream's FinalizerKubernetes).
const Finalizer = corev1.FinalizerKubernetes

const (
	// DefaultDeletionGracePeriod delays the first look at a deleted namespace, as upstream, so
	// every gateway replica has seen the deletion (they refuse new content from then on) before
	// the content is listed.
	DefaultDeletionGracePeriod = 5 * time.Second
	// finalizerEstimate is how long upstream assumes objects held by finalizers take; the
	// namespace is looked at again after half of it.
	finalizerEstimate int64 = 15
)

// Options configure the controller.
type Options struct {
	// DeletionGracePeriod delays the handling of a namespace after its deletion is seen (default
	// DefaultDeletionGracePeriod; tests shorten it).
	DeletionGracePeriod time.Duration
	Metrics             *metrics.Metrics
	Log                 *slog.Logger
}

// Controller empties and removes deleted namespaces.
type Controller struct {
	client   kubernetes.Interface
	dynamic  dynamic.Interface
	discover func() ([]*metav1.APIResourceList, error)
	lister   corelisters.NamespaceLister
	synced   cache.InformerSynced
	queue    *runner.Queue
	grace    time.Duration
	log      *slog.Logger

	mu sync.Mutex
	// unsupported remembers operations a resource answered 405 or 404 to, as upstream does for
	// resources whose discovery lists verbs they do not serve.
	unsupported map[opKey]bool
}

type opKey struct {
	op  string
	gvr schema.GroupVersionResource
}

// New builds the controller and registers its event handlers.
func New(client kubernetes.Interface, dyn dynamic.Interface, disc discovery.DiscoveryInterface, namespaces coreinformers.NamespaceInformer, opts Options) (*Controller, error) {
	if opts.DeletionGracePeriod == 0 {
		opts.DeletionGracePeriod = DefaultDeletionGracePeriod
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:      client,
		dynamic:     dyn,
		discover:    disc.ServerPreferredNamespacedResources,
		lister:      namespaces.Lister(),
		synced:      namespaces.Informer().HasSynced,
		grace:       opts.DeletionGracePeriod,
		log:         opts.Log,
		unsupported: map[opKey]bool{},
	}
	c.queue = runner.New(runner.Options{
		Controller: Name, Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log,
		// Upstream's namespace rate limiter: 5ms doubling up to a minute.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
	})
	if _, err := namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	c.queue.AddAfter(ns.Name, c.grace)
}

// Run waits for the informer, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.ShutDown()
		return
	}
	c.queue.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	if _, err := c.lister.Get(name); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	estimate, err := c.delete(ctx, name)
	if err != nil {
		return err
	}
	if estimate > 0 {
		return runner.RequeueAfter(time.Duration(estimate/2+1) * time.Second)
	}
	return nil
}

// delete runs one pass over a deleted namespace; a positive estimate (seconds) means content
// remains and the namespace should be looked at again.
func (c *Controller) delete(ctx context.Context, name string) (int64, error) {
	nsClient := c.client.CoreV1().Namespaces()
	ns, err := nsClient.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ns.DeletionTimestamp == nil {
		return 0, nil
	}
	ns, err = c.retryOnConflict(ctx, ns, c.markTerminating)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ns.DeletionTimestamp == nil {
		return 0, nil
	}
	if hasFinalizer(ns) {
		estimate, err := c.deleteContent(ctx, ns)
		if err != nil {
			return 0, err
		}
		if estimate > 0 {
			return estimate, nil
		}
		ns, err = c.retryOnConflict(ctx, ns, c.finalize)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
	}
	if len(ns.Spec.Finalizers) > 0 {
		// Other actors' finalizers still hold it; they finish it.
		return 0, nil
	}
	// Nothing holds it any more: the final delete lets it go (also when an earlier pass
	// finalized it but did not get to the delete).
	var opts metav1.DeleteOptions
	if ns.UID != "" {
		uid := ns.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = nsClient.Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	c.log.Info("namespace finalized", "namespace", name)
	return 0, nil
}

func hasFinalizer(ns *corev1.Namespace) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

// retryOnConflict applies fn to the newest namespace until it does not conflict; a namespace that
// was replaced (another uid) is an error.
func (c *Controller) retryOnConflict(ctx context.Context, ns *corev1.Namespace, fn func(context.Context, *corev1.Namespace) (*corev1.Namespace, error)) (*corev1.Namespace, error) {
	for {
		out, err := fn(ctx, ns)
		if !apierrors.IsConflict(err) {
			return out, err
		}
		latest, err := c.client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if latest.UID != ns.UID {
			return nil, fmt.Errorf("namespace %s was replaced (uid changed) while it was being finalized", ns.Name)
		}
		ns = latest
	}
}

// markTerminating sets the Terminating phase of a deleted namespace.
func (c *Controller) markTerminating(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	if ns.DeletionTimestamp == nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return ns, nil
	}
	next := ns.DeepCopy()
	next.Status.Phase = corev1.NamespaceTerminating
	return c.client.CoreV1().Namespaces().UpdateStatus(ctx, next, metav1.UpdateOptions{})
}

// finalize removes this controller's entry from spec.finalizers (the others kept, sorted, as
// upstream writes them).
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	rest := sets.New[string]()
	for _, f := range ns.Spec.Finalizers {
		if f != Finalizer {
			rest.Insert(string(f))
		}
	}
	next := ns.DeepCopy()
	next.Spec.Finalizers = make([]corev1.FinalizerName, 0, rest.Len())
	for _, f := range sets.List(rest) {
		next.Spec.Finalizers = append(next.Spec.Finalizers, corev1.FinalizerName(f))
	}
	out, err := c.client.CoreV1().Namespaces().Finalize(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		// Gone already: nothing holds it.
		return next, nil
	}
	return out, err
}

// deleteContent deletes every namespaced object of ns and records the outcome in its conditions.
// It returns how many seconds the remaining content is expected to take, or the errors met.
func (c *Controller) deleteContent(ctx context.Context, ns *corev1.Namespace) (int64, error) {
	r := newReport()
	var errs []error
	lists, err := c.discover()
	if err != nil {
		// Partial discovery still names most resources: delete what is known, report the rest.
		r.discoveryErr = err
		errs = append(errs, err)
	}
	deletable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists)
	gvrs, err := discovery.GroupVersionResources(deletable)
	if err != nil {
		r.parseErr = err
		errs = append(errs, err)
	}
	verbs := verbsOf(deletable)
	var estimate int64
	for _, gvr := range sortedGVRs(gvrs) {
		left, byFinalizer, est, err := c.purge(ctx, gvr, verbs[gvr], ns.Name)
		if err != nil {
			r.contentErrs = append(r.contentErrs, err)
			errs = append(errs, err)
		}
		estimate = max(estimate, est)
		if left > 0 {
			r.remaining[gvr] = left
			for f, n := range byFinalizer {
				r.byFinalizer[f] += n
			}
		}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	next := ns.DeepCopy()
	if applyConditions(&next.Status, r, metav1.Now()) {
		if _, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			// A conflict means someone else wrote; the next pass writes the conditions again.
			c.log.Info("could not update the namespace's conditions", "namespace", ns.Name, "error", err)
		}
	}
	return estimate, errors.Join(errs...)
}

func verbsOf(lists []*metav1.APIResourceList) map[schema.GroupVersionResource]sets.Set[string] {
	out := map[schema.GroupVersionResource]sets.Set[string]{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			out[gv.WithResource(r.Name)] = sets.New[string](r.Verbs...)
		}
	}
	return out
}

func sortedGVRs(m map[schema.GroupVersionResource]struct{}) []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(m))
	for gvr := range m {
		out = append(out, gvr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (c *Controller) isUnsupported(op string, gvr schema.GroupVersionResource) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unsupported[opKey{op, gvr}]
}

func (c *Controller) setUnsupported(op string, gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unsupported[opKey{op, gvr}] = true
}

// notServed tells whether err says the operation is not served for the resource (405, or 404 for
// a collection discovery lists but does not serve).
func notServed(err error) bool {
	return apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err)
}

// purge deletes one resource's objects in a namespace and counts what remains: how many, which
// finalizers hold them, and the seconds they are expected to take. Objects left without a
// finalizer are an error (they should have gone).
func (c *Controller) purge(ctx context.Context, gvr schema.GroupVersionResource, verbs sets.Set[string], namespace string) (int, map[string]int, int64, error) {
	client := c.dynamic.Resource(gvr).Namespace(namespace)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	eachItem := true
	if verbs.Has("deletecollection") && !c.isUnsupported("deletecollection", gvr) {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case err == nil:
			eachItem = false
		case notServed(err):
			c.setUnsupported("deletecollection", gvr)
		default:
			return 0, nil, 0, fmt.Errorf("deleting %s in %s: %w", gvr.GroupResource(), namespace, err)
		}
	}
	if c.isUnsupported("list", gvr) {
		return 0, nil, 0, nil
	}
	if eachItem {
		list, err := client.List(ctx, metav1.ListOptions{})
		if notServed(err) {
			c.setUnsupported("list", gvr)
			return 0, nil, 0, nil
		}
		if err != nil {
			return 0, nil, 0, fmt.Errorf("listing %s in %s: %w", gvr.GroupResource(), namespace, err)
		}
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() != nil {
				continue
			}
			err := client.Delete(ctx, item.GetName(), opts)
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, nil, 0, fmt.Errorf("deleting %s %s in %s: %w", gvr.GroupResource(), item.GetName(), namespace, err)
			}
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if notServed(err) {
		c.setUnsupported("list", gvr)
		return 0, nil, 0, nil
	}
	if err != nil {
		return 0, nil, 0, fmt.Errorf("listing %s in %s: %w", gvr.GroupResource(), namespace, err)
	}
	if len(list.Items) == 0 {
		return 0, nil, 0, nil
	}
	byFinalizer := map[string]int{}
	for _, item := range list.Items {
		for _, f := range item.GetFinalizers() {
			byFinalizer[f]++
		}
	}
	// Pods deleted gracefully stay until their node ends them: upstream waits for the longest
	// grace period of the pods that have not finished.
	if gvr.Group == "" && gvr.Resource == "pods" {
		if est := podsEstimate(list.Items); est > 0 {
			return len(list.Items), byFinalizer, est, nil
		}
	}
	if len(byFinalizer) > 0 {
		return len(list.Items), byFinalizer, finalizerEstimate, nil
	}
	return len(list.Items), nil, 0, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", namespace, gvr)
}

// podsEstimate is upstream's estimate of the graceful termination of a namespace's pods: the
// longest terminationGracePeriodSeconds among those not finished (Succeeded, Failed).
func podsEstimate(items []unstructured.Unstructured) int64 {
	var estimate int64
	for _, item := range items {
		phase, _, _ := unstructured.NestedString(item.Object, "status", "phase")
		if phase == string(corev1.PodSucceeded) || phase == string(corev1.PodFailed) {
			continue
		}
		if grace, ok, _ := unstructured.NestedInt64(item.Object, "spec", "terminationGracePeriodSeconds"); ok {
			estimate = max(estimate, grace)
		}
	}
	return estimate
}
