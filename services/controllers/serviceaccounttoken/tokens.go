// Package serviceaccounttoken is the token controller (upstream's "serviceaccount-token"): it
// fills Secrets of type naming.SecretTypeServiceAccountToken that name a ServiceAccount with a
// non-expiring token, the root CA and the namespace, deletes them when their account is gone (or
// replaced: the uid differs), and drops a deleted Secret from its account's secrets list. As
// upstream since 1.24, it never creates token Secrets on its own.
package serviceaccounttoken

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"platform.io/libs/naming"
	"platform.io/libs/serviceaccount"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "serviceaccount-token"

// maxRetries bounds the retries of one key, as upstream's token controller.
const maxRetries = 10

// TokenGenerator signs the non-expiring token of a token Secret for its account (the issuer of
// legacy service account tokens implements it).
type TokenGenerator interface {
	GenerateToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error)
}

// TokenGeneratorFunc adapts a function to TokenGenerator (for example an issuer's method value:
// TokenGeneratorFunc(issuer.IssueLegacy)).
type TokenGeneratorFunc func(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error)

// GenerateToken calls f.
func (f TokenGeneratorFunc) GenerateToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	return f(sa, secret)
}

// Options configure the controller.
type Options struct {
	// Generator signs the tokens (required).
	Generator TokenGenerator
	// RootCA is put in every token Secret as ca.crt (empty: no ca.crt).
	RootCA  []byte
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller is the token controller.
type Controller struct {
	client      kubernetes.Interface
	generator   TokenGenerator
	rootCA      []byte
	sas         corelisters.ServiceAccountLister
	secrets     corelisters.SecretLister
	synced      []cache.InformerSynced
	saQueue     *runner.Queue
	secretQueue *runner.Queue
	log         *slog.Logger
}

// New builds the controller and registers its event handlers. secrets may be an informer of all
// Secrets or of the token Secrets only (upstream selects type=<token type>); other types are
// ignored either way.
func New(client kubernetes.Interface, sas coreinformers.ServiceAccountInformer, secrets coreinformers.SecretInformer, opts Options) (*Controller, error) {
	if opts.Generator == nil {
		return nil, errors.New("a token generator is required")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:    client,
		generator: opts.Generator,
		rootCA:    opts.RootCA,
		sas:       sas.Lister(),
		secrets:   secrets.Lister(),
		synced:    []cache.InformerSynced{sas.Informer().HasSynced, secrets.Informer().HasSynced},
		log:       opts.Log,
	}
	c.saQueue = runner.New(runner.Options{Controller: Name, Name: "serviceaccount_tokens_service", Sync: c.syncServiceAccount, MaxRetries: maxRetries, Metrics: opts.Metrics, Log: opts.Log})
	c.secretQueue = runner.New(runner.Options{Controller: Name, Name: "serviceaccount_tokens_secret", Sync: c.syncSecret, MaxRetries: maxRetries, Metrics: opts.Metrics, Log: opts.Log})
	if _, err := sas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.queueServiceAccount,
		UpdateFunc: func(_, obj any) { c.queueServiceAccount(obj) },
		DeleteFunc: c.queueServiceAccount,
	}); err != nil {
		return nil, err
	}
	if _, err := secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s := secretOf(obj)
			return s != nil && s.Type == corev1.SecretType(naming.SecretTypeServiceAccountToken)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.queueSecret,
			UpdateFunc: func(_, obj any) { c.queueSecret(obj) },
			DeleteFunc: c.queueSecret,
		},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run waits for the informers, then works until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		c.saQueue.ShutDown()
		c.secretQueue.ShutDown()
		return
	}
	done := make(chan struct{})
	go func() { c.saQueue.Run(ctx, workers); close(done) }()
	c.secretQueue.Run(ctx, workers)
	<-done
}

// accountKey names a ServiceAccount as it was seen (the uid tells a recreated one apart).
type accountKey struct {
	Namespace string    `json:"ns"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

// secretKey names a token Secret and the account its annotations named when it was seen.
type secretKey struct {
	Namespace string    `json:"ns"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	SAName    string    `json:"saName"`
	SAUID     types.UID `json:"saUID"`
}

func encodeKey(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (c *Controller) queueServiceAccount(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return
	}
	c.saQueue.Add(encodeKey(accountKey{Namespace: sa.Namespace, Name: sa.Name, UID: sa.UID}))
}

func secretOf(obj any) *corev1.Secret {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, _ := obj.(*corev1.Secret)
	return s
}

func (c *Controller) queueSecret(obj any) {
	s := secretOf(obj)
	if s == nil {
		return
	}
	c.secretQueue.Add(encodeKey(secretKey{
		Namespace: s.Namespace, Name: s.Name, UID: s.UID,
		SAName: s.Annotations[naming.ServiceAccountNameAnnotation],
		SAUID:  types.UID(s.Annotations[naming.ServiceAccountUIDAnnotation]),
	}))
}

// syncServiceAccount deletes the token Secrets of an account that is gone (or was replaced by
// one with another uid).
func (c *Controller) syncServiceAccount(ctx context.Context, key string) error {
	var k accountKey
	if err := json.Unmarshal([]byte(key), &k); err != nil {
		return nil
	}
	sa, err := c.serviceAccount(ctx, k.Namespace, k.Name, k.UID, false)
	if err != nil || sa != nil {
		return err
	}
	gone := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, UID: k.UID}}
	secrets, err := c.secrets.Secrets(k.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range secrets {
		if !IsServiceAccountToken(s, gone) {
			continue
		}
		if err := c.deleteSecret(ctx, s.Namespace, s.Name, s.UID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncSecret fills a token Secret whose account exists, deletes one whose account does not, and
// drops a deleted Secret from its account's secrets list.
func (c *Controller) syncSecret(ctx context.Context, key string) error {
	var k secretKey
	if err := json.Unmarshal([]byte(key), &k); err != nil {
		return nil
	}
	secret, err := c.secret(k.Namespace, k.Name, k.UID)
	if err != nil {
		return err
	}
	if secret == nil {
		sa, err := c.serviceAccount(ctx, k.Namespace, k.SAName, k.SAUID, false)
		if err != nil || sa == nil {
			return err
		}
		return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			return c.removeSecretReference(ctx, k.Namespace, k.SAName, k.SAUID, k.Name)
		})
	}
	if k.SAName == "" {
		// Names no account: upstream's API refuses such a Secret; it is left alone.
		return nil
	}
	sa, err := c.serviceAccount(ctx, k.Namespace, k.SAName, k.SAUID, true)
	if err != nil {
		return err
	}
	if sa == nil {
		c.log.Info("deleting token secret: its service account does not exist", "namespace", k.Namespace, "secret", k.Name, "serviceAccount", k.SAName)
		return c.deleteSecret(ctx, k.Namespace, k.Name, k.UID)
	}
	return c.fill(ctx, sa, secret)
}

// IsServiceAccountToken tells whether secret is a token Secret of sa: its type, the account's
// name, and the account's uid unless the Secret names none yet.
func IsServiceAccountToken(secret *corev1.Secret, sa *corev1.ServiceAccount) bool {
	if secret.Type != corev1.SecretType(naming.SecretTypeServiceAccountToken) {
		return false
	}
	if secret.Annotations[naming.ServiceAccountNameAnnotation] != sa.Name {
		return false
	}
	uid := secret.Annotations[naming.ServiceAccountUIDAnnotation]
	return uid == "" || uid == string(sa.UID)
}

// serviceAccount returns the account named, or nil when it does not exist or has another uid
// than a non-empty uid. fetch asks the API when the informer has not seen it (it may be new).
func (c *Controller) serviceAccount(ctx context.Context, namespace, name string, uid types.UID, fetch bool) (*corev1.ServiceAccount, error) {
	if name == "" {
		return nil, nil
	}
	sa, err := c.sas.ServiceAccounts(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if sa != nil && err == nil {
		if uid == "" || uid == sa.UID {
			return sa, nil
		}
	}
	if !fetch {
		return nil, nil
	}
	sa, err = c.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if uid == "" || uid == sa.UID {
		return sa, nil
	}
	return nil, nil
}

// secret returns the Secret from the informer, or nil when it is gone or was replaced.
func (c *Controller) secret(namespace, name string, uid types.UID) (*corev1.Secret, error) {
	s, err := c.secrets.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if uid != "" && uid != s.UID {
		return nil, nil
	}
	return s, nil
}

// deleteSecret deletes a token Secret if it is still the one seen (uid precondition). Gone or
// replaced is success.
func (c *Controller) deleteSecret(ctx context.Context, namespace, name string, uid types.UID) error {
	var opts metav1.DeleteOptions
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.client.CoreV1().Secrets(namespace).Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// updateNeeded tells which of ca.crt, namespace and token a Secret lacks.
func (c *Controller) updateNeeded(s *corev1.Secret) (ca, namespace, token bool) {
	ca = len(c.rootCA) > 0 && !bytes.Equal(s.Data[corev1.ServiceAccountRootCAKey], c.rootCA)
	namespace = len(s.Data[corev1.ServiceAccountNamespaceKey]) == 0
	token = len(s.Data[corev1.ServiceAccountTokenKey]) == 0
	return ca, namespace, token
}

// fill writes what a token Secret lacks, to a fresh copy read from the API: only when that copy
// is what the informer saw, so a concurrent change is looked at again when its event arrives.
func (c *Controller) fill(ctx context.Context, sa *corev1.ServiceAccount, cached *corev1.Secret) error {
	if ca, ns, tok := c.updateNeeded(cached); !ca && !ns && !tok {
		return nil
	}
	secrets := c.client.CoreV1().Secrets(cached.Namespace)
	live, err := secrets.Get(ctx, cached.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live.ResourceVersion != cached.ResourceVersion {
		return nil
	}
	needCA, needNS, needToken := c.updateNeeded(live)
	if !needCA && !needNS && !needToken {
		return nil
	}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	if needCA {
		live.Data[corev1.ServiceAccountRootCAKey] = c.rootCA
	}
	if needNS {
		live.Data[corev1.ServiceAccountNamespaceKey] = []byte(live.Namespace)
	}
	if needToken {
		token, err := c.generator.GenerateToken(sa, live)
		if err != nil {
			return fmt.Errorf("generating the token of secret %s/%s: %w", live.Namespace, live.Name, err)
		}
		live.Data[corev1.ServiceAccountTokenKey] = []byte(token)
	}
	live.Annotations[naming.ServiceAccountNameAnnotation] = sa.Name
	live.Annotations[naming.ServiceAccountUIDAnnotation] = string(sa.UID)
	_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Changed or deleted meanwhile: its event brings it back here.
		return nil
	}
	if err == nil {
		c.log.Info("filled service account token secret", "namespace", live.Namespace, "secret", live.Name, "serviceAccount", sa.Name)
	}
	return err
}

// removeSecretReference drops a deleted Secret from its account's secrets list.
func (c *Controller) removeSecretReference(ctx context.Context, namespace, saName string, saUID types.UID, secretName string) error {
	sas := c.client.CoreV1().ServiceAccounts(namespace)
	sa, err := sas.Get(ctx, saName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if saUID != "" && saUID != sa.UID {
		return nil
	}
	kept := make([]corev1.ObjectReference, 0, len(sa.Secrets))
	for _, ref := range sa.Secrets {
		if ref.Name != secretName {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(sa.Secrets) {
		return nil
	}
	sa.Secrets = kept
	_, err = sas.Update(ctx, sa, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// NewSigner builds the TokenGenerator that signs Secret-based tokens with the service account
// private key in keyFile (--service-account-private-key-file), as upstream's controller manager
// does: legacy claims, the legacy issuer.
func NewSigner(keyFile string) (TokenGenerator, error) {
	key, err := serviceaccount.LoadSigningKey(keyFile)
	if err != nil {
		return nil, err
	}
	iss, err := serviceaccount.NewIssuer(naming.LegacyServiceAccountIssuer, key)
	if err != nil {
		return nil, err
	}
	return TokenGeneratorFunc(iss.IssueLegacy), nil
}
