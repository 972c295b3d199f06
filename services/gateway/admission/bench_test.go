package admission_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"platform.io/libs/naming"
	"platform.io/services/gateway/gatewaytest"
)

// BenchmarkCreateValidatingAdmissionPolicy is ConfigMap creates through the real split stack in
// one process (HTTPS with HTTP/2, the gateway, gRPC to the admission and storage services on
// loopback; 8 parallel clients, as BenchmarkCreate in apiserver): first with no policy (the
// gateway's interest set skips the admission hop), then matched by one ValidatingAdmissionPolicy
// (two validations, one with a messageExpression) bound with Deny that admits them. Both in one
// run, on one stack: compare the two ns/op.
func BenchmarkCreateValidatingAdmissionPolicy(b *testing.B) {
	e := gatewaytest.Start(b, gatewaytest.Options{})
	const cms = "/api/v1/namespaces/default/configmaps"
	var n atomic.Int64
	creates := func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		cpu := cpuTime()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if code := post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("obj-%d", n.Add(1)))); code != http.StatusCreated {
					b.Fatalf("create: %d", code)
				}
			}
		})
		b.StopTimer()
		// Every service runs in this process: its CPU time per create is the stack's, and
		// unlike ns/op it does not move with what else runs on the machine.
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	}
	b.Run("none", creates)

	group := naming.Group("admissionregistration.k8s.io")
	post(b, e.Admin, e.URL+"/apis/"+group+"/v1/validatingadmissionpolicies", mustJSON(b, map[string]any{
		"metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{
			"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
				"operations": []string{"CREATE", "UPDATE"}, "apiGroups": []string{""}, "apiVersions": []string{"v1"}, "resources": []string{"configmaps"},
			}}},
			"validations": []any{
				map[string]any{"expression": "!has(object.data) || size(object.data) <= 16", "messageExpression": "'too many keys: ' + string(size(object.data))"},
				map[string]any{"expression": "!object.metadata.name.startsWith('denied')", "message": "denied names"},
			},
		},
	}))
	post(b, e.Admin, e.URL+"/apis/"+group+"/v1/validatingadmissionpolicybindings", mustJSON(b, map[string]any{
		"metadata": map[string]any{"name": "bench"},
		"spec":     map[string]any{"policyName": "bench", "validationActions": []string{"Deny"}},
	}))
	// In effect once the gateway asks admission for config map creates and the service has the
	// policy: a denied name is refused.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("denied-%d", i))) != http.StatusUnprocessableEntity; i++ {
		if time.Now().After(deadline) {
			b.Fatal("the policy did not take effect within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Run("one-policy", creates)
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func post(b *testing.B, c *http.Client, url string, body []byte) int {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func mustJSON(b *testing.B, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// cmBody is BenchmarkCreate's ConfigMap (~300 bytes).
func cmBody(name string) []byte {
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]string{"app": "bench"}},
		"data": map[string]string{"key1": "value-one", "key2": "value-two", "key3": "a somewhat longer value to make it realistic"}})
	return data
}
