package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/registry"
)

// The audit annotations of a request to a deprecated API (upstream k8s.io/deprecated and
// k8s.io/removed-release).
var (
	auditDeprecatedKey     = naming.GroupSuffix + "/deprecated"
	auditRemovedReleaseKey = naming.GroupSuffix + "/removed-release"
)

func newDeprecatedAPIsGauge(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_requested_deprecated_apis",
		Help: "Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.",
	}, []string{"group", "version", "resource", "subresource", "removed_release"})
	if reg != nil {
		reg.MustRegister(g)
	}
	return g
}

// deprecationWarning is upstream's text: "<group>/<version> <Kind> is deprecated in v1.33+,
// unavailable in v1.36+; use <group>/<version> <Kind>".
func deprecationWarning(res *registry.Resource) string {
	d := res.Deprecation
	msg := fmt.Sprintf("%s %s is deprecated in v%s+", res.GroupVersion(), res.Kind, d.In)
	if d.RemovedIn != "" {
		msg += fmt.Sprintf(", unavailable in v%s+", d.RemovedIn)
	}
	if d.Replacement != "" {
		msg += "; use " + d.Replacement
	}
	return msg
}

// signalDeprecation gives a request to a deprecated resource the spec's three signals: the
// Warning header, the audit annotation, and the gauge.
func (a *API) signalDeprecation(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	res := info.res
	w.Header().Add("Warning", "299 - "+strconv.Quote(deprecationWarning(res)))
	audit.AddAnnotation(r.Context(), auditDeprecatedKey, "true")
	if res.Deprecation.RemovedIn != "" {
		audit.AddAnnotation(r.Context(), auditRemovedReleaseKey, res.Deprecation.RemovedIn)
	}
	a.deprecatedAPIs.WithLabelValues(res.Group, res.Version, res.Resource, info.subresource, res.Deprecation.RemovedIn).Set(1)
}
