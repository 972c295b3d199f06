package webhook

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// BenchmarkNoMatchingWebhook is the cost a request pays when 20 configurations exist and none
// matches it (listing, the compiled-hook cache check, rule matching).
func BenchmarkNoMatchingWebhook(b *testing.B) {
	e := newEnv(&testing.T{})
	for i := 0; i < 20; i++ {
		e.t = &testing.T{}
		e.addValidating(fmt.Sprintf("cfg-%02d", i), hookSpec{name: fmt.Sprintf("h%d.example.com", i), url: "https://127.0.0.1:1/x",
			rules: []admissionregistrationv1.RuleWithOperations{rule([]string{"CREATE"}, []string{"apps"}, []string{"v1"}, []string{"deployments"}, "")}})
	}
	chain := e.build()
	attrs := createPod(newPod("p", nil))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := chain.Validate(ctx, attrs); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkCalls(b *testing.B, mutating bool, conds []admissionregistrationv1.MatchCondition, handler reviewHandler) {
	t := &testing.T{}
	srv := newHookServer(t, []string{"127.0.0.1"}, handler)
	defer srv.Close()
	e := newEnv(t)
	spec := hookSpec{name: "bench.example.com", url: srv.url(), conditions: conds}
	if mutating {
		e.addMutating("cfg", spec)
	} else {
		e.addValidating("cfg", spec)
	}
	chain := e.build()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		attrs := createPod(newPod("p", map[string]string{"app": "web"}))
		start := time.Now()
		var err error
		if mutating {
			err = chain.Admit(ctx, attrs)
		} else {
			err = chain.Validate(ctx, attrs)
		}
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}

// BenchmarkValidatingNoop is one matching no-op validating webhook on loopback HTTPS.
func BenchmarkValidatingNoop(b *testing.B) { benchmarkCalls(b, false, nil, allow) }

// BenchmarkMutatingPatch is one mutating webhook answering a one-operation JSON patch.
func BenchmarkMutatingPatch(b *testing.B) {
	benchmarkCalls(b, true, nil, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return jsonPatch(map[string]any{"op": "add", "path": "/metadata/labels/seen", "value": "1"})
	})
}

// BenchmarkValidatingWithConditions adds two matchConditions to the no-op webhook.
func BenchmarkValidatingWithConditions(b *testing.B) {
	benchmarkCalls(b, false, []admissionregistrationv1.MatchCondition{
		{Name: "app", Expression: "object.metadata.labels['app'] == 'web'"},
		{Name: "user", Expression: "!request.userInfo.username.startsWith('system:')"},
	}, allow)
}
