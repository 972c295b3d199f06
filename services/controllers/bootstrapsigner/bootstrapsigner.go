// Package bootstrapsigner is the bootstrap signer (upstream's "bootstrapsigner", off by
// default): the cluster-info ConfigMap of naming.PublicNamespace carries, for every bootstrap
// token that may sign (usage-bootstrap-signing "true", not expired), the entry
// jws-kubeconfig-<token-id> with the detached JWS of its kubeconfig; entries of tokens that are
// gone, expired or no longer signing are removed. A joining client that holds a token checks the
// kubeconfig it read with it. When cluster-info does not exist, it is created with a kubeconfig
// holding only the cluster (server and certificate-authority-data), as kubeadm writes it.
package bootstrapsigner

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"platform.io/libs/naming"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "bootstrapsigner"

// key is the only key of the queue: every change leads to one look at cluster-info.
const key = "cluster-info"

// Options configure the controller.
type Options struct {
	// Server and RootCA make the kubeconfig of a cluster-info this controller creates.
	Server string
	RootCA []byte
	// Now tells the time (default time.Now).
	Now     func() time.Time
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller signs cluster-info.
type Controller struct {
	client     kubernetes.Interface
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      *runner.Queue
	opts       Options
	log        *slog.Logger
}

// New builds the controller and registers its event handlers. secrets should hold the system
// namespace's Secrets (others are ignored), configMaps the public namespace's ConfigMaps (only
// cluster-info matters).
func New(client kubernetes.Interface, secrets coreinformers.SecretInformer, configMaps coreinformers.ConfigMapInformer, opts Options) (*Controller, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:     client,
		secrets:    secrets.Lister(),
		configMaps: configMaps.Lister(),
		synced:     []cache.InformerSynced{secrets.Informer().HasSynced, configMaps.Informer().HasSynced},
		opts:       opts,
		log:        opts.Log,
	}
	c.queue = runner.New(runner.Options{Controller: Name, Name: "bootstrap_signer_queue", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(key) },
		UpdateFunc: func(_, _ any) { c.queue.Add(key) },
		DeleteFunc: func(any) { c.queue.Add(key) },
	}
	if _, err := secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s, ok := obj.(*corev1.Secret)
			return ok && bootstraptoken.IsBootstrapToken(s)
		},
		Handler: enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := configMaps.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			cm, ok := obj.(*corev1.ConfigMap)
			return ok && cm.Namespace == naming.PublicNamespace && cm.Name == bootstraptoken.ConfigMapClusterInfo
		},
		Handler: enqueue,
	}); err != nil {
		return nil, err
	}
	// The first look creates cluster-info when it does not exist (no event would ask for it).
	c.queue.Add(key)
	return c, nil
}

// Run waits for the informers, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.queue.ShutDown()
		return
	}
	c.queue.Run(ctx, 1)
}

// ClusterInfoKubeconfig is the kubeconfig of a new cluster-info: the cluster only, no user.
func ClusterInfoKubeconfig(server string, rootCA []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: rootCA}
	return clientcmd.Write(*cfg)
}

// signingTokens are the tokens that may sign now (id to secret), and the time until the first of
// them expires (0: none expires).
func (c *Controller) signingTokens() (map[string]string, time.Duration, error) {
	list, err := c.secrets.Secrets(naming.SystemNamespace).List(labels.Everything())
	if err != nil {
		return nil, 0, err
	}
	// By name, so that of two Secrets claiming one id the same one wins every time.
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	now := c.opts.Now()
	tokens := map[string]string{}
	var next time.Duration
	for _, s := range list {
		id, secret, ok := bootstraptoken.SigningToken(s, now)
		if !ok {
			continue
		}
		if _, dup := tokens[id]; dup {
			c.log.Warn("two bootstrap token secrets have one token id; the second is ignored", "tokenID", id, "secret", s.Name)
			continue
		}
		tokens[id] = secret
		if ttl, _ := bootstraptoken.Expiration(s, now); ttl > 0 && (next == 0 || ttl < next) {
			next = ttl
		}
	}
	return tokens, next, nil
}

func (c *Controller) sync(ctx context.Context, _ string) error {
	cm, err := c.configMaps.ConfigMaps(naming.PublicNamespace).Get(bootstraptoken.ConfigMapClusterInfo)
	if apierrors.IsNotFound(err) {
		return c.create(ctx)
	}
	if err != nil {
		return err
	}
	content, ok := cm.Data[bootstraptoken.KubeConfigKey]
	if !ok {
		// Nothing to sign (upstream leaves such a ConfigMap alone).
		return nil
	}
	tokens, next, err := c.signingTokens()
	if err != nil {
		return err
	}
	want := map[string]string{}
	for id, secret := range tokens {
		want[bootstraptoken.JWSSignaturePrefix+id] = bootstraptoken.DetachedSignature(content, id, secret)
	}
	changed := false
	for k, v := range cm.Data {
		if strings.HasPrefix(k, bootstraptoken.JWSSignaturePrefix) && want[k] != v {
			changed = true
		}
	}
	for k, v := range want {
		if cur, ok := cm.Data[k]; !ok || cur != v {
			changed = true
		}
	}
	if changed {
		next := cm.DeepCopy()
		for k := range next.Data {
			if strings.HasPrefix(k, bootstraptoken.JWSSignaturePrefix) {
				delete(next.Data, k)
			}
		}
		for k, v := range want {
			next.Data[k] = v
		}
		if _, err := c.client.CoreV1().ConfigMaps(naming.PublicNamespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating the signatures of %s/%s: %w", naming.PublicNamespace, bootstraptoken.ConfigMapClusterInfo, err)
		}
		c.log.Info("updated cluster-info signatures", "tokens", len(want))
	}
	if next > 0 {
		// A signing token expires then: its signature goes.
		return runner.RequeueAfter(next)
	}
	return nil
}

// create writes a new cluster-info; its event brings the signatures.
func (c *Controller) create(ctx context.Context) error {
	kubeconfig, err := ClusterInfoKubeconfig(c.opts.Server, c.opts.RootCA)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraptoken.ConfigMapClusterInfo, Namespace: naming.PublicNamespace},
		Data:       map[string]string{bootstraptoken.KubeConfigKey: string(kubeconfig)},
	}
	_, err = c.client.CoreV1().ConfigMaps(naming.PublicNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		c.log.Info("created cluster-info", "namespace", naming.PublicNamespace, "server", c.opts.Server)
	}
	return err
}
