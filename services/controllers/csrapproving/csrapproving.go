// Package csrapproving is the CertificateSigningRequest approving controller (upstream's
// "csrapproving", on by default): it approves the node client certificate requests their
// requesters are authorized to make, so that node agents bootstrap and renew their credentials
// without an administrator.
//
// A request is looked at when it is pending (none of Approved, Denied, Failed; no certificate),
// names the kubelet client signer (naming.SignerAPIServerClientKubelet) and its PKCS#10 request
// is a node client request: CN system:node:<name>, organization exactly [system:nodes], no
// subject alternative names, usages digital signature and client auth, with or without key encipherment
// (as upstream). The controller then asks a SubjectAccessReview, for the request's
// requester (spec.username, groups, extra, uid), of verb create on
// certificates.platform.io/certificatesigningrequests with the virtual subresource
// selfnodeclient when the requester is the node the certificate names (a renewal; nodeclient is
// asked next, as upstream), nodeclient otherwise (a bootstrap credential asking for some node's
// certificate). When allowed, it adds
// the Approved condition (reason AutoApproved) through the approval subresource; the signer
// then issues the certificate.
//
// A request whose requester is not (yet) authorized is looked at again with exponential backoff
// (200ms doubling up to 1000s, as upstream's certificate controllers retry), so a binding created
// afterwards still gets it approved.
package csrapproving

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"platform.io/libs/bootstrappolicy"
	"platform.io/libs/naming"
	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "csrapproving"

// DefaultWorkers is upstream's number of workers.
const DefaultWorkers = 5

// The virtual subresources of certificatesigningrequests the SubjectAccessReview asks about.
const (
	SubresourceNodeClient     = "nodeclient"
	SubresourceSelfNodeClient = "selfnodeclient"
)

// The Approved condition the controller adds (upstream's messages: one for a node renewing its
// own certificate, one for any other node client request).
const (
	ApprovedReason      = "AutoApproved"
	ApprovedMessage     = "Auto approving kubelet client certificate after SubjectAccessReview."
	SelfApprovedMessage = "Auto approving self kubelet client certificate after SubjectAccessReview."
)

// nodeUserPrefix starts the user name (and certificate CN) of a node agent.
const nodeUserPrefix = "system:node:"

// Retry spacing: upstream's certificate controllers' per-request backoff.
const (
	baseDelay = 200 * time.Millisecond
	maxDelay  = 1000 * time.Second
)

// Options configure the controller.
type Options struct {
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Controller approves authorized node client certificate requests.
type Controller struct {
	client  certificatesv1client.CertificateSigningRequestsGetter
	reviews authorizationv1client.SubjectAccessReviewsGetter
	csrs    certificateslisters.CertificateSigningRequestLister
	synced  cache.InformerSynced
	queue   *runner.Queue
	// backoff spaces the looks at requests whose requester was not authorized.
	backoff workqueue.TypedRateLimiter[string]
	log     *slog.Logger
}

// New builds the controller (the clients and informer of apiclient's clientset, which reach
// Platform's group names) and registers its event handlers.
func New(client certificatesv1client.CertificateSigningRequestsGetter, reviews authorizationv1client.SubjectAccessReviewsGetter,
	informer certificatesinformers.CertificateSigningRequestInformer, opts Options) (*Controller, error) {
	csrs := informer.Informer()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{
		client:  client,
		reviews: reviews,
		csrs:    informer.Lister(),
		synced:  csrs.HasSynced,
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](baseDelay, maxDelay),
		log:     opts.Log,
	}
	c.queue = runner.New(runner.Options{
		Controller: Name, Name: "certificate", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](baseDelay, maxDelay),
	})
	if _, err := csrs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
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
	csr, err := c.csrs.Get(key)
	if apierrors.IsNotFound(err) {
		c.backoff.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	subresources, ok := c.recognize(csr)
	if !ok {
		c.backoff.Forget(key)
		return nil
	}
	// As upstream, each permission that applies is asked in turn: a node renewing its own
	// certificate may be allowed either selfnodeclient or nodeclient.
	var allowed bool
	var subresource, reason string
	for _, subresource = range subresources {
		if allowed, reason, err = c.authorize(ctx, csr, subresource); err != nil {
			return err
		}
		if allowed {
			break
		}
	}
	if !allowed {
		// Not an error: the requester may be authorized later (a binding created afterwards).
		delay := c.backoff.When(key)
		c.log.Debug("node client certificate request not authorized", "name", csr.Name, "subresource", subresource,
			"user", csr.Spec.Username, "reason", reason, "retry", delay)
		return runner.RequeueAfter(delay)
	}
	approved := csr.DeepCopy()
	now := metav1.Now()
	approved.Status.Conditions = append(approved.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: ApprovedReason, Message: approvedMessage(subresource), LastUpdateTime: now, LastTransitionTime: now,
	})
	_, err = c.client.CertificateSigningRequests().UpdateApproval(ctx, csr.Name, approved, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.backoff.Forget(key)
		return nil
	case err != nil:
		// A conflict means the request changed: its update is queued and judged again.
		return fmt.Errorf("approving %s: %w", csr.Name, err)
	}
	c.backoff.Forget(key)
	c.log.Info("approved certificate signing request", "name", csr.Name, "subresource", subresource, "user", csr.Spec.Username)
	return nil
}

// approvedMessage is the Approved condition's message for the permission that allowed it.
func approvedMessage(subresource string) string {
	if subresource == SubresourceSelfNodeClient {
		return SelfApprovedMessage
	}
	return ApprovedMessage
}

// recognize tells whether csr is a pending node client certificate request, and which
// subresources its requester may be allowed to create, in the order they are asked.
func (c *Controller) recognize(csr *certificatesv1.CertificateSigningRequest) ([]string, bool) {
	if !pending(csr) || csr.Spec.SignerName != naming.SignerAPIServerClientKubelet {
		return nil, false
	}
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		// The gateway stores only parseable requests; nothing to approve in one that is not.
		c.log.Debug("certificate request not readable", "name", csr.Name, "error", err)
		return nil, false
	}
	if !IsNodeClientRequest(req, csr.Spec.Usages) {
		return nil, false
	}
	if csr.Spec.Username == req.Subject.CommonName {
		return []string{SubresourceSelfNodeClient, SubresourceNodeClient}, true
	}
	return []string{SubresourceNodeClient}, true
}

// authorize asks whether the request's requester may create the subresource.
func (c *Controller) authorize(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   csr.Spec.Username,
			UID:    csr.Spec.UID,
			Groups: csr.Spec.Groups,
			Extra:  extra(csr.Spec.Extra),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb:        "create",
				Group:       naming.Group(certificatesv1.GroupName),
				Version:     "*",
				Resource:    csrcleaner.Resource,
				Subresource: subresource,
			},
		},
	}
	out, err := c.reviews.SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview for %s: %w", csr.Name, err)
	}
	return out.Status.Allowed, out.Status.Reason, nil
}

func extra(in map[string]certificatesv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// pending: none of Approved, Denied, Failed, and no certificate issued.
func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	if len(csr.Status.Certificate) > 0 {
		return false
	}
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return true
}

// parseRequest reads the PEM CERTIFICATE REQUEST of spec.request.
func parseRequest(pemData []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemData)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM CERTIFICATE REQUEST block")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// nodeClientUsages are the usages a node client certificate may have.
var nodeClientUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth,
}

// IsNodeClientRequest tells whether req with usages asks for a node client certificate: CN
// system:node:<name> with a name, organization exactly [system:nodes], no subject alternative
// names, usages digital signature and client auth, with or without key encipherment (upstream's
// two sets).
func IsNodeClientRequest(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) bool {
	cn := req.Subject.CommonName
	if !strings.HasPrefix(cn, nodeUserPrefix) || len(cn) == len(nodeUserPrefix) {
		return false
	}
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != bootstrappolicy.GroupNodes {
		return false
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return false
	}
	// As upstream: exactly digital signature and client auth, with or without key encipherment.
	for _, u := range usages {
		if !slices.Contains(nodeClientUsages, u) {
			return false
		}
	}
	return slices.Contains(usages, certificatesv1.UsageClientAuth) && slices.Contains(usages, certificatesv1.UsageDigitalSignature)
}
