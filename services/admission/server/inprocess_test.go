package server_test

import (
	"context"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

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
	checkGracefulStop(t, e, client, "in-process ")
}
