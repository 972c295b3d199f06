package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	storagev1 "platform.io/proto/storage/v1"
)

// BenchmarkMetricsUnary is the storage request metrics' interceptor around a handler that does
// nothing: its cost per call.
func BenchmarkMetricsUnary(b *testing.B) {
	m := newMetrics(prometheus.NewRegistry(), nil)
	req := &storagev1.GetRequest{Type: &storagev1.ResourceType{Group: "apps", Resource: "deployments"}, Namespace: "ns", Name: "n"}
	resp := &storagev1.GetResponse{}
	info := &grpc.UnaryServerInfo{FullMethod: storagev1.Storage_Get_FullMethodName}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.unary(ctx, req, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}
