package aggregator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are upstream's aggregator metrics: aggregator_unavailable_apiservice (1 while an
// APIService is not available, 0 while it is) and aggregator_unavailable_apiservice_total (each
// time one becomes unavailable, by reason).
type metrics struct {
	unavailable      *prometheus.GaugeVec
	unavailableTotal *prometheus.CounterVec
	mu               sync.Mutex
	known            map[string]bool
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		unavailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aggregator_unavailable_apiservice",
			Help: "Gauge of APIServices which are marked as unavailable broken down by APIService name.",
		}, []string{"name"}),
		unavailableTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_unavailable_apiservice_total",
			Help: "Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
		}, []string{"name", "reason"}),
		known: map[string]bool{},
	}
	if reg != nil {
		reg.MustRegister(m.unavailable, m.unavailableTotal)
	}
	return m
}

// observe records an APIService's availability; wasAvailable is what it was before.
func (m *metrics) observe(name string, available, wasAvailable bool, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[name] = true
	if available {
		m.unavailable.WithLabelValues(name).Set(0)
		return
	}
	m.unavailable.WithLabelValues(name).Set(1)
	if wasAvailable {
		m.unavailableTotal.WithLabelValues(name, reason).Inc()
	}
}

// forget drops the series of APIServices that no longer exist.
func (m *metrics) forget(exists func(string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.known {
		if !exists(name) {
			m.unavailable.DeleteLabelValues(name)
			delete(m.known, name)
		}
	}
}
