// Package tokencleaner is the bootstrap token cleaner (upstream's "tokencleaner", off by
// default): it deletes bootstrap token Secrets of the system namespace whose expiration has
// passed, and looks at the others again when they expire. An expiration that cannot be parsed
// counts as passed, as upstream.
package tokencleaner

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "tokencleaner"

// Options configure the controller.
type Options struct {
	// Now tells the time (default time.Now).
	Now     func() time.Time
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller deletes expired bootstrap tokens.
type Controller struct {
	client  kubernetes.Interface
	secrets corelisters.SecretLister
	synced  cache.InformerSynced
	queue   *runner.Queue
	now     func() time.Time
	log     *slog.Logger
}

// New builds the controller and registers its event handlers. secrets may watch more than the
// system namespace's bootstrap tokens (upstream selects exactly those); others are ignored.
func New(client kubernetes.Interface, secrets coreinformers.SecretInformer, opts Options) (*Controller, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{client: client, secrets: secrets.Lister(), synced: secrets.Informer().HasSynced, now: opts.Now, log: opts.Log}
	c.queue = runner.New(runner.Options{Controller: Name, Name: "token_cleaner", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	if _, err := secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s, ok := obj.(*corev1.Secret)
			return ok && bootstraptoken.IsBootstrapToken(s)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// Run waits for the informer, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.ShutDown()
		return
	}
	c.queue.Run(ctx, workers)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ns != naming.SystemNamespace {
		return nil
	}
	s, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !bootstraptoken.IsBootstrapToken(s) {
		return nil
	}
	ttl, expired := bootstraptoken.Expiration(s, c.now())
	if !expired {
		if ttl > 0 {
			return runner.RequeueAfter(ttl)
		}
		return nil
	}
	opts := metav1.DeleteOptions{}
	if s.UID != "" {
		uid := s.UID
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = c.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		// Retried with backoff (upstream only logs and waits for the next resync).
		return err
	}
	if err == nil {
		c.log.Info("deleted expired bootstrap token", "namespace", ns, "secret", name)
	}
	return nil
}
