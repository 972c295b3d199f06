package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// useTracing installs a tracer provider with sampler and the W3C propagator for one test.
func useTracing(t *testing.T, sampler sdktrace.Sampler) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	return rec
}

const clientTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// A recorded server span continues the client's trace, is named by the route and carries
// semconv's HTTP attributes and the status code; a 5xx marks it as an error.
func TestServerSpanRecorded(t *testing.T) {
	rec := useTracing(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	for _, tc := range []struct {
		code      int
		wantError bool
	}{{http.StatusCreated, false}, {http.StatusNotFound, false}, {http.StatusServiceUnavailable, true}} {
		h := withServerSpan(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !trace.SpanFromContext(r.Context()).SpanContext().IsValid() {
				t.Error("handler runs without the server span in its context")
			}
			w.WriteHeader(tc.code)
		}))
		req := httptest.NewRequest("POST", "https://gw.example:6443/api/v1/namespaces/ns1/configmaps?dryRun=All", nil)
		req.Header.Set("traceparent", clientTraceparent)
		req.Header.Set("User-Agent", "kubectl/v1.32")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	for i, want := range []struct {
		code      int64
		wantError bool
	}{{201, false}, {404, false}, {503, true}} {
		s := spans[i]
		if s.Name() != "POST /api/v1/namespaces/{namespace}/configmaps" || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %q kind %v", i, s.Name(), s.SpanKind())
		}
		if s.Parent().SpanID().String() != "b7ad6b7169203331" || s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("span %d: parent %v trace %v, want the client's", i, s.Parent().SpanID(), s.SpanContext().TraceID())
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		for k, v := range map[string]string{
			"http.request.method": "POST", "http.route": "/api/v1/namespaces/{namespace}/configmaps",
			"url.path": "/api/v1/namespaces/ns1/configmaps", "url.query": "dryRun=All", "url.scheme": "https",
			"server.address": "gw.example", "user_agent.original": "kubectl/v1.32",
		} {
			if got := attrs[attribute.Key(k)].Emit(); got != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, got, v)
			}
		}
		if got := attrs["http.response.status_code"].AsInt64(); got != want.code {
			t.Errorf("span %d: http.response.status_code %d, want %d", i, got, want.code)
		}
		if got := attrs["server.port"].AsInt64(); got != 6443 {
			t.Errorf("span %d: server.port %d", i, got)
		}
		if (s.Status().Code == codes.Error) != want.wantError {
			t.Errorf("span %d: status %v", i, s.Status())
		}
	}
}

// An unsampled span still gives the request its ids (for the traceresponse header and logs),
// and the handler then gets the connection's own ResponseWriter, unwrapped.
func TestServerSpanUnsampledIsIdsOnly(t *testing.T) {
	rec := useTracing(t, sdktrace.NeverSample())
	var inner http.ResponseWriter
	var sc trace.SpanContext
	h := withServerSpan(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner, sc = w, trace.SpanFromContext(r.Context()).SpanContext()
	}))
	outer := httptest.NewRecorder()
	h.ServeHTTP(outer, httptest.NewRequest("GET", "https://gw.example/version", nil))
	if !sc.IsValid() || sc.IsSampled() {
		t.Fatalf("span context %+v, want valid ids, unsampled", sc)
	}
	if inner != http.ResponseWriter(outer) {
		t.Errorf("unsampled request's writer is %T, want the server's own", inner)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded with NeverSample", n)
	}
}
