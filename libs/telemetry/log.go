package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of the trace context (OpenTelemetry's names for them in log records).
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// NewLogHandler wraps h so that every record logged with a context that carries a span
// (slog's *Context methods, or Log(ctx, ...)) gets trace_id and span_id attributes, and the
// line can be found from the trace and the trace from the line. A record that has either
// attribute of its own keeps it (no duplicate keys).
//
// The attributes are added at the top level when the logger has no groups; after WithGroup they
// land in the innermost group, as any attribute of the record would.
func NewLogHandler(h slog.Handler) slog.Handler {
	if t, ok := h.(*traceHandler); ok {
		return t
	}
	return &traceHandler{next: h}
}

// NewLogger is the process logger every Platform binary uses: JSON lines to w, at level (nil:
// Info), with the trace context of each record (NewLogHandler).
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

type traceHandler struct {
	next slog.Handler
}

func (h *traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	hasTrace, hasSpan := hasAttrs(r)
	if hasTrace && hasSpan {
		return h.next.Handle(ctx, r)
	}
	// Clone: the caller's record may share its attribute storage with other copies.
	r = r.Clone()
	if !hasTrace {
		r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()))
	}
	if !hasSpan {
		r.AddAttrs(slog.String(SpanIDKey, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &traceHandler{next: h.next.WithAttrs(attrs)}
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	return &traceHandler{next: h.next.WithGroup(name)}
}

// hasAttrs tells whether the record has top-level trace_id and span_id attributes of its own.
func hasAttrs(r slog.Record) (trace, span bool) {
	r.Attrs(func(a slog.Attr) bool {
		trace = trace || a.Key == TraceIDKey
		span = span || a.Key == SpanIDKey
		return !(trace && span)
	})
	return trace, span
}

// AddLogLevelFlag registers --log-level (debug, info, warn or error; default info) on fs and
// returns the level it sets, for NewLogger.
func AddLogLevelFlag(fs *pflag.FlagSet) *slog.LevelVar {
	level := &slog.LevelVar{}
	fs.Var(levelFlag{level}, "log-level", "log lines at this level and above: debug, info, warn or error (debug adds a line per API request in the gateway)")
	return level
}

// levelFlag is a slog level as a flag value.
type levelFlag struct{ v *slog.LevelVar }

func (f levelFlag) String() string {
	if f.v == nil {
		return "info"
	}
	return strings.ToLower(f.v.Level().String())
}

func (f levelFlag) Set(s string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("want debug, info, warn or error: %w", err)
	}
	f.v.Set(l)
	return nil
}

func (f levelFlag) Type() string { return "level" }
