package server

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

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
	"platform.io/services/storage/cache"
)

// metrics are the storage service's Prometheus metrics. Request metrics are recorded by gRPC
// interceptors; per-type state (revisions, lag, watchers, object counts) is read from the cache
// at scrape time, so it costs nothing on the request path.
//
// Two carry upstream's meaning under upstream's (or an apiserver_storage_) name, so upstream's
// dashboards carry over: apiserver_storage_objects{resource} (objects that exist now, per
// resource, "configmaps" or "deployments.apps" as upstream spells it) and
// apiserver_storage_request_duration_seconds{operation,type}, the equivalent of upstream's
// etcd_request_duration_seconds: the latency of the storage layer the API server calls, by
// operation (create, get, list, update, delete, revision, compact) and resource. It is not named
// etcd_*, because there is no etcd: a query for etcd_* would silently find nothing, and a
// dashboard should say what it measures. Its buckets start at 100 us (reads are served from
// the cache) where upstream's start at 5 ms.
type metrics struct {
	requests       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	storageLatency *prometheus.HistogramVec
	watches        *prometheus.CounterVec
	cache          *cache.Cache

	// series are the request series of each (method, resource type), resolved on its first call
	// rather than by WithLabelValues (which hashes the labels) on every call. Copy on write:
	// calls read it without a lock.
	series   atomic.Pointer[map[seriesKey]*requestSeries]
	seriesMu sync.Mutex

	revision, compacted, events, objects, live, watchers, lag *prometheus.Desc
}

// storageBuckets are the latency buckets of the storage request metrics.
var storageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newMetrics(reg prometheus.Registerer, c *cache.Cache) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "storage_requests_total", Help: "Storage requests by method, resource type and gRPC code.",
		}, []string{"method", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "storage_request_duration_seconds", Help: "Latency of unary storage requests.",
			Buckets: storageBuckets,
		}, []string{"method", "resource"}),
		storageLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_storage_request_duration_seconds",
			Help:    "Storage request latency in seconds for each operation and object type (upstream's etcd_request_duration_seconds for this storage service).",
			Buckets: storageBuckets,
		}, []string{"operation", "type"}),
		watches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "storage_watch_events_sent_total", Help: "Watch events sent, by resource type.",
		}, []string{"resource"}),
		cache:     c,
		revision:  prometheus.NewDesc("storage_revision", "Revision the cache has applied, per resource type.", []string{"resource"}, nil),
		compacted: prometheus.NewDesc("storage_compacted_revision", "Compacted revision per resource type.", []string{"resource"}, nil),
		events:    prometheus.NewDesc("storage_retained_events", "Changes retained for watches per resource type.", []string{"resource"}, nil),
		objects:   prometheus.NewDesc("storage_cached_keys", "Keys in the cache's index per resource type.", []string{"resource"}, nil),
		live:      prometheus.NewDesc("apiserver_storage_objects", "Number of stored objects at the time of last check split by kind.", []string{"resource"}, nil),
		watchers:  prometheus.NewDesc("storage_watchers", "Open watches per resource type.", []string{"resource"}, nil),
		lag:       prometheus.NewDesc("storage_revision_lag", "Revisions the cache is behind the backend, per resource type.", []string{"resource"}, nil),
	}
	reg.MustRegister(m.requests, m.latency, m.storageLatency, m.watches, m)
	return m
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.revision, m.compacted, m.events, m.objects, m.live, m.watchers, m.lag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.cache.Stats() {
		ch <- prometheus.MustNewConstMetric(m.revision, prometheus.GaugeValue, float64(s.Revision), s.Type)
		ch <- prometheus.MustNewConstMetric(m.compacted, prometheus.GaugeValue, float64(s.Compacted), s.Type)
		ch <- prometheus.MustNewConstMetric(m.events, prometheus.GaugeValue, float64(s.Events), s.Type)
		ch <- prometheus.MustNewConstMetric(m.objects, prometheus.GaugeValue, float64(s.Objects), s.Type)
		ch <- prometheus.MustNewConstMetric(m.live, prometheus.GaugeValue, float64(s.Live), s.Type)
		ch <- prometheus.MustNewConstMetric(m.watchers, prometheus.GaugeValue, float64(s.Watchers), s.Type)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for typ, lag := range m.cache.Lag(ctx) {
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(lag), typ)
	}
}

type typedRequest interface {
	GetType() *storagev1.ResourceType
}

func resourceOf(req any) string {
	if r, ok := req.(typedRequest); ok && r.GetType() != nil {
		return backend.TypeName(r.GetType())
	}
	return ""
}

func methodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}

// seriesKey identifies the request series of a unary call: its full method name and its
// request's resource type (empty without one).
type seriesKey struct{ fullMethod, group, resource string }

// requestSeries are the series of one method and resource type.
type requestSeries struct {
	method, res             string
	latency, storageLatency prometheus.Observer
	// requests are its storage_requests_total children by code, resolved on first use of each
	// code (a series appears when it is first counted, as with WithLabelValues).
	requests [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
}

// maxCachedSeries bounds the series cache (request types come from clients); calls beyond it
// resolve their series per call.
const maxCachedSeries = 4096

func (m *metrics) seriesOf(fullMethod string, req any) *requestSeries {
	key := seriesKey{fullMethod: fullMethod}
	if r, ok := req.(typedRequest); ok && r.GetType() != nil {
		key.group, key.resource = r.GetType().GetGroup(), r.GetType().GetResource()
	}
	if cur := m.series.Load(); cur != nil {
		if s, ok := (*cur)[key]; ok {
			return s
		}
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := m.series.Load()
	if old != nil {
		if s, ok := (*old)[key]; ok {
			return s
		}
	}
	method, res := methodName(fullMethod), resourceOf(req)
	s := &requestSeries{method: method, res: res,
		latency:        m.latency.WithLabelValues(method, res),
		storageLatency: m.storageLatency.WithLabelValues(strings.ToLower(method), res)}
	if old != nil && len(*old) >= maxCachedSeries {
		return s
	}
	next := make(map[seriesKey]*requestSeries, 1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[key] = s
	m.series.Store(&next)
	return s
}

// requestCounter is the storage_requests_total child of s for code.
func (m *metrics) requestCounter(s *requestSeries, code codes.Code) prometheus.Counter {
	if int(code) >= len(s.requests) {
		return m.requests.WithLabelValues(s.method, s.res, code.String())
	}
	if c := s.requests[code].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(s.method, s.res, code.String())
	s.requests[code].Store(&c)
	return c
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	d := time.Since(start).Seconds()
	s := m.seriesOf(info.FullMethod, req)
	s.latency.Observe(d)
	s.storageLatency.Observe(d)
	m.requestCounter(s, status.Code(err)).Inc()
	return resp, err
}

// countingStream counts the events a watch sends.
type countingStream struct {
	grpc.ServerStream
	m   *metrics
	res string
	c   prometheus.Counter
}

func (s *countingStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	if err == nil && s.c == nil {
		s.res = resourceOf(msg)
		s.c = s.m.watches.WithLabelValues(s.res)
	}
	return err
}

func (s *countingStream) SendMsg(msg any) error {
	if b, ok := msg.(*cache.Batch); ok && s.c != nil {
		s.c.Add(float64(b.Len()))
	}
	return s.ServerStream.SendMsg(msg)
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	cs := &countingStream{ServerStream: ss, m: m}
	err := handler(srv, cs)
	m.requests.WithLabelValues(methodName(info.FullMethod), cs.res, status.Code(err).String()).Inc()
	return err
}
