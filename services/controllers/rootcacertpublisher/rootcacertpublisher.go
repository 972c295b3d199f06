// Package rootcacertpublisher is the root CA certificate publisher (upstream's
// "root-ca-cert-publisher"): every namespace has a ConfigMap naming.RootCAConfigMap whose
// "ca.crt" is the cluster's CA bundle, which the ServiceAccount admission plugin projects into
// pods next to their token so that they can verify the API server. A deleted ConfigMap is
// created again, changed data is restored and a missing description annotation is added; other
// labels and annotations are kept.
package rootcacertpublisher

import (
	"context"
	"errors"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers (upstream's name before 1.28, still accepted
// there; its newer name is an alias in the manager).
const Name = "root-ca-cert-publisher"

// DefaultWorkers is upstream's number of workers for this controller.
const DefaultWorkers = 1

// queueName is upstream's work queue name (it labels the workqueue_* metrics).
const queueName = "root_ca_cert_publisher"

// CAKey is the ConfigMap key that holds the CA bundle (the key the projected volume reads).
const CAKey = "ca.crt"

// Description is the value of naming.DescriptionAnnotation on the ConfigMap: upstream's text,
// with the API server named after the product.
const Description = "Contains a CA bundle that can be used to verify the " + naming.Product + "-apiserver when using internal endpoints such as the internal service IP or " + naming.Product + ".default.svc. " +
	"No other usage is guaranteed across distributions of " + naming.Product + " clusters."

// Options configure the controller.
type Options struct {
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller keeps naming.RootCAConfigMap in every namespace in line with the root CA bundle.
type Controller struct {
	client     kubernetes.Interface
	rootCA     string
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      *runner.Queue
	log        *slog.Logger
}

// New builds the controller and registers its event handlers; it acts once Run is called.
// configMaps should watch only ConfigMaps named naming.RootCAConfigMap (a field selector on
// metadata.name), so that the controller does not cache every ConfigMap of the cluster; others
// are ignored anyway. rootCA is the PEM bundle to publish; it must not be empty.
func New(client kubernetes.Interface, namespaces coreinformers.NamespaceInformer, configMaps coreinformers.ConfigMapInformer, rootCA []byte, opts Options) (*Controller, error) {
	if len(rootCA) == 0 {
		return nil, errors.New("root CA publisher: no root CA bundle to publish")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:     client,
		rootCA:     string(rootCA),
		namespaces: namespaces.Lister(),
		configMaps: configMaps.Lister(),
		synced:     []cache.InformerSynced{namespaces.Informer().HasSynced, configMaps.Informer().HasSynced},
		log:        opts.Log,
	}
	c.queue = runner.New(runner.Options{Controller: Name, Name: queueName, Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	// Upstream reacts to updates and deletions of the ConfigMap. Additions are watched too: one
	// created by someone else just before the controller's own create makes that create fail
	// with AlreadyExists, and the addition is what brings its content to be checked.
	if _, err := configMaps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueConfigMap,
		UpdateFunc: func(_, obj any) { c.enqueueConfigMap(obj) },
		DeleteFunc: c.enqueueConfigMap,
	}); err != nil {
		return nil, err
	}
	// As upstream: every new namespace, and every update of an active one (which includes the
	// informer's periodic resync, repairing anything a failed sync left behind).
	if _, err := namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				c.queue.Add(ns.Name)
			}
		},
		UpdateFunc: func(_, obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase == corev1.NamespaceActive {
				c.queue.Add(ns.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueueConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == naming.RootCAConfigMap {
		c.queue.Add(cm.Namespace)
	}
}

// Run waits for the informers, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.queue.ShutDown()
		return
	}
	c.log.Info("publishing the root CA bundle", "configmap", naming.RootCAConfigMap)
	c.queue.Run(ctx, workers)
}

// sync makes one namespace's ConfigMap what it should be.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		// Gone, or not seen yet: its addition queues it again.
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		// The namespace controller is emptying it; recreating what it deletes would only fight
		// it, and nothing new can start there to read the bundle.
		return nil
	}
	cms := c.client.CoreV1().ConfigMaps(namespace)
	cm, err := c.configMaps.ConfigMaps(namespace).Get(naming.RootCAConfigMap)
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, Desired(nil, c.rootCA), metav1.CreateOptions{})
		switch {
		case err == nil:
			c.log.Info("created the root CA ConfigMap", "namespace", namespace)
			return nil
		case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// As upstream: no retry when the namespace is gone or started terminating since the
			// lister saw it (403 with the NamespaceTerminating cause).
			return nil
		case apierrors.IsAlreadyExists(err):
			// Created meanwhile; its addition queues the namespace again to check the content.
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	want := Desired(cm, c.rootCA)
	if want == nil {
		return nil
	}
	_, err = cms.Update(ctx, want, metav1.UpdateOptions{})
	switch {
	case err == nil:
		c.log.Info("restored the root CA ConfigMap", "namespace", namespace)
		return nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// Changed or deleted since the lister saw it: that event queues the namespace again.
		return nil
	}
	return err
}

// Desired is what the ConfigMap must become: for cm nil, the ConfigMap to create; nil when cm's
// data is exactly {CAKey: rootCA} and it has a non-empty naming.DescriptionAnnotation (any text:
// upstream leaves an edited description alone); otherwise a copy of cm with that data and
// Description as the annotation (as upstream, which rewrites both together), its other labels,
// annotations and binary data untouched.
func Desired(cm *corev1.ConfigMap, rootCA string) *corev1.ConfigMap {
	data := map[string]string{CAKey: rootCA}
	if cm == nil {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:        naming.RootCAConfigMap,
				Annotations: map[string]string{naming.DescriptionAnnotation: Description},
			},
			Data: data,
		}
	}
	if maps.Equal(cm.Data, data) && cm.Annotations[naming.DescriptionAnnotation] != "" {
		return nil
	}
	out := cm.DeepCopy()
	out.Data = data
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[naming.DescriptionAnnotation] = Description
	return out
}
