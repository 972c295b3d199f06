package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"platform.io/services/gateway/apiserver"
)

// requestMetrics are upstream's request metrics, under upstream's names so dashboards carry over.
type requestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource, subresource, and scope (watches excluded).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 10, 20, 30, 60},
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Maximal number of currently used inflight request limit of this apiserver per request kind.",
		}, []string{"request_kind"}),
	}
	reg.MustRegister(m.total, m.duration, m.inflight)
	return m
}

// statusRecorder remembers the response code and passes Flush through (watches need it).
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (m *requestMetrics) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		labels := &apiserver.RequestLabels{}
		rec := &statusRecorder{ResponseWriter: w}
		kind := "readOnly"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			kind = "mutating"
		}
		m.inflight.WithLabelValues(kind).Inc()
		start := time.Now()
		next.ServeHTTP(rec, r.WithContext(apiserver.WithRequestLabels(r.Context(), labels)))
		m.inflight.WithLabelValues(kind).Dec()
		verb := labels.Verb
		if verb == "" {
			verb = r.Method
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.total.WithLabelValues(verb, labels.Group, labels.Version, labels.Resource, labels.Subresource, labels.Scope, "apiserver", strconv.Itoa(code)).Inc()
		if verb != "watch" {
			m.duration.WithLabelValues(verb, labels.Group, labels.Version, labels.Resource, labels.Subresource, labels.Scope, "apiserver").Observe(time.Since(start).Seconds())
		}
	})
}
