package webhook

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/warning"
	"platform.io/services/admission/admission"
)

func allow(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil }

func sleepy(d time.Duration) reviewHandler {
	return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		time.Sleep(d)
		return nil
	}
}

// The AdmissionReview a webhook receives: upstream's group and version, a fresh uid per call,
// the request's fields as the spec lists them.
func TestReviewRequestFields(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	e := newEnv(t)
	e.addValidating("cfg", hookSpec{name: "fields.example.com", url: srv.url()})
	attrs := createPod(newPod("p", map[string]string{"a": "b"}))
	attrs.User.Extra = map[string][]string{"scopes": {"x", "y"}}
	attrs.DryRun = true
	if err := e.run(attrs); err != nil {
		t.Fatal(err)
	}
	if err := e.run(attrs); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.versions[0] != "admission.platform.io/v1" {
		t.Errorf("apiVersion sent = %q, want the spec's admission.platform.io/v1", srv.versions[0])
	}
	r := srv.requests[0]
	if r.UID == "" || r.UID == srv.requests[1].UID || string(r.UID) == attrs.UID {
		t.Errorf("uid %q: want a fresh uid per call", r.UID)
	}
	if r.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}) || r.Resource != (metav1.GroupVersionResource{Version: "v1", Resource: "pods"}) ||
		r.RequestKind == nil || *r.RequestKind != r.Kind || r.RequestResource == nil || *r.RequestResource != r.Resource {
		t.Errorf("kind/resource = %+v %+v %+v %+v", r.Kind, r.Resource, r.RequestKind, r.RequestResource)
	}
	if r.Name != "p" || r.Namespace != "default" || r.Operation != admissionv1.Create || r.DryRun == nil || !*r.DryRun {
		t.Errorf("name/namespace/operation/dryRun = %q %q %q %v", r.Name, r.Namespace, r.Operation, r.DryRun)
	}
	if r.UserInfo.Username != "alice" || r.UserInfo.UID != "u-1" || len(r.UserInfo.Groups) != 2 || len(r.UserInfo.Extra["scopes"]) != 2 {
		t.Errorf("userInfo = %+v", r.UserInfo)
	}
	if !strings.Contains(string(r.Object.Raw), `"name":"p"`) || string(r.OldObject.Raw) != "null" && len(r.OldObject.Raw) != 0 {
		t.Errorf("object %s oldObject %s", r.Object.Raw, r.OldObject.Raw)
	}
	if !strings.Contains(string(r.Options.Raw), "CreateOptions") {
		t.Errorf("options = %s", r.Options.Raw)
	}
	if q := srv.queries[0]; q != "timeout=5s" {
		t.Errorf("query = %q, want timeout=5s (the webhook's timeout)", q)
	}
	if ua := srv.headers[0].Get("User-Agent"); ua != naming.Product+"-apiserver-admission" {
		t.Errorf("User-Agent = %q", ua)
	}
}

// Upstream: validating webhooks are called in parallel; two slow webhooks take one timeout.
func TestValidatingInParallel(t *testing.T) {
	one := newHookServer(t, []string{"127.0.0.1"}, sleepy(time.Second))
	two := newHookServer(t, []string{"127.0.0.1"}, sleepy(time.Second))
	e := newEnv(t)
	e.addValidating("a", hookSpec{name: "one.example.com", url: one.url()})
	e.addValidating("b", hookSpec{name: "two.example.com", url: two.url()})
	e.build()
	start := time.Now()
	if err := e.run(createPod(newPod("p", nil))); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if one.calls.Load() != 1 || two.calls.Load() != 1 {
		t.Fatalf("calls %d %d", one.calls.Load(), two.calls.Load())
	}
	if elapsed > 1800*time.Millisecond {
		t.Errorf("two 1s webhooks took %v: not called in parallel", elapsed)
	}
	t.Logf("two parallel 1s webhooks: %v", elapsed)
}

// Upstream (ToStatusErr): a denial keeps the webhook's code when it is 400 or more (else 400)
// and prefixes its message with the webhook's name; any validating rejection rejects.
func TestDenial(t *testing.T) {
	for _, tc := range []struct {
		name     string
		result   *metav1.Status
		wantCode int32
		wantMsg  string
		reason   metav1.StatusReason
	}{
		{"custom code and message", &metav1.Status{Code: 422, Message: "replicas must be odd", Reason: "Invalid"}, 422,
			`admission webhook "deny.example.com" denied the request: replicas must be odd`, "Invalid"},
		{"code below 400 becomes 400", &metav1.Status{Code: 200, Message: "no"}, 400, `admission webhook "deny.example.com" denied the request: no`, ""},
		{"reason as message", &metav1.Status{Code: 403, Reason: "NotAllowed"}, 403, `admission webhook "deny.example.com" denied the request: NotAllowed`, "NotAllowed"},
		{"no explanation", nil, 400, `admission webhook "deny.example.com" denied the request without explanation`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deny := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return &admissionv1.AdmissionResponse{Allowed: false, Result: tc.result}
			})
			ok := newHookServer(t, []string{"127.0.0.1"}, allow)
			e := newEnv(t)
			e.addValidating("a", hookSpec{name: "allow.example.com", url: ok.url()}, hookSpec{name: "deny.example.com", url: deny.url()})
			err := e.run(createPod(newPod("p", nil)))
			se := statusOf(t, err)
			if se.ErrStatus.Code != tc.wantCode || se.ErrStatus.Message != tc.wantMsg || se.ErrStatus.Reason != tc.reason || se.ErrStatus.Status != metav1.StatusFailure {
				t.Fatalf("got %d %q %q, want %d %q %q", se.ErrStatus.Code, se.ErrStatus.Message, se.ErrStatus.Reason, tc.wantCode, tc.wantMsg, tc.reason)
			}
		})
	}
}

// Upstream: a webhook that does not answer in time is a failed call: failurePolicy Ignore lets
// the request through (with a failed-open annotation), Fail rejects it with a 500.
func TestTimeouts(t *testing.T) {
	slow := newHookServer(t, []string{"127.0.0.1"}, sleepy(3*time.Second))
	for _, tc := range []struct {
		policy admissionregistrationv1.FailurePolicyType
		reject bool
	}{{admissionregistrationv1.Ignore, false}, {admissionregistrationv1.Fail, true}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			for _, mutating := range []bool{true, false} {
				e := newEnv(t)
				spec := hookSpec{name: "slow-" + strings.ToLower(string(tc.policy)) + ".example.com", url: slow.url(), timeout: 1, failure: tc.policy}
				if mutating {
					e.addMutating("cfg", spec)
				} else {
					e.addValidating("cfg", spec)
				}
				attrs := createPod(newPod("p", nil))
				start := time.Now()
				err := e.run(attrs)
				elapsed := time.Since(start)
				if elapsed > 2500*time.Millisecond || elapsed < 900*time.Millisecond {
					t.Errorf("mutating=%v: took %v, want about the 1s timeout", mutating, elapsed)
				}
				if !tc.reject {
					if err != nil {
						t.Fatalf("mutating=%v: %v", mutating, err)
					}
					prefix := validatingFailedOpenPrefix
					if mutating {
						prefix = mutationFailedOpenAnnotationPrefix
					}
					if got := attrs.Annotations()[prefix+"round_0_index_0"]; got != spec.name {
						t.Errorf("mutating=%v: failed-open annotation = %q", mutating, got)
					}
					continue
				}
				se := statusOf(t, err)
				if se.ErrStatus.Code != 500 || !strings.Contains(se.ErrStatus.Message, `failed calling webhook "`+spec.name+`"`) ||
					!strings.Contains(se.ErrStatus.Message, "deadline exceeded") {
					t.Errorf("mutating=%v: got %d %q", mutating, se.ErrStatus.Code, se.ErrStatus.Message)
				}
			}
		})
	}
}

// A webhook that is down, one whose certificate is not signed by the caBundle, and one without a
// caBundle (system roots) fail the call: Fail rejects, Ignore admits.
func TestFailedCalls(t *testing.T) {
	_, other := cas(t)
	up := newHookServer(t, []string{"127.0.0.1"}, allow)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "https://" + l.Addr().String() + "/hook"
	l.Close()
	for _, tc := range []struct {
		name string
		spec hookSpec
		want string
	}{
		{"webhook down", hookSpec{url: downURL}, "connection refused"},
		{"wrong CA", hookSpec{url: up.url(), caBundle: other.CertPEM}, "certificate signed by unknown authority"},
		{"system roots", hookSpec{url: up.url(), noCA: true}, "certificate signed by unknown authority"},
		{"bad caBundle", hookSpec{url: up.url(), caBundle: []byte("not pem")}, "unable to load root certificates"},
		{"no supported review version", hookSpec{url: up.url(), versions: []string{"v2"}}, "webhook does not accept known AdmissionReview versions (v1, v1beta1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
				e := newEnv(t)
				spec := tc.spec
				spec.name, spec.failure = "failing.example.com", policy
				e.addValidating("cfg", spec)
				err := e.run(createPod(newPod("p", nil)))
				if policy == admissionregistrationv1.Ignore {
					if err != nil {
						t.Errorf("Ignore: %v", err)
					}
					continue
				}
				se := statusOf(t, err)
				if se.ErrStatus.Code != 500 || !strings.Contains(se.ErrStatus.Message, `failed calling webhook "failing.example.com"`) || !strings.Contains(se.ErrStatus.Message, tc.want) {
					t.Errorf("Fail: got %d %q, want 500 with %q", se.ErrStatus.Code, se.ErrStatus.Message, tc.want)
				}
			}
		})
	}
}

// Upstream: a dry-run request that would call a webhook whose sideEffects is not None or
// NoneOnDryRun fails with 400; the others are called with dryRun true.
func TestSideEffectsAndDryRun(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	for _, tc := range []struct {
		side     *admissionregistrationv1.SideEffectClass
		dryRun   bool
		wantErr  string
		wantCall bool
	}{
		{ptr(admissionregistrationv1.SideEffectClassSome), true, `admission webhook "side.example.com" does not support dry run`, false},
		{ptr(admissionregistrationv1.SideEffectClassUnknown), true, `admission webhook "side.example.com" does not support dry run`, false},
		{ptr(admissionregistrationv1.SideEffectClassSome), false, "", true},
		{ptr(admissionregistrationv1.SideEffectClassNone), true, "", true},
		{ptr(admissionregistrationv1.SideEffectClassNoneOnDryRun), true, "", true},
		{nil, true, "Webhook SideEffects is nil", false},
	} {
		for _, mutating := range []bool{true, false} {
			name := "nil"
			if tc.side != nil {
				name = string(*tc.side)
			}
			e := newEnv(t)
			spec := hookSpec{name: "side.example.com", url: srv.url(), sideEffects: tc.side, omitSideEffects: tc.side == nil}
			if mutating {
				e.addMutating("cfg", spec)
			} else {
				e.addValidating("cfg", spec)
			}
			before := srv.calls.Load()
			attrs := createPod(newPod("p", nil))
			attrs.DryRun = tc.dryRun
			err := e.run(attrs)
			called := srv.calls.Load() > before
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s dryRun=%v mutating=%v: %v", name, tc.dryRun, mutating, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("%s dryRun=%v mutating=%v: got %v, want %q", name, tc.dryRun, mutating, err, tc.wantErr)
			case called != tc.wantCall:
				t.Errorf("%s dryRun=%v mutating=%v: called=%v", name, tc.dryRun, mutating, called)
			}
			if tc.wantErr != "" && strings.Contains(tc.wantErr, "dry run") && statusOf(t, err).ErrStatus.Code != 400 {
				t.Errorf("%s: code %d, want 400", name, statusOf(t, err).ErrStatus.Code)
			}
		}
	}
}

// clientConfig.service: the Service object decides where to connect (a cluster IP, an external
// name, else the service's DNS name); the TLS server name is always <name>.<namespace>.svc.
func TestServiceResolution(t *testing.T) {
	srv := newHookServer(t, []string{"hooks.webhooks.svc"}, allow)
	path := "/hook"
	ref := &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: "hooks", Port: ptr(srv.port()), Path: &path}
	for _, tc := range []struct {
		name    string
		service *corev1.Service
		wantErr string
	}{
		{"cluster IP", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "127.0.0.1",
			Ports: []corev1.ServicePort{{Port: srv.port()}}}}, ""},
		{"external name", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"}}, ""},
		{"cluster IP without the port", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.1", Ports: []corev1.ServicePort{{Port: 1}}}},
			`no service port`},
		{"no Service: DNS name", nil, "hooks.webhooks.svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.service != nil {
				tc.service.Name, tc.service.Namespace = "hooks", "webhooks"
				e.objects.ServiceList.Add(tc.service)
			}
			e.addValidating("cfg", hookSpec{name: "svc.example.com", service: ref})
			before := srv.calls.Load()
			err := e.run(createPod(newPod("p", nil)))
			if tc.wantErr == "" {
				if err != nil || srv.calls.Load() != before+1 {
					t.Fatalf("err %v, calls %d", err, srv.calls.Load()-before)
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// Malformed answers are failed calls (the failurePolicy decides): wrong uid, not JSON, the
// wrong version, no response, over 3 MiB, a patch from a validating webhook, an HTTP error.
// Upstream's v1beta1 leniency (no uid or kind check) is kept; answers in the spec's group are
// accepted.
func TestMalformedAnswers(t *testing.T) {
	big := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"warnings":["` + strings.Repeat("x", MaxResponseBytes) + `"]}}`
	for _, tc := range []struct {
		name     string
		versions []string
		status   int
		body     string
		want     string // "" means admitted
	}{
		{"wrong uid", nil, 200, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"other","allowed":true}}`,
			`received invalid webhook response: expected response.uid=`},
		{"not JSON", nil, 200, `<html>hello</html>`, "failed to call webhook: decoding the AdmissionReview"},
		{"wrong version", nil, 200, `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true}}`,
			"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview"},
		{"no response", nil, 200, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "webhook response was absent"},
		{"oversized", nil, 200, big, "the response is larger than 3145728 bytes"},
		{"validating webhook patches", nil, 200, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"patchType":"JSONPatch","patch":"W10="}}`,
			"validating webhook may not return response.patch"},
		{"HTTP error with a Status", nil, 500, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","code":500}`, "boom"},
		{"HTTP error without a Status", nil, 502, `bad gateway`, "bad gateway"},
		{"answer in the spec's group", nil, 200, `{"apiVersion":"` + naming.Group("admission.k8s.io") + `/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true}}`, ""},
		{"v1beta1 answer without uid or kind", []string{"v1beta1"}, 200, `{"response":{"allowed":true}}`, ""},
		{"v1beta1 denial", []string{"v1beta1", "v1"}, 200, `{"response":{"allowed":false,"status":{"message":"old style"}}}`, "denied the request: old style"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRawServer(t, []string{"127.0.0.1"}, func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
				if tc.status != 200 {
					w.WriteHeader(tc.status)
				}
				_, _ = w.Write([]byte(strings.ReplaceAll(tc.body, "UID", string(review.Request.UID))))
			})
			e := newEnv(t)
			e.addValidating("cfg", hookSpec{name: "bad.example.com", url: srv.url(), versions: tc.versions})
			err := e.run(createPod(newPod("p", nil)))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if tc.versions != nil && tc.versions[0] == "v1beta1" {
				srv.mu.Lock()
				v := srv.versions[0]
				srv.mu.Unlock()
				if v != "admission.platform.io/v1beta1" {
					t.Errorf("sent %s, want the first supported version v1beta1", v)
				}
			}
		})
	}
}

// The spec's rejection metric: labels name, type, operation, error_type and rejection_code
// (codes over 600 reported as 600), and the request and latency metrics.
func TestRejectionMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := SetMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := SetMetrics(reg); err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	deny := func(code int32) reviewHandler {
		return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: code, Message: "no"}}
		}
	}
	d422 := newHookServer(t, []string{"127.0.0.1"}, deny(422))
	d777 := newHookServer(t, []string{"127.0.0.1"}, deny(777))
	slow := newHookServer(t, []string{"127.0.0.1"}, sleepy(2*time.Second))
	broken := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return jsonPatch(map[string]any{"op": "replace", "path": "/spec/containers", "value": 1})
	})
	for _, tc := range []struct {
		mutating bool
		spec     hookSpec
		labels   []string // type, error_type, rejection_code
	}{
		{false, hookSpec{name: "m-422.example.com", url: d422.url()}, []string{"validating", "no_error", "422"}},
		{true, hookSpec{name: "m-777.example.com", url: d777.url()}, []string{"admit", "no_error", "600"}},
		{false, hookSpec{name: "m-timeout.example.com", url: slow.url(), timeout: 1}, []string{"validating", "calling_webhook_error", "503"}},
		{true, hookSpec{name: "m-broken.example.com", url: broken.url()}, []string{"admit", "apiserver_internal_error", "0"}},
	} {
		e := newEnv(t)
		if tc.mutating {
			e.addMutating("cfg", tc.spec)
		} else {
			e.addValidating("cfg", tc.spec)
		}
		rejections := rejectionCount.WithLabelValues(tc.spec.name, tc.labels[0], "CREATE", tc.labels[1], tc.labels[2])
		requests := requestTotal.WithLabelValues(tc.spec.name, tc.labels[0], "CREATE", tc.labels[2], "true")
		rejBefore, reqBefore := testutil.ToFloat64(rejections), testutil.ToFloat64(requests)
		if err := e.run(createPod(newPod("p", nil))); err == nil {
			t.Fatalf("%s admitted", tc.spec.name)
		}
		if got := testutil.ToFloat64(rejections) - rejBefore; got != 1 {
			t.Errorf("%s: apiserver_admission_webhook_rejection_count%v grew by %v, want 1", tc.spec.name, tc.labels, got)
		}
		if got := testutil.ToFloat64(requests) - reqBefore; got != 1 {
			t.Errorf("%s: apiserver_admission_webhook_request_total grew by %v, want 1", tc.spec.name, got)
		}
	}
	// An ignored failure is not a rejection.
	e := newEnv(t)
	e.addValidating("cfg", hookSpec{name: "m-ignored.example.com", url: slow.url(), timeout: 1, failure: admissionregistrationv1.Ignore})
	failOpen := failOpenCount.WithLabelValues("m-ignored.example.com", "validating")
	failOpenBefore := testutil.ToFloat64(failOpen)
	if err := e.run(createPod(newPod("p", nil))); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() != "apiserver_admission_webhook_rejection_count" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "m-ignored.example.com" {
					t.Errorf("an ignored failure was counted as a rejection: %v", m.GetLabel())
				}
			}
		}
	}
	if got := testutil.ToFloat64(failOpen) - failOpenBefore; got != 1 {
		t.Errorf("fail open count grew by %v, want 1", got)
	}
	for _, n := range []string{"apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_admission_duration_seconds",
		"apiserver_admission_webhook_request_total", "apiserver_admission_webhook_fail_open_count"} {
		if !names[n] {
			t.Errorf("metric %s is not registered", n)
		}
	}
}

// Upstream: webhook warnings reach the client; the spec's size rules apply; the webhook's audit
// annotations are recorded under "<webhook>/<key>".
func TestWarningsAndAuditAnnotations(t *testing.T) {
	long := strings.Repeat("w", 300)
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, strings.Repeat(string(rune('a'+i%26)), 150)+"-"+string(rune('A'+i)))
	}
	srv := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: append([]string{"first", "first", long}, many...),
			AuditAnnotations: map[string]string{"decision": "ok"}}
	})
	e := newEnv(t)
	e.addValidating("cfg", hookSpec{name: "warn.example.com", url: srv.url()})
	attrs := createPod(newPod("p", nil))
	if err := e.run(attrs); err != nil {
		t.Fatal(err)
	}
	ws := attrs.Warnings()
	if len(ws) == 0 || ws[0] != "first" || (len(ws) > 1 && ws[1] == "first") {
		t.Fatalf("warnings %q: want the first once", ws)
	}
	total := 0
	for _, w := range ws {
		if len([]rune(w)) > warning.MessageMax {
			t.Errorf("a %d-character warning was not truncated", len(w))
		}
		total += len(w) + len(`299 - ""`)
	}
	if total > warning.TotalMax+warning.MessageMax+16 {
		t.Errorf("warnings total %d bytes", total)
	}
	if len(ws) >= 1+1+len(many) {
		t.Errorf("no warning was dropped (%d kept)", len(ws))
	}
	if got := attrs.Annotations()["warn.example.com/decision"]; got != "ok" {
		t.Errorf("webhook audit annotation = %q", got)
	}
}

// Upstream: requests on webhook configurations never go to webhooks.
func TestConfigurationsAreExempt(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false}
	})
	e := newEnv(t)
	e.addValidating("cfg", hookSpec{name: "all.example.com", url: srv.url(), rules: []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{"*"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
	}}})
	group := naming.Group("admissionregistration.k8s.io")
	attrs := &admission.Attributes{Operation: admission.Create,
		Kind:     metav1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"),
		Resource: metav1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"), Name: "cfg", UID: "x"}
	attrs.Kind.Group, attrs.Kind.Version, attrs.Resource.Group, attrs.Resource.Version = group, "v1", group, "v1"
	if err := e.run(attrs); err != nil || srv.calls.Load() != 0 {
		t.Fatalf("err %v calls %d", err, srv.calls.Load())
	}
	if err := e.run(createPod(newPod("p", nil))); err == nil {
		t.Fatal("the catch-all webhook did not see a pod")
	}
}

// The context's own deadline ends the chain with upstream's 504.
func TestRequestDeadline(t *testing.T) {
	slow := newHookServer(t, []string{"127.0.0.1"}, sleepy(2*time.Second))
	e := newEnv(t)
	e.addMutating("a", hookSpec{name: "slow.example.com", url: slow.url(), failure: admissionregistrationv1.Ignore})
	e.addMutating("b", hookSpec{name: "slow2.example.com", url: slow.url(), failure: admissionregistrationv1.Ignore})
	chain := e.build()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := chain.Admit(ctx, createPod(newPod("p", nil)))
	if se := statusOf(t, err); se.ErrStatus.Code != 504 {
		t.Fatalf("got %v, want 504", err)
	}
	if time.Since(start) > 1500*time.Millisecond {
		t.Errorf("took %v", time.Since(start))
	}
	if slow.calls.Load() != 1 {
		t.Errorf("calls %d, want 1 (no call after the deadline)", slow.calls.Load())
	}
}
