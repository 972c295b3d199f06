package server

import (
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
)

// TraceResponseHeader is the response header that tells the client the trace of its request:
// W3C Trace Context Level 2's traceresponse, "00-<trace-id>-<span-id>-<flags>", where span-id is
// the gateway's server span. Upstream answers with no such header; it is ours.
const TraceResponseHeader = "Traceresponse"

// TraceIDAnnotation is the audit annotation key that records the request's trace id
// (trace.platform.io/trace-id, or trace.kubernetes.io/... under the kubernetes naming profile).
func TraceIDAnnotation() string { return "trace." + naming.Domain + "/trace-id" }

// tracerName is the instrumentation scope of the gateway's server spans.
const tracerName = "platform.io/services/gateway"

// withServerSpan starts the request's server span, continuing the client's traceparent (the
// global propagator), named "{method} {http.route}" as semconv's HTTP server spans. The span's
// attributes (semconv's HTTP server attributes and the response's status code, an error status for
// 5xx) are computed only when the span is recorded: unsampled spans (every span when no exporter
// is configured, see libs/telemetry) still give the request its trace and span ids, at the cost
// of the ids alone. It replaces otelhttp's handler, which built every attribute and metric
// attribute set of every request whether recorded or not (8% of the all-in-one's CPU serving
// gets); the gateway's own Prometheus metrics already cover what otelhttp's metrics measured.
func withServerSpan(next http.Handler) http.Handler {
	tracer := otel.GetTracerProvider().Tracer(tracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		route := routeOf(r.URL.Path)
		ctx, span := tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		r = r.WithContext(ctx)
		if !span.IsRecording() {
			next.ServeHTTP(w, r)
			return
		}
		span.SetAttributes(requestAttributes(r, route)...)
		rec := &codeRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

// requestAttributes are semconv's HTTP server span attributes of r.
func requestAttributes(r *http.Request, route string) []attribute.KeyValue {
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.HTTPRoute(route),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme),
		semconv.NetworkProtocolVersion(strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)),
	}
	if r.URL.RawQuery != "" {
		attrs = append(attrs, semconv.URLQuery(r.URL.RawQuery))
	}
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(host), semconv.NetworkPeerAddress(host))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	return attrs
}

// withTrace runs inside the request's server span (withServerSpan) and audit record: it
// answers with the traceresponse header,
// records the trace id as an audit annotation, and at debug level logs one line per request
// (with the trace context, through the logger's handler).
func withTrace(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		span := trace.SpanFromContext(ctx)
		sc := span.SpanContext()
		if sc.IsValid() {
			w.Header().Set(TraceResponseHeader, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-"+sc.TraceFlags().String())
			audit.AddAnnotation(ctx, TraceIDAnnotation(), sc.TraceID().String())
		}
		if !log.Enabled(ctx, slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &codeRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		log.DebugContext(ctx, "request", "method", r.Method, "route", routeOf(r.URL.Path), "code", code,
			"duration_ms", float64(time.Since(start).Microseconds())/1000, "audit_id", w.Header().Get("Audit-Id"))
	})
}

// codeRecorder remembers the response's status code; Flush and Unwrap keep streaming (watches)
// and http.ResponseController working through it.
type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeRecorder) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.ResponseWriter.Write(p)
}

func (c *codeRecorder) Flush() {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *codeRecorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// routeOf is the low-cardinality route of an API path, as semconv's http.route wants it: the
// group, version and resource stay, namespace and object names become {namespace} and {name}:
// /api/v1/namespaces/{namespace}/configmaps/{name}, /apis/apps/v1/deployments,
// /api/v1/namespaces/{name}/status. Paths outside /api and /apis (health, /version, /openapi,
// /metrics) keep at most their first three segments.
func routeOf(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var prefix []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		prefix, parts = parts[:2], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		prefix, parts = parts[:3], parts[3:]
	default:
		if len(parts) > 3 {
			parts = parts[:3]
		}
		return "/" + strings.Join(parts, "/")
	}
	out := append([]string(nil), prefix...)
	if len(parts) > 0 && parts[0] == "watch" { // the deprecated /watch/ prefix
		out, parts = append(out, "watch"), parts[1:]
	}
	// As upstream's request info: namespaces/<ns>/<resource>... is a namespaced resource, unless
	// the third segment is a subresource of the namespace itself (status, finalize).
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		out, parts = append(out, "namespaces", "{namespace}"), parts[2:]
	}
	if len(parts) > 0 && parts[0] != "" {
		out = append(out, parts[0])
	}
	if len(parts) > 1 {
		out = append(out, "{name}")
	}
	if len(parts) > 2 {
		// A subresource: status, scale, log, exec, ... (a fixed set, so fine as a route).
		out = append(out, parts[2])
	}
	return "/" + strings.Join(out, "/")
}
