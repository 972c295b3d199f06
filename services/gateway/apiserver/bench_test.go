package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
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

func BenchmarkCreate(b *testing.B) { benchCreate(b, benchEnv(b), cms, cmBody) }

func BenchmarkGet(b *testing.B) { benchGet(b, benchEnv(b), cms, cmBody) }

// BenchmarkList2000 is one unpaged JSON list of 2,000 ConfigMaps per op (from the list cache),
// uncompressed (Accept-Encoding: identity).
func BenchmarkList2000(b *testing.B) { benchList2000(b, benchEnv(b), cms, cmBody) }

// BenchmarkList2000Gzip is the same list with Accept-Encoding: gzip: the gateway compresses it
// (APIResponseCompression, over 128 KiB). The client reads the compressed bytes without
// decompressing them, so the difference in cpu-ms/op from BenchmarkList2000 is the gateway's
// compression (less the TLS and writes of the bytes saved); wire-B/op is what crossed the wire.
func BenchmarkList2000Gzip(b *testing.B) { benchList2000Encoding(b, benchEnv(b), cms, cmBody, "gzip") }

// BenchmarkList2000FromStorage is the same list read from storage: a single page (limit
// 2,001) is never answered by the list cache.
func BenchmarkList2000FromStorage(b *testing.B) {
	benchList2000(b, benchEnv(b), cms+"?limit=2001", cmBody)
}

// BenchmarkMergePatch is a merge patch of one of 100 ConfigMaps per op (8 parallel clients).
func BenchmarkMergePatch(b *testing.B) {
	benchWrite(b, benchEnv(b), cms, cmBody, "application/merge-patch+json", func(i int64) []byte {
		return []byte(fmt.Sprintf(`{"data":{"counter":"%d"}}`, i))
	})
}

// BenchmarkApply is a server-side apply of one of 100 ConfigMaps per op (8 parallel clients).
func BenchmarkApply(b *testing.B) {
	benchWrite(b, benchEnv(b), cms, cmBody, "application/apply-patch+yaml", func(i int64) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"obj-%d"},"data":{"key1":"value-one","counter":"%d"}}`, i%100, i))
	})
}

// benchCreate creates objects of unique names (8 parallel clients).
func benchCreate(b *testing.B, e *gatewaytest.Env, collection string, body func(string) []byte) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, e.Admin, e.URL+collection, body(fmt.Sprintf("obj-%d", n.Add(1))))
		}
	})
}

// seed creates obj-0 ... obj-<n-1>.
func seed(b *testing.B, e *gatewaytest.Env, collection string, body func(string) []byte, n int) {
	for i := 0; i < n; i++ {
		post(b, e.Admin, e.URL+collection, body(fmt.Sprintf("obj-%d", i)))
	}
}

// benchGet reads one of 100 objects per op (8 parallel clients).
func benchGet(b *testing.B, e *gatewaytest.Env, collection string, body func(string) []byte) {
	seed(b, e, collection, body, 100)
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := e.Admin.Get(fmt.Sprintf("%s%s/obj-%d", e.URL, collection, n.Add(1)%100))
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

// benchList2000 lists 2,000 objects, unpaged and uncompressed, per op.
func benchList2000(b *testing.B, e *gatewaytest.Env, collection string, body func(string) []byte) {
	benchList2000Encoding(b, e, collection, body, "identity")
}

// benchList2000Encoding lists 2,000 objects, unpaged, per op, asking for the content encoding;
// besides time it reports the process's CPU per list (gateway, storage and the client's reads)
// and the bytes of the answer as sent.
func benchList2000Encoding(b *testing.B, e *gatewaytest.Env, collection string, body func(string) []byte, encoding string) {
	seed(b, e, strings.Split(collection, "?")[0], body, 2000)
	wantGzip := encoding == "gzip"
	var wire int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("GET", e.URL+collection, nil)
		// Named explicitly, the transport neither adds gzip nor decompresses.
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := e.Admin.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (resp.Header.Get("Content-Encoding") == "gzip") != wantGzip || (!wantGzip && n < 2000*200) {
			b.Fatalf("list: %d, %d bytes, Content-Encoding %q", resp.StatusCode, n, resp.Header.Get("Content-Encoding"))
		}
		wire += n
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(wire)/float64(b.N), "wire-B/op")
}

// processCPU is the CPU time the process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWrite patches one of 100 objects per op (8 parallel clients) with the body for op i;
// apply forces (the creator owns the fields first).
func benchWrite(b *testing.B, e *gatewaytest.Env, collection string, seedBody func(string) []byte, contentType string, body func(int64) []byte) {
	seed(b, e, collection, seedBody, 100)
	query := "fieldManager=bench"
	if contentType == "application/apply-patch+yaml" {
		query += "&force=true"
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			req, _ := http.NewRequest("PATCH", fmt.Sprintf("%s%s/obj-%d?%s", e.URL, collection, i%100, query), bytes.NewReader(body(i)))
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

func BenchmarkCustomCreate(b *testing.B) { benchCreate(b, customBenchEnv(b), benchWidgets, widgetBody) }

func BenchmarkCustomGet(b *testing.B) { benchGet(b, customBenchEnv(b), benchWidgets, widgetBody) }

// BenchmarkCustomList2000 is one unpaged JSON list of 2,000 custom objects per op.
func BenchmarkCustomList2000(b *testing.B) {
	benchList2000(b, customBenchEnv(b), benchWidgets, widgetBody)
}

// BenchmarkCustomApply is a server-side apply of one of 100 custom objects per op (8 parallel
// clients), merging a map list by key.
func BenchmarkCustomApply(b *testing.B) {
	benchWrite(b, customBenchEnv(b), benchWidgets, widgetBody, "application/apply-patch+yaml", func(i int64) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"obj-%d"},"spec":{"size":%d,"ports":[{"name":"http","port":%d}]}}`, i%100, i%10+1, i))
	})
}
