package service

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

	// unaries and streams are the series of each method, by full method name, resolved on its
	// first call (WithLabelValues hashes and looks up the labels on every call, which showed in
	// profiles of in-process calls). Copy on write: calls read them without a lock.
	unaries, streams atomic.Pointer[map[string]*methodSeries]
	seriesMu         sync.Mutex
}

// methodSeries are the series of one method.
type methodSeries struct {
	lv                      [3]string // grpc_type, grpc_service, grpc_method
	started, received, sent prometheus.Counter
	seconds                 prometheus.Observer
	handled                 codeCounters
	// unarySent is sent of a unary method, resolved on its first success (as WithLabelValues
	// would: a method that never succeeded has no sent series).
	unarySent atomic.Pointer[prometheus.Counter]
}

// sentUnary is the sent counter of a unary method.
func (m *grpcMetrics) sentUnary(s *methodSeries) prometheus.Counter {
	if c := s.unarySent.Load(); c != nil {
		return *c
	}
	c := m.sent.WithLabelValues(s.lv[0], s.lv[1], s.lv[2])
	s.unarySent.Store(&c)
	return c
}

// codeCounters are the children of a counter with a trailing grpc_code label, for one set of
// the other labels, resolved on first use of each code (a series appears when it is first
// counted, as with WithLabelValues).
type codeCounters [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]

// counter is the child of vec for lv and code, cached in cc.
func (cc *codeCounters) counter(vec *prometheus.CounterVec, lv [3]string, code codes.Code) prometheus.Counter {
	if int(code) >= len(cc) {
		return vec.WithLabelValues(lv[0], lv[1], lv[2], code.String())
	}
	if c := cc[code].Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(lv[0], lv[1], lv[2], code.String())
	cc[code].Store(&c)
	return c
}

// series returns the series of a method of type typ from the cache at, creating them once.
func (m *grpcMetrics) series(at *atomic.Pointer[map[string]*methodSeries], fullMethod, typ string) *methodSeries {
	if cur := at.Load(); cur != nil {
		if s, ok := (*cur)[fullMethod]; ok {
			return s
		}
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := at.Load()
	if old != nil {
		if s, ok := (*old)[fullMethod]; ok {
			return s
		}
	}
	svc, method := splitMethod(fullMethod)
	s := &methodSeries{lv: [3]string{typ, svc, method}}
	s.started = m.started.WithLabelValues(typ, svc, method)
	s.received = m.received.WithLabelValues(typ, svc, method)
	if typ != "unary" {
		s.sent = m.sent.WithLabelValues(typ, svc, method)
	}
	s.seconds = m.seconds.WithLabelValues(typ, svc, method)
	next := make(map[string]*methodSeries, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[fullMethod] = s
	at.Store(&next)
	return s
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
	s := m.series(&m.unaries, info.FullMethod, "unary")
	s.started.Inc()
	s.received.Inc()
	start := time.Now()
	resp, err := handler(ctx, req)
	s.seconds.Observe(time.Since(start).Seconds())
	s.handled.counter(m.handled, s.lv, status.Code(err)).Inc()
	if err == nil {
		m.sentUnary(s).Inc()
	}
	return resp, err
}

func (m *grpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := m.series(&m.streams, info.FullMethod, rpcType(info.IsClientStream, info.IsServerStream))
	s.started.Inc()
	start := time.Now()
	err := handler(srv, &countedStream{ServerStream: ss, received: s.received, sent: s.sent})
	s.seconds.Observe(time.Since(start).Seconds())
	s.handled.counter(m.handled, s.lv, status.Code(err)).Inc()
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
