package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// panicky is the test service with handlers that panic on a request starting with "panic":
// Echo at once, Chat at that message (mid-stream, after answering the ones before).
type panicky struct{ *impl }

// secret is in every panicking request: it must not reach the log (requests may carry tokens).
const secret = "token-s3cr3t"

func (p panicky) echo(ctx context.Context, req *wrapperspb.StringValue) (any, error) {
	if strings.HasPrefix(req.Value, "panic") {
		var m map[string]int
		m["x"]++ // a nil map: a runtime error, as a real bug would be
	}
	return p.impl.echo(ctx, req)
}

func (p panicky) chat(ss grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if strings.HasPrefix(in.Value, "panic") {
			panic("chat: cannot handle this message")
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

// syncBuffer is a log destination the handlers' goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// records are the JSON log records written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// checkPanicsAnswered drives conn's panicking Echo and Chat and checks that each fails with a
// generic Internal, and that the service answers the next calls.
func checkPanicsAnswered(t *testing.T, conn grpc.ClientConnInterface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := echo(ctx, conn, "panic "+secret)
	if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("a panicking unary handler answered %v, want Internal with a generic message", err)
	}
	if out, err := echo(ctx, conn, "after"); err != nil || out.Value != "after!" {
		t.Fatalf("the call after a panic: %v %v", out, err)
	}

	cs, err := conn.NewStream(ctx, &testDesc.Streams[1], "/test.Test/Chat")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("one")); err != nil {
		t.Fatal(err)
	}
	if got := new(wrapperspb.StringValue); cs.RecvMsg(got) != nil || got.Value != "one" {
		t.Fatalf("chat before the panic: %v", got)
	}
	if err := cs.SendMsg(wrapperspb.String("panic " + secret)); err != nil {
		t.Fatal(err)
	}
	err = cs.RecvMsg(new(wrapperspb.StringValue))
	if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("a panicking stream handler ended the stream with %v, want Internal with a generic message", err)
	}
	// A new stream is served.
	cs, err = conn.NewStream(ctx, &testDesc.Streams[1], "/test.Test/Chat")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("two")); err != nil {
		t.Fatal(err)
	}
	_ = cs.CloseSend()
	if got := new(wrapperspb.StringValue); cs.RecvMsg(got) != nil || got.Value != "two" {
		t.Fatalf("chat after the panic: %v", got)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Fatalf("end of the chat after the panic: %v", err)
	}
}

// checkPanicLogs checks that the log has one Error record with the method and stack per panic,
// and no request content.
func checkPanicLogs(t *testing.T, logs *syncBuffer, want int) {
	t.Helper()
	var n int
	for _, r := range logs.records(t) {
		line, _ := json.Marshal(r)
		if strings.Contains(string(line), secret) {
			t.Errorf("the log has the request's content: %s", line)
		}
		if r["level"] != "ERROR" || !strings.Contains(r["msg"].(string), "panicked") {
			continue
		}
		n++
		method, _ := r["method"].(string)
		stack, _ := r["stack"].(string)
		switch method {
		case "/test.Test/Echo":
			if !strings.Contains(stack, "panicky.echo") || !strings.Contains(r["panic"].(string), "nil map") {
				t.Errorf("the Echo panic's record has no stack down to the handler, or no panic value: %v", r)
			}
		case "/test.Test/Chat":
			if !strings.Contains(stack, "panicky.chat") || r["panic"] != "chat: cannot handle this message" {
				t.Errorf("the Chat panic's record has no stack down to the handler, or no panic value: %v", r)
			}
		default:
			t.Errorf("a panic logged with method %q", method)
		}
	}
	if n != want {
		t.Errorf("%d panics logged, want %d", n, want)
	}
}

// A handler's panic, unary or in a stream, over the listener or the server's in-process
// connection, fails that call alone with a generic Internal; it is logged with its stack (without
// the request) and counted, the metrics count the call as Internal, and the service serves on.
func TestServerRecoversHandlerPanics(t *testing.T) {
	logs := &syncBuffer{}
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", ShutdownTimeout: time.Second}, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	svc := panicky{&impl{}}
	s.GRPC.RegisterService(&testDesc, svc)
	p := s.NewInProcess(InProcessOptions{})
	p.RegisterService(&testDesc, svc)
	s.Serve()
	defer s.Stop(context.Background(), nil)

	// Every method's counter exists at zero before any panic.
	if got := testutil.ToFloat64(s.recovery.panics.WithLabelValues("unary", "test.Test", "Echo")); got != 0 {
		t.Fatalf("%s before any panic: %v", PanicsMetric, got)
	}
	if n := testutil.CollectAndCount(s.recovery.panics); n < 4 {
		t.Fatalf("%s has %d series before any panic, want one per method", PanicsMetric, n)
	}

	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct {
		name string
		conn grpc.ClientConnInterface
	}{{"listener", conn}, {"in-process", p}} {
		checkPanicsAnswered(t, c.conn)
		t.Logf("%s: ok", c.name)
	}

	want := `
# HELP grpc_server_panics_total Total number of panics of gRPC handlers recovered by the server (each answered Internal).
# TYPE grpc_server_panics_total counter
grpc_server_panics_total{grpc_method="Chat",grpc_service="test.Test",grpc_type="bidi_stream"} 2
grpc_server_panics_total{grpc_method="Count",grpc_service="test.Test",grpc_type="server_stream"} 0
grpc_server_panics_total{grpc_method="Echo",grpc_service="test.Test",grpc_type="unary"} 2
grpc_server_panics_total{grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 0
grpc_server_panics_total{grpc_method="List",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 0
grpc_server_panics_total{grpc_method="Watch",grpc_service="grpc.health.v1.Health",grpc_type="server_stream"} 0
`
	if err := testutil.GatherAndCompare(s.Metrics, strings.NewReader(want), PanicsMetric); err != nil {
		t.Error(err)
	}
	// The metrics interceptor, outside the recovery, saw each panicking call fail with Internal.
	for _, m := range []struct{ typ, method string }{{"unary", "Echo"}, {"bidi_stream", "Chat"}} {
		if got := testutil.ToFloat64(s.grpcm.handled.WithLabelValues(m.typ, "test.Test", m.method, "Internal")); got != 2 {
			t.Errorf("grpc_server_handled_total{grpc_method=%q,grpc_code=\"Internal\"} = %v, want 2", m.method, got)
		}
	}
	checkPanicLogs(t, logs, 4)
}

// An InProcess built without the server (so without its interceptors) still keeps a handler's
// panic from escaping into the caller, on the caller's goroutine (unary) or on the stream's own.
func TestInProcessRecoversPanicsWithoutInterceptors(t *testing.T) {
	p := NewInProcess(InProcessOptions{})
	logs := &syncBuffer{}
	p.recovery.log = slog.New(slog.NewJSONHandler(logs, nil))
	p.RegisterService(&testDesc, panicky{&impl{}})
	checkPanicsAnswered(t, p)
	checkPanicLogs(t, logs, 2)
}

// panicCodec panics encoding a response whose value starts with "codec-panic".
type panicCodec struct{ testCodec }

func (c panicCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*wrapperspb.StringValue); ok && strings.HasPrefix(m.Value, "codec-panic") {
		panic("codec: cannot encode this")
	}
	return c.testCodec.Marshal(v)
}

// A panic outside the recovery interceptor (the server's codec encoding a unary response, after
// the interceptors returned) is still answered Internal by the server's in-process connection,
// and logged and counted as the interceptor's are.
func TestServerInProcessRecoversPanicsOutsideInterceptors(t *testing.T) {
	logs := &syncBuffer{}
	s, err := NewServer("test", ServerConfig{Listen: "127.0.0.1:0", ShutdownTimeout: time.Second}, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background(), nil)
	p := s.NewInProcess(InProcessOptions{Codec: panicCodec{testCodec{clientCodec}}})
	p.RegisterService(&testDesc, &impl{})
	if _, err := echo(context.Background(), p, "codec-panic "+secret); status.Code(err) != codes.Internal {
		t.Fatalf("a panicking codec: %v, want Internal", err)
	}
	if out, err := echo(context.Background(), p, "after"); err != nil || out.Value != "after!" {
		t.Fatalf("the call after a panic: %v %v", out, err)
	}
	if got := testutil.ToFloat64(s.recovery.panics.WithLabelValues("unary", "test.Test", "Echo")); got != 1 {
		t.Errorf("%s = %v, want 1", PanicsMetric, got)
	}
	recs := logs.records(t)
	if len(recs) != 1 || recs[0]["method"] != "/test.Test/Echo" || !strings.Contains(recs[0]["stack"].(string), "panicCodec.Marshal") ||
		strings.Contains(fmt.Sprint(recs), secret) {
		t.Errorf("log: %v", recs)
	}
}

// Recover returns f's own result; a panic of f (on a goroutine of its own, as a handler's fan-out
// runs) becomes ErrPanicked, which says nothing of the panic, and is logged once at Error with
// the attributes given, the panic's value and the stack down to where it happened.
func TestRecover(t *testing.T) {
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	ctx := context.Background()
	if err := Recover(ctx, log, func() error { return nil }); err != nil {
		t.Errorf("f returned nil: %v", err)
	}
	own := errors.New("own")
	if err := Recover(ctx, log, func() error { return own }, "unit", "x"); err != own {
		t.Errorf("f returned its own error: got %v", err)
	}
	if n := len(logs.records(t)); n != 0 {
		t.Fatalf("%d records without a panic", n)
	}

	attrs := []any{"webhook", "w.example.com"}
	errc := make(chan error)
	go func() {
		errc <- Recover(ctx, log, func() error {
			var m map[string]int
			m[secret]++
			return nil
		}, attrs...)
	}()
	err := <-errc
	if !errors.Is(err, ErrPanicked) || strings.Contains(err.Error(), "nil map") {
		t.Errorf("a panic: got %v, want ErrPanicked without the panic's value", err)
	}
	if len(attrs) != 2 {
		t.Errorf("Recover changed the caller's attrs: %v", attrs)
	}
	recs := logs.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1: %v", len(recs), recs)
	}
	r := recs[0]
	stack, _ := r["stack"].(string)
	if r["level"] != "ERROR" || r["webhook"] != "w.example.com" || !strings.Contains(r["panic"].(string), "assignment to entry in nil map") ||
		!strings.Contains(stack, "TestRecover.func") || !strings.Contains(stack, "panic(") {
		t.Errorf("the panic's record: %v", r)
	}

	// Without a logger, slog's default is used.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)
	if err := Recover(ctx, nil, func() error { panic("p") }); !errors.Is(err, ErrPanicked) {
		t.Errorf("a panic without a logger: %v", err)
	}
	if recs := logs.records(t); len(recs) != 2 || recs[1]["panic"] != "p" {
		t.Errorf("a panic without a logger was not logged by slog's default: %v", recs)
	}
}
