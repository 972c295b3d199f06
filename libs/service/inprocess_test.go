package service

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// testService is a small hand-written gRPC service: Echo (unary), Count (server streaming) and
// Chat (bidirectional).
type testService interface {
	echo(ctx context.Context, req *wrapperspb.StringValue) (any, error)
	count(req *wrapperspb.Int64Value, ss grpc.ServerStream) error
	chat(ss grpc.ServerStream) error
}

var testDesc = grpc.ServiceDesc{
	ServiceName: "test.Test",
	HandlerType: (*testService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(testService).echo(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Test/Echo"}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(testService).echo(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Count",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			in := new(wrapperspb.Int64Value)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			return srv.(testService).count(in, ss)
		},
	}, {
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(testService).chat(ss) },
	}},
}

// shared is a message the service returns to every caller: callers must get copies.
var shared = &wrapperspb.StringValue{Value: "shared"}

// batch is a response only the server's codec knows how to encode (as the storage service's
// watch batches).
type batch struct{ values []string }

type testCodec struct{ encoding.CodecV2 }

func (c testCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*batch); ok {
		var s string
		for _, v := range b.values {
			s += v
		}
		return c.CodecV2.Marshal(wrapperspb.String(s))
	}
	return c.CodecV2.Marshal(v)
}

type impl struct {
	// seen records the last Echo request (the handler's own message).
	mu   sync.Mutex
	seen *wrapperspb.StringValue
}

func (s *impl) echo(ctx context.Context, req *wrapperspb.StringValue) (any, error) {
	s.mu.Lock()
	s.seen = req
	s.mu.Unlock()
	switch req.Value {
	case "fail":
		st, _ := status.New(codes.NotFound, "no such thing").WithDetails(wrapperspb.String("detail"))
		return nil, st.Err()
	case "plain":
		return nil, errors.New("plain error")
	case "sleep":
		<-ctx.Done()
		return nil, ctx.Err()
	case "shared":
		return shared, nil
	case "batch":
		return &batch{values: []string{"a", "b"}}, nil
	case "md":
		md, _ := metadata.FromIncomingContext(ctx)
		if omd, _ := metadata.FromOutgoingContext(ctx); len(omd) > 0 {
			return nil, status.Error(codes.Internal, "outgoing metadata leaked into the handler")
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("h", "1"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("t", "2"))
		return wrapperspb.String(grpc.ServerTransportStreamFromContext(ctx).Method() + " " + md.Get("x-a")[0]), nil
	}
	req.Value += "!" // the handler owns its message
	return req, nil
}

// count sends n messages; a negative n sends until the stream's context ends.
func (s *impl) count(req *wrapperspb.Int64Value, ss grpc.ServerStream) error {
	for i := int64(0); req.Value < 0 || i < req.Value; i++ {
		var err error
		if i%2 == 1 {
			err = ss.SendMsg(&batch{values: []string{"b", strconv.FormatInt(i, 10)}})
		} else {
			err = ss.SendMsg(wrapperspb.String(strconv.FormatInt(i, 10)))
		}
		if err != nil {
			return err
		}
	}
	if req.Value == 3 {
		return status.Error(codes.ResourceExhausted, "three")
	}
	return nil
}

func (s *impl) chat(ss grpc.ServerStream) error {
	_ = ss.SetHeader(metadata.Pairs("h", "chat"))
	ss.SetTrailer(metadata.Pairs("t", "chat"))
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

func newTestInProcess(t *testing.T, opts InProcessOptions) (*InProcess, *impl) {
	t.Helper()
	if opts.Codec == nil {
		opts.Codec = testCodec{clientCodec}
	}
	p := NewInProcess(opts)
	s := &impl{}
	p.RegisterService(&testDesc, s)
	return p, s
}

func echo(ctx context.Context, p grpc.ClientConnInterface, v string, opts ...grpc.CallOption) (*wrapperspb.StringValue, error) {
	out := new(wrapperspb.StringValue)
	err := p.Invoke(ctx, "/test.Test/Echo", wrapperspb.String(v), out, opts...)
	return out, err
}

func TestInProcessUnary(t *testing.T) {
	p, s := newTestInProcess(t, InProcessOptions{})
	req := wrapperspb.String("hi")
	out := new(wrapperspb.StringValue)
	if err := p.Invoke(context.Background(), "/test.Test/Echo", req, out); err != nil {
		t.Fatal(err)
	}
	if out.Value != "hi!" || req.Value != "hi" {
		t.Fatalf("reply %q, request %q: want hi! and hi", out.Value, req.Value)
	}
	if s.seen == req || s.seen == out {
		t.Fatal("the handler shares a message with the caller")
	}
	// The reply is a copy of what the handler returned.
	out, err := echo(context.Background(), p, "shared")
	if err != nil || out.Value != "shared" || out == shared {
		t.Fatalf("shared: %v %v", out, err)
	}
	out.Value = "changed"
	if shared.Value != "shared" {
		t.Fatal("the caller changed the handler's message")
	}
	// The server's codec encodes what only it knows.
	if out, err := echo(context.Background(), p, "batch"); err != nil || out.Value != "ab" {
		t.Fatalf("batch: %v %v", out, err)
	}
	if err := p.Invoke(context.Background(), "/test.Test/Nope", req, out); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
}

func TestInProcessErrors(t *testing.T) {
	p, _ := newTestInProcess(t, InProcessOptions{})
	_, err := echo(context.Background(), p, "fail")
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.NotFound || st.Message() != "no such thing" || len(st.Details()) != 1 {
		t.Fatalf("status %v (%v)", st, err)
	}
	if d, ok := st.Details()[0].(*wrapperspb.StringValue); !ok || d.Value != "detail" {
		t.Fatalf("details %v", st.Details())
	}
	if _, err := echo(context.Background(), p, "plain"); status.Code(err) != codes.Unknown || status.Convert(err).Message() != "plain error" {
		t.Fatalf("plain error: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := echo(ctx, p, "sleep"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := echo(ctx, p, "hi"); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestInProcessMetadataAndInterceptors(t *testing.T) {
	var order []string
	var mu sync.Mutex
	rec := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	unary := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			rec(name + " " + info.FullMethod)
			return h(ctx, req)
		}
	}
	stream := func(name string) grpc.StreamServerInterceptor {
		return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			rec(name + " " + info.FullMethod + " " + strconv.FormatBool(info.IsClientStream))
			return h(srv, ss)
		}
	}
	p, _ := newTestInProcess(t, InProcessOptions{Unary: []grpc.UnaryServerInterceptor{unary("a"), nil, unary("b")},
		Stream: []grpc.StreamServerInterceptor{stream("a"), stream("b")}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "X-A", "v")
	var header, trailer metadata.MD
	out, err := echo(ctx, p, "md", grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || out.Value != "/test.Test/Echo v" {
		t.Fatalf("md: %v %v", out, err)
	}
	if header.Get("h")[0] != "1" || trailer.Get("t")[0] != "2" {
		t.Fatalf("header %v trailer %v", header, trailer)
	}
	cs, err := p.NewStream(context.Background(), &testDesc.Streams[1], "/test.Test/Chat")
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatal(err)
	}
	want := []string{"a /test.Test/Echo", "b /test.Test/Echo", "a /test.Test/Chat true", "b /test.Test/Chat true"}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != len(want) {
		t.Fatalf("interceptors ran as %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("interceptors ran as %q, want %q", order, want)
		}
	}
}

func count(ctx context.Context, p grpc.ClientConnInterface, n int64) (grpc.ClientStream, error) {
	cs, err := p.NewStream(ctx, &testDesc.Streams[0], "/test.Test/Count")
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(wrapperspb.Int64(n)); err != nil {
		return nil, err
	}
	return cs, cs.CloseSend()
}

func TestInProcessServerStream(t *testing.T) {
	p, _ := newTestInProcess(t, InProcessOptions{})
	for _, n := range []int64{0, 3, 10} {
		cs, err := count(context.Background(), p, n)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			m := new(wrapperspb.StringValue)
			err = cs.RecvMsg(m)
			if err != nil {
				break
			}
			got = append(got, m.Value)
		}
		if int64(len(got)) != n {
			t.Fatalf("%d: got %q", n, got)
		}
		for i, v := range got {
			want := strconv.Itoa(i)
			if i%2 == 1 {
				want = "b" + want
			}
			if v != want {
				t.Fatalf("%d: got %q", n, got)
			}
		}
		if n == 3 {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("end of stream: %v", err)
			}
		} else if err != io.EOF {
			t.Fatalf("end of stream: %v", err)
		}
		// Once ended, the stream stays ended.
		if err2 := cs.RecvMsg(new(wrapperspb.StringValue)); err2 != err {
			t.Fatalf("second end %v, want %v", err2, err)
		}
	}
}

func TestInProcessStreamCancel(t *testing.T) {
	p, _ := newTestInProcess(t, InProcessOptions{})
	base := runtime.NumGoroutine()
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cs, err := count(ctx, p, -1) // endless, blocks once the buffer is full
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < i%7; j++ {
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		// The caller sees its cancellation, whatever the buffer still holds.
		for {
			err := cs.RecvMsg(new(wrapperspb.StringValue))
			if err == nil {
				continue
			}
			if status.Code(err) != codes.Canceled {
				t.Fatalf("after cancel: %v", err)
			}
			break
		}
	}
	// Abandoned streams whose handler ends on its own, and a deadline.
	for i := 0; i < 20; i++ {
		if _, err := count(context.Background(), p, 2); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	cs, err := count(ctx, p, -1)
	if err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if _, err := cs.Header(); status.Code(err) != codes.DeadlineExceeded && err != nil {
		t.Fatalf("header: %v", err)
	}
	// Stop waits for every call.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	p.Stop(sctx)
	if sctx.Err() != nil {
		t.Fatal("calls still running after their contexts ended")
	}
	waitGoroutines(t, base)
	if _, err := echo(context.Background(), p, "hi"); status.Code(err) != codes.Unavailable {
		t.Fatalf("after Stop: %v", err)
	}
	if _, err := count(context.Background(), p, 1); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream after Stop: %v", err)
	}
}

// waitGoroutines fails unless the goroutine count returns to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInProcessBidi(t *testing.T) {
	p, _ := newTestInProcess(t, InProcessOptions{})
	base := runtime.NumGoroutine()
	cs, err := p.NewStream(context.Background(), &testDesc.Streams[1], "/test.Test/Chat")
	if err != nil {
		t.Fatal(err)
	}
	// The sender runs ahead of the receiver by no more than the buffers hold: interleave.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			m := wrapperspb.String(strconv.Itoa(i))
			if err := cs.SendMsg(m); err != nil {
				t.Error(err)
				return
			}
			m.Value = "changed" // the handler has its own copy
		}
		_ = cs.CloseSend()
	}()
	for i := 0; ; i++ {
		m := new(wrapperspb.StringValue)
		err := cs.RecvMsg(m)
		if err == io.EOF {
			if i != 100 {
				t.Fatalf("%d messages", i)
			}
			break
		}
		if err != nil || m.Value != strconv.Itoa(i) {
			t.Fatalf("message %d: %v %v", i, m, err)
		}
	}
	wg.Wait()
	h, err := cs.Header()
	if err != nil || h.Get("h")[0] != "chat" || cs.Trailer().Get("t")[0] != "chat" {
		t.Fatalf("header %v (%v), trailer %v", h, err, cs.Trailer())
	}
	if err := cs.SendMsg(wrapperspb.String("late")); err == nil {
		t.Fatal("SendMsg after CloseSend succeeded")
	}
	waitGoroutines(t, base)
}

func TestInProcessConcurrent(t *testing.T) {
	p, _ := newTestInProcess(t, InProcessOptions{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				v := strconv.Itoa(i*1000 + j)
				out, err := echo(context.Background(), p, v)
				if err != nil || out.Value != v+"!" {
					t.Errorf("%s: %v %v", v, out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestServerInProcessHealth(t *testing.T) {
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", ShutdownTimeout: time.Second}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	p := s.NewInProcess(InProcessOptions{})
	p.RegisterService(&testDesc, &impl{})
	s.GRPC.RegisterService(&testDesc, &impl{})
	s.Serve()
	defer s.Stop(context.Background(), nil)
	if err := CheckHealth(context.Background(), p, time.Second); err != nil {
		t.Fatal(err)
	}
	if out, err := echo(context.Background(), p, "x"); err != nil || !proto.Equal(out, wrapperspb.String("x!")) {
		t.Fatalf("echo: %v %v", out, err)
	}
	s.SetServing(false)
	if err := CheckHealth(context.Background(), p, time.Second); err == nil {
		t.Fatal("healthy while NOT_SERVING")
	}
	// The server's Stop stops its in-process connections too.
	s.Stop(context.Background(), nil)
	if _, err := echo(context.Background(), p, "y"); status.Code(err) != codes.Unavailable {
		t.Fatalf("echo after the server stopped: %v, want UNAVAILABLE", err)
	}
}
