package filters

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// TestCompression: answers over 128 KiB are gzipped for clients that accept gzip, whether the
// handler writes them at once or a streaming encoder starts with a few bytes; small answers,
// clients that do not accept gzip, watches, answers with an encoding of their own, HEAD and
// streams that flush early are not; the status code and the other headers pass.
func TestCompression(t *testing.T) {
	large := bytes.Repeat([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}},`), GzipThreshold/60)
	small := []byte(`{"kind":"Status"}`)
	for _, c := range []struct {
		name, method, path, acceptEncoding string
		handler                            http.HandlerFunc
		enabled, gzipped                   bool
		want                               []byte
	}{
		{"large", "GET", "/api/v1/configmaps", "gzip", writeAll(large), true, true, large},
		{"large, gzip among others", "GET", "/api/v1/configmaps", "deflate, gzip;q=0.8", writeAll(large), true, true, large},
		{"large, gzip refused", "GET", "/api/v1/configmaps", "gzip;q=0", writeAll(large), true, false, large},
		{"large, off", "GET", "/api/v1/configmaps", "gzip", writeAll(large), false, false, large},
		{"large, no Accept-Encoding", "GET", "/api/v1/configmaps", "", writeAll(large), true, false, large},
		{"small", "GET", "/api/v1/configmaps", "gzip", writeAll(small), true, false, small},
		{"streaming encoder", "GET", "/api/v1/configmaps", "gzip", writeChunks(large[:1], large[1:3], large[3:]), true, true, large},
		{"watch", "GET", "/api/v1/configmaps?watch=true", "gzip", writeAll(large), true, false, large},
		{"already encoded", "GET", "/apis/x.example.com/v1/things", "gzip", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			w.Header().Set("X-Kept", "yes")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(large)
		}, true, false, large},
		{"flushed early", "GET", "/api/v1/configmaps", "gzip", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Kept", "yes")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(large[:2])
			w.(http.Flusher).Flush()
			_, _ = w.Write(large[2:])
		}, true, false, large},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, nil)
			if c.acceptEncoding != "" {
				r.Header.Set("Accept-Encoding", c.acceptEncoding)
			}
			rec := httptest.NewRecorder()
			WithCompression(c.handler, c.enabled).ServeHTTP(rec, r)
			if rec.Code != http.StatusCreated || rec.Header().Get("X-Kept") != "yes" {
				t.Fatalf("code %d, headers %v", rec.Code, rec.Header())
			}
			body := rec.Body.Bytes()
			if gz := rec.Header().Get("Content-Encoding") == "gzip"; gz != c.gzipped {
				t.Fatalf("Content-Encoding %q, want gzip %t", rec.Header().Get("Content-Encoding"), c.gzipped)
			}
			if c.gzipped {
				if rec.Header().Get("Content-Length") != "" || rec.Header().Get("Vary") != "Accept-Encoding" {
					t.Errorf("headers of a compressed answer: %v", rec.Header())
				}
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, c.want) {
				t.Errorf("body of %d bytes, want %d", len(body), len(c.want))
			}
		})
	}

	// HEAD: nothing to compress, the headers as for GET without the encoding.
	r := httptest.NewRequest("HEAD", "/api/v1/configmaps", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	WithCompression(writeAll(large), true).ServeHTTP(rec, r)
	if rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("HEAD: %v", rec.Header())
	}
	// A status without a body passes as it is.
	r = httptest.NewRequest("GET", "/apis", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	rec = httptest.NewRecorder()
	WithCompression(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) }), true).ServeHTTP(rec, r)
	if rec.Code != http.StatusNotModified || rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("304: %d %v", rec.Code, rec.Header())
	}
}

func writeAll(body []byte) http.HandlerFunc {
	return writeChunks(body)
}

// writeChunks answers 201 with a header of its own and the body in the given writes.
func writeChunks(chunks ...[]byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := 0
		for _, c := range chunks {
			n += len(c)
		}
		w.Header().Set("X-Kept", "yes")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusCreated)
		if r.Method == http.MethodHead {
			return
		}
		for _, c := range chunks {
			_, _ = w.Write(c)
		}
	}
}

// list2000 is the JSON of a list of 2,000 ConfigMaps as the gateway answers it (the benchmarks'
// objects: three data keys and a label, with server-set metadata: random uids, distinct
// timestamps, which is what gzip cannot shrink).
func list2000() []byte {
	rnd := rand.New(rand.NewPCG(1, 2))
	uid := func() string {
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rnd.Uint32(), rnd.Uint32()&0xffff, rnd.Uint32()&0xffff, rnd.Uint32()&0xffff, rnd.Uint64()&0xffffffffffff)
	}
	var b bytes.Buffer
	b.WriteString(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"2001"},"items":[`)
	for i := 0; i < 2000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * 347 * time.Millisecond).Format(time.RFC3339)
		b.WriteString(`{"metadata":{"name":"obj-` + strconv.Itoa(i) + `","namespace":"default","uid":"` + uid() +
			`","resourceVersion":"` + strconv.Itoa(i+2) + `","creationTimestamp":"` + ts + `","labels":{"app":"bench"},` +
			`"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"v1","time":"` + ts + `","fieldsType":"FieldsV1",` +
			`"fieldsV1":{"f:data":{".":{},"f:key1":{},"f:key2":{},"f:key3":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}]},` +
			`"data":{"key1":"value-one","key2":"value-two","key3":"a somewhat longer value to make it realistic"}}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkCompressList2000 is the compression filter alone on a list of 2,000 ConfigMaps, with
// and without Accept-Encoding: gzip: the CPU compression adds to a large list, and the bytes.
func BenchmarkCompressList2000(b *testing.B) {
	body := list2000()
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			h := WithCompression(writeAll(body), true)
			r := httptest.NewRequest("GET", "/api/v1/namespaces/default/configmaps", nil)
			r.Header.Set("Accept-Encoding", enc)
			var out int
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				w := &countingWriter{header: http.Header{}}
				h.ServeHTTP(w, r)
				out = w.n
			}
			b.ReportMetric(float64(out), "wire-B/op")
		})
	}
}

// countingWriter is a ResponseWriter that counts the body's bytes.
type countingWriter struct {
	header http.Header
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
