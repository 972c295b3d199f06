package server_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

// The upstream-named metrics: apiserver_storage_objects counts what exists now (deleted objects
// are not counted), apiserver_storage_request_duration_seconds times each operation per type,
// and the gRPC server metrics every service has (libs/service) count calls by method and code.
func TestUpstreamStorageMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	srv := startEmbedded(t, func(c *server.Config) { c.MetricsBindAddress = metricsAddr })
	c := storage.NewClient(dial(t, srv.Addr().String()))
	for _, name := range []string{"a", "b", "c"} {
		if _, err := c.Create(ctx(t), &storagev1.CreateRequest{Type: widgets, Object: &storagev1.Object{Namespace: "ns", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx(t), &storagev1.DeleteRequest{Type: widgets, Namespace: "ns", Name: "b"}); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Get(ctx(t), &storagev1.GetRequest{Type: widgets, Namespace: "ns", Name: "missing"})
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`apiserver_storage_objects{resource="widgets.test.platform.io"} 2`,
		`apiserver_storage_request_duration_seconds_count{operation="create",type="widgets.test.platform.io"} 3`,
		`apiserver_storage_request_duration_seconds_count{operation="delete",type="widgets.test.platform.io"} 1`,
		`apiserver_storage_request_duration_seconds_count{operation="get",type="widgets.test.platform.io"} 1`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Create",grpc_service="platform.storage.v1.Storage",grpc_type="unary"} 3`,
		`grpc_server_handled_total{grpc_code="NotFound",grpc_method="Get",grpc_service="platform.storage.v1.Storage",grpc_type="unary"} 1`,
		`grpc_server_started_total{grpc_method="Create",grpc_service="platform.storage.v1.Storage",grpc_type="unary"} 3`,
		`grpc_server_handling_seconds_count{grpc_method="Create",grpc_service="platform.storage.v1.Storage",grpc_type="unary"} 3`,
		// Initialized at start: a method never called still has its series.
		`grpc_server_started_total{grpc_method="Compact",grpc_service="platform.storage.v1.Storage",grpc_type="unary"} 0`,
		`grpc_server_started_total{grpc_method="Watch",grpc_service="platform.storage.v1.Storage",grpc_type="server_stream"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
