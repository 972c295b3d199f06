package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/pki"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// testCA is the CA of the test webhook servers.
var (
	testCAOnce sync.Once
	testCA     *pki.CA
	otherCA    *pki.CA
)

func cas(t *testing.T) (*pki.CA, *pki.CA) {
	t.Helper()
	testCAOnce.Do(func() {
		var err error
		if testCA, err = pki.NewCA("webhook-test-ca", time.Hour); err != nil {
			panic(err)
		}
		if otherCA, err = pki.NewCA("other-ca", time.Hour); err != nil {
			panic(err)
		}
	})
	return testCA, otherCA
}

// reviewHandler answers one AdmissionReview request; the server fills in the uid.
type reviewHandler func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// hookServer is a real HTTPS webhook server.
type hookServer struct {
	*httptest.Server
	calls atomic.Int64

	mu       sync.Mutex
	requests []*admissionv1.AdmissionRequest
	versions []string
	queries  []string
	headers  []http.Header
}

type serverOption func(*httptest.Server)

// requireClientCert makes the server demand a client certificate signed by ca.
func requireClientCert(ca *pki.CA) serverOption {
	return func(s *httptest.Server) {
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		s.TLS.ClientCAs = pool
		s.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
}

// newHookServer starts an HTTPS webhook server with a certificate for hosts, answering with f.
func newHookServer(t *testing.T, hosts []string, f reviewHandler, opts ...serverOption) *hookServer {
	return newRawServer(t, hosts, func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
		resp := f(review.Request)
		if resp == nil {
			resp = &admissionv1.AdmissionResponse{Allowed: true}
		}
		resp.UID = review.Request.UID
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}, opts...)
}

// newRawServer starts an HTTPS webhook server whose handler writes the answer itself.
func newRawServer(t *testing.T, hosts []string, handle func(w http.ResponseWriter, review *admissionv1.AdmissionReview), opts ...serverOption) *hookServer {
	t.Helper()
	ca, _ := cas(t)
	certPEM, keyPEM, err := ca.IssueServing("webhook", hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hs := &hookServer{}
	hs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		hs.mu.Lock()
		hs.requests = append(hs.requests, review.Request)
		hs.versions = append(hs.versions, review.APIVersion)
		hs.queries = append(hs.queries, r.URL.RawQuery)
		hs.headers = append(hs.headers, r.Header.Clone())
		hs.mu.Unlock()
		handle(w, &review)
	}))
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// Handshake failures are what some tests are about; keep them out of the output.
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	for _, o := range opts {
		o(hs.Server)
	}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return hs
}

func (hs *hookServer) url() string { return hs.URL + "/hook" }

func (hs *hookServer) port() int32 {
	_, p, _ := net.SplitHostPort(hs.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

func (hs *hookServer) lastRequest(t *testing.T) *admissionv1.AdmissionRequest {
	t.Helper()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.requests) == 0 {
		t.Fatal("the webhook was not called")
	}
	return hs.requests[len(hs.requests)-1]
}

// hookSpec describes a webhook for a test configuration.
type hookSpec struct {
	name            string
	url             string
	service         *admissionregistrationv1.ServiceReference
	caBundle        []byte
	noCA            bool
	rules           []admissionregistrationv1.RuleWithOperations
	failure         admissionregistrationv1.FailurePolicyType
	matchPolicy     *admissionregistrationv1.MatchPolicyType
	sideEffects     *admissionregistrationv1.SideEffectClass
	timeout         int32
	versions        []string
	nsSelector      *metav1.LabelSelector
	objSelector     *metav1.LabelSelector
	conditions      []admissionregistrationv1.MatchCondition
	reinvocation    admissionregistrationv1.ReinvocationPolicyType
	omitSideEffects bool
}

func podRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
}

func (s hookSpec) clientConfig(t *testing.T) admissionregistrationv1.WebhookClientConfig {
	ca, _ := cas(t)
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM}
	if s.caBundle != nil {
		cc.CABundle = s.caBundle
	}
	if s.noCA {
		cc.CABundle = nil
	}
	if s.service != nil {
		cc.Service = s.service
	} else {
		u := s.url
		cc.URL = &u
	}
	return cc
}

func (s hookSpec) common() (rules []admissionregistrationv1.RuleWithOperations, fp *admissionregistrationv1.FailurePolicyType,
	se *admissionregistrationv1.SideEffectClass, timeout *int32, versions []string) {
	rules = s.rules
	if rules == nil {
		rules = podRules()
	}
	f := s.failure
	if f == "" {
		f = admissionregistrationv1.Fail
	}
	se = s.sideEffects
	if se == nil && !s.omitSideEffects {
		none := admissionregistrationv1.SideEffectClassNone
		se = &none
	}
	to := s.timeout
	if to == 0 {
		to = 5
	}
	versions = s.versions
	if versions == nil {
		versions = []string{"v1"}
	}
	return rules, &f, se, &to, versions
}

func (s hookSpec) mutating(t *testing.T) admissionregistrationv1.MutatingWebhook {
	rules, fp, se, to, versions := s.common()
	w := admissionregistrationv1.MutatingWebhook{Name: s.name, ClientConfig: s.clientConfig(t), Rules: rules, FailurePolicy: fp, MatchPolicy: s.matchPolicy,
		SideEffects: se, TimeoutSeconds: to, AdmissionReviewVersions: versions, NamespaceSelector: s.nsSelector, ObjectSelector: s.objSelector,
		MatchConditions: s.conditions}
	if s.reinvocation != "" {
		p := s.reinvocation
		w.ReinvocationPolicy = &p
	}
	return w
}

func (s hookSpec) validating(t *testing.T) admissionregistrationv1.ValidatingWebhook {
	rules, fp, se, to, versions := s.common()
	return admissionregistrationv1.ValidatingWebhook{Name: s.name, ClientConfig: s.clientConfig(t), Rules: rules, FailurePolicy: fp, MatchPolicy: s.matchPolicy,
		SideEffects: se, TimeoutSeconds: to, AdmissionReviewVersions: versions, NamespaceSelector: s.nsSelector, ObjectSelector: s.objSelector,
		MatchConditions: s.conditions}
}

// env is a test's objects and plugins.
type env struct {
	t       *testing.T
	objects *admissiontest.Objects
	deps    admission.Deps
	chain   *admission.Chain
	config  []byte
}

func newEnv(t *testing.T) *env {
	t.Helper()
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "test"}}})
	return &env{t: t, objects: objects, deps: admissiontest.Deps(objects, nil)}
}

func (e *env) addMutating(name string, hooks ...hookSpec) {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: uuid.NewString()}}
	for _, h := range hooks {
		c.Webhooks = append(c.Webhooks, h.mutating(e.t))
	}
	e.objects.MutatingWebhookList.Add(c)
}

func (e *env) addValidating(name string, hooks ...hookSpec) {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: uuid.NewString()}}
	for _, h := range hooks {
		c.Webhooks = append(c.Webhooks, h.validating(e.t))
	}
	e.objects.ValidatingWebhookList.Add(c)
}

// build makes the chain of both webhook plugins through the registry.
func (e *env) build() *admission.Chain {
	e.t.Helper()
	reg := admission.NewRegistry()
	Register(reg)
	configs := map[string][]byte{}
	if e.config != nil {
		configs[admission.MutatingAdmissionWebhook] = e.config
		configs[admission.ValidatingAdmissionWebhook] = e.config
	}
	chain, err := admission.Build(reg, []string{admission.MutatingAdmissionWebhook, admission.ValidatingAdmissionWebhook}, configs, e.deps, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.chain = chain
	return chain
}

// run passes a through both phases, as the service does.
func (e *env) run(a *admission.Attributes) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	chain := e.chain
	if chain == nil {
		chain = e.build()
	}
	if err := chain.Admit(ctx, a); err != nil {
		return err
	}
	return chain.Validate(ctx, a)
}

var (
	podKind     = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

func newPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func createPod(pod *corev1.Pod) *admission.Attributes {
	return &admission.Attributes{
		Operation: admission.Create, Kind: podKind, Resource: podResource, RequestKind: podKind, RequestResource: podResource,
		Namespace: pod.Namespace, Name: pod.Name, Object: pod, Options: []byte(`{"kind":"CreateOptions","apiVersion":"meta.platform.io/v1"}`),
		User: &admission.User{Name: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"}}, UID: uuid.NewString(),
	}
}

// statusOf returns the StatusError of err, failing the test when it is not one.
func statusOf(t *testing.T, err error) *apierrors.StatusError {
	t.Helper()
	se, ok := err.(*apierrors.StatusError)
	if !ok {
		t.Fatalf("error %T %v is not a StatusError", err, err)
	}
	return se
}

func ptr[T any](v T) *T { return &v }
