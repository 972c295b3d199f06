package basic

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// clock is a settable time source for the buckets.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func eventReq(ns, user string, ev *corev1.Event) *admission.Attributes {
	if ev == nil {
		ev = &corev1.Event{}
	}
	ev.Name, ev.Namespace = "e", ns
	a := req(admission.Create, "", "events", "", "Event", ns, ev, nil)
	a.User = &admission.User{Name: user}
	return a
}

func newRateLimit(t *testing.T, config string) (admission.Plugin, *clock) {
	t.Helper()
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	d := deps()
	d.Now = c.Now
	return build(t, admission.EventRateLimit, d, config), c
}

func TestEventRateLimitBuckets(t *testing.T) {
	t.Run("upstream: a Server bucket allows burst, then 429 until it refills at qps", func(t *testing.T) {
		p, clk := newRateLimit(t, `{"apiVersion": "eventratelimit.admission.k8s.io/v1alpha1", "kind": "Configuration", "limits": [{"type": "Server", "qps": 2, "burst": 3}]}`)
		for i := 0; i < 3; i++ {
			wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		}
		// upstream wraps the enforcer's 429 into another, so its message says it twice.
		wantStatus(t, run(p, eventReq("b", "v", nil)), 429, "Too many requests: Too many requests: limit reached on type Server for key ")
		clk.step(500 * time.Millisecond) // one token at 2 qps
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", nil)), 429, "Too many requests: Too many requests: limit reached on type Server for key ")
		clk.step(time.Hour) // refills to burst, not beyond
		for i := 0; i < 3; i++ {
			wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		}
		wantStatus(t, run(p, eventReq("a", "u", nil)), 429, "Too many requests: Too many requests: limit reached on type Server for key ")
	})
	t.Run("upstream: Namespace buckets are per namespace", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "Namespace", "qps": 1, "burst": 1}]}`)
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", nil)), 429, "Too many requests: Too many requests: limit reached on type Namespace for key a")
		wantStatus(t, run(p, eventReq("b", "u", nil)), 0, "")
	})
	t.Run("upstream: User buckets are per user", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "User", "qps": 1, "burst": 1}]}`)
		wantStatus(t, run(p, eventReq("a", "kubelet", nil)), 0, "")
		wantStatus(t, run(p, eventReq("b", "kubelet", nil)), 429, "Too many requests: Too many requests: limit reached on type User for key kubelet")
		wantStatus(t, run(p, eventReq("a", "scheduler", nil)), 0, "")
	})
	t.Run("upstream: SourceAndObject buckets are per source and involved object", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "SourceAndObject", "qps": 1, "burst": 1}]}`)
		ev := func(host, obj string) *corev1.Event {
			return &corev1.Event{Source: corev1.EventSource{Component: "kubelet", Host: host}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "a", Name: obj, UID: "uid", APIVersion: "v1"}}
		}
		wantStatus(t, run(p, eventReq("a", "u", ev("n1", "web"))), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", ev("n1", "web"))), 429, "Too many requests: Too many requests: limit reached on type SourceAndObject for key kubeletn1Podawebuidv1")
		wantStatus(t, run(p, eventReq("a", "u", ev("n2", "web"))), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", ev("n1", "db"))), 0, "")
	})
	t.Run("upstream: the least recently used bucket is forgotten beyond cacheSize", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "Namespace", "qps": 1, "burst": 1, "cacheSize": 1}]}`)
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		wantStatus(t, run(p, eventReq("b", "u", nil)), 0, "") // evicts a's empty bucket
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "") // a starts full again
		for _, ns := range []string{"c", "d", "e"} {
			wantStatus(t, run(p, eventReq(ns, "u", nil)), 0, "")
		}
		if n := p.(*eventRateLimit).enforcers[0].buckets.len(); n != 1 {
			t.Errorf("%d buckets kept, cacheSize is 1", n)
		}
	})
	t.Run("upstream: every limit is charged and refusals are aggregated", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "Server", "qps": 1, "burst": 1}, {"type": "Namespace", "qps": 1, "burst": 1}]}`)
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", nil)), 429, "Too many requests: [Too many requests: limit reached on type Server for key , Too many requests: limit reached on type Namespace for key a]")
	})
	t.Run("upstream: dry runs and other kinds are not counted", func(t *testing.T) {
		p, _ := newRateLimit(t, `{"limits": [{"type": "Server", "qps": 1, "burst": 1}]}`)
		dry := eventReq("a", "u", nil)
		dry.DryRun = true
		wantStatus(t, run(p, dry), 0, "")
		wantStatus(t, run(p, dry), 0, "")
		other := req(admission.Create, naming.Group("events.k8s.io"), "events", "", "Event", "a", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, nil)
		wantStatus(t, run(p, other), 0, "")
		wantStatus(t, run(p, eventReq("a", "u", nil)), 0, "")
	})
}

func TestEventRateLimitConcurrent(t *testing.T) {
	// A frozen clock: exactly burst requests may pass however many race for them.
	p, _ := newRateLimit(t, `{"limits": [{"type": "Server", "qps": 1, "burst": 50}, {"type": "Namespace", "qps": 1, "burst": 1000}]}`)
	var passed atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if run(p, eventReq("ns", "u", nil)) == nil {
					passed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := passed.Load(); n != 50 {
		t.Fatalf("%d of 320 concurrent events passed, want exactly the burst of 50", n)
	}
}

func TestEventRateLimitConfiguration(t *testing.T) {
	cases := []struct {
		name, config, err string
	}{
		{"upstream: no configuration means no limits, which is invalid", "", `EventRateLimit: limits: Invalid value: "null": must not be empty`},
		{"upstream: unknown type", `{"limits": [{"type": "Pod", "qps": 1, "burst": 1}]}`, `EventRateLimit: limits[0].type: Unsupported value: "Pod": supported values: "Namespace", "Server", "SourceAndObject", "User"`},
		{"upstream: qps and burst must be positive", `{"limits": [{"type": "User", "qps": 0, "burst": -1}]}`, "EventRateLimit: [limits[0].burst: Invalid value: -1: must be positive, limits[0].qps: Invalid value: 0: must be positive]"},
		{"upstream: cacheSize must not be negative", `{"limits": [{"type": "User", "qps": 1, "burst": 1, "cacheSize": -1}]}`, "EventRateLimit: limits[0].cacheSize: Invalid value: -1: must not be negative"},
		{"another kind", `{"apiVersion": "v1", "kind": "ConfigMap", "limits": [{"type": "User", "qps": 1, "burst": 1}]}`, "EventRateLimit: the configuration must be kind Configuration in " + eventRateLimitGroupVersion + `, not "ConfigMap" in "v1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := buildErr(admission.EventRateLimit, deps(), c.config)
			if err == nil || err.Error() != c.err {
				t.Fatalf("err\n got %v\nwant %s", err, c.err)
			}
		})
	}
	p := build(t, admission.EventRateLimit, deps(), `{"limits": [{"type": "Server", "qps": 1, "burst": 1}]}`)
	if !interested(p, req(admission.Update, "", "events", "", "Event", "ns", nil, nil)) || interested(p, req(admission.Create, "", "pods", "", "Pod", "ns", nil, nil)) {
		t.Error("interest: core events creates and updates only")
	}
}

// BenchmarkEventRateLimit measures one event write through all four limit types (buckets
// never run dry: the clock is real and the rates high).
func BenchmarkEventRateLimit(b *testing.B) {
	p, err := buildErr(admission.EventRateLimit, deps(), `{"limits": [{"type": "Server", "qps": 1000000000, "burst": 1000000000}, {"type": "Namespace", "qps": 1000000000, "burst": 1000000000}, {"type": "User", "qps": 1000000000, "burst": 1000000000}, {"type": "SourceAndObject", "qps": 1000000000, "burst": 1000000000}]}`)
	if err != nil {
		b.Fatal(err)
	}
	a := eventReq("ns", "kubelet", &corev1.Event{Source: corev1.EventSource{Component: "kubelet", Host: "n1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}})
	b.ReportAllocs()
	for b.Loop() {
		if err := run(p, a); err != nil {
			b.Fatal(err)
		}
	}
}
