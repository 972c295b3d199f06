package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	authnv1 "platform.io/proto/authn/v1"
)

// The in-process connection serves the same service and health as the listener, and answers
// UNAVAILABLE once the service stopped.
func TestInProcess(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	conn := e.srv.InProcess()
	client := authnv1.NewAuthenticationClient(conn)
	resp, err := client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: "s3cret"})
	if err != nil || !resp.Authenticated || resp.User.Name != "jane" || resp.Method != "token-file" {
		t.Fatalf("in process: %v, %v", resp, err)
	}
	if _, err := client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: "nope"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("in process, unknown token: %v", err)
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: authnv1.Authentication_ServiceDesc.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("in-process health: %v, %v", h, err)
	}

	e.srv.Stop(ctx)
	if _, err := client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: "s3cret"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("in process after Stop: %v, want UNAVAILABLE", err)
	}
}
