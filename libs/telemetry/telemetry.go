// Package telemetry sets up OpenTelemetry tracing for a Platform service from the standard
// OTEL_* environment variables, and ties the service's log lines to its traces.
//
// Tracing: W3C trace context (and baggage) propagation always; an OTLP/gRPC exporter when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, sampling as
// OTEL_TRACES_SAMPLER says (default: parent-based, always on). Without an exporter the process
// still creates trace and span ids, unsampled and unrecorded (cheap), so that the trace id in log
// lines and in the gateway's response header correlates a request across services even when no
// tracing backend runs. OTEL_SDK_DISABLED=true turns all of it off (no ids at all), and
// OTEL_TRACES_EXPORTER=none keeps the ids but exports nothing.
//
// Logs: NewLogHandler adds the trace_id and span_id of the record's context to every line.
package telemetry

import (
	"context"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Setup installs the global tracer provider and propagator for service (the resource's
// service.name unless OTEL_SERVICE_NAME names it) and returns the function that flushes and
// stops them.
func Setup(ctx context.Context, service string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return func(context.Context) error { return nil }, nil
	}
	// The SDK merges resource.Environment() (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME) under
	// the resource given; put it on top so that the standard variables win over our default.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, err
	}
	if res, err = resource.Merge(res, resource.Environment()); err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if exporting() {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, err
		}
		// The batcher reads OTEL_BSP_* (schedule delay, queue and batch sizes).
		opts = append(opts, sdktrace.WithBatcher(exp))
	} else {
		// Ids only: nothing would receive a recorded span.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// exporting tells whether the OTEL_* variables ask for the OTLP exporter: an endpoint is set and
// OTEL_TRACES_EXPORTER is unset or otlp.
func exporting() bool {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false
	}
	e := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	return e == "" || strings.EqualFold(e, "otlp")
}
