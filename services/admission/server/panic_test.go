package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"platform.io/libs/service"
	admissionv1 "platform.io/proto/admission/v1"
	"platform.io/services/admission/server"
)

// A plugin that panics on one client's object fails that request alone with Internal, over the
// listener and the in-process connection, in both phases: the panic is counted, the service
// answers the next request and stays SERVING, and the process (this test's) lives on.
func TestPluginPanicFailsOnlyItsRequest(t *testing.T) {
	metricsAddr := freeAddr(t)
	st, store := startStorage(t, "127.0.0.1:0")
	e := startAdmission(t, st.Addr().String(), func(c *server.Config) { c.MetricsBindAddress = metricsAddr })
	e.store = store
	e.waitReady(t)
	ctx := context.Background()

	conns := []struct {
		name   string
		client admissionv1.AdmissionClient
	}{{"listener", e.client}, {"in-process", admissionv1.NewAdmissionClient(e.adm.InProcess())}}
	for _, c := range conns {
		for _, phase := range []string{"admit", "validate"} {
			call := c.client.Admit
			if phase == "validate" {
				call = c.client.Validate
			}
			resp, err := call(ctx, createRequest(t, configMap("boom", map[string]string{annPanic: phase})))
			if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "nil map") {
				t.Fatalf("%s %s with a panicking plugin: %v, %v; want Internal without the panic's value", c.name, phase, resp, err)
			}
			resp, err = call(ctx, createRequest(t, configMap("fine", nil)))
			if err != nil || !resp.Allowed {
				t.Fatalf("%s %s after the panic: %v, %v", c.name, phase, resp, err)
			}
		}
	}
	h, err := e.health.Check(ctx, &healthpb.HealthCheckRequest{Service: admissionv1.Admission_ServiceDesc.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after the panics: %v, %v", h, err)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, method := range []string{"Admit", "Validate"} {
		// One panic over the listener, one in process.
		want := fmt.Sprintf(`%s{grpc_method=%q,grpc_service=%q,grpc_type="unary"} 2`, service.PanicsMetric, method, admissionv1.Admission_ServiceDesc.ServiceName)
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics have no %s", want)
		}
		want = fmt.Sprintf(`grpc_server_handled_total{grpc_code="Internal",grpc_method=%q,grpc_service=%q,grpc_type="unary"} 2`, method, admissionv1.Admission_ServiceDesc.ServiceName)
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics have no %s", want)
		}
	}
}
