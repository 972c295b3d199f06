package service

// streamWindow and connWindow are the HTTP/2 flow-control windows of every gRPC connection
// between the services, on both ends. Setting them turns off gRPC's dynamic window (BDP
// estimation), which answers received data with PING frames to measure the link: on a
// request/response hop of a few hundred bytes that is an extra frame to write, read and wake a
// goroutine for on both sides of most calls, for windows that never need to grow on loopback or
// in a cluster network. The sizes still let a stream carry 1 MiB (a large list or watch batch)
// before the receiver must acknowledge, and the connection 8 MiB.
const (
	streamWindow = 1 << 20
	connWindow   = 8 << 20
)
