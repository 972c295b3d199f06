package metrics

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stack.CleanupBuild()
	os.Exit(code)
}

// query is one PromQL expression of a dashboard panel.
type query struct {
	dashboard, panel, expr string
	names                  []string
}

// loadDashboards reads every dashboard under build/dashboards and the metric names of each of
// its panels' queries. Every panel must query something, and every query must name a metric.
func loadDashboards(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(stack.RepoRoot(), "build", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards under build/dashboards: %v", err)
	}
	type panel struct {
		Title   string  `json:"title"`
		Type    string  `json:"type"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var out []query
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string  `json:"uid"`
			Title  string  `json:"title"`
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
			t.Errorf("%s: a dashboard needs a uid, a title and panels", f)
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", filepath.Base(f), p.Title)
				}
				for _, tg := range p.Targets {
					names, err := MetricNames(tg.Expr)
					if err != nil {
						t.Errorf("%s: panel %q: %v", filepath.Base(f), p.Title, err)
						continue
					}
					if len(names) == 0 {
						t.Errorf("%s: panel %q: query %q names no metric", filepath.Base(f), p.Title, tg.Expr)
					}
					out = append(out, query{dashboard: filepath.Base(f), panel: p.Title, expr: tg.Expr, names: names})
				}
			}
		}
		walk(d.Panels)
	}
	return out
}

// scrape fetches one /metrics page and returns the names of its samples (histograms give
// name_bucket, name_sum and name_count, as PromQL sees them).
func scrape(client *http.Client, url string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if end := strings.IndexAny(line, "{ "); end > 0 {
			names[line[:end]] = true
		}
	}
	return names, sc.Err()
}

// endpoints are the /metrics URLs of a stack by service, and the client for each.
type endpoint struct {
	url    string
	client *http.Client
}

func endpoints(t *testing.T, s *stack.Stack) map[string]endpoint {
	t.Helper()
	admin, err := s.HTTPClient("metrics-scraper", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]endpoint{"gateway": {url: s.URL + "/metrics", client: admin}}
	for name, url := range s.MetricsURLs {
		out[name] = endpoint{url: url, client: http.DefaultClient}
	}
	return out
}

// scrapeAll scrapes every endpoint.
func scrapeAll(t *testing.T, eps map[string]endpoint) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for name, ep := range eps {
		names, err := scrape(ep.client, ep.url)
		if err != nil {
			t.Fatalf("scraping %s: %v", name, err)
		}
		out[name] = names
	}
	return out
}

// missing lists what is not exposed: each service's required metrics, and each dashboard query's
// metrics in any service's scrape (all when anyService).
func missing(scrapes map[string]map[string]bool, required map[string][]string, queries []query) []string {
	var out []string
	for svc, names := range required {
		for _, n := range names {
			if !scrapes[svc][n] {
				out = append(out, fmt.Sprintf("service %s does not expose %s", svc, n))
			}
		}
	}
	for _, q := range queries {
		for _, n := range q.names {
			found := false
			for _, names := range scrapes {
				found = found || names[n]
			}
			if !found {
				out = append(out, fmt.Sprintf("%s, panel %q: no service exposes %s (query %s)", q.dashboard, q.panel, n, q.expr))
			}
		}
	}
	sort.Strings(out)
	return out
}

// waitExposed scrapes until nothing is missing (series appear as the services handle the
// requests driven, some asynchronously: controllers, the CSR signer), within a bound.
func waitExposed(t *testing.T, eps map[string]endpoint, required map[string][]string, queries []query) map[string]map[string]bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		scrapes := scrapeAll(t, eps)
		miss := missing(scrapes, required, queries)
		if len(miss) == 0 {
			return scrapes
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, metrics missing:\n  %s", strings.Join(miss, "\n  "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requiredSplit are the metrics each service of the split stack must expose once requests went
// through it: upstream's names where upstream has them, and the gRPC server metrics everywhere.
var requiredSplit = map[string][]string{
	"gateway": {"apiserver_request_total", "apiserver_request_duration_seconds_bucket", "apiserver_current_inflight_requests",
		"gateway_authentication_cache_total", "gateway_authorization_cache_total", "gateway_admission_requests_total", "process_cpu_seconds_total"},
	"storage": {"apiserver_storage_objects", "apiserver_storage_request_duration_seconds_bucket", "storage_requests_total", "storage_watchers",
		"grpc_server_started_total", "grpc_server_handled_total", "grpc_server_handling_seconds_bucket", "grpc_server_msg_sent_total"},
	"authn": {"authentication_attempts", "authentication_duration_seconds_bucket", "grpc_server_handled_total"},
	"authz": {"authorization_attempts_total", "authorization_duration_seconds_bucket", "apiserver_authorization_decisions_total",
		"authorization_mode_duration_seconds_bucket", "grpc_server_handled_total"},
	"admission": {"apiserver_admission_step_admission_duration_seconds_bucket", "apiserver_admission_controller_admission_duration_seconds_bucket",
		"apiserver_admission_webhook_admission_duration_seconds_bucket", "apiserver_admission_webhook_request_total",
		"apiserver_admission_webhook_rejection_count", "grpc_server_handled_total"},
	"certificates": {"certificates_signer_requests_total", "apiserver_certificates_registry_csr_honored_duration_total", "grpc_server_started_total"},
	"controllers": {"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
		"workqueue_retries_total", "leader_election_master_status", "controller_syncs_total", "controller_sync_errors_total", "grpc_server_started_total"},
}

// The split stack, every service with its metrics endpoint: after requests that pass through
// every service (CRUD, a watch, a webhook that allows and one that rejects, a refused token, a
// forbidden request, a signed CSR), each service exposes its metrics under upstream's names and
// every metric of every dashboard panel is exposed by some service.
func TestDashboardsQueryExposedMetricsSplit(t *testing.T) {
	queries := loadDashboards(t)
	s, err := stack.Start(stack.Options{Mode: stack.Split, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if len(s.MetricsURLs) != 6 {
		t.Fatalf("metrics endpoints %v, want one per service", s.MetricsURLs)
	}
	drive(t, s, true)
	scrapes := waitExposed(t, endpoints(t, s), requiredSplit, queries)
	var report []string
	for svc, names := range scrapes {
		// The service's own metrics (runtime ones left out), for the log of a -v run.
		var own []string
		for n := range names {
			base, histogram := strings.CutSuffix(n, "_bucket")
			if !histogram && (strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") || strings.HasPrefix(n, "promhttp_") ||
				names[strings.TrimSuffix(n, "_sum")+"_bucket"] || names[strings.TrimSuffix(n, "_count")+"_bucket"]) {
				continue
			}
			own = append(own, base)
		}
		sort.Strings(own)
		report = append(report, fmt.Sprintf("%s (%d names): %s", svc, len(names), strings.Join(own, " ")))
	}
	sort.Strings(report)
	t.Log("\n" + strings.Join(report, "\n"))
}

// The all-in-one serves the gateway's /metrics (its services run in process, without
// endpoints of their own): the gateway dashboard's metrics are all there.
func TestDashboardsQueryExposedMetricsAllInOne(t *testing.T) {
	var queries []query
	for _, q := range loadDashboards(t) {
		if q.dashboard == "platform-gateway.json" {
			queries = append(queries, q)
		}
	}
	if len(queries) == 0 {
		t.Fatal("no gateway dashboard")
	}
	s, err := stack.Start(stack.Options{Mode: stack.AllInOne})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	drive(t, s, false)
	waitExposed(t, endpoints(t, s), map[string][]string{"gateway": requiredSplit["gateway"]}, queries)
}

func restConfig(t *testing.T, s *stack.Stack, user string, groups ...string) *rest.Config {
	t.Helper()
	cert, key, err := s.ClientCert(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: s.CAPEM, CertData: cert, KeyData: key}, QPS: -1, UserAgent: "platform-metrics-test"}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// drive makes requests that pass through every service: config map CRUD and a watch, a refused
// token, a forbidden request, and (full) a validating webhook that allows and rejects, and a CSR
// approved and signed.
func drive(t *testing.T, s *stack.Stack, full bool) {
	t.Helper()
	ctx := ctxFor(t)
	kube, err := kubernetes.NewForConfig(restConfig(t, s, "admin", "system:masters"))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "metrics"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"metrics-test": "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if full {
		webhook(t, s, kube, ns)
	}
	cms := kube.CoreV1().ConfigMaps(ns)
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 5 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Get(ctx, "cm-0", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "absent", metav1.GetOptions{}); err == nil {
		t.Fatal("got a config map never created")
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1"}, Data: map[string]string{"k": "w"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ResultChan():
	case <-ctx.Done():
		t.Fatal("the watch delivered nothing")
	}
	// A refused bearer token (authentication) and a user without permissions (authorization).
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(s.CAPEM), MinVersion: tls.VersionTLS12}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := plain.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a refused token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	nobody, err := s.HTTPClient("nobody")
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/namespaces/"+ns+"/configmaps", nil)
	if resp, err := nobody.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a user without permissions: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if full {
		signCSR(t, s)
	}
}

func pool(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemBytes)
	return p
}

// webhook registers a validating webhook for config maps in ns that rejects names starting with
// "reject", waits until the admission service calls it, and makes it allow and reject once more.
func webhook(t *testing.T, s *stack.Stack, kube kubernetes.Interface, ns string) {
	t.Helper()
	ctx := ctxFor(t)
	certPEM, keyPEM, err := s.CA.IssueServing("metrics-webhook", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev struct {
			APIVersion string `json:"apiVersion"`
			Request    struct {
				UID  string `json:"uid"`
				Name string `json:"name"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"uid": rev.Request.UID, "allowed": !strings.HasPrefix(rev.Request.Name, "reject")}
		if !resp["allowed"].(bool) {
			resp["status"] = map[string]any{"code": 403, "message": "rejected by the metrics test"}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": rev.APIVersion, "kind": "AdmissionReview", "response": resp})
	})}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + lis.Addr().(*net.TCPAddr).String() + "/validate"
	none := admissionregistrationv1.SideEffectClassNone
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "metrics-test"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name:                    "reject.metrics.test",
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: s.CAPEM},
		Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"metrics-test": "yes"}},
		SideEffects:             &none,
		AdmissionReviewVersions: []string{"v1"},
	}}}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The admission service reads configurations through a watch: dry-run until it rejects.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reject-probe"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "rejected by the metrics test") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook is not called within 15s (last answer: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signCSR creates a certificate signing request for the API client signer asking for an hour,
// approves it and waits until the certificates service has signed it.
func signCSR(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := ctxFor(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "metrics-user"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(restConfig(t, s, "admin", "system:masters"))
	if err != nil {
		t.Fatal(err)
	}
	group := "certificates." + naming.GroupSuffix
	res := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "certificatesigningrequests"})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "CertificateSigningRequest", "metadata": map[string]any{"name": "metrics"},
		"spec": map[string]any{
			"signerName":        naming.SignerAPIServerClient,
			"usages":            []any{"client auth"},
			"expirationSeconds": int64(3600),
		},
	}}
	// []byte is not a JSON value unstructured accepts: the request goes as its base64 string.
	if err := unstructured.SetNestedField(obj.Object, b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), "spec", "request"); err != nil {
		t.Fatal(err)
	}
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(created.Object, []any{map[string]any{"type": "Approved", "status": "True", "reason": "MetricsTest", "message": "approved by the metrics test"}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, created, metav1.UpdateOptions{}, "approval"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := res.Get(ctx, "metrics", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c, _, _ := unstructured.NestedString(got.Object, "status", "certificate"); c != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CSR is not signed within 15s: %v", got.Object["status"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
