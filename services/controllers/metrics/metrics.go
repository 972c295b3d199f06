// Package metrics holds the controllers service's Prometheus metrics: syncs and sync errors per
// controller, leadership, and client-go's work queue metrics under upstream's names
// (workqueue_depth, workqueue_adds_total, ...), all registered in one registry so that several
// managers in one process (tests, the all-in-one) keep separate counts.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are one controller manager's metrics.
type Metrics struct {
	// Syncs counts the keys each controller processed, Errors those whose sync failed.
	Syncs  *prometheus.CounterVec
	Errors *prometheus.CounterVec
	// Leader is 1 while this process holds the named leader lease (upstream's
	// leader_election_master_status).
	Leader *prometheus.GaugeVec

	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

// New creates the metrics and registers them in reg.
func New(reg prometheus.Registerer) *Metrics {
	queueBuckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	m := &Metrics{
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_syncs_total", Help: "Keys processed by each controller.",
		}, []string{"controller"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_sync_errors_total", Help: "Keys whose processing failed, by controller (each is retried with backoff).",
		}, []string{"controller"}),
		Leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status", Help: "1 while this process holds the named leader lease, 0 otherwise.",
		}, []string{"name"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of the work queue.",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Adds handled by the work queue.",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "How long an item stays in the work queue before being requested.", Buckets: queueBuckets,
		}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "How long processing an item from the work queue takes.", Buckets: queueBuckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration.",
		}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor of the work queue has been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Retries handled by the work queue.",
		}, []string{"name"}),
	}
	reg.MustRegister(m.Syncs, m.Errors, m.Leader, m.depth, m.adds, m.latency, m.work, m.unfinished, m.longest, m.retries)
	return m
}

// QueueMetrics is the provider of client-go work queue metrics backed by m (nil m: none).
func (m *Metrics) QueueMetrics() workqueue.MetricsProvider {
	if m == nil {
		return nil
	}
	return queueProvider{m}
}

// queueProvider hands client-go's work queues the series of their name.
type queueProvider struct{ m *Metrics }

func (p queueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.depth.WithLabelValues(name)
}

func (p queueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.adds.WithLabelValues(name)
}

func (p queueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.latency.WithLabelValues(name)
}

func (p queueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.work.WithLabelValues(name)
}

func (p queueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.unfinished.WithLabelValues(name)
}

func (p queueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.longest.WithLabelValues(name)
}

func (p queueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.retries.WithLabelValues(name)
}
