package webhook

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric types ("type" label), as upstream.
const (
	typeAdmit      = "admit"
	typeValidating = "validating"
)

// Rejection error types (the error_type label of the rejection metric), as upstream.
const (
	errorTypeCallingWebhook = "calling_webhook_error"
	errorTypeInternal       = "apiserver_internal_error"
	errorTypeNone           = "no_error"
)

// maxCode caps the code labels, keeping the metrics' cardinality bounded (upstream's rule).
const maxCode = 600

// Upstream's webhook metrics.
var (
	rejectionCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "apiserver", Subsystem: "admission", Name: "webhook_rejection_count",
		Help: "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. " +
			"Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) " +
			"and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). " +
			"Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
	}, []string{"name", "type", "operation", "error_type", "rejection_code"})
	admissionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "apiserver", Subsystem: "admission", Name: "webhook_admission_duration_seconds",
		Help:    "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
		Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25},
	}, []string{"name", "type", "operation", "rejected"})
	requestTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "apiserver", Subsystem: "admission", Name: "webhook_request_total",
		Help: "Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. " +
			"Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
	}, []string{"name", "type", "operation", "code", "rejected"})
	failOpenCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "apiserver", Subsystem: "admission", Name: "webhook_fail_open_count",
		Help: "Admission webhook fail open count, identified by name and broken out for each admission type (validating or admit).",
	}, []string{"name", "type"})
)

// SetMetrics registers the webhook metrics (apiserver_admission_webhook_rejection_count,
// apiserver_admission_webhook_admission_duration_seconds, apiserver_admission_webhook_request_total,
// apiserver_admission_webhook_fail_open_count) on reg. The metrics are recorded whether or not
// they are registered; registering them twice on one registry is not an error.
func SetMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{rejectionCount, admissionDuration, requestTotal, failOpenCount} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

func capCode(code int) string {
	if code > maxCode {
		code = maxCode
	}
	return strconv.Itoa(code)
}

func observeRejection(name, typ, op, errorType string, code int) {
	rejectionCount.WithLabelValues(name, typ, op, errorType, capCode(code)).Inc()
}

func observeCall(name, typ, op string, d time.Duration, rejected bool, code int) {
	r := strconv.FormatBool(rejected)
	admissionDuration.WithLabelValues(name, typ, op, r).Observe(d.Seconds())
	requestTotal.WithLabelValues(name, typ, op, capCode(code), r).Inc()
}
