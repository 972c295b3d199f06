package service

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// benchGetter is the handler of BenchmarkInProcessInvoke's service: a Get that answers a small
// request with a ~1 KiB message it keeps (as the storage service answers from its cache).
type benchGetter interface {
	get(ctx context.Context, req *wrapperspb.StringValue) (any, error)
}

type benchImpl struct{ resp *wrapperspb.StringValue }

func (s benchImpl) get(context.Context, *wrapperspb.StringValue) (any, error) { return s.resp, nil }

var benchDesc = grpc.ServiceDesc{
	ServiceName: "bench.Bench",
	HandlerType: (*benchGetter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Get",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(benchGetter).get(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/bench.Bench/Get"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(benchGetter).get(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
}

// BenchmarkInProcessInvoke is one in-process unary call (a small request, a ~1 KiB response)
// through the gRPC metrics interceptor, with a server codec of its own (as the storage service's).
func BenchmarkInProcessInvoke(b *testing.B) {
	gm := newGRPCMetrics(prometheus.NewRegistry())
	p := NewInProcess(InProcessOptions{Codec: testCodec{clientCodec}, Unary: []grpc.UnaryServerInterceptor{gm.unary}})
	p.RegisterService(&benchDesc, benchImpl{resp: wrapperspb.String(strings.Repeat("x", 1024))})
	ctx := context.Background()
	req := wrapperspb.String("default/name")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out := new(wrapperspb.StringValue)
		if err := p.Invoke(ctx, "/bench.Bench/Get", req, out); err != nil {
			b.Fatal(err)
		}
	}
}
