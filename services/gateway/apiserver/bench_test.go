package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
)

// The gateway's hot paths through the real stack in one process (HTTPS with HTTP/2, the gateway,
// gRPC to an embedded storage service on loopback): what a client sees per request.

func benchEnv(b *testing.B) *gatewaytest.Env {
	return gatewaytest.Start(b, gatewaytest.Options{})
}

func post(b *testing.B, c *http.Client, url string, body []byte) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("create: %d", resp.StatusCode)
	}
}

func cmBody(name string) []byte {
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]string{"app": "bench"}},
		"data": map[string]string{"key1": "value-one", "key2": "value-two", "key3": "a somewhat longer value to make it realistic"}})
	return data
}

func BenchmarkCreate(b *testing.B) {
	e := benchEnv(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("cm-%d", n.Add(1))))
		}
	})
}

func BenchmarkGet(b *testing.B) {
	e := benchEnv(b)
	for i := 0; i < 100; i++ {
		post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("cm-%d", i)))
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := e.Admin.Get(fmt.Sprintf("%s%s/cm-%d", e.URL, cms, n.Add(1)%100))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("get: %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkList2000 is one unpaged JSON list of 2,000 ConfigMaps per op.
func BenchmarkList2000(b *testing.B) {
	e := benchEnv(b)
	for i := 0; i < 2000; i++ {
		post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("cm-%04d", i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := e.Admin.Get(e.URL + cms)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n < 2000*200 {
			b.Fatalf("list: %d, %d bytes", resp.StatusCode, n)
		}
	}
}

// BenchmarkMergePatch is a merge patch of one of 100 ConfigMaps per op (8 parallel clients).
func BenchmarkMergePatch(b *testing.B) {
	benchWrite(b, "application/merge-patch+json", func(i int64) []byte {
		return []byte(fmt.Sprintf(`{"data":{"counter":"%d"}}`, i))
	})
}

// BenchmarkApply is a server-side apply of one of 100 ConfigMaps per op (8 parallel clients).
func BenchmarkApply(b *testing.B) {
	benchWrite(b, "application/apply-patch+yaml", func(i int64) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d"},"data":{"key1":"value-one","counter":"%d"}}`, i%100, i))
	})
}

func benchWrite(b *testing.B, contentType string, body func(int64) []byte) {
	e := benchEnv(b)
	for i := 0; i < 100; i++ {
		post(b, e.Admin, e.URL+cms, cmBody(fmt.Sprintf("cm-%d", i)))
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s%s/cm-%d?fieldManager=bench", e.URL, cms, i%100), bytes.NewReader(body(i)))
			req.Header.Set("Content-Type", contentType)
			resp, err := e.Admin.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%s: %d", contentType, resp.StatusCode)
			}
		}
	})
}

// Custom resources: the same paths for a kind defined by a CustomResourceDefinition (objects
// pruned, defaulted and validated against the schema, stored as JSON).

const benchWidgets = "/apis/example.com/v1/namespaces/default/widgets"

func customBenchEnv(b *testing.B) *gatewaytest.Env {
	e := benchEnv(b)
	resp, err := e.Admin.Post(e.URL+crdsPath, "application/json", bytes.NewReader([]byte(widgetCRD)))
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("creating the definition: %d", resp.StatusCode)
	}
	for i := 0; ; i++ {
		resp, err := e.Admin.Get(e.URL + benchWidgets)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e
			}
		}
		if i > 500 {
			b.Fatal("the definition was not established")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func widgetBody(name string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":%q,"labels":{"app":"bench"}},
	  "spec":{"size":3,"tags":["a","b"],"ports":[{"name":"http","port":80},{"name":"https","port":443}]}}`, name))
}

func BenchmarkCustomCreate(b *testing.B) {
	e := customBenchEnv(b)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, e.Admin, e.URL+benchWidgets, widgetBody(fmt.Sprintf("w-%d", n.Add(1))))
		}
	})
}

func BenchmarkCustomGet(b *testing.B) {
	e := customBenchEnv(b)
	for i := 0; i < 100; i++ {
		post(b, e.Admin, e.URL+benchWidgets, widgetBody(fmt.Sprintf("w-%d", i)))
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := e.Admin.Get(fmt.Sprintf("%s%s/w-%d", e.URL, benchWidgets, n.Add(1)%100))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("get: %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkCustomList2000 is one unpaged JSON list of 2,000 custom objects per op.
func BenchmarkCustomList2000(b *testing.B) {
	e := customBenchEnv(b)
	for i := 0; i < 2000; i++ {
		post(b, e.Admin, e.URL+benchWidgets, widgetBody(fmt.Sprintf("w-%04d", i)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := e.Admin.Get(e.URL + benchWidgets)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n < 2000*200 {
			b.Fatalf("list: %d, %d bytes", resp.StatusCode, n)
		}
	}
}

// BenchmarkCustomApply is a server-side apply of one of 100 custom objects per op (8 parallel
// clients), merging a map list by key (forced: the creator owns the fields first).
func BenchmarkCustomApply(b *testing.B) {
	e := customBenchEnv(b)
	for i := 0; i < 100; i++ {
		post(b, e.Admin, e.URL+benchWidgets, widgetBody(fmt.Sprintf("w-%d", i)))
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d"},"spec":{"size":%d,"ports":[{"name":"http","port":%d}]}}`, i%100, i%10+1, i)
			req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s%s/w-%d?fieldManager=bench&force=true", e.URL, benchWidgets, i%100), bytes.NewReader([]byte(body)))
			req.Header.Set("Content-Type", "application/apply-patch+yaml")
			resp, err := e.Admin.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("apply: %d", resp.StatusCode)
			}
		}
	})
}
