package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/test/stack"
)

// hookReview is the part of an AdmissionReview request a test webhook reads.
type hookReview struct {
	APIVersion string `json:"apiVersion"`
	Request    struct {
		UID       string          `json:"uid"`
		Operation string          `json:"operation"`
		Namespace string          `json:"namespace"`
		Name      string          `json:"name"`
		DryRun    bool            `json:"dryRun"`
		Object    json.RawMessage `json:"object"`
	} `json:"request"`
}

// hookAnswer is what a test webhook answers (uid and apiVersion are filled in).
type hookAnswer struct {
	Allowed  bool
	Code     int32
	Message  string
	Patch    []map[string]any
	Warnings []string
}

// hookServer is one HTTPS server standing for the webhooks of a test: each path is a webhook.
type hookServer struct {
	t     *testing.T
	url   string
	caPEM []byte
	port  int
	mu    sync.Mutex
	paths map[string]func(hookReview) (hookAnswer, bool)
	calls map[string]*atomic.Int64
	// raw paths answer whatever their handler writes (malformed answers).
	raw map[string]http.HandlerFunc
}

// newHookServer starts a webhook server on loopback whose certificate names 127.0.0.1 and the
// given DNS names (a Service's <name>.<namespace>.svc), with a CA of its own.
func newHookServer(t *testing.T, dnsNames ...string) *hookServer {
	t.Helper()
	ca, err := pki.NewCA("e2e-admission-webhook-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("e2e-admission-webhook", append([]string{"127.0.0.1"}, dnsNames...), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookServer{t: t, caPEM: ca.CertPEM, paths: map[string]func(hookReview) (hookAnswer, bool){}, calls: map[string]*atomic.Int64{}, raw: map[string]http.HandlerFunc{}}
	srv := &http.Server{Handler: http.HandlerFunc(h.serve), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	h.url = "https://" + lis.Addr().String()
	h.port = lis.Addr().(*net.TCPAddr).Port
	return h
}

// handle registers a webhook at path; decide returns the answer (false: no answer, 500).
func (h *hookServer) handle(path string, decide func(hookReview) (hookAnswer, bool)) *atomic.Int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paths[path] = decide
	h.calls[path] = &atomic.Int64{}
	return h.calls[path]
}

func (h *hookServer) handleRaw(path string, f http.HandlerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.raw[path] = f
}

func (h *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	decide, calls, raw := h.paths[r.URL.Path], h.calls[r.URL.Path], h.raw[r.URL.Path]
	h.mu.Unlock()
	if raw != nil {
		raw(w, r)
		return
	}
	if decide == nil {
		http.NotFound(w, r)
		return
	}
	var rev hookReview
	if err := json.NewDecoder(r.Body).Decode(&rev); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ans hookAnswer
	ok := true
	if rev.Request.Name == naming.RootCAConfigMap {
		// The root CA publisher's ConfigMap, which it writes into every namespace (a test's
		// namespace too, whenever it gets to it): allowed unchanged, not counted.
		ans = hookAnswer{Allowed: true}
	} else {
		calls.Add(1)
		ans, ok = decide(rev)
	}
	if !ok {
		http.Error(w, "no answer", http.StatusInternalServerError)
		return
	}
	resp := map[string]any{"uid": rev.Request.UID, "allowed": ans.Allowed}
	if ans.Code != 0 || ans.Message != "" {
		resp["status"] = map[string]any{"code": ans.Code, "message": ans.Message}
	}
	if len(ans.Patch) > 0 {
		p, _ := json.Marshal(ans.Patch)
		resp["patchType"] = "JSONPatch"
		resp["patch"] = p // []byte marshals as base64, as the field is
	}
	if len(ans.Warnings) > 0 {
		resp["warnings"] = ans.Warnings
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": rev.APIVersion, "kind": "AdmissionReview", "response": resp})
}

// configMapsIn are webhook rules and selector for creates and updates of config maps in one
// namespace (so tests sharing a stack do not see each other's webhooks).
func configMapsIn(ns string) ([]admissionregistrationv1.RuleWithOperations, *metav1.LabelSelector) {
	return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}}, &metav1.LabelSelector{MatchLabels: map[string]string{
			corev1.LabelMetadataName: ns,
		}}
}

func ptrTo[T any](v T) *T { return &v }

// validatingHook is a validating webhook for config maps in ns at the server's path.
func (h *hookServer) validatingHook(name, ns, path string, edit func(*admissionregistrationv1.ValidatingWebhook)) admissionregistrationv1.ValidatingWebhook {
	rules, sel := configMapsIn(ns)
	w := admissionregistrationv1.ValidatingWebhook{
		Name: name, Rules: rules, NamespaceSelector: sel,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptrTo(h.url + path), CABundle: h.caPEM},
		SideEffects:             ptrTo(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptrTo(int32(5)),
	}
	if edit != nil {
		edit(&w)
	}
	return w
}

// mutatingHook is the mutating equivalent.
func (h *hookServer) mutatingHook(name, ns, path string, edit func(*admissionregistrationv1.MutatingWebhook)) admissionregistrationv1.MutatingWebhook {
	rules, sel := configMapsIn(ns)
	w := admissionregistrationv1.MutatingWebhook{
		Name: name, Rules: rules, NamespaceSelector: sel,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptrTo(h.url + path), CABundle: h.caPEM},
		SideEffects:             ptrTo(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptrTo(int32(5)),
	}
	if edit != nil {
		edit(&w)
	}
	return w
}

// admissionEnv is one namespace of the webhook test stack with clients.
type admissionEnv struct {
	t    *testing.T
	s    *stack.Stack
	kube kubernetes.Interface
	ns   string
	ctx  context.Context
}

func newAdmissionEnv(t *testing.T, s *stack.Stack, ns string) *admissionEnv {
	t.Helper()
	kube, err := kubernetes.NewForConfig(restConfig(t, s, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &admissionEnv{t: t, s: s, kube: kube, ns: ns, ctx: ctx}
}

func (e *admissionEnv) validating(hooks ...admissionregistrationv1.ValidatingWebhook) {
	e.t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e.ns}, Webhooks: hooks}
	if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, cfg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), e.ns, metav1.DeleteOptions{})
	})
}

func (e *admissionEnv) mutating(hooks ...admissionregistrationv1.MutatingWebhook) {
	e.t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e.ns}, Webhooks: hooks}
	if _, err := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, cfg, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), e.ns, metav1.DeleteOptions{})
	})
}

// createCM creates a config map; err is the API's answer.
func (e *admissionEnv) createCM(name string, dryRun bool) (*corev1.ConfigMap, error) {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}, opts)
}

// eventually creates config maps named name-<i> until check accepts the answer: the admission
// service sees a new configuration through its watch (milliseconds later); the bound is the
// guarantee under test.
func (e *admissionEnv) eventually(name string, check func(*corev1.ConfigMap, error) bool) (*corev1.ConfigMap, error) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		cm, err := e.createCM(fmt.Sprintf("%s-%d", name, i), false)
		if check(cm, err) {
			return cm, err
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: the webhook configuration did not take effect within 5s (last answer: %v)", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *admissionEnv) stored(name string) bool {
	_, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	return err == nil
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// Admission webhooks on a split stack of their own (the admission service's metrics are served
// for the rejection metric): real HTTPS webhook servers, configurations written through the API,
// each subtest in a namespace of its own selected by the configurations' namespaceSelector.
func TestAdmissionWebhooks(t *testing.T) {
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(port)
	s := startStack(t, stack.Options{Mode: stack.Split, AdmissionArgs: []string{"--metrics-bind-address", metricsAddr}})
	logsOnFailure(t, s, "admission")
	// The Service-resolved webhook's certificate names the Service's DNS name.
	hooks := newHookServer(t, "hooks.adm-service.svc")
	// The group returns once its parallel subtests are done; the metric is read after them.
	t.Run("group", func(t *testing.T) { webhookCases(t, s, hooks) })
	t.Run("RejectionMetric", func(t *testing.T) {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range [][]string{
			{"apiserver_admission_webhook_rejection_count{", `error_type="no_error"`, `name="deny.e2e.platform.io"`, `operation="CREATE"`, `rejection_code="409"`, `type="validating"`},
			{"apiserver_admission_webhook_rejection_count{", `error_type="calling_webhook_error"`, `name="down-fail.e2e.platform.io"`, `operation="CREATE"`, `type="validating"`},
		} {
			if !metricLine(body, want...) {
				t.Errorf("metrics lack a line with %v", want)
			}
		}
	})
}

// The same webhook cases on the all-in-one (`make run`), where admission runs in process.
func TestAdmissionWebhooksAllInOne(t *testing.T) {
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	webhookCases(t, s, newHookServer(t, "hooks.adm-service.svc"))
}

// metricLine tells whether some line of a metrics page has every part.
func metricLine(page []byte, parts ...string) bool {
	for _, line := range strings.Split(string(page), "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// webhookCases are the webhook subtests, in parallel on one stack.
func webhookCases(t *testing.T, s *stack.Stack, hooks *hookServer) {
	t.Run("MutatingWithReinvocation", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-mutating")
		// first adds a label when missing and asks to be reinvoked; second adds an annotation
		// after it: first must see second's change (a second round).
		first := hooks.handle("/first", func(r hookReview) (hookAnswer, bool) {
			if strings.Contains(string(r.Request.Object), `"first":"done"`) {
				return hookAnswer{Allowed: true}, true
			}
			return hookAnswer{Allowed: true, Patch: []map[string]any{{"op": "add", "path": "/metadata/labels", "value": map[string]string{"first": "done"}}}}, true
		})
		second := hooks.handle("/second", func(r hookReview) (hookAnswer, bool) {
			if strings.Contains(string(r.Request.Object), `"second":"done"`) {
				return hookAnswer{Allowed: true}, true
			}
			return hookAnswer{Allowed: true, Patch: []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"second": "done"}}}}, true
		})
		e.mutating(
			hooks.mutatingHook("first.e2e.platform.io", e.ns, "/first", func(w *admissionregistrationv1.MutatingWebhook) {
				w.ReinvocationPolicy = ptrTo(admissionregistrationv1.IfNeededReinvocationPolicy)
			}),
			hooks.mutatingHook("second.e2e.platform.io", e.ns, "/second", nil),
		)
		cm, err := e.eventually("cm", func(cm *corev1.ConfigMap, err error) bool { return err == nil && cm.Labels["first"] == "done" })
		if err != nil || cm.Annotations["second"] != "done" {
			t.Fatalf("mutations: %v %v", cm, err)
		}
		// The last create: first ran twice (reinvoked after second's change), second once.
		f0, s0 := first.Load(), second.Load()
		if _, err := e.createCM("again", false); err != nil {
			t.Fatal(err)
		}
		if df, ds := first.Load()-f0, second.Load()-s0; df != 2 || ds != 1 {
			t.Errorf("calls for one create: first %d (want 2, reinvoked), second %d (want 1)", df, ds)
		}
	})

	t.Run("ValidatingInParallelAndDenial", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-validating")
		slow := func(r hookReview) (hookAnswer, bool) {
			if strings.HasPrefix(r.Request.Name, "slow") {
				time.Sleep(time.Second)
			}
			return hookAnswer{Allowed: true}, true
		}
		hooks.handle("/slow-a", slow)
		hooks.handle("/slow-b", slow)
		hooks.handle("/deny", func(r hookReview) (hookAnswer, bool) {
			if strings.HasPrefix(r.Request.Name, "denied") {
				return hookAnswer{Allowed: false, Code: http.StatusConflict, Message: "no config maps named denied here"}, true
			}
			return hookAnswer{Allowed: true, Warnings: []string{"config maps here are watched"}}, true
		})
		e.validating(
			hooks.validatingHook("slow-a.e2e.platform.io", e.ns, "/slow-a", nil),
			hooks.validatingHook("slow-b.e2e.platform.io", e.ns, "/slow-b", nil),
			hooks.validatingHook("deny.e2e.platform.io", e.ns, "/deny", nil),
		)
		e.eventually("denied", func(_ *corev1.ConfigMap, err error) bool { return err != nil })
		// Two one-second webhooks run in parallel: about one second, not two.
		start := time.Now()
		if _, err := e.createCM("slow", false); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 1800*time.Millisecond {
			t.Errorf("two 1s validating webhooks took %v: not in parallel", d)
		}
		// The denial's code and message reach the client; nothing is stored.
		_, err := e.createCM("denied-x", false)
		if statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), `admission webhook "deny.e2e.platform.io" denied the request: no config maps named denied here`) {
			t.Errorf("denial: %d %v", statusCode(err), err)
		}
		if e.stored("denied-x") {
			t.Error("a denied object was stored")
		}
		// kubectl shows the webhook's message and its warnings.
		k := newKubectl(t, s, e.ns)
		_, stderr, code := k.run("", "create", "configmap", "denied-kubectl", "--from-literal=a=b")
		if code == 0 || !strings.Contains(stderr, "no config maps named denied here") {
			t.Errorf("kubectl on a denial: exit %d, stderr %q", code, stderr)
		}
		_, stderr, code = k.run("", "create", "configmap", "fine", "--from-literal=a=b")
		if code != 0 || !strings.Contains(stderr, "Warning: config maps here are watched") {
			t.Errorf("kubectl with a webhook warning: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("TimeoutsAndFailurePolicies", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-failures")
		hooks.handle("/hang", func(r hookReview) (hookAnswer, bool) {
			time.Sleep(3 * time.Second)
			return hookAnswer{Allowed: false, Message: "too late"}, true
		})
		downPort, err := freeLoopbackPort() // nobody listens there
		if err != nil {
			t.Fatal(err)
		}
		down := "127.0.0.1:" + strconv.Itoa(downPort)
		wrongCA, err := pki.NewCA("not-the-webhook-ca", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		hook := func(name, path string, policy admissionregistrationv1.FailurePolicyType, edit func(*admissionregistrationv1.ValidatingWebhook)) admissionregistrationv1.ValidatingWebhook {
			return hooks.validatingHook(name, e.ns, path, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.FailurePolicy = ptrTo(policy)
				w.TimeoutSeconds = ptrTo(int32(1))
				// Each webhook acts on config maps labeled with its case only.
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"case": strings.SplitN(name, ".", 2)[0]}}
				if edit != nil {
					edit(w)
				}
			})
		}
		e.validating(
			hook("hang-ignore.e2e.platform.io", "/hang", admissionregistrationv1.Ignore, nil),
			hook("hang-fail.e2e.platform.io", "/hang", admissionregistrationv1.Fail, nil),
			hook("down-fail.e2e.platform.io", "", admissionregistrationv1.Fail, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.URL = ptrTo("https://" + down + "/down")
			}),
			hook("down-ignore.e2e.platform.io", "", admissionregistrationv1.Ignore, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.URL = ptrTo("https://" + down + "/down")
			}),
			hook("wrongca-fail.e2e.platform.io", "/hang", admissionregistrationv1.Fail, func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.CABundle = wrongCA.CertPEM
			}),
		)
		create := func(name, c string) error {
			_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"case": c}}}, metav1.CreateOptions{})
			return err
		}
		// Wait for the configuration (a Fail webhook that is down refuses).
		deadline := time.Now().Add(5 * time.Second)
		for i := 0; create(fmt.Sprintf("probe-%d", i), "down-fail") == nil; i++ {
			if time.Now().After(deadline) {
				t.Fatal("the configuration did not take effect")
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, c := range []struct {
			caseName string
			want     string // "" allowed, else part of the 500's message
			maxTime  time.Duration
		}{
			{"hang-ignore", "", 2500 * time.Millisecond},
			{"hang-fail", `failed calling webhook "hang-fail.e2e.platform.io"`, 2500 * time.Millisecond},
			{"down-ignore", "", time.Second},
			{"down-fail", `failed calling webhook "down-fail.e2e.platform.io"`, time.Second},
			{"wrongca-fail", `failed calling webhook "wrongca-fail.e2e.platform.io"`, time.Second},
		} {
			start := time.Now()
			err := create(c.caseName+"-x", c.caseName)
			took := time.Since(start)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: %v", c.caseName, err)
			case c.want != "" && (statusCode(err) != http.StatusInternalServerError || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: want 500 with %q, got %d %v", c.caseName, c.want, statusCode(err), err)
			case c.want != "" && e.stored(c.caseName+"-x"):
				t.Errorf("%s: stored despite the failure", c.caseName)
			}
			if took > c.maxTime {
				t.Errorf("%s took %v (timeoutSeconds 1)", c.caseName, took)
			}
		}
		if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, "wrongca-fail-x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("wrong CA: %v", err)
		}
	})

	t.Run("SideEffectsAndDryRun", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-dryrun")
		calls := hooks.handle("/effects", func(r hookReview) (hookAnswer, bool) {
			return hookAnswer{Allowed: true}, true
		})
		e.validating(hooks.validatingHook("effects.e2e.platform.io", e.ns, "/effects", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.SideEffects = ptrTo(admissionregistrationv1.SideEffectClassNoneOnDryRun)
		}))
		e.eventually("cm", func(_ *corev1.ConfigMap, err error) bool { return err == nil && calls.Load() > 0 })
		// NoneOnDryRun: a dry run is sent, marked.
		n := calls.Load()
		if _, err := e.createCM("dry", true); err != nil || calls.Load() != n+1 {
			t.Errorf("NoneOnDryRun webhook on a dry run: %v, calls %d", err, calls.Load()-n)
		}
		// Webhooks with side effects (Some, Unknown) cannot be called on a dry run (400, unit
		// tested in the webhook package); v1 configurations may not declare them at all.
		cfg, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(e.ctx, e.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Webhooks[0].SideEffects = ptrTo(admissionregistrationv1.SideEffectClassSome)
		_, err = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(e.ctx, cfg, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `webhooks[0].sideEffects: Unsupported value: "Some"`) {
			t.Errorf("sideEffects Some in v1: %v", err)
		}
		if e.stored("dry") {
			t.Error("a dry run stored the object")
		}
	})

	t.Run("ServiceReference", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-service")
		// The Service "hooks" in the namespace points at the webhook server (its cluster IP is
		// loopback here); the dispatcher resolves it and verifies hooks.adm-service.svc.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hooks"}, Spec: corev1.ServiceSpec{
			ClusterIP: "127.0.0.1", Ports: []corev1.ServicePort{{Port: int32(hooks.port)}},
		}}
		if _, err := e.kube.CoreV1().Services(e.ns).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		calls := hooks.handle("/svc", func(r hookReview) (hookAnswer, bool) {
			return hookAnswer{Allowed: !strings.HasPrefix(r.Request.Name, "no"), Message: "refused through the Service"}, true
		})
		e.validating(hooks.validatingHook("svc.e2e.platform.io", e.ns, "", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ClientConfig.URL = nil
			w.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: e.ns, Name: "hooks", Path: ptrTo("/svc"), Port: ptrTo(int32(hooks.port))}
		}))
		_, err := e.eventually("no", func(_ *corev1.ConfigMap, err error) bool { return err != nil })
		// A denial without a code is a 400, as upstream.
		if statusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "refused through the Service") || calls.Load() == 0 {
			t.Errorf("Service-resolved webhook: %v (calls %d)", err, calls.Load())
		}
		if _, err := e.createCM("yes", false); err != nil {
			t.Errorf("allowed through the Service: %v", err)
		}
	})

	t.Run("BadAnswers", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-bad")
		hooks.handleRaw("/not-json", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("this is not an AdmissionReview"))
		})
		hooks.handleRaw("/huge", func(w http.ResponseWriter, r *http.Request) {
			var rev hookReview
			_ = json.NewDecoder(r.Body).Decode(&rev)
			w.Header().Set("Content-Type", "application/json")
			pad := strings.Repeat("x", 4<<20)
			fmt.Fprintf(w, `{"apiVersion":%q,"kind":"AdmissionReview","response":{"uid":%q,"allowed":true,"warnings":[%q]}}`, rev.APIVersion, rev.Request.UID, pad)
		})
		hooks.handle("/bad-patch", func(r hookReview) (hookAnswer, bool) {
			// data must be a map of strings: this patch makes an object that does not decode.
			return hookAnswer{Allowed: true, Patch: []map[string]any{{"op": "replace", "path": "/data", "value": 42}}}, true
		})
		mhook := func(name, path string) admissionregistrationv1.MutatingWebhook {
			return hooks.mutatingHook(name, e.ns, path, func(w *admissionregistrationv1.MutatingWebhook) {
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"case": strings.SplitN(name, ".", 2)[0]}}
			})
		}
		e.mutating(mhook("not-json.e2e.platform.io", "/not-json"), mhook("huge.e2e.platform.io", "/huge"), mhook("bad-patch.e2e.platform.io", "/bad-patch"))
		create := func(name, c string) error {
			_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"case": c}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			return err
		}
		deadline := time.Now().Add(5 * time.Second)
		for i := 0; create(fmt.Sprintf("probe-%d", i), "not-json") == nil; i++ {
			if time.Now().After(deadline) {
				t.Fatal("the configuration did not take effect")
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, c := range []string{"not-json", "huge", "bad-patch"} {
			err := create(c+"-x", c)
			if statusCode(err) != http.StatusInternalServerError || !strings.Contains(err.Error(), c+".e2e.platform.io") {
				t.Errorf("%s: want a 500 naming the webhook, got %d %v", c, statusCode(err), err)
			}
			if e.stored(c + "-x") {
				t.Errorf("%s: stored", c)
			}
		}
	})

	t.Run("ConfigurationValidation", func(t *testing.T) {
		t.Parallel()
		e := newAdmissionEnv(t, s, "adm-config")
		bad := hooks.validatingHook("novers.e2e.platform.io", e.ns, "/x", func(w *admissionregistrationv1.ValidatingWebhook) {
			w.AdmissionReviewVersions = []string{"v2"}
		})
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "adm-config-bad"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{bad}}
		_, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, cfg, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "admissionReviewVersions") {
			t.Errorf("a configuration with no supported admissionReviewVersions: %v", err)
		}
	})

}

// freeLoopbackPort finds a free TCP port on loopback.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
