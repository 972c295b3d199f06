package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	admissionv1 "platform.io/proto/admission/v1"
)

// The in-process connection serves the same service and health as the listener, and stops as it
// does: interest streams end with UNAVAILABLE, in-flight calls finish, new calls are refused.
func TestInProcessGracefulStop(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	conn := e.adm.InProcess()
	client := admissionv1.NewAdmissionClient(conn)
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: admissionv1.Admission_ServiceDesc.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("in-process health: %v, %v", h, err)
	}
	if resp, err := client.Admit(ctx, createRequest(t, configMap("plain", nil))); err != nil || !resp.Allowed {
		t.Fatalf("in-process Admit: %v, %v", resp, err)
	}
	stream, err := client.WatchInterest(ctx, &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvSet(t, stream)

	inflight := make(chan error, 1)
	go func() {
		resp, err := client.Validate(ctx, createRequest(t, configMap("slow", map[string]string{annBlock: "yes"})))
		if err == nil && !resp.Allowed {
			err = status.Error(codes.Internal, "rejected")
		}
		inflight <- err
	}()
	select {
	case <-e.plugins.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking call never reached the plugin")
	}

	stopped := make(chan struct{})
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		e.adm.Stop(sctx)
		close(stopped)
	}()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("in-process interest stream at Stop: %v, want UNAVAILABLE", err)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned with an in-process call in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(e.plugins.release)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight in-process call: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after the in-flight call finished")
	}
	if _, err := client.Admit(ctx, createRequest(t, configMap("after", nil))); status.Code(err) != codes.Unavailable {
		t.Fatalf("in-process Admit after Stop = %v, want UNAVAILABLE", err)
	}
}
