// Package serviceresolve finds where a Service's port is reached from the control plane, as
// upstream's API server resolves the Services that webhooks and APIServices name (its cluster
// resolver): an ExternalName Service's external name, otherwise the Service's cluster IP, which
// must serve the port. Both the admission webhook dispatcher and the gateway's aggregator use it.
package serviceresolve

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// ErrNoClusterIP says that the Service has no cluster IP to route to (a headless Service, or
// one without an address yet).
var ErrNoClusterIP = errors.New("cannot route to service without a cluster IP")

// PortError says that the Service does not serve the port asked for.
type PortError struct {
	Name string
	Port int32
}

func (e *PortError) Error() string {
	return fmt.Sprintf("no service port %d found for service %q", e.Port, e.Name)
}

// Address returns host:port for port of svc: the external name of an ExternalName Service, or
// the cluster IP when one of the Service's ports is port (a *PortError otherwise), or
// ErrNoClusterIP for a Service without one.
func Address(svc *corev1.Service, port int32) (string, error) {
	portStr := strconv.Itoa(int(port))
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		if svc.Spec.ExternalName == "" {
			return "", ErrNoClusterIP
		}
		return net.JoinHostPort(svc.Spec.ExternalName, portStr), nil
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone:
		if _, ok := ServicePort(svc, port); !ok {
			return "", &PortError{Name: svc.Name, Port: port}
		}
		return net.JoinHostPort(svc.Spec.ClusterIP, portStr), nil
	}
	return "", ErrNoClusterIP
}

// ServicePort returns the Service's port entry for port.
func ServicePort(svc *corev1.Service, port int32) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

// DNSName is the Service's in-cluster DNS name (<name>.<namespace>.svc), which is also the
// server name its serving certificate is verified against.
func DNSName(namespace, name string) string {
	return name + "." + namespace + ".svc"
}

// ErrNoEndpoints says that no ready address serves the Service's port.
var ErrNoEndpoints = errors.New("no endpoints available for the service port")

// EndpointAddress returns ip:port of one ready endpoint of svc's port (chosen by pick among the
// candidates, for spreading the load), as upstream's endpoint routing does: the Service port
// with that number names the endpoint port (by its name) whose number is used.
func EndpointAddress(svc *corev1.Service, eps *corev1.Endpoints, port int32, pick func(n int) int) (string, error) {
	sp, ok := ServicePort(svc, port)
	if !ok {
		return "", &PortError{Name: svc.Name, Port: port}
	}
	var candidates []string
	for _, subset := range eps.Subsets {
		for _, p := range subset.Ports {
			if p.Name != sp.Name {
				continue
			}
			for _, a := range subset.Addresses {
				candidates = append(candidates, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if len(candidates) == 0 {
		return "", ErrNoEndpoints
	}
	return candidates[pick(len(candidates))], nil
}
