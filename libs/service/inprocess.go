package service

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// InProcess is a gRPC connection to services registered on it in the same process: it is a
// grpc.ServiceRegistrar (register the service's implementation as on a grpc.Server) and a
// grpc.ClientConnInterface (hand it to the generated clients), and calls the registered handlers
// directly through their grpc.ServiceDesc: no HTTP/2 framing, no socket, no goroutine per unary
// call.
//
// It keeps the semantics of the wire where they matter to callers and handlers:
//   - messages are never shared: a request is copied into the handler's own message (proto.Merge
//     into a fresh message, or encoded and decoded), and what the handler returns or sends is
//     encoded with the server's codec (which may know message types of its own) and decoded into
//     the caller's message with the proto codec;
//   - the caller's outgoing metadata is the handler's incoming metadata; the handler's context
//     derives from the caller's, so deadlines and cancellation reach it;
//   - errors are gRPC status errors, converted as grpc-go's server converts them (a context error
//     becomes Canceled or DeadlineExceeded, any other error without a status Unknown);
//   - the server's unary and stream interceptors run (stats handlers do not);
//   - a handler's panic (or an interceptor's) does not escape into the caller: it fails the call
//     with Internal and is logged with its stack, as the server's recovery interceptors do (on the
//     caller's goroutine for a unary call, on the stream's own goroutine for a stream, where an
//     escaped panic would kill the whole process);
//   - streams buffer a few messages each way and block beyond that (backpressure); a stream ends
//     when its handler returns (the client reads io.EOF, or the handler's status) or when the
//     caller's context ends.
//
// Call options are ignored except grpc.Header and grpc.Trailer on unary calls; message size
// limits do not apply.
type InProcess struct {
	codec  encoding.CodecV2 // the server's: decodes requests, encodes responses
	unary  grpc.UnaryServerInterceptor
	stream grpc.StreamServerInterceptor
	// recovery turns a panic that reached InProcess itself into Internal: the server's (which
	// counts it) for Server.NewInProcess, a log-only one otherwise.
	recovery *panicRecovery

	// methods maps "/service/method" to its handler; replaced (copy on write) by RegisterService.
	methods atomic.Pointer[map[string]inProcessMethod]
	regMu   sync.Mutex

	// mu guards stopped; calls holds the calls in flight, which Stop waits for.
	mu      sync.RWMutex
	stopped bool
	calls   sync.WaitGroup
}

type inProcessMethod struct {
	impl   any
	unary  *grpc.MethodDesc
	stream *grpc.StreamDesc
}

// InProcessOptions configure an InProcess.
type InProcessOptions struct {
	// Codec is the server's codec (default: proto).
	Codec encoding.CodecV2
	// Unary and Stream are the server's interceptors, outermost first (as grpc.ChainUnaryInterceptor
	// and grpc.ChainStreamInterceptor order them).
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
}

// inProcessStreamBuffer is how many messages a stream holds in each direction before the sender
// blocks.
const inProcessStreamBuffer = 4

// clientCodec encodes what callers send and decodes what they receive, as a gRPC client does.
var clientCodec = encoding.GetCodecV2(grpcproto.Name)

// errInProcessStopped is what calls get once the connection is stopped.
var errInProcessStopped = status.Error(codes.Unavailable, "in-process connection stopped")

// NewInProcess returns a connection with no services registered.
func NewInProcess(opts InProcessOptions) *InProcess {
	p := &InProcess{codec: opts.Codec, unary: chainUnary(opts.Unary), stream: chainStream(opts.Stream),
		recovery: &panicRecovery{}}
	if p.codec == nil {
		p.codec = clientCodec
	}
	p.methods.Store(&map[string]inProcessMethod{})
	return p
}

// NewInProcess returns an in-process connection to this server: the gRPC metrics and panic
// recovery interceptors run before opts' own interceptors (so a panic is logged, counted and
// answered as over the listener), and the server's health service is registered on it (so
// health checks through it report what the listener's do). The caller registers the service's API
// on it as on s.GRPC, with the same codec and interceptors as the server's. Stop stops it after
// the listener's calls have drained, and waits for its own in-flight calls within the same bound.
func (s *Server) NewInProcess(opts InProcessOptions) *InProcess {
	opts.Unary = append([]grpc.UnaryServerInterceptor{s.grpcm.unary, s.recovery.unary}, opts.Unary...)
	opts.Stream = append([]grpc.StreamServerInterceptor{s.grpcm.stream, s.recovery.stream}, opts.Stream...)
	p := NewInProcess(opts)
	p.recovery = s.recovery
	healthpb.RegisterHealthServer(p, s.health)
	s.inprocMu.Lock()
	s.inprocs = append(s.inprocs, p)
	s.inprocMu.Unlock()
	return p
}

// RegisterService registers a service implementation, as grpc.Server's does; it panics on a
// duplicate service or an implementation that does not implement desc.HandlerType.
func (p *InProcess) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if st := reflect.TypeOf(impl); !st.Implements(ht) {
			panic(fmt.Sprintf("in-process RegisterService: handler of type %v does not satisfy %v", st, ht))
		}
	}
	p.regMu.Lock()
	defer p.regMu.Unlock()
	old := *p.methods.Load()
	m := make(map[string]inProcessMethod, len(old)+len(desc.Methods)+len(desc.Streams))
	prefix := "/" + desc.ServiceName + "/"
	for k, v := range old {
		if strings.HasPrefix(k, prefix) {
			panic("in-process RegisterService: duplicate service " + desc.ServiceName)
		}
		m[k] = v
	}
	for i := range desc.Methods {
		m[prefix+desc.Methods[i].MethodName] = inProcessMethod{impl: impl, unary: &desc.Methods[i]}
	}
	for i := range desc.Streams {
		m[prefix+desc.Streams[i].StreamName] = inProcessMethod{impl: impl, stream: &desc.Streams[i]}
	}
	p.methods.Store(&m)
}

// Stop makes new calls fail with Unavailable and waits, within ctx, for the calls in flight
// (streams included: end them first, as the server's own shutdown does).
func (p *InProcess) Stop(ctx context.Context) {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (p *InProcess) begin() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped {
		return false
	}
	p.calls.Add(1)
	return true
}

func (p *InProcess) lookup(method string) (inProcessMethod, error) {
	m, ok := (*p.methods.Load())[method]
	if !ok {
		return m, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	return m, nil
}

// serverContext is the handler's context: the caller's, with its outgoing metadata as incoming
// metadata (and no outgoing metadata), and the transport stream grpc.SetHeader and grpc.Method
// use.
func serverContext(ctx context.Context, ts grpc.ServerTransportStream) context.Context {
	// Without outgoing metadata the incoming metadata is a nil MD: metadata.FromIncomingContext
	// still reports it (as an empty MD of the handler's own), without a map per call.
	md, ok := metadata.FromOutgoingContext(ctx)
	if ok {
		ctx = metadata.NewOutgoingContext(ctx, nil)
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	return grpc.NewContextWithServerTransportStream(ctx, ts)
}

// statusError is err as grpc-go's server sends it: a status error (nil stays nil).
func statusError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	return st.Err()
}

// copyMessage copies src into dst: proto.Merge when both are proto messages (dst is fresh),
// encoding with enc and decoding with dec otherwise.
func copyMessage(src, dst any, enc, dec encoding.CodecV2) error {
	if s, ok := src.(proto.Message); ok {
		if d, ok := dst.(proto.Message); ok {
			proto.Merge(d, s)
			return nil
		}
	}
	data, err := enc.Marshal(src)
	if err != nil {
		return status.Errorf(codes.Internal, "in-process: marshaling: %v", err)
	}
	defer data.Free()
	if err := dec.Unmarshal(data, dst); err != nil {
		return status.Errorf(codes.Internal, "in-process: unmarshaling: %v", err)
	}
	return nil
}

// transcode encodes v with enc and decodes it into dst with dec, as the wire would.
func transcode(v, dst any, enc, dec encoding.CodecV2) error {
	data, err := enc.Marshal(v)
	if err != nil {
		return status.Errorf(codes.Internal, "in-process: marshaling: %v", err)
	}
	return decodeFree(data, dst, dec)
}

// decodeFree decodes data into dst and releases data.
func decodeFree(data mem.BufferSlice, dst any, dec encoding.CodecV2) error {
	defer data.Free()
	if m, ok := dst.(proto.Message); ok && dec == clientCodec && len(data) == 1 {
		// What the proto codec does, without materializing (and reference counting) one buffer.
		// proto.Unmarshal copies what it keeps: dst does not alias data.
		if err := proto.Unmarshal(data[0].ReadOnlyData(), m); err != nil {
			return status.Errorf(codes.Internal, "in-process: unmarshaling: %v", err)
		}
		return nil
	}
	if err := dec.Unmarshal(data, dst); err != nil {
		return status.Errorf(codes.Internal, "in-process: unmarshaling: %v", err)
	}
	return nil
}

// Invoke calls a unary method: its handler runs on the caller's goroutine.
func (p *InProcess) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) (err error) {
	m, err := p.lookup(method)
	if err != nil {
		return err
	}
	if m.unary == nil {
		return status.Errorf(codes.Unimplemented, "%s is a streaming method", method)
	}
	if !p.begin() {
		return errInProcessStopped
	}
	defer p.calls.Done()
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	// The interceptors' recovery, if any, has already answered a panic of the handler; this one
	// catches what happens outside it (decoding the request, the interceptors outside it,
	// encoding the response), and everything when there are no interceptors.
	defer func() {
		if v := recover(); v != nil {
			err = p.recovery.recovered(ctx, method, "unary", v)
		}
	}()
	ts := &unaryTransport{method: method}
	dec := func(v any) error { return copyMessage(args, v, clientCodec, p.codec) }
	resp, err := m.unary.Handler(m.impl, serverContext(ctx, ts), dec, p.unary)
	ts.deliver(opts)
	if err != nil {
		return statusError(err)
	}
	return transcode(resp, reply, p.codec, clientCodec)
}

// unaryTransport collects what a unary handler sets with grpc.SetHeader, grpc.SendHeader and
// grpc.SetTrailer, for the caller's grpc.Header and grpc.Trailer options.
type unaryTransport struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
	sent, done      bool
}

func (t *unaryTransport) Method() string { return t.method }

func (t *unaryTransport) SetHeader(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent || t.done {
		return status.Error(codes.Internal, "transport: SetHeader called after the header was sent")
	}
	t.header = metadata.Join(t.header, md)
	return nil
}

func (t *unaryTransport) SendHeader(md metadata.MD) error {
	if err := t.SetHeader(md); err != nil {
		return err
	}
	t.mu.Lock()
	t.sent = true
	t.mu.Unlock()
	return nil
}

func (t *unaryTransport) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return status.Error(codes.Internal, "transport: SetTrailer called after the call ended")
	}
	t.trailer = metadata.Join(t.trailer, md)
	return nil
}

func (t *unaryTransport) deliver(opts []grpc.CallOption) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = t.header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = t.trailer.Copy()
		}
	}
}

// NewStream starts a streaming call: its handler runs on a goroutine of its own until it returns
// or the caller's context ends.
func (p *InProcess) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	m, err := p.lookup(method)
	if err != nil {
		return nil, err
	}
	if m.stream == nil {
		return nil, status.Errorf(codes.Unimplemented, "%s is a unary method", method)
	}
	if !p.begin() {
		return nil, errInProcessStopped
	}
	if err := ctx.Err(); err != nil {
		p.calls.Done()
		return nil, status.FromContextError(err).Err()
	}
	ps := &pipe{
		p:           p,
		method:      method,
		ctx:         ctx,
		c2s:         make(chan mem.BufferSlice, inProcessStreamBuffer),
		s2c:         make(chan mem.BufferSlice, inProcessStreamBuffer),
		headerReady: make(chan struct{}),
		done:        make(chan struct{}),
	}
	var sctx context.Context
	sctx, ps.cancel = context.WithCancel(ctx)
	ps.sctx = serverContext(sctx, (*pipeTransport)(ps))
	info := &grpc.StreamServerInfo{FullMethod: method, IsClientStream: m.stream.ClientStreams, IsServerStream: m.stream.ServerStreams}
	go ps.serve(m, info)
	return (*clientStream)(ps), nil
}

// pipe is one in-process stream; clientStream and serverStream are its two ends.
type pipe struct {
	p      *InProcess
	method string
	ctx    context.Context // the caller's
	sctx   context.Context // the handler's
	cancel context.CancelFunc

	c2s, s2c chan mem.BufferSlice
	// sendClosed is set by CloseSend (the client's sending goroutine only).
	sendClosed bool

	mu          sync.Mutex
	header      metadata.MD
	trailer     metadata.MD
	headerSent  bool
	headerReady chan struct{} // closed once the header is sent
	done        chan struct{} // closed once the handler returned; err is its status
	err         error
}

func (ps *pipe) serve(m inProcessMethod, info *grpc.StreamServerInfo) {
	defer ps.p.calls.Done()
	err := ps.handle(m, info)
	ps.mu.Lock()
	ps.err = statusError(err)
	ps.sendHeaderLocked()
	close(ps.done)
	ps.mu.Unlock()
	ps.cancel()
}

// handle runs the stream's interceptors and handler. It recovers a panic: this goroutine is the
// pipe's own, so a panic escaping it would end the whole process, not just the call.
func (ps *pipe) handle(m inProcessMethod, info *grpc.StreamServerInfo) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = ps.p.recovery.recovered(ps.sctx, ps.method, rpcType(info.IsClientStream, info.IsServerStream), v)
		}
	}()
	if ps.p.stream != nil {
		return ps.p.stream(m.impl, (*serverStream)(ps), info, m.stream.Handler)
	}
	return m.stream.Handler(m.impl, (*serverStream)(ps))
}

// sendHeaderLocked marks the header sent (once); ps.mu is held.
func (ps *pipe) sendHeaderLocked() {
	if !ps.headerSent {
		ps.headerSent = true
		close(ps.headerReady)
	}
}

func (ps *pipe) ctxError(ctx context.Context) error {
	return status.FromContextError(ctx.Err()).Err()
}

// clientStream is the caller's end of a pipe.
type clientStream pipe

func (cs *clientStream) Context() context.Context { return cs.ctx }

func (cs *clientStream) Header() (metadata.MD, error) {
	select {
	case <-cs.headerReady:
	case <-cs.done:
	case <-cs.ctx.Done():
		return nil, (*pipe)(cs).ctxError(cs.ctx)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.header.Copy(), nil
}

func (cs *clientStream) Trailer() metadata.MD {
	select {
	case <-cs.done:
	default:
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.trailer.Copy()
}

func (cs *clientStream) CloseSend() error {
	if !cs.sendClosed {
		cs.sendClosed = true
		close(cs.c2s)
	}
	return nil
}

// SendMsg sends m to the handler; io.EOF means the stream has ended (RecvMsg says how).
func (cs *clientStream) SendMsg(m any) error {
	if cs.sendClosed {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	select {
	case <-cs.done:
		return io.EOF
	case <-cs.ctx.Done():
		return io.EOF
	default:
	}
	data, err := clientCodec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "in-process: marshaling: %v", err)
	}
	select {
	case cs.c2s <- data:
		return nil
	case <-cs.done:
	case <-cs.ctx.Done():
	}
	data.Free()
	return io.EOF
}

// RecvMsg receives the handler's next message; at the end, io.EOF if the handler returned nil,
// its status otherwise, or the status of the caller's context error.
func (cs *clientStream) RecvMsg(m any) error {
	select {
	case data := <-cs.s2c:
		return decodeFree(data, m, clientCodec)
	case <-cs.done:
		// What the handler sent before it returned comes first.
		select {
		case data := <-cs.s2c:
			return decodeFree(data, m, clientCodec)
		default:
		}
		if cs.err != nil {
			return cs.err
		}
		return io.EOF
	case <-cs.ctx.Done():
		return (*pipe)(cs).ctxError(cs.ctx)
	}
}

// serverStream is the handler's end of a pipe.
type serverStream pipe

func (ss *serverStream) Context() context.Context { return ss.sctx }

func (ss *serverStream) SetHeader(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.headerSent {
		return status.Error(codes.Internal, "transport: SetHeader called after the header was sent")
	}
	ss.header = metadata.Join(ss.header, md)
	return nil
}

func (ss *serverStream) SendHeader(md metadata.MD) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.headerSent {
		return status.Error(codes.Internal, "transport: SendHeader called multiple times")
	}
	ss.header = metadata.Join(ss.header, md)
	(*pipe)(ss).sendHeaderLocked()
	return nil
}

func (ss *serverStream) SetTrailer(md metadata.MD) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.trailer = metadata.Join(ss.trailer, md)
}

// SendMsg encodes m with the server's codec and queues it for the caller; it blocks while the
// queue is full, until the stream's context ends.
func (ss *serverStream) SendMsg(m any) error {
	ss.mu.Lock()
	(*pipe)(ss).sendHeaderLocked()
	ss.mu.Unlock()
	if ss.sctx.Err() != nil {
		return (*pipe)(ss).ctxError(ss.sctx)
	}
	data, err := ss.p.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "in-process: marshaling: %v", err)
	}
	select {
	case ss.s2c <- data:
		return nil
	case <-ss.sctx.Done():
		data.Free()
		return (*pipe)(ss).ctxError(ss.sctx)
	}
}

// RecvMsg receives the caller's next message with the server's codec; io.EOF once the caller
// closed its side.
func (ss *serverStream) RecvMsg(m any) error {
	select {
	case data, ok := <-ss.c2s:
		if !ok {
			return io.EOF
		}
		return decodeFree(data, m, ss.p.codec)
	case <-ss.sctx.Done():
		return (*pipe)(ss).ctxError(ss.sctx)
	}
}

// pipeTransport is the pipe as grpc.SetHeader and friends see it in the handler's context.
type pipeTransport pipe

func (t *pipeTransport) Method() string                  { return t.method }
func (t *pipeTransport) SetHeader(md metadata.MD) error  { return (*serverStream)(t).SetHeader(md) }
func (t *pipeTransport) SendHeader(md metadata.MD) error { return (*serverStream)(t).SendHeader(md) }
func (t *pipeTransport) SetTrailer(md metadata.MD) error {
	(*serverStream)(t).SetTrailer(md)
	return nil
}

// chainUnary is interceptors as one, the first outermost (nil for none).
func chainUnary(interceptors []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	var ints []grpc.UnaryServerInterceptor
	for _, i := range interceptors {
		if i != nil {
			ints = append(ints, i)
		}
	}
	switch len(ints) {
	case 0:
		return nil
	case 1:
		return ints[0]
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return ints[0](ctx, req, info, unaryStep(ints, 0, info, handler))
	}
}

func unaryStep(ints []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(ints)-1 {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return ints[i+1](ctx, req, info, unaryStep(ints, i+1, info, final))
	}
}

// chainStream is interceptors as one, the first outermost (nil for none).
func chainStream(interceptors []grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	var ints []grpc.StreamServerInterceptor
	for _, i := range interceptors {
		if i != nil {
			ints = append(ints, i)
		}
	}
	switch len(ints) {
	case 0:
		return nil
	case 1:
		return ints[0]
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return ints[0](srv, ss, info, streamStep(ints, 0, info, handler))
	}
}

func streamStep(ints []grpc.StreamServerInterceptor, i int, info *grpc.StreamServerInfo, final grpc.StreamHandler) grpc.StreamHandler {
	if i == len(ints)-1 {
		return final
	}
	return func(srv any, ss grpc.ServerStream) error {
		return ints[i+1](srv, ss, info, streamStep(ints, i+1, info, final))
	}
}

var (
	_ grpc.ClientConnInterface = (*InProcess)(nil)
	_ grpc.ServiceRegistrar    = (*InProcess)(nil)
	_ grpc.ClientStream        = (*clientStream)(nil)
	_ grpc.ServerStream        = (*serverStream)(nil)
)
