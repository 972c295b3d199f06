package apiserver

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// RequestLabels describe a request for metrics: the API verb and the resource it addressed.
// The metrics middleware puts an empty one in the context; the API fills it while it serves.
type RequestLabels struct {
	Verb, Group, Version, Resource, Subresource, Scope string
}

type labelsKey struct{}

// WithRequestLabels returns a context carrying labels for the API to fill.
func WithRequestLabels(ctx context.Context, l *RequestLabels) context.Context {
	return context.WithValue(ctx, labelsKey{}, l)
}

// fillLabels records what the request addressed, if the context carries labels.
func fillLabels(ctx context.Context, info *requestInfo) {
	l, ok := ctx.Value(labelsKey{}).(*RequestLabels)
	if !ok {
		return
	}
	l.Verb, l.Group, l.Version, l.Resource, l.Subresource = info.verb, info.res.Group, info.res.Version, info.res.Resource, info.subresource
	switch {
	case info.name != "":
		l.Scope = "resource"
	case info.namespace != "":
		l.Scope = "namespace"
	default:
		l.Scope = "cluster"
	}
}

type auditIDKey struct{}

// WithAuditID returns a context carrying the request's Audit-Id, which the API's log lines for
// the request include (with the trace id).
func WithAuditID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, auditIDKey{}, id)
}

// auditIDFrom returns the request's Audit-Id ("" when none).
func auditIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(auditIDKey{}).(string)
	return id
}

// requestAttrs are the attributes every log line about a request carries.
func requestAttrs(ctx context.Context) []any {
	var attrs []any
	if id, ok := ctx.Value(auditIDKey{}).(string); ok {
		attrs = append(attrs, "audit_id", id)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		attrs = append(attrs, "trace_id", sc.TraceID().String())
	}
	return attrs
}
