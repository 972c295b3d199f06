package serviceresolve

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAddress(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	if got, err := Address(svc, 443); got != "10.0.0.1:443" || err != nil {
		t.Errorf("cluster IP: %q %v", got, err)
	}
	var pe *PortError
	if _, err := Address(svc, 8443); !errors.As(err, &pe) {
		t.Errorf("missing port: %v", err)
	}
	headless := svc.DeepCopy()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	if _, err := Address(headless, 443); !errors.Is(err, ErrNoClusterIP) {
		t.Errorf("headless: %v", err)
	}
	ext := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "api.example.com"}}
	if got, err := Address(ext, 443); got != "api.example.com:443" || err != nil {
		t.Errorf("external name: %q %v", got, err)
	}
}

func TestEndpointAddress(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	eps := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}, Ports: []corev1.EndpointPort{{Name: "metrics", Port: 9090}}},
		{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.2"}, {IP: "10.1.0.3"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 8443}}},
	}}
	for i, want := range []string{"10.1.0.2:8443", "10.1.0.3:8443"} {
		if got, err := EndpointAddress(svc, eps, 443, func(int) int { return i }); got != want || err != nil {
			t.Errorf("pick %d: %q %v", i, got, err)
		}
	}
	if _, err := EndpointAddress(svc, &corev1.Endpoints{}, 443, func(int) int { return 0 }); !errors.Is(err, ErrNoEndpoints) {
		t.Errorf("no endpoints: %v", err)
	}
	var pe *PortError
	if _, err := EndpointAddress(svc, eps, 80, func(int) int { return 0 }); !errors.As(err, &pe) {
		t.Errorf("missing port: %v", err)
	}
}
