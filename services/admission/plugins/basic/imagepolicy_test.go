package basic

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	imagepolicyv1alpha1 "k8s.io/api/imagepolicy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/admission/admission"
)

// policyBackend is a real HTTPS image policy backend that requires a client certificate from
// the test CA, records what it is sent and answers as told.
type policyBackend struct {
	srv *httptest.Server
	ca  *pki.CA

	mu      sync.Mutex
	reviews []imagepolicyv1alpha1.ImageReview
	clients []string // client certificate CNs
	answer  func(r imagepolicyv1alpha1.ImageReview) (int, any)
}

func newPolicyBackend(t *testing.T) *policyBackend {
	t.Helper()
	ca, err := pki.NewCA("image-policy-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("image-policy", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	b := &policyBackend{ca: ca}
	b.answer = func(imagepolicyv1alpha1.ImageReview) (int, any) {
		return 200, map[string]any{"apiVersion": imageReviewAPIVersion, "kind": "ImageReview", "status": map[string]any{"allowed": true}}
	}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review imagepolicyv1alpha1.ImageReview
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/review" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request shape", http.StatusBadRequest)
			return
		}
		if err := json.Unmarshal(body, &review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.reviews = append(b.reviews, review)
		if len(r.TLS.PeerCertificates) > 0 {
			b.clients = append(b.clients, r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		answer := b.answer
		b.mu.Unlock()
		code, out := answer(review)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(out)
	}))
	b.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *policyBackend) setAnswer(f func(imagepolicyv1alpha1.ImageReview) (int, any)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answer = f
}

func (b *policyBackend) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reviews)
}

func (b *policyBackend) last() imagepolicyv1alpha1.ImageReview {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reviews[len(b.reviews)-1]
}

// kubeconfig writes a kubeconfig for the backend, trusting caPEM, with a client certificate
// from the backend's CA.
func (b *policyBackend) kubeconfig(t *testing.T, caPEM []byte) string {
	t.Helper()
	certPEM, keyPEM, err := b.ca.IssueClient("apiserver", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "imagepolicy.kubeconfig")
	if err := pki.WriteKubeconfig(path, pki.Kubeconfig{ClusterName: "backend", UserName: "apiserver", Server: b.srv.URL + "/review", CAPEM: caPEM, CertPEM: certPEM, KeyPEM: keyPEM}); err != nil {
		t.Fatal(err)
	}
	return path
}

func (b *policyBackend) plugin(t *testing.T, extra string) (admission.Plugin, *clock) {
	t.Helper()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	d := deps()
	d.Now = clk.Now
	cfg := fmt.Sprintf(`{"imagePolicy": {"kubeConfigFile": %q, "retryBackoff": 1%s}}`, b.kubeconfig(t, b.ca.CertPEM), extra)
	return build(t, admission.ImagePolicyWebhook, d, cfg), clk
}

func policyPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{
			"mycluster" + naming.ImagePolicyAnnotationInfix + "ticket": "1234",
			"other.example.com/x": "not sent",
		}},
		Spec: corev1.PodSpec{
			Containers:          []corev1.Container{{Name: "a", Image: "registry.example.com/a:1"}, {Name: "b", Image: "registry.example.com/b:1"}},
			InitContainers:      []corev1.Container{{Name: "i", Image: "registry.example.com/init:1"}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}},
		},
	}
}

func podCreate(pod *corev1.Pod) *admission.Attributes {
	return req(admission.Create, "", "pods", "", "Pod", "ns", pod, nil)
}

func TestImagePolicyWebhookReviews(t *testing.T) {
	b := newPolicyBackend(t)
	p, _ := b.plugin(t, "")

	t.Run("upstream: the review carries containers' and init containers' images, the policy annotations and the namespace", func(t *testing.T) {
		b.setAnswer(func(imagepolicyv1alpha1.ImageReview) (int, any) {
			return 200, map[string]any{"apiVersion": imageReviewAPIVersion, "kind": "ImageReview", "status": map[string]any{"allowed": true, "auditAnnotations": map[string]string{"checked-by": "policy-7"}}}
		})
		a := podCreate(policyPod())
		wantStatus(t, run(p, a), 0, "")
		got := b.last()
		if got.APIVersion != naming.Group("imagepolicy.k8s.io")+"/v1alpha1" || got.Kind != "ImageReview" {
			t.Errorf("sent as %s %s", got.APIVersion, got.Kind)
		}
		want := imagepolicyv1alpha1.ImageReviewSpec{
			Containers:  []imagepolicyv1alpha1.ImageReviewContainerSpec{{Image: "registry.example.com/a:1"}, {Image: "registry.example.com/b:1"}, {Image: "registry.example.com/init:1"}},
			Annotations: map[string]string{"mycluster" + naming.ImagePolicyAnnotationInfix + "ticket": "1234"},
			Namespace:   "ns",
		}
		if !reflect.DeepEqual(got.Spec, want) {
			t.Errorf("spec\n got %+v\nwant %+v", got.Spec, want)
		}
		if key := "imagepolicywebhook" + naming.ImagePolicyAnnotationInfix + "checked-by"; a.Annotations()[key] != "policy-7" {
			t.Errorf("audit annotations %v", a.Annotations())
		}
		b.mu.Lock()
		cn := b.clients[len(b.clients)-1]
		b.mu.Unlock()
		if cn != "apiserver" {
			t.Errorf("the kubeconfig's client certificate was not presented: %q", cn)
		}
	})
	t.Run("upstream: ephemeral containers added through their subresource are reviewed alone", func(t *testing.T) {
		pd := policyPod()
		pd.Spec.EphemeralContainers[0].Image = "busybox:ephemeral"
		wantStatus(t, run(p, req(admission.Update, "", "pods", "ephemeralcontainers", "Pod", "ns", pd, policyPod())), 0, "")
		if got := b.last().Spec.Containers; !reflect.DeepEqual(got, []imagepolicyv1alpha1.ImageReviewContainerSpec{{Image: "busybox:ephemeral"}}) {
			t.Errorf("containers %+v", got)
		}
	})
	t.Run("upstream: a denial with a reason", func(t *testing.T) {
		b.setAnswer(func(imagepolicyv1alpha1.ImageReview) (int, any) {
			return 200, map[string]any{"apiVersion": imageReviewAPIVersion, "kind": "ImageReview", "status": map[string]any{"allowed": false, "reason": "untrusted registry"}}
		})
		pd := policyPod()
		pd.Spec.Containers[0].Image = "evil.example.com/x"
		wantStatus(t, run(p, podCreate(pd)), 403, `pods "p" is forbidden: image policy webhook backend denied one or more images: untrusted registry`)
	})
	t.Run("upstream: a denial without a reason; answers in upstream's group are read", func(t *testing.T) {
		b.setAnswer(func(imagepolicyv1alpha1.ImageReview) (int, any) {
			return 200, map[string]any{"apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview", "status": map[string]any{"allowed": false}}
		})
		pd := policyPod()
		pd.Spec.Containers[0].Image = "evil.example.com/y"
		wantStatus(t, run(p, podCreate(pd)), 403, `pods "p" is forbidden: one or more images rejected by webhook backend`)
	})
	t.Run("other resources and subresources are not reviewed", func(t *testing.T) {
		n := b.calls()
		wantStatus(t, run(p, req(admission.Update, "", "pods", "status", "Pod", "ns", policyPod(), policyPod())), 0, "")
		wantStatus(t, run(p, req(admission.Create, "", "configmaps", "", "ConfigMap", "ns", &corev1.ConfigMap{}, nil)), 0, "")
		if b.calls() != n {
			t.Error("backend called")
		}
		if interested(p, req(admission.Update, "", "pods", "status", "Pod", "ns", nil, nil)) || !interested(p, req(admission.Update, "", "pods", "ephemeralcontainers", "Pod", "ns", nil, nil)) {
			t.Error("interest: pods and pods/ephemeralcontainers only")
		}
	})
}

func TestImagePolicyWebhookCache(t *testing.T) {
	b := newPolicyBackend(t)
	allowed := true
	var mu sync.Mutex
	b.setAnswer(func(imagepolicyv1alpha1.ImageReview) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		return 200, map[string]any{"status": map[string]any{"allowed": allowed}} // no apiVersion: read as the review's
	})
	p, clk := b.plugin(t, `, "allowTTL": 60, "denyTTL": 5`)
	pd := policyPod()
	wantStatus(t, run(p, podCreate(pd)), 0, "")
	wantStatus(t, run(p, podCreate(pd)), 0, "")
	if b.calls() != 1 {
		t.Fatalf("upstream: an allowed answer is cached for allowTTL; backend called %d times", b.calls())
	}
	clk.step(61 * time.Second)
	mu.Lock()
	allowed = false
	mu.Unlock()
	wantStatus(t, run(p, podCreate(pd)), 403, `pods "p" is forbidden: one or more images rejected by webhook backend`)
	wantStatus(t, run(p, podCreate(pd)), 403, `pods "p" is forbidden: one or more images rejected by webhook backend`)
	if b.calls() != 2 {
		t.Fatalf("upstream: the entry expires after allowTTL and the denial is cached; backend called %d times", b.calls())
	}
	clk.step(6 * time.Second)
	mu.Lock()
	allowed = true
	mu.Unlock()
	wantStatus(t, run(p, podCreate(pd)), 0, "")
	if b.calls() != 3 {
		t.Fatalf("upstream: a denial is cached for denyTTL only; backend called %d times", b.calls())
	}
	other := policyPod()
	other.Spec.Containers[1].Image = "registry.example.com/b:2"
	wantStatus(t, run(p, podCreate(other)), 0, "")
	if b.calls() != 4 {
		t.Fatalf("a different review is not served from the cache; backend called %d times", b.calls())
	}

	nocache, _ := b.plugin(t, `, "allowTTL": -1`)
	before := b.calls()
	wantStatus(t, run(nocache, podCreate(pd)), 0, "")
	wantStatus(t, run(nocache, podCreate(pd)), 0, "")
	if b.calls()-before != 2 {
		t.Fatalf("upstream: allowTTL -1 disables caching; backend called %d times", b.calls()-before)
	}
}

func TestImagePolicyWebhookFailures(t *testing.T) {
	b := newPolicyBackend(t)
	failedOpen := "imagepolicywebhook" + naming.ImagePolicyAnnotationInfix + "failed-open"
	cases := []struct {
		name         string
		code         int
		body         any
		allow        bool
		wantCalls    int
		wantErr      string
		wantFailOpen bool
	}{
		{"upstream: a 500 is retried five times, then defaultAllow false rejects", 500, map[string]string{"error": "boom"}, false, 5, `pods "p" is forbidden: Error contacting webhook: 500`, false},
		{"upstream: a 403 from the backend is not retried", 403, map[string]string{"error": "no"}, false, 1, `pods "p" is forbidden: Error contacting webhook: 403`, false},
		{"upstream: defaultAllow admits when the backend fails, and says so in the audit", 500, map[string]string{"error": "boom"}, true, 5, "", true},
		{"an answer of another kind is a failure", 200, map[string]any{"apiVersion": "v1", "kind": "Status"}, false, 1, `pods "p" is forbidden: the image policy backend answered v1 Status, not ImageReview ` + imageReviewAPIVersion, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b.setAnswer(func(imagepolicyv1alpha1.ImageReview) (int, any) { return c.code, c.body })
			extra := ""
			if c.allow {
				extra = `, "defaultAllow": true`
			}
			p, _ := b.plugin(t, extra)
			before := b.calls()
			a := podCreate(policyPod())
			err := run(p, a)
			if c.wantErr == "" {
				wantStatus(t, err, 0, "")
			} else {
				wantStatus(t, err, 403, c.wantErr)
			}
			if n := b.calls() - before; n != c.wantCalls {
				t.Errorf("backend called %d times, want %d", n, c.wantCalls)
			}
			if got := a.Annotations()[failedOpen] == "true"; got != c.wantFailOpen {
				t.Errorf("failed-open annotation = %v", got)
			}
		})
	}
	t.Run("a backend whose certificate the kubeconfig's CA did not sign fails the review", func(t *testing.T) {
		otherCA, err := pki.NewCA("other", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`{"imagePolicy": {"kubeConfigFile": %q, "retryBackoff": 1}}`, b.kubeconfig(t, otherCA.CertPEM))
		p := build(t, admission.ImagePolicyWebhook, deps(), cfg)
		err = run(p, podCreate(policyPod()))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a backend that is down fails the review", func(t *testing.T) {
		down := newPolicyBackend(t)
		p, _ := down.plugin(t, "")
		down.srv.Close()
		err := run(p, podCreate(policyPod()))
		if err == nil || !strings.Contains(err.Error(), `pods "p" is forbidden: Post "`+down.srv.URL+`/review"`) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestImagePolicyWebhookConfiguration(t *testing.T) {
	b := newPolicyBackend(t)
	kc := b.kubeconfig(t, b.ca.CertPEM)
	cases := []struct{ name, config, err string }{
		{"upstream: a configuration is required", "", "ImagePolicyWebhook: no config specified"},
		{"the kubeconfig file is required", `{"imagePolicy": {}}`, "ImagePolicyWebhook: imagePolicy.kubeConfigFile is required"},
		{"upstream: allowTTL within 1s..30m", fmt.Sprintf(`{"imagePolicy": {"kubeConfigFile": %q, "allowTTL": 3600}}`, kc), "ImagePolicyWebhook: allowTTL: valid value is between 1s and 30m0s, got 1h0m0s"},
		{"upstream: retryBackoff at most 5m", fmt.Sprintf(`{"imagePolicy": {"kubeConfigFile": %q, "retryBackoff": 300001}}`, kc), "ImagePolicyWebhook: retryBackoff: valid value is between 1ns and 5m0s, got 5m0.001s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := buildErr(admission.ImagePolicyWebhook, deps(), c.config)
			if err == nil || err.Error() != c.err {
				t.Fatalf("err\n got %v\nwant %s", err, c.err)
			}
		})
	}
	if _, err := buildErr(admission.ImagePolicyWebhook, deps(), `{"imagePolicy": {"kubeConfigFile": "/nonexistent/kubeconfig"}}`); err == nil {
		t.Error("a missing kubeconfig file is accepted")
	}
	p := build(t, admission.ImagePolicyWebhook, deps(), fmt.Sprintf(`{"imagePolicy": {"kubeConfigFile": %q}}`, kc))
	ip := p.(*imagePolicyWebhook)
	if ip.allowTTL != 5*time.Minute || ip.denyTTL != 30*time.Second || ip.retryBackoff != 500*time.Millisecond || ip.defaultAllow {
		t.Errorf("upstream defaults: %v %v %v %v", ip.allowTTL, ip.denyTTL, ip.retryBackoff, ip.defaultAllow)
	}
}
