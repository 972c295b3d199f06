// Package serviceaccount is the service account controller (upstream's "serviceaccount"): every
// active namespace has the ServiceAccounts it should (upstream: "default"), and one deleted is
// created again.
package serviceaccount

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "serviceaccount"

// DefaultServiceAccounts are the accounts every namespace gets (upstream: "default").
var DefaultServiceAccounts = []string{"default"}

// Options configure the controller.
type Options struct {
	// ServiceAccounts are the names ensured in every namespace (default DefaultServiceAccounts).
	ServiceAccounts []string
	Metrics         *metrics.Metrics
	Log             *slog.Logger
}

// Controller keeps the default service accounts in every active namespace.
type Controller struct {
	client     kubernetes.Interface
	accounts   []string
	namespaces corelisters.NamespaceLister
	sas        corelisters.ServiceAccountLister
	synced     []cache.InformerSynced
	queue      *runner.Queue
	log        *slog.Logger
}

// New builds the controller and registers its event handlers; it acts once Run is called.
func New(client kubernetes.Interface, namespaces coreinformers.NamespaceInformer, sas coreinformers.ServiceAccountInformer, opts Options) (*Controller, error) {
	if opts.ServiceAccounts == nil {
		opts.ServiceAccounts = DefaultServiceAccounts
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:     client,
		accounts:   opts.ServiceAccounts,
		namespaces: namespaces.Lister(),
		sas:        sas.Lister(),
		synced:     []cache.InformerSynced{namespaces.Informer().HasSynced, sas.Informer().HasSynced},
		log:        opts.Log,
	}
	c.queue = runner.New(runner.Options{Controller: Name, Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	// A deleted account is recreated: its namespace is looked at again.
	if _, err := sas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if sa := serviceAccountOf(obj); sa != nil {
				c.queue.Add(sa.Namespace)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueNamespace(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueueNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

func serviceAccountOf(obj any) *corev1.ServiceAccount {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sa, _ := obj.(*corev1.ServiceAccount)
	return sa
}

// Run waits for the informers, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.queue.ShutDown()
		return
	}
	c.queue.Run(ctx, workers)
}

// sync creates the missing accounts of one namespace. Namespaces that are not active (being
// deleted) get none, as upstream: the namespace controller is emptying them.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.Status.Phase != corev1.NamespaceActive || ns.DeletionTimestamp != nil {
		return nil
	}
	for _, account := range c.accounts {
		if _, err := c.sas.ServiceAccounts(name).Get(account); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}
		_, err := c.client.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.log.Info("created service account", "namespace", name, "name", account)
		case apierrors.IsAlreadyExists(err):
			// The informer had not seen it yet.
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// The namespace started terminating since the lister saw it.
		default:
			return err
		}
	}
	return nil
}
