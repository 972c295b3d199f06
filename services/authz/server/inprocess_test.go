package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/authz/server"
)

// The in-process connection serves the same service and health as the listener; Stop ends its
// policy streams and then answers UNAVAILABLE.
func TestInProcess(t *testing.T) {
	e := start(t, server.ModeRBAC)
	e.authorize(t, &authzv1.Attributes{User: &authzv1.User{Name: "root", Groups: []string{"system:masters"}}, Verb: "get", ResourceRequest: true, Resource: "pods"})
	ctx := context.Background()
	conn := e.srv.InProcess()
	client := authzv1.NewAuthorizationClient(conn)
	r, err := client.Authorize(ctx, &authzv1.AuthorizeRequest{Attributes: &authzv1.Attributes{
		User: &authzv1.User{Name: "root", Groups: []string{"system:masters"}}, Verb: "delete", ResourceRequest: true, Resource: "nodes"}})
	if err != nil || r.Decision != authzv1.Decision_DECISION_ALLOW {
		t.Fatalf("in process: %v, %v", r, err)
	}
	// Health follows readiness a tick after the policy is loaded.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: authzv1.Authorization_ServiceDesc.ServiceName})
		if err == nil && h.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in-process health: %v, %v", h, err)
		}
	}
	stream, err := client.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	stopped := make(chan struct{})
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		e.srv.Stop(sctx)
		close(stopped)
	}()
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	if _, err := client.Authorize(ctx, &authzv1.AuthorizeRequest{Attributes: &authzv1.Attributes{User: &authzv1.User{Name: "root"}, Verb: "get"}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("in process after Stop: %v, want UNAVAILABLE", err)
	}
}
