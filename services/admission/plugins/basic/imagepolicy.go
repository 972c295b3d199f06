package basic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	imagepolicyv1alpha1 "k8s.io/api/imagepolicy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// imagePolicyWebhook is ImagePolicyWebhook: before a pod (or its new ephemeral containers) is
// admitted, a backend named by a kubeconfig file is asked, with an ImageReview, whether its
// images may run. Answers are cached (allowed for allowTTL, denied for denyTTL, keyed by the
// review's spec); transient failures are retried with exponential backoff; when the backend
// cannot answer, defaultAllow decides (a fail-open admission is recorded as an audit
// annotation). The backend's audit annotations are recorded under the plugin's prefix.
//
// On the wire the review is ImageReview in imagepolicy.<suffix>/v1alpha1 (the spec's group:
// imagepolicy.platform.io); answers in that group or in upstream's are read alike, as are
// answers that name no apiVersion.
type imagePolicyWebhook struct {
	log          *slog.Logger
	now          func() time.Time
	client       *http.Client
	url          string
	allowTTL     time.Duration
	denyTTL      time.Duration
	retryBackoff time.Duration
	defaultAllow bool

	mu    sync.Mutex
	cache *lru[imagepolicyv1alpha1.ImageReviewStatus]
}

// ImagePolicyWebhookConfig is the plugin's configuration, as upstream's.
type ImagePolicyWebhookConfig struct {
	// ImagePolicy is the plugin's settings (upstream's single key).
	ImagePolicy struct {
		// KubeConfigFile names the kubeconfig file whose cluster is the backend (server URL and
		// CA) and whose user is the credential presented to it.
		KubeConfigFile string `json:"kubeConfigFile"`
		// AllowTTL and DenyTTL are how many seconds an allowed or denied answer is cached: 0 for
		// the default (300 and 30), -1 for no caching, else 1 to 1800.
		AllowTTL int64 `json:"allowTTL"`
		DenyTTL  int64 `json:"denyTTL"`
		// RetryBackoff is the first wait, in milliseconds, before retrying a transient failure
		// (0: 500; -1: no wait; else at most 300000); waits grow 1.5 times, five tries in all.
		RetryBackoff int64 `json:"retryBackoff"`
		// DefaultAllow admits pods when the backend cannot answer.
		DefaultAllow bool `json:"defaultAllow"`
	} `json:"imagePolicy"`
}

// Identifiers of the review and of the plugin's annotations.
var (
	imageReviewGroup = naming.Group("imagepolicy.k8s.io")
	// imageReviewAPIVersion is what reviews are sent as.
	imageReviewAPIVersion = imageReviewGroup + "/v1alpha1"
	// imagePolicyAuditPrefix starts the audit annotations the plugin records (upstream
	// imagepolicywebhook.image-policy.k8s.io/).
	imagePolicyAuditPrefix = strings.ToLower(admission.ImagePolicyWebhook) + naming.ImagePolicyAnnotationInfix
)

// Upstream's bounds and defaults of the configuration's durations.
const (
	defaultRetryBackoff = 500 * time.Millisecond
	maxRetryBackoff     = 5 * time.Minute
	defaultAllowTTL     = 5 * time.Minute
	defaultDenyTTL      = 30 * time.Second
	minTTL              = time.Second
	maxTTL              = 30 * time.Minute
	// imagePolicyRequestTimeout bounds one call to the backend (upstream's webhook client).
	imagePolicyRequestTimeout = 30 * time.Second
	// imagePolicyCacheSize is how many distinct reviews' answers are kept.
	imagePolicyCacheSize = 1024
	// retrySteps is how many calls a review makes at most.
	retrySteps = 5
)

// normalizeDuration reads a configured duration: -1 disables (zero), 0 takes the default,
// anything else is scaled and must lie within [min, max].
func normalizeDuration(name string, v int64, scale, min, max, def time.Duration) (time.Duration, error) {
	switch v {
	case -1:
		return 0, nil
	case 0:
		return def, nil
	}
	d := time.Duration(v) * scale
	if d < min || d > max {
		return 0, fmt.Errorf("%s: valid value is between %v and %v, got %v", name, min, max, d)
	}
	return d, nil
}

func newImagePolicyWebhook(deps admission.Deps, config []byte) (admission.Plugin, error) {
	name := admission.ImagePolicyWebhook
	if len(config) == 0 {
		return nil, fmt.Errorf("%s: no config specified", name)
	}
	var c ImagePolicyWebhookConfig
	if err := decodeJSON(config, &c); err != nil {
		return nil, fmt.Errorf("%s: reading the configuration: %w", name, err)
	}
	ic := c.ImagePolicy
	backoff, err := normalizeDuration("retryBackoff", ic.RetryBackoff, time.Millisecond, time.Nanosecond, maxRetryBackoff, defaultRetryBackoff)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	allowTTL, err := normalizeDuration("allowTTL", ic.AllowTTL, time.Second, minTTL, maxTTL, defaultAllowTTL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	denyTTL, err := normalizeDuration("denyTTL", ic.DenyTTL, time.Second, minTTL, maxTTL, defaultDenyTTL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if ic.KubeConfigFile == "" {
		return nil, fmt.Errorf("%s: imagePolicy.kubeConfigFile is required", name)
	}
	// Only the named file is read (not $KUBECONFIG or the user's), with its relative paths
	// resolved against its own directory.
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: ic.KubeConfigFile}, &clientcmd.ConfigOverrides{})
	restConfig, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: imagePolicy.kubeConfigFile %s: %w", name, ic.KubeConfigFile, err)
	}
	restConfig.Timeout = imagePolicyRequestTimeout
	client, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		return nil, fmt.Errorf("%s: imagePolicy.kubeConfigFile %s: %w", name, ic.KubeConfigFile, err)
	}
	url := restConfig.Host
	if !strings.Contains(url, "://") {
		url = "https://" + url
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("the ImagePolicyWebhook admission plugin is deprecated upstream: prefer a validating admission webhook", slog.String("plugin", name))
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &imagePolicyWebhook{
		log:          log.With(slog.String("plugin", name)),
		now:          now,
		client:       client,
		url:          url,
		allowTTL:     allowTTL,
		denyTTL:      denyTTL,
		retryBackoff: backoff,
		defaultAllow: ic.DefaultAllow,
		cache:        newLRU[imagepolicyv1alpha1.ImageReviewStatus](imagePolicyCacheSize),
	}, nil
}

func (*imagePolicyWebhook) Name() string { return admission.ImagePolicyWebhook }

// Interests: pod creates and updates, and updates of the ephemeralcontainers subresource.
func (*imagePolicyWebhook) Interests() []admission.Interest {
	return []admission.Interest{{
		Operations: []admission.Operation{admission.Create, admission.Update},
		APIGroups:  []string{""},
		Resources:  []string{"pods", "pods/ephemeralcontainers"},
		Scope:      "Namespaced",
	}}
}

func (p *imagePolicyWebhook) Validate(ctx context.Context, a *admission.Attributes) error {
	if !a.Is("", "pods", "") && !a.Is("", "pods", "ephemeralcontainers") {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
	}
	var containers []imagepolicyv1alpha1.ImageReviewContainerSpec
	if a.Subresource == "" {
		for _, c := range pod.Spec.Containers {
			containers = append(containers, imagepolicyv1alpha1.ImageReviewContainerSpec{Image: c.Image})
		}
		for _, c := range pod.Spec.InitContainers {
			containers = append(containers, imagepolicyv1alpha1.ImageReviewContainerSpec{Image: c.Image})
		}
	} else {
		for _, c := range pod.Spec.EphemeralContainers {
			containers = append(containers, imagepolicyv1alpha1.ImageReviewContainerSpec{Image: c.Image})
		}
	}
	annotations := map[string]string{}
	for k, v := range pod.Annotations {
		if strings.Contains(k, naming.ImagePolicyAnnotationInfix) {
			annotations[k] = v
		}
	}
	review := &imagepolicyv1alpha1.ImageReview{Spec: imagepolicyv1alpha1.ImageReviewSpec{
		Containers: containers, Annotations: annotations, Namespace: a.Namespace,
	}}
	review.APIVersion, review.Kind = imageReviewAPIVersion, "ImageReview"
	if err := p.review(ctx, a, review); err != nil {
		return forbidden(a, err)
	}
	return nil
}

// review decides one review: from the cache, else from the backend.
func (p *imagePolicyWebhook) review(ctx context.Context, a *admission.Attributes, review *imagepolicyv1alpha1.ImageReview) error {
	keyBytes, err := json.Marshal(review.Spec)
	if err != nil {
		return err
	}
	key := string(keyBytes)
	p.mu.Lock()
	status, cached := p.cache.get(key, p.now())
	p.mu.Unlock()
	if !cached {
		status, err = p.call(ctx, review)
		if err != nil {
			return p.backendFailed(ctx, a, err)
		}
		ttl := p.denyTTL
		if status.Allowed {
			ttl = p.allowTTL
		}
		if ttl > 0 {
			p.mu.Lock()
			p.cache.add(key, status, p.now().Add(ttl))
			p.mu.Unlock()
		}
	}
	for k, v := range status.AuditAnnotations {
		a.AddAnnotation(imagePolicyAuditPrefix+k, v)
	}
	if !status.Allowed {
		if status.Reason != "" {
			return fmt.Errorf("image policy webhook backend denied one or more images: %s", status.Reason)
		}
		return errors.New("one or more images rejected by webhook backend")
	}
	return nil
}

// backendFailed applies defaultAllow to a backend that could not answer.
func (p *imagePolicyWebhook) backendFailed(ctx context.Context, a *admission.Attributes, err error) error {
	p.log.InfoContext(ctx, "error contacting the image policy backend", slog.String("err", err.Error()), slog.Bool("defaultAllow", p.defaultAllow))
	if p.defaultAllow {
		a.AddAnnotation(imagePolicyAuditPrefix+"failed-open", "true")
		return nil
	}
	return forbidden(a, err)
}

// call posts the review, retrying transient failures with exponential backoff (1.5 times, 20%
// jitter, five calls at most, within ctx), and returns the backend's status.
func (p *imagePolicyWebhook) call(ctx context.Context, review *imagepolicyv1alpha1.ImageReview) (imagepolicyv1alpha1.ImageReviewStatus, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return imagepolicyv1alpha1.ImageReviewStatus{}, err
	}
	wait := p.retryBackoff
	var lastErr error
	for attempt := 0; attempt < retrySteps; attempt++ {
		if attempt > 0 {
			jittered := wait + time.Duration(rand.Float64()*0.2*float64(wait))
			select {
			case <-ctx.Done():
				return imagepolicyv1alpha1.ImageReviewStatus{}, lastErr
			case <-time.After(jittered):
			}
			wait = time.Duration(float64(wait) * 1.5)
		}
		status, retry, err := p.post(ctx, body)
		if err == nil {
			return status, nil
		}
		lastErr = err
		if !retry {
			break
		}
	}
	return imagepolicyv1alpha1.ImageReviewStatus{}, lastErr
}

// post makes one call; retry tells whether a failure is worth another (connection resets,
// 429, 500, 504, and any answer naming a Retry-After).
func (p *imagePolicyWebhook) post(ctx context.Context, body []byte) (imagepolicyv1alpha1.ImageReviewStatus, bool, error) {
	var none imagepolicyv1alpha1.ImageReviewStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return none, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return none, isConnectionReset(err), err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 3<<20))
	if err != nil {
		return none, isConnectionReset(err), err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusInternalServerError ||
			resp.StatusCode == http.StatusGatewayTimeout || resp.Header.Get("Retry-After") != ""
		return none, retry, fmt.Errorf("Error contacting webhook: %d", resp.StatusCode)
	}
	var answer imagepolicyv1alpha1.ImageReview
	if err := json.Unmarshal(data, &answer); err != nil {
		return none, false, fmt.Errorf("decoding the image policy backend's answer: %w", err)
	}
	if answer.APIVersion != "" || answer.Kind != "" {
		group, version, _ := strings.Cut(answer.APIVersion, "/")
		if answer.Kind != "ImageReview" || naming.Group(group) != imageReviewGroup || version != "v1alpha1" {
			return none, false, fmt.Errorf("the image policy backend answered %s %s, not ImageReview %s", answer.APIVersion, answer.Kind, imageReviewAPIVersion)
		}
	}
	return answer.Status, false, nil
}

// isConnectionReset tells whether err is a connection the backend reset or dropped mid-way.
func isConnectionReset(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne *net.OpError
	return errors.As(err, &ne) && strings.Contains(ne.Err.Error(), "connection reset")
}
