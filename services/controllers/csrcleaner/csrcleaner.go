// Package csrcleaner is the CertificateSigningRequest cleaner (upstream's "csrcleaner", on by
// default): it deletes requests that are done with, as the spec's garbage collection rule says.
// A request is deletable
//
//   - FinishedTTL (1 hour) after an Approved, Denied or Failed condition was set (the condition's
//     lastUpdateTime, as upstream; lastTransitionTime when that is missing),
//   - PendingTTL (24 hours) after its creation while it has none of those conditions,
//   - once the certificate it was issued (the first CERTIFICATE block of status.certificate) has
//     expired,
//
// whichever comes first. Upstream lists every request once an hour; this controller does the same
// pass every Interval and also looks at each request again at the moment it becomes deletable.
//
// The client and informer are client-go's typed ones over apiclient's clientset, which reaches
// certificates.platform.io/v1.
package csrcleaner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"

	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/runner"
)

// Name is the controller's name in --controllers.
const Name = "csrcleaner"

// Upstream's periods.
const (
	DefaultInterval    = time.Hour
	DefaultFinishedTTL = time.Hour
	DefaultPendingTTL  = 24 * time.Hour
)

// Resource is the served resource's name.
const Resource = "certificatesigningrequests"

// Options configure the controller.
type Options struct {
	// Now tells the time (default time.Now).
	Now func() time.Time
	// Interval is how often every request is looked at again (default DefaultInterval).
	Interval time.Duration
	// FinishedTTL and PendingTTL are the deadlines (defaults DefaultFinishedTTL and
	// DefaultPendingTTL).
	FinishedTTL, PendingTTL time.Duration
	Metrics                 *metrics.Metrics
	Log                     *slog.Logger
}

// Controller deletes CertificateSigningRequests past their deadlines.
type Controller struct {
	client certificatesv1client.CertificateSigningRequestsGetter
	csrs   certificateslisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	queue  *runner.Queue
	opts   Options
	log    *slog.Logger
}

// New builds the controller and registers its event handlers.
func New(client certificatesv1client.CertificateSigningRequestsGetter, informer certificatesinformers.CertificateSigningRequestInformer, opts Options) (*Controller, error) {
	csrs := informer.Informer()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.FinishedTTL <= 0 {
		opts.FinishedTTL = DefaultFinishedTTL
	}
	if opts.PendingTTL <= 0 {
		opts.PendingTTL = DefaultPendingTTL
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{client: client, csrs: informer.Lister(),
		synced: csrs.HasSynced, opts: opts, log: opts.Log}
	c.queue = runner.New(runner.Options{Controller: Name, Name: "csr_cleaner", Sync: c.sync, Metrics: opts.Metrics, Log: opts.Log})
	if _, err := csrs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
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

// Run waits for the informer, then works until ctx ends, queueing every request again each
// Interval.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		c.queue.ShutDown()
		return
	}
	go c.poll(ctx)
	c.queue.Run(ctx, workers)
}

// poll is upstream's periodic pass over every request.
func (c *Controller) poll(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		csrs, err := c.csrs.List(labels.Everything())
		if err != nil {
			continue
		}
		for _, csr := range csrs {
			c.queue.Add(csr.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	csr, err := c.csrs.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	when, why := c.deletableAt(csr)
	if when.IsZero() {
		// Nothing tells when (conditions without times): only the periodic pass looks again.
		return nil
	}
	now := c.opts.Now()
	if now.Before(when) {
		return runner.RequeueAfter(when.Sub(now))
	}
	// Deletes exactly the version judged: a request changed since (or recreated under the same
	// name) is judged again when its update arrives.
	uid, rv := csr.UID, csr.ResourceVersion
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{}}
	if uid != "" {
		opts.Preconditions.UID = &uid
	}
	if rv != "" {
		opts.Preconditions.ResourceVersion = &rv
	}
	err = c.client.CertificateSigningRequests().Delete(ctx, csr.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		// Retried with backoff (upstream logs and waits for its next pass).
		return err
	}
	if err == nil {
		c.log.Info("deleted certificate signing request", "name", csr.Name, "reason", why)
	}
	return nil
}

// deletableAt is the earliest moment a rule makes csr deletable and the rule's description (zero
// when no rule can tell).
func (c *Controller) deletableAt(csr *certificatesv1.CertificateSigningRequest) (time.Time, string) {
	var when time.Time
	var why string
	consider := func(t time.Time, reason string) {
		if !t.IsZero() && (when.IsZero() || t.Before(when)) {
			when, why = t, reason
		}
	}
	finished := false
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
		default:
			continue
		}
		finished = true
		set := cond.LastUpdateTime.Time
		if set.IsZero() {
			set = cond.LastTransitionTime.Time
		}
		if !set.IsZero() {
			consider(set.Add(c.opts.FinishedTTL), string(cond.Type)+" for "+c.opts.FinishedTTL.String())
		}
	}
	if !finished && !csr.CreationTimestamp.IsZero() {
		consider(csr.CreationTimestamp.Add(c.opts.PendingTTL), "Pending for "+c.opts.PendingTTL.String())
	}
	if notAfter, err := certificateExpiry(csr.Status.Certificate); err == nil {
		consider(notAfter, "issued certificate expired")
	} else if !errors.Is(err, errNoCertificate) {
		// The gateway only stores parseable certificates; should one not parse, the other rules
		// still apply (upstream skips the request altogether).
		c.log.Debug("issued certificate not readable", "name", csr.Name, "error", err)
	}
	return when, why
}

var errNoCertificate = errors.New("no certificate")

// certificateExpiry is the NotAfter of the first CERTIFICATE block of pemData (text outside the
// blocks is ignored, as the spec says).
func certificateExpiry(pemData []byte) (time.Time, error) {
	remaining := pemData
	for len(remaining) > 0 {
		var block *pem.Block
		block, remaining = pem.Decode(remaining)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, err
		}
		return cert.NotAfter, nil
	}
	return time.Time{}, errNoCertificate
}
