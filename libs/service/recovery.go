package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PanicsMetric is the name of the counter of handler panics every service recovers from, by
// grpc_type, grpc_service and grpc_method (the labels of the other grpc_server_* metrics, so that
// it joins with grpc_server_handled_total).
const PanicsMetric = "grpc_server_panics_total"

// errPanicked is what a client gets for a call whose handler panicked: a generic Internal
// status, since the panic's value may say things about the server (or the request) the client
// has no business seeing; the details are in the server's log.
var errPanicked = status.Error(codes.Internal, "internal error")

// panicRecovery turns a panic of a gRPC handler into an Internal status, so that one bad request
// (a plugin's nil map, an index out of range) fails alone instead of killing the service and
// every call in flight with it.
type panicRecovery struct {
	log *slog.Logger
	// panics counts the recovered panics; nil for an InProcess built without a server, which has
	// no registry to count into.
	panics *prometheus.CounterVec
}

func newPanicRecovery(log *slog.Logger, reg prometheus.Registerer) *panicRecovery {
	r := &panicRecovery{log: log, panics: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: PanicsMetric, Help: "Total number of panics of gRPC handlers recovered by the server (each answered Internal).",
	}, []string{"grpc_type", "grpc_service", "grpc_method"})}
	reg.MustRegister(r.panics)
	return r
}

// initialize creates the counter of every registered method at zero: an alert on
// increase(grpc_server_panics_total[...]) cannot see a series that is born at 1.
func (r *panicRecovery) initialize(s *grpc.Server) {
	for svc, info := range s.GetServiceInfo() {
		for _, mi := range info.Methods {
			r.panics.WithLabelValues(rpcType(mi.IsClientStream, mi.IsServerStream), svc, mi.Name)
		}
	}
}

// recovered logs and counts the panic v of a call of fullMethod and returns the status the client
// gets. It must be called from the deferred function that recovered v, so that the stack it logs
// is the panicking goroutine's, down to where the panic happened. The request itself is never
// logged: it may carry credentials (tokens in a TokenReview, Secrets under admission).
func (r *panicRecovery) recovered(ctx context.Context, fullMethod, typ string, v any) error {
	stack := debug.Stack()
	if r.panics != nil {
		svc, method := splitMethod(fullMethod)
		r.panics.WithLabelValues(typ, svc, method).Inc()
	}
	log := r.log
	if log == nil {
		log = slog.Default()
	}
	log.ErrorContext(ctx, "gRPC handler panicked; the call fails with Internal and the service keeps serving",
		"method", fullMethod, "panic", fmt.Sprint(v), "stack", string(stack))
	return errPanicked
}

// unary is the unary recovery interceptor.
func (r *panicRecovery) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, r.recovered(ctx, info.FullMethod, "unary", v)
		}
	}()
	return handler(ctx, req)
}

// stream is the stream recovery interceptor.
func (r *panicRecovery) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = r.recovered(ss.Context(), info.FullMethod, rpcType(info.IsClientStream, info.IsServerStream), v)
		}
	}()
	return handler(srv, ss)
}

// ErrPanicked is the error Recover returns for a panic. It says nothing of the panic's value,
// which may say things about the server (or the request) that whoever gets the error has no
// business seeing; the details are in the server's log.
var ErrPanicked = errors.New("internal error: panicked (the details are in the server's log)")

// Recover runs f, turning a panic into an error and logging it. It is for the goroutines a
// handler starts (calls fanned out in parallel, a fetch shared by concurrent requests): the
// recovery interceptors only cover the handler's own goroutine, and a panic on any other one
// kills the process with every call in flight. Run the goroutine's work (or the part of it whose
// failure has a defined outcome) under Recover and handle its error as that work's failure.
//
// It returns f's error, or ErrPanicked when f panicked. A panic is logged once, at Error on log
// (slog.Default when nil) with ctx, attrs (slog key-value pairs naming the unit of work, such as
// the webhook called), the panic's value and the panicking goroutine's stack. Never pass the
// request's contents in attrs: they may carry credentials. The panic is not counted in
// grpc_server_panics_total: that counter is the server's, by gRPC method, for calls answered
// Internal, and the work of a goroutine may fail without its call failing.
func Recover(ctx context.Context, log *slog.Logger, f func() error, attrs ...any) (err error) {
	defer func() {
		if v := recover(); v != nil {
			// Here, in the deferred function, the stack is still the panicking goroutine's, down
			// to where the panic happened.
			stack := debug.Stack()
			if log == nil {
				log = slog.Default()
			}
			log.ErrorContext(ctx, "a request's goroutine panicked; its work fails with an error and the service keeps serving",
				slices.Concat(attrs, []any{"panic", fmt.Sprint(v), "stack", string(stack)})...)
			err = ErrPanicked
		}
	}()
	return f()
}
