package admission

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	admissionv1 "platform.io/proto/admission/v1"
)

// interestServer serves the interest stream from sets (one stream at a time, ended by a value
// on end) and answers every Validate with generation.
type interestServer struct {
	admissionv1.UnimplementedAdmissionServer
	sets       chan *admissionv1.InterestSet
	end        chan struct{}
	generation atomic.Uint64
}

func (s *interestServer) WatchInterest(_ *admissionv1.WatchInterestRequest, stream admissionv1.Admission_WatchInterestServer) error {
	for {
		select {
		case <-s.end:
			return nil
		case set := <-s.sets:
			if err := stream.Send(set); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (s *interestServer) Validate(context.Context, *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	return &admissionv1.AdmissionResponse{Allowed: true, InterestGeneration: s.generation.Load()}, nil
}

// TestInterestFloor: an answer reporting a newer interest generation than the gateway has makes
// it ask for every write until that set arrives (a request such as a namespace's first quota may
// have just changed the interest); a new stream (a restarted service) starts the floor again.
func TestInterestFloor(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &interestServer{sets: make(chan *admissionv1.InterestSet), end: make(chan struct{})}
	fake.generation.Store(7)
	admissionv1.RegisterAdmissionServer(srv, fake)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := New(conn, slog.New(slog.DiscardHandler), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	write := Request{Operation: "CREATE", Resource: "configmaps", Namespaced: true, Namespace: "ns"}
	generation := func() uint64 {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.set.GetGeneration()
	}
	send := func(gen uint64) {
		t.Helper()
		fake.sets <- &admissionv1.InterestSet{Generation: gen}
		deadline := time.Now().Add(5 * time.Second)
		for generation() != gen {
			if time.Now().After(deadline) {
				t.Fatalf("set %d not received", gen)
			}
			time.Sleep(time.Millisecond)
		}
	}
	send(6)
	if c.Interested(write) {
		t.Fatal("a write no rule matches is asked")
	}
	if _, err := c.Validate(ctx, &admissionv1.AdmissionRequest{}); err != nil {
		t.Fatal(err)
	}
	if !c.Interested(write) {
		t.Fatal("a write is skipped while the set is older than an answer's generation")
	}
	send(7)
	if c.Interested(write) {
		t.Fatal("a write is asked once the set is as new as the answers")
	}
	// The service restarts: its generations start again, and so does the floor.
	fake.generation.Store(2)
	if _, err := c.Validate(ctx, &admissionv1.AdmissionRequest{}); err != nil {
		t.Fatal(err)
	}
	fake.end <- struct{}{}
	send(1)
	if c.Interested(write) {
		t.Fatal("the floor of the previous service holds after a new stream")
	}
}
