package service

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// grpcMetrics are the gRPC server metrics every service exposes, under the names and labels of
// go-grpc-middleware's Prometheus provider (grpc_server_started_total,
// grpc_server_handled_total, grpc_server_handling_seconds, grpc_server_msg_received_total,
// grpc_server_msg_sent_total), so that existing gRPC dashboards and alerts work unchanged.
// They are our own interceptors: one small file instead of another dependency.
type grpcMetrics struct {
	started  *prometheus.CounterVec
	handled  *prometheus.CounterVec
	received *prometheus.CounterVec
	sent     *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// grpcLatencyBuckets span a co-located hop (~100 us) to a long list or a slow webhook (seconds);
// the provider's default buckets start at 5 ms, which would put every call of a healthy service
// in the first bucket.
var grpcLatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newGRPCMetrics(reg prometheus.Registerer) *grpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	m := &grpcMetrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_started_total", Help: "Total number of RPCs started on the server.",
		}, labels),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_handled_total", Help: "Total number of RPCs completed on the server, regardless of success or failure.",
		}, append(labels[:3:3], "grpc_code")),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_msg_received_total", Help: "Total number of RPC stream messages received on the server.",
		}, labels),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_msg_sent_total", Help: "Total number of gRPC stream messages sent by the server.",
		}, labels),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_server_handling_seconds", Help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
			Buckets: grpcLatencyBuckets,
		}, labels),
	}
	reg.MustRegister(m.started, m.handled, m.received, m.sent, m.seconds)
	return m
}

// splitMethod turns "/pkg.Service/Method" into ("pkg.Service", "Method").
func splitMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}

// rpcType is the provider's grpc_type label of a call.
func rpcType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return "bidi_stream"
	case clientStream:
		return "client_stream"
	case serverStream:
		return "server_stream"
	}
	return "unary"
}

// initialize creates the series of every registered method, so that a method never called shows
// a rate of zero instead of no data.
func (m *grpcMetrics) initialize(s *grpc.Server) {
	for svc, info := range s.GetServiceInfo() {
		for _, mi := range info.Methods {
			lv := []string{rpcType(mi.IsClientStream, mi.IsServerStream), svc, mi.Name}
			m.started.WithLabelValues(lv...)
			m.handled.WithLabelValues(append(lv, "OK")...)
			m.seconds.WithLabelValues(lv...)
		}
	}
}

func (m *grpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	svc, method := splitMethod(info.FullMethod)
	m.started.WithLabelValues("unary", svc, method).Inc()
	m.received.WithLabelValues("unary", svc, method).Inc()
	start := time.Now()
	resp, err := handler(ctx, req)
	m.seconds.WithLabelValues("unary", svc, method).Observe(time.Since(start).Seconds())
	m.handled.WithLabelValues("unary", svc, method, status.Code(err).String()).Inc()
	if err == nil {
		m.sent.WithLabelValues("unary", svc, method).Inc()
	}
	return resp, err
}

func (m *grpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	svc, method := splitMethod(info.FullMethod)
	typ := rpcType(info.IsClientStream, info.IsServerStream)
	m.started.WithLabelValues(typ, svc, method).Inc()
	start := time.Now()
	err := handler(srv, &countedStream{ServerStream: ss,
		received: m.received.WithLabelValues(typ, svc, method), sent: m.sent.WithLabelValues(typ, svc, method)})
	m.seconds.WithLabelValues(typ, svc, method).Observe(time.Since(start).Seconds())
	m.handled.WithLabelValues(typ, svc, method, status.Code(err).String()).Inc()
	return err
}

// countedStream counts the messages of one stream.
type countedStream struct {
	grpc.ServerStream
	received, sent prometheus.Counter
}

func (s *countedStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	if err == nil {
		s.received.Inc()
	}
	return err
}

func (s *countedStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	if err == nil {
		s.sent.Inc()
	}
	return err
}
