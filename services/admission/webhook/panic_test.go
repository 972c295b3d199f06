package webhook

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/service"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// logBuffer collects JSON log records written from the dispatcher's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the records at level Error written since the last take, and forgets them all.
func (l *logBuffer) take(t *testing.T) (errs []map[string]any, all string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	all = l.b.String()
	for _, line := range strings.Split(strings.TrimSpace(all), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["level"] == "ERROR" {
			errs = append(errs, r)
		}
	}
	l.b.Reset()
	return errs, all
}

// withLog makes the env's plugins log JSON into a buffer.
func withLog(e *env) *logBuffer {
	l := &logBuffer{}
	e.deps.Log = slog.New(slog.NewJSONHandler(l, nil))
	return l
}

// The pod, user and label every request of these tests carries: none may reach the log.
const (
	panicPodName = "pod-n4me"
	panicUser    = "alice"
)

func panicPod() *admission.Attributes {
	return createPod(newPod(panicPodName, map[string]string{"secret-label": "l4bel"}))
}

// checkPanicLogged checks that the panic was logged once, at Error, with its value, the
// panicking goroutine's stack (down to frame) and the attribute key=value, and that the log says
// nothing of the request.
func checkPanicLogged(t *testing.T, logs *logBuffer, key, value, frame string) {
	t.Helper()
	errs, all := logs.take(t)
	if len(errs) != 1 {
		t.Fatalf("%d records at Error, want the panic's alone:\n%s", len(errs), all)
	}
	r := errs[0]
	if r[key] != value {
		t.Errorf("the panic's record has %s=%v, want %q", key, r[key], value)
	}
	if p, _ := r["panic"].(string); !strings.Contains(p, "assignment to entry in nil map") {
		t.Errorf("the panic's record has panic=%q, want the panic's value", p)
	}
	if s, _ := r["stack"].(string); !strings.Contains(s, frame) || !strings.Contains(s, "panic(") {
		t.Errorf("the panic's record has no stack down to %s:\n%s", frame, s)
	}
	for _, secret := range []string{panicPodName, panicUser, "l4bel"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log carries the request's %q:\n%s", secret, all)
		}
	}
}

// nilMapPanic panics as a real bug would: a runtime error.
func nilMapPanic() {
	var m map[string]int
	m["x"]++
}

// A panic on a validating webhook's goroutine is a failure to call that webhook: its
// failurePolicy decides (Fail: the request is rejected with an internal error that does not
// carry the panic's value; Ignore: the request is admitted, failed open), it is logged once with
// the stack and the webhook's name, the webhooks called beside it are unaffected, and the service
// (this process) serves the next request normally.
func TestValidatingWebhookPanicIsAFailedCall(t *testing.T) {
	srv := newHookServer(t, []string{"127.0.0.1"}, allow)
	const panicky, fine = "panicky.example.com", "fine.example.com"
	var armed atomic.Bool
	testHookValidatingCall = func(webhook string) {
		if webhook == panicky && armed.CompareAndSwap(true, false) {
			nilMapPanic()
		}
	}
	t.Cleanup(func() { testHookValidatingCall = nil })
	for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			logs := withLog(e)
			e.addValidating("cfg",
				hookSpec{name: panicky, url: srv.url(), failure: policy},
				hookSpec{name: fine, url: srv.url()})
			e.build()
			rejections := rejectionCount.WithLabelValues(panicky, typeValidating, "CREATE", errorTypeCallingWebhook, "500")
			failOpen := failOpenCount.WithLabelValues(panicky, typeValidating)
			rejBefore, openBefore := testutil.ToFloat64(rejections), testutil.ToFloat64(failOpen)

			armed.Store(true)
			before := srv.calls.Load()
			attrs := panicPod()
			err := e.run(attrs)
			if armed.Load() {
				t.Fatal("the test hook was not called")
			}
			if got := srv.calls.Load() - before; got != 1 {
				t.Errorf("the webhook server got %d calls, want 1 (%s's; %s's call panicked before it was sent)", got, fine, panicky)
			}
			checkPanicLogged(t, logs, "webhook", panicky, "callOne")
			switch policy {
			case admissionregistrationv1.Fail:
				se := statusOf(t, err)
				msg := se.ErrStatus.Message
				if se.ErrStatus.Code != 500 || !strings.Contains(msg, `failed calling webhook "`+panicky+`"`) || !strings.Contains(msg, "internal error") {
					t.Errorf("Fail: got %d %q, want 500, an internal error calling %s", se.ErrStatus.Code, msg, panicky)
				}
				if strings.Contains(msg, "nil map") {
					t.Errorf("Fail: the client is told the panic's value: %q", msg)
				}
				if got := testutil.ToFloat64(rejections) - rejBefore; got != 1 {
					t.Errorf("Fail: the calling_webhook_error rejection count grew by %v, want 1", got)
				}
			case admissionregistrationv1.Ignore:
				if err != nil {
					t.Errorf("Ignore: %v", err)
				}
				if got := attrs.Annotations()[validatingFailedOpenPrefix+"round_0_index_0"]; got != panicky {
					t.Errorf("Ignore: failed-open annotation %q, want %q", got, panicky)
				}
				if got := testutil.ToFloat64(failOpen) - openBefore; got != 1 {
					t.Errorf("Ignore: the fail open count grew by %v, want 1", got)
				}
			}

			// The service lives on: the next request calls both webhooks and is admitted.
			before = srv.calls.Load()
			if err := e.run(panicPod()); err != nil {
				t.Fatalf("the next request: %v", err)
			}
			if got := srv.calls.Load() - before; got != 2 {
				t.Errorf("the next request made %d calls, want 2", got)
			}
			if errs, all := logs.take(t); len(errs) != 0 {
				t.Errorf("the next request logged at Error:\n%s", all)
			}
		})
	}
}

// panickyObjects is the test's objects whose Service lister panics while armed.
type panickyObjects struct {
	*admissiontest.Objects
	armed *atomic.Bool
}

func (o panickyObjects) Services() admission.Lister[*corev1.Service] {
	return panickyLister{o.Objects.Services(), o.armed}
}

type panickyLister struct {
	admission.Lister[*corev1.Service]
	armed *atomic.Bool
}

func (l panickyLister) Get(namespace, name string) (*corev1.Service, bool) {
	if l.armed.CompareAndSwap(true, false) {
		nilMapPanic()
	}
	return l.Lister.Get(namespace, name)
}

// A service webhook's Service is looked up when the HTTP transport dials, on a goroutine of its
// own: a panic there is a failure to connect to the webhook, under its failurePolicy, and the
// next request connects.
func TestServiceLookupPanicIsAFailedCall(t *testing.T) {
	srv := newHookServer(t, []string{"hooks.webhooks.svc"}, allow)
	path := "/hook"
	ref := &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: "hooks", Port: ptr(srv.port()), Path: &path}
	const name = "svc.example.com"
	for _, policy := range []admissionregistrationv1.FailurePolicyType{admissionregistrationv1.Fail, admissionregistrationv1.Ignore} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			e.objects.ServiceList.Add(&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "webhooks", Name: "hooks"},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "127.0.0.1", Ports: []corev1.ServicePort{{Port: srv.port()}}}})
			var armed atomic.Bool
			e.deps.Objects = panickyObjects{e.objects, &armed}
			logs := withLog(e)
			e.addValidating("cfg", hookSpec{name: name, service: ref, failure: policy})
			e.build()

			armed.Store(true)
			before := srv.calls.Load()
			err := e.run(panicPod())
			if armed.Load() {
				t.Fatal("the Service was not looked up")
			}
			if got := srv.calls.Load() - before; got != 0 {
				t.Errorf("the webhook was called %d times, want 0", got)
			}
			checkPanicLogged(t, logs, "service", "webhooks/hooks", "resolveService")
			if policy == admissionregistrationv1.Ignore {
				if err != nil {
					t.Errorf("Ignore: %v", err)
				}
			} else {
				se := statusOf(t, err)
				if msg := se.ErrStatus.Message; se.ErrStatus.Code != 500 || !strings.Contains(msg, `failed calling webhook "`+name+`"`) ||
					!strings.Contains(msg, service.ErrPanicked.Error()) || strings.Contains(msg, "nil map") {
					t.Errorf("Fail: got %d %q, want 500, failed calling %s with %q", se.ErrStatus.Code, msg, name, service.ErrPanicked)
				}
			}

			before = srv.calls.Load()
			if err := e.run(panicPod()); err != nil {
				t.Fatalf("the next request: %v", err)
			}
			if got := srv.calls.Load() - before; got != 1 {
				t.Errorf("the next request made %d calls, want 1", got)
			}
		})
	}
}
