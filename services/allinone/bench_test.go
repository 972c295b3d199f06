package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/naming"
)

// BenchmarkCreateValidatingAdmissionPolicy is services/gateway/admission's benchmark of the same
// name on the all-in-one, where the gateway reaches the admission service in process: ConfigMap
// creates (8 parallel clients) with no policy, then matched by one ValidatingAdmissionPolicy that
// admits them, on one platform, with the process's CPU time per create.
func BenchmarkCreateValidatingAdmissionPolicy(b *testing.B) {
	cfg := defaultConfig()
	fs := pflag.NewFlagSet("platform", pflag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := fs.Parse([]string{"--data-dir=" + b.TempDir(), "--secure-port=0"}); err != nil {
		b.Fatal(err)
	}
	cfg.parsed(fs)
	p, err := start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.stop(context.Background()) })
	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.Host = p.url
	transport, err := rest.TransportFor(rc)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: transport}
	post := func(path string, body []byte) int {
		resp, err := client.Post(p.url+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	cmBody := func(name string) []byte {
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]string{"app": "bench"}},
			"data": map[string]string{"key1": "value-one", "key2": "value-two", "key3": "a somewhat longer value to make it realistic"}})
		return data
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	var n atomic.Int64
	creates := func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		cpu := processCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if code := post(cms, cmBody(fmt.Sprintf("obj-%d", n.Add(1)))); code != http.StatusCreated {
					b.Fatalf("create: %d", code)
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	}
	b.Run("none", creates)

	group := naming.Group("admissionregistration.k8s.io")
	policy, _ := json.Marshal(map[string]any{
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
	})
	binding, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{"policyName": "bench", "validationActions": []string{"Deny"}}})
	if code := post("/apis/"+group+"/v1/validatingadmissionpolicies", policy); code != http.StatusCreated {
		b.Fatalf("policy: %d", code)
	}
	if code := post("/apis/"+group+"/v1/validatingadmissionpolicybindings", binding); code != http.StatusCreated {
		b.Fatalf("binding: %d", code)
	}
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; post(cms, cmBody(fmt.Sprintf("denied-%d", i))) != http.StatusUnprocessableEntity; i++ {
		if time.Now().After(deadline) {
			b.Fatal("the policy did not take effect within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Run("one-policy", creates)
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
