package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// logLine logs one line through NewLogger with ctx and returns it decoded.
func logLine(t *testing.T, ctx context.Context, log func(l *slog.Logger)) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log(NewLogger(&buf, nil).With("service", "test"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	return rec
}

func spanContext(t testing.TB) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// A line logged with a context that carries a span has its trace_id and span_id; without one,
// neither; a record that names its trace_id itself keeps it (no duplicate key).
func TestLogHandlerAddsTraceContext(t *testing.T) {
	ctx, sc := spanContext(t)
	rec := logLine(t, ctx, func(l *slog.Logger) { l.InfoContext(ctx, "hello", "k", "v") })
	if rec[TraceIDKey] != sc.TraceID().String() || rec[SpanIDKey] != sc.SpanID().String() || rec["k"] != "v" || rec["service"] != "test" {
		t.Errorf("with a span: %v", rec)
	}
	rec = logLine(t, ctx, func(l *slog.Logger) { l.Info("hello") })
	if _, ok := rec[TraceIDKey]; ok {
		t.Errorf("without a context: %v", rec)
	}
	rec = logLine(t, ctx, func(l *slog.Logger) { l.InfoContext(context.Background(), "hello") })
	if _, ok := rec[TraceIDKey]; ok {
		t.Errorf("with a context without a span: %v", rec)
	}
	var buf bytes.Buffer
	NewLogger(&buf, nil).InfoContext(ctx, "hello", TraceIDKey, "given")
	if n := strings.Count(buf.String(), `"`+TraceIDKey+`"`); n != 1 || !strings.Contains(buf.String(), `"given"`) || !strings.Contains(buf.String(), sc.SpanID().String()) {
		t.Errorf("a record with its own trace_id (kept, span_id added): %s", buf.String())
	}
	// The wrapper survives With and WithGroup.
	buf.Reset()
	NewLogger(&buf, nil).With("a", 1).WithGroup("g").InfoContext(ctx, "hello")
	if !strings.Contains(buf.String(), sc.TraceID().String()) {
		t.Errorf("after With and WithGroup: %s", buf.String())
	}
}

// --log-level sets the logger's level; a bad value is refused with the accepted ones.
func TestLogLevelFlag(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	level := AddLogLevelFlag(fs)
	if level.Level() != slog.LevelInfo || fs.Lookup("log-level").DefValue != "info" {
		t.Fatalf("default %v %q", level.Level(), fs.Lookup("log-level").DefValue)
	}
	if err := fs.Parse([]string{"--log-level=debug"}); err != nil || level.Level() != slog.LevelDebug {
		t.Fatalf("debug: %v %v", err, level.Level())
	}
	var buf bytes.Buffer
	NewLogger(&buf, level).Debug("shown")
	if !strings.Contains(buf.String(), "shown") {
		t.Errorf("debug line not written at --log-level=debug")
	}
	fs = pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	AddLogLevelFlag(fs)
	if err := fs.Parse([]string{"--log-level=loud"}); err == nil || !strings.Contains(err.Error(), "debug, info, warn or error") {
		t.Errorf("bad level: %v", err)
	}
}

// Without an exporter, Setup still gives requests trace ids (unsampled), propagated in W3C
// trace context, so logs correlate across services.
func TestSetupWithoutExporterMakesIDs(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	shutdown, err := Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	ctx, span := otel.Tracer("test").Start(context.Background(), "op")
	sc := span.SpanContext()
	span.End()
	if !sc.IsValid() || sc.IsSampled() || span.IsRecording() {
		t.Fatalf("span context %v (valid, unsampled, not recording wanted)", sc)
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-00"; carrier["traceparent"] != want {
		t.Errorf("traceparent %q, want %q", carrier["traceparent"], want)
	}
	// A caller's sampled context is continued (the same trace id).
	parent, psc := spanContext(t)
	_, child := otel.Tracer("test").Start(parent, "child")
	if child.SpanContext().TraceID() != psc.TraceID() {
		t.Errorf("child trace %s, want the parent's %s", child.SpanContext().TraceID(), psc.TraceID())
	}
	child.End()
}

// OTEL_TRACES_EXPORTER=none keeps the ids but configures no exporter.
func TestExporting(t *testing.T) {
	for _, c := range []struct {
		endpoint, exporter string
		want               bool
	}{
		{"", "", false},
		{"http://127.0.0.1:4317", "", true},
		{"http://127.0.0.1:4317", "otlp", true},
		{"http://127.0.0.1:4317", "none", false},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
		t.Setenv("OTEL_TRACES_EXPORTER", c.exporter)
		if got := exporting(); got != c.want {
			t.Errorf("endpoint %q exporter %q: %v, want %v", c.endpoint, c.exporter, got, c.want)
		}
	}
}

// The cost the handler adds to a line logged with a span's context (compare /plain).
func BenchmarkLogLine(b *testing.B) {
	ctx, _ := spanContext(b)
	for _, c := range []struct {
		name string
		log  *slog.Logger
	}{
		{"plain", slog.New(slog.NewJSONHandler(io.Discard, nil))},
		{"trace", NewLogger(io.Discard, nil)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.log.InfoContext(ctx, "request failed", "method", "POST", "code", 500)
			}
		})
	}
}
