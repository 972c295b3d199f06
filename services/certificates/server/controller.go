package server

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/certificates/signer"
)

// The stored type of CertificateSigningRequests.
var (
	// Group is the API group of CertificateSigningRequests.
	Group = naming.Group("certificates.k8s.io")
	// Resource is their stored resource name.
	Resource = "certificatesigningrequests"
	// APIVersion and Kind are written in the stored envelope, as the gateway writes them.
	APIVersion = Group + "/v1"
	Kind       = "CertificateSigningRequest"

	resourceType = &storagev1.ResourceType{Group: Group, Resource: Resource}
)

// ReasonSignerValidationFailure is the reason of the Failed condition of a request that breaks
// its signer's rules (upstream's).
const ReasonSignerValidationFailure = "SignerValidationFailure"

const (
	// syncTimeout bounds the handling of one request.
	syncTimeout = 30 * time.Second
	// maxCASAttempts bounds the re-reads after conflicting writes before the request is retried
	// later.
	maxCASAttempts = 5
	// Retries of a request whose handling failed back off from minRetry to maxRetry.
	minRetry = 100 * time.Millisecond
	maxRetry = 30 * time.Second
)

// metrics count the outcome of handled requests by signer, and, under upstream's names, whether
// the lifetime a request asked for (spec.expirationSeconds) was honored. Upstream counts the
// latter in its CSR registry for any signer that writes a certificate; here the built-in
// signers write theirs straight to storage (decision 54), so this service counts them.
type metrics struct {
	requests *prometheus.CounterVec
	honored  *prometheus.CounterVec
	dropped  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "certificates_signer_requests_total",
		Help: "Certificate signing requests handled by the built-in signers, by signer and result (signed: a certificate was issued; failed: the request broke the signer's rules and got the Failed condition).",
	}, []string{"signer", "result"}),
		honored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_certificates_registry_csr_honored_duration_total",
			Help: "Total number of issued CSRs with a requested duration that was honored, sliced by signer.",
		}, []string{"signerName"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_certificates_registry_csr_dropped_duration_total",
			Help: "Total number of issued CSRs with a requested duration that was ignored, sliced by signer.",
		}, []string{"signerName"}),
	}
	reg.MustRegister(m.requests, m.honored, m.dropped)
	return m
}

// issued counts a certificate issued for a request that asked for expirationSeconds (nil: not
// asked, not counted).
func (m *metrics) issued(signerName string, expirationSeconds *int32, certPEM []byte) {
	if expirationSeconds == nil {
		return
	}
	if durationHonored(time.Duration(*expirationSeconds)*time.Second, certPEM) {
		m.honored.WithLabelValues(signerName).Inc()
	} else {
		m.dropped.WithLabelValues(signerName).Inc()
	}
}

// durationHonored tells whether the certificate is valid for the requested duration: its
// NotAfter-NotBefore within signer.Backdate of it, since NotBefore is backdated and NotAfter is
// too unless the lifetime is short. A duration capped by the signer's maximum or the CA's expiry,
// or raised to signer.MinLifetime, is not honored.
func durationHonored(want time.Duration, certPEM []byte) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	delta := cert.NotAfter.Sub(cert.NotBefore) - want
	return delta >= -signer.Backdate && delta <= signer.Backdate
}

// controller signs the approved requests of the signers it runs.
type controller struct {
	client  *storage.Client
	inf     *storage.Informer[*certificatesv1.CertificateSigningRequest]
	signers map[string]*signer.Signer
	now     func() time.Time
	metrics *metrics
	log     *slog.Logger
	queue   *queue
	// failures counts consecutive failed handlings per request (worker goroutine only).
	failures map[string]int
}

func newController(client *storage.Client, signers map[string]*signer.Signer, now func() time.Time, m *metrics, log *slog.Logger) *controller {
	c := &controller{client: client, signers: signers, now: now, metrics: m, log: log, queue: newQueue(), failures: map[string]int{}}
	for name := range signers {
		// Each signer's series exist from the start: a dashboard shows zero, not no data.
		m.honored.WithLabelValues(name)
		m.dropped.WithLabelValues(name)
	}
	c.inf = storage.NewInformer(client, resourceType, func(o *storagev1.Object) (*certificatesv1.CertificateSigningRequest, error) {
		csr := &certificatesv1.CertificateSigningRequest{}
		if err := storage.DecodeStored(o.GetValue(), csr); err != nil {
			return nil, err
		}
		csr.ResourceVersion = strconv.FormatInt(o.GetResourceVersion(), 10)
		return csr, nil
	}, log)
	c.inf.OnChange(func(changes []storage.Change[*certificatesv1.CertificateSigningRequest]) {
		for _, ch := range changes {
			if ch.Type != storage.Deleted && c.signerFor(ch.New) != nil {
				c.queue.add(ch.Key)
			}
		}
	})
	return c
}

// run watches requests and handles them until ctx ends (done is closed then); synced is closed
// once the first list is in.
func (c *controller) run(ctx context.Context, done chan<- struct{}) (synced <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.inf.Run(ctx) }()
	go func() { defer wg.Done(); c.work(ctx) }()
	go func() { wg.Wait(); close(done) }()
	return c.inf.Synced()
}

// hasCondition tells whether the request has a condition of type t with status True.
func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// signerFor is the signer that must act on csr now: one this service runs, for a request
// approved, not denied, not failed and without a certificate; nil otherwise.
func (c *controller) signerFor(csr *certificatesv1.CertificateSigningRequest) *signer.Signer {
	if csr == nil || len(csr.Status.Certificate) > 0 {
		return nil
	}
	s := c.signers[csr.Spec.SignerName]
	if s == nil || !hasCondition(csr, certificatesv1.CertificateApproved) ||
		hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	return s
}

// work handles queued requests one at a time until ctx ends; a failed handling is retried with
// backoff.
func (c *controller) work(ctx context.Context) {
	for {
		key, ok := c.queue.get(ctx)
		if !ok {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, syncTimeout)
		err := c.sync(sctx, key)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			delete(c.failures, key)
			continue
		}
		n := c.failures[key]
		c.failures[key] = n + 1
		delay := minRetry << min(n, 12)
		if delay > maxRetry {
			delay = maxRetry
		}
		c.log.Warn("handling a certificate signing request failed; retrying", "name", key, "retry_in", delay.String(), "err", err)
		time.AfterFunc(delay, func() {
			if ctx.Err() == nil {
				c.queue.add(key)
			}
		})
	}
}

// get reads a request as stored now, with its revision.
func (c *controller) get(ctx context.Context, name string) (*certificatesv1.CertificateSigningRequest, int64, error) {
	resp, err := c.client.Get(ctx, &storagev1.GetRequest{Type: resourceType, Name: name})
	if err != nil {
		return nil, 0, err
	}
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := storage.DecodeStored(resp.GetObject().GetValue(), csr); err != nil {
		return nil, 0, fmt.Errorf("decoding %s %s: %w", Resource, name, err)
	}
	return csr, resp.GetObject().GetResourceVersion(), nil
}

// update writes csr if the stored revision is still rv.
func (c *controller) update(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, rv int64) error {
	out := csr.DeepCopy()
	out.ResourceVersion = ""
	value, err := storage.EncodeStored(APIVersion, Kind, out)
	if err != nil {
		return err
	}
	_, err = c.client.Update(ctx, &storagev1.UpdateRequest{
		Type: resourceType,
		Object: &storagev1.Object{Name: out.Name, Value: value, Uid: string(out.UID), Labels: out.Labels,
			Fields: map[string]string{"metadata.name": out.Name, "spec.signerName": out.Spec.SignerName}},
		Preconditions: &storagev1.Preconditions{ResourceVersion: rv},
	})
	return err
}

// sync signs one request, or marks it Failed when it breaks its signer's rules, by
// compare-and-swap: after a conflict (another replica, or a user, wrote it) it reads the request
// again and decides again, so a request another replica signed is left as it is.
func (c *controller) sync(ctx context.Context, name string) error {
	for range maxCASAttempts {
		csr, rv, err := c.get(ctx, name)
		if storage.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		s := c.signerFor(csr)
		if s == nil {
			return nil
		}
		now := c.now()
		result := "signed"
		req, verr := signer.ParseRequest(csr.Spec.Request)
		if verr == nil {
			verr = s.Validate(req, csr.Spec.Usages)
		}
		if verr == nil {
			cert, err := s.Sign(req, csr.Spec.Usages, csr.Spec.ExpirationSeconds, now)
			switch {
			case signer.IsValidation(err):
				verr = err
			case err != nil:
				return err
			default:
				csr.Status.Certificate = cert
			}
		}
		if verr != nil {
			result = "failed"
			t := metav1.NewTime(now)
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: ReasonSignerValidationFailure,
				Message: verr.Error(), LastUpdateTime: t, LastTransitionTime: t,
			})
		}
		err = c.update(ctx, csr, rv)
		switch {
		case storage.IsConflict(err):
			continue
		case storage.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		c.metrics.requests.WithLabelValues(s.Name(), result).Inc()
		if verr == nil {
			c.metrics.issued(s.Name(), csr.Spec.ExpirationSeconds, csr.Status.Certificate)
		}
		if verr != nil {
			c.log.Info("certificate signing request failed its signer's rules", "name", name, "signer", s.Name(), "requester", csr.Spec.Username, "reason", verr.Error())
		} else {
			c.log.Info("certificate signing request signed", "name", name, "signer", s.Name(), "requester", csr.Spec.Username)
		}
		return nil
	}
	return fmt.Errorf("request %s changed %d times while being handled", name, maxCASAttempts)
}

// queue is a FIFO of request keys, each queued at most once at a time.
type queue struct {
	mu     sync.Mutex
	items  []string
	queued map[string]bool
	wake   chan struct{}
}

func newQueue() *queue {
	return &queue{queued: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (q *queue) add(key string) {
	q.mu.Lock()
	if !q.queued[key] {
		q.queued[key] = true
		q.items = append(q.items, key)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// get takes the next key, waiting for one until ctx ends.
func (q *queue) get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			key := q.items[0]
			q.items = q.items[1:]
			delete(q.queued, key)
			q.mu.Unlock()
			return key, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-q.wake:
		}
	}
}
