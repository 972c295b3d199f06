package service

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The unary interceptor counts each call under its method and code, the same series whether
// resolved on the first call or taken from the cache on later ones (codes outside the known range
// included), and times each call.
func TestGRPCMetricsUnary(t *testing.T) {
	reg := prometheus.NewRegistry()
	gm := newGRPCMetrics(reg)
	call := func(method string, code codes.Code) {
		info := &grpc.UnaryServerInfo{FullMethod: method}
		_, _ = gm.unary(context.Background(), nil, info, func(context.Context, any) (any, error) {
			if code == codes.OK {
				return "ok", nil
			}
			return nil, status.Error(code, "failed")
		})
	}
	for range 3 {
		call("/a.A/Get", codes.OK)
	}
	call("/a.A/Get", codes.NotFound)
	call("/a.A/Get", codes.Code(99))
	call("/a.A/Get", codes.Code(99))
	call("/b.B/List", codes.NotFound)

	want := `
# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="Code(99)",grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 2
grpc_server_handled_total{grpc_code="NotFound",grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="NotFound",grpc_method="List",grpc_service="b.B",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 3
# HELP grpc_server_msg_received_total Total number of RPC stream messages received on the server.
# TYPE grpc_server_msg_received_total counter
grpc_server_msg_received_total{grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 6
grpc_server_msg_received_total{grpc_method="List",grpc_service="b.B",grpc_type="unary"} 1
# HELP grpc_server_msg_sent_total Total number of gRPC stream messages sent by the server.
# TYPE grpc_server_msg_sent_total counter
grpc_server_msg_sent_total{grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 3
# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="Get",grpc_service="a.A",grpc_type="unary"} 6
grpc_server_started_total{grpc_method="List",grpc_service="b.B",grpc_type="unary"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "grpc_server_handled_total",
		"grpc_server_msg_received_total", "grpc_server_msg_sent_total", "grpc_server_started_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(gm.seconds); n != 2 {
		t.Errorf("grpc_server_handling_seconds has %d series, want 2", n)
	}
}
