package metrics

import (
	"reflect"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`apiserver_request_total`, []string{"apiserver_request_total"}},
		{`sum by (verb) (rate(apiserver_request_total{code=~"5..", verb!="WATCH"}[$__rate_interval]))`, []string{"apiserver_request_total"}},
		{`histogram_quantile(0.99, sum by (le, job) (rate(grpc_server_handling_seconds_bucket{grpc_type="unary"}[5m])))`, []string{"grpc_server_handling_seconds_bucket"}},
		{`sum(rate(a_total[1m])) without (instance) / on(job) group_left(name) b_info`, []string{"a_total", "b_info"}},
		{`sum(x) by (job) - sum by (job) (y offset 1h) > bool 0.5e-3`, []string{"x", "y"}},
		{`topk(10, max by (resource) (apiserver_storage_objects{resource="a}b"}))`, []string{"apiserver_storage_objects"}},
		{`rate(up[${interval}]) and ignoring(code) down unless $var`, []string{"up", "down"}},
		{`{__name__="hidden"}`, nil},
		{`count(count by (x) (metric:recorded:rate5m))`, []string{"metric:recorded:rate5m"}},
	} {
		got, err := MetricNames(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.expr, got, c.want)
		}
	}
	for _, bad := range []string{`rate(x[5m]`, `x{a="b"`, `sum(x))`, `x{a="b}`, `x]`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
