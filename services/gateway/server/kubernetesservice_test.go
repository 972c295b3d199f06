package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"platform.io/libs/naming"
	storageclient "platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// getJSON reads path as the admin into out; false when it is not there (404).
func getJSON(t *testing.T, e *gatewaytest.Env, path string, out any) bool {
	t.Helper()
	code, _, body := e.Do(t, e.Admin, http.MethodGet, path, nil)
	if code == http.StatusNotFound {
		return false
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatal(err)
	}
	return true
}

// eventually polls cond (nil when it holds) every 20 ms for up to 15 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// endpointIPs reads the addresses of the kubernetes Endpoints and EndpointSlice, and checks
// that both list the same ones with the gateway's port.
func endpointIPs(t *testing.T, e *gatewaytest.Env, port int32) ([]string, error) {
	t.Helper()
	var ep corev1.Endpoints
	if !getJSON(t, e, "/api/v1/namespaces/default/endpoints/"+naming.APIServerServiceName, &ep) {
		return nil, fmt.Errorf("no endpoints")
	}
	var slice discoveryv1.EndpointSlice
	if !getJSON(t, e, "/apis/"+naming.Group("discovery.k8s.io")+"/v1/namespaces/default/endpointslices/"+naming.APIServerServiceName, &slice) {
		return nil, fmt.Errorf("no endpoint slice")
	}
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0] != (corev1.EndpointPort{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}) ||
		ep.Labels[naming.LabelSkipMirror] != "true" {
		return nil, fmt.Errorf("endpoints %+v labels %v", ep.Subsets, ep.Labels)
	}
	var ips []string
	for _, a := range ep.Subsets[0].Addresses {
		ips = append(ips, a.IP)
	}
	var sliceIPs []string
	for _, s := range slice.Endpoints {
		if len(s.Addresses) != 1 || s.Conditions.Ready == nil || !*s.Conditions.Ready {
			return nil, fmt.Errorf("slice endpoint %+v", s)
		}
		sliceIPs = append(sliceIPs, s.Addresses[0])
	}
	if slice.AddressType != discoveryv1.AddressTypeIPv4 || slice.Labels[naming.LabelServiceName] != naming.APIServerServiceName ||
		len(slice.Ports) != 1 || *slice.Ports[0].Port != port || *slice.Ports[0].Name != "https" || *slice.Ports[0].Protocol != corev1.ProtocolTCP {
		return nil, fmt.Errorf("slice %+v", slice)
	}
	if !slices.Equal(ips, sliceIPs) {
		return nil, fmt.Errorf("endpoints %v, slice %v", ips, sliceIPs)
	}
	return ips, nil
}

// Upstream's kubernetes Service (kube-apiserver's own controller and lease endpoint reconciler):
// default/kubernetes with the first address of --service-cluster-ip-range, port 443 ("https") to
// the secure port and upstream's labels; its Endpoints and EndpointSlice list every gateway whose
// lease is current, at its --advertise-address: a second gateway joins when it starts and leaves
// when it stops, a lapsed lease drops out (and is removed), a current one stays; a Service whose
// ports were changed gets them back.
func TestKubernetesService(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.EnableControllers = false
		c.ServiceClusterIPRange = "10.96.0.0/12"
		c.AdvertiseAddress = "192.0.2.10"
	}})
	port := int32(e.Gateway.Addr().(*net.TCPAddr).Port)
	svcPath := "/api/v1/namespaces/default/services/" + naming.APIServerServiceName

	var svc corev1.Service
	eventually(t, "the kubernetes service", func() error {
		if !getJSON(t, e, svcPath, &svc) {
			return fmt.Errorf("not found")
		}
		return nil
	})
	p := svc.Spec.Ports
	if svc.Spec.ClusterIP != "10.96.0.1" || !slices.Equal(svc.Spec.ClusterIPs, []string{"10.96.0.1"}) || svc.Spec.Type != corev1.ServiceTypeClusterIP ||
		len(p) != 1 || p[0].Name != "https" || p[0].Port != 443 || p[0].Protocol != corev1.ProtocolTCP || p[0].TargetPort.IntVal != port ||
		svc.Spec.Selector != nil || svc.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		svc.Labels["provider"] != naming.APIServerServiceProvider || svc.Labels["component"] != "apiserver" {
		t.Fatalf("service: %+v labels %v", svc.Spec, svc.Labels)
	}
	eventually(t, "the endpoints list the gateway", func() error {
		ips, err := endpointIPs(t, e, port)
		if err == nil && !slices.Equal(ips, []string{"192.0.2.10"}) {
			err = fmt.Errorf("addresses %v", ips)
		}
		return err
	})

	// Someone changes the Service's ports: the next pass (here: another gateway's first) resets them.
	code, _, body := e.Do(t, e.Admin, http.MethodPatch, svcPath, `{"spec":{"ports":[{"name":"https","port":8443,"protocol":"TCP","targetPort":1}]}}`,
		"Content-Type", "application/merge-patch+json")
	if code != http.StatusOK {
		t.Fatalf("patching the service: %d %s", code, body)
	}
	// Leases of two other gateways: one current, one lapsed long ago.
	st := storageClient(t, e)
	leaseType := &storagev1.ResourceType{Resource: "masterleases"}
	for ip, renewed := range map[string]time.Time{"192.0.2.98": time.Now(), "192.0.2.99": time.Now().Add(-time.Hour)} {
		value, _ := json.Marshal(map[string]any{"ip": ip, "port": port, "renewTime": renewed.UTC(), "ttlSeconds": 15})
		if _, err := st.Create(context.Background(), &storagev1.CreateRequest{Type: leaseType, Object: &storagev1.Object{Name: ip, Value: value}}); err != nil {
			t.Fatal(err)
		}
	}

	// A second gateway on the same services, advertising another address.
	gc := server.DefaultConfig()
	gc.SecurePort = 0
	gc.TLSCertFile, gc.TLSPrivateKeyFile, gc.ClientCAFile = filepath.Join(e.Dir, "tls.crt"), filepath.Join(e.Dir, "tls.key"), e.CAFile
	gc.Storage.Address = e.Storage.Addr().String()
	gc.Authn.Address = e.Authn.Addr().String()
	gc.Authz.Address = e.Authz.Addr().String()
	gc.Admission.Address = e.Admission.Addr().String()
	gc.EnableControllers = false
	gc.ServiceClusterIPRange = "10.96.0.0/12"
	gc.AdvertiseAddress = "192.0.2.11"
	second, err := server.Start(context.Background(), gc, server.Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			second.Stop(context.Background())
		}
	})
	// Its port differs from the first's (one host): the endpoints carry the port of the gateway
	// that wrote them last, as upstream's (whose API servers share one port).
	eventually(t, "both gateways and the current lease listed, the lapsed lease gone", func() error {
		var ep corev1.Endpoints
		if !getJSON(t, e, "/api/v1/namespaces/default/endpoints/"+naming.APIServerServiceName, &ep) || len(ep.Subsets) != 1 {
			return fmt.Errorf("endpoints %+v", ep.Subsets)
		}
		var ips []string
		for _, a := range ep.Subsets[0].Addresses {
			ips = append(ips, a.IP)
		}
		if want := []string{"192.0.2.10", "192.0.2.11", "192.0.2.98"}; !slices.Equal(ips, want) {
			return fmt.Errorf("addresses %v, want %v", ips, want)
		}
		return nil
	})
	if _, err := st.Get(context.Background(), &storagev1.GetRequest{Type: leaseType, Name: "192.0.2.99"}); !storageclient.IsNotFound(err) {
		t.Errorf("the lapsed lease is still stored: %v", err)
	}
	if !getJSON(t, e, svcPath, &svc) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("the service's ports were not reset: %+v", svc.Spec.Ports)
	}

	// The second gateway stops: it leaves at once.
	second.Stop(context.Background())
	stopped = true
	eventually(t, "the stopped gateway left", func() error {
		var ep corev1.Endpoints
		getJSON(t, e, "/api/v1/namespaces/default/endpoints/"+naming.APIServerServiceName, &ep)
		var ips []string
		for _, s := range ep.Subsets {
			for _, a := range s.Addresses {
				ips = append(ips, a.IP)
			}
		}
		if want := []string{"192.0.2.10", "192.0.2.98"}; !slices.Equal(ips, want) {
			return fmt.Errorf("addresses %v, want %v", ips, want)
		}
		return nil
	})
	if _, err := st.Get(context.Background(), &storagev1.GetRequest{Type: leaseType, Name: "192.0.2.11"}); !storageclient.IsNotFound(err) {
		t.Errorf("the stopped gateway's lease is still stored: %v", err)
	}
}

// storageClient is a plain client of the environment's storage service (loopback, no TLS).
func storageClient(t *testing.T, e *gatewaytest.Env) *storageclient.Client {
	t.Helper()
	conn, err := grpc.NewClient(e.Storage.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return storageclient.NewClient(conn)
}

// The flags of the kubernetes Service, as kube-apiserver's: the Service's address is the first of
// the (first) service range, 10.0.0.0/24 by default; a second range must be of the other family;
// the advertised address is --advertise-address, else the bind address, else (bind address
// unspecified or loopback) the host's default interface; the reconciler is lease or none.
func TestKubernetesServiceFlags(t *testing.T) {
	for ranges, want := range map[string]string{"": "10.0.0.1", "10.96.0.0/12": "10.96.0.1", "fd00:10:96::/108": "fd00:10:96::1",
		"10.0.0.0/24,fd00::/108": "10.0.0.1", "172.16.255.0/24": "172.16.255.1"} {
		c := server.DefaultConfig()
		c.ServiceClusterIPRange = ranges
		ip, err := c.KubernetesServiceIP()
		if err != nil || ip.String() != want {
			t.Errorf("--service-cluster-ip-range %q: %v %v, want %s", ranges, ip, err, want)
		}
	}
	for _, ranges := range []string{"10.0.0.0", "10.0.0.0/24,10.1.0.0/24", "10.0.0.0/24,fd00::/108,10.1.0.0/24", "10.0.0.1/32"} {
		c := server.DefaultConfig()
		c.ServiceClusterIPRange = ranges
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--service-cluster-ip-range") {
			t.Errorf("--service-cluster-ip-range %q: %v", ranges, err)
		}
	}
	c := server.DefaultConfig()
	c.BindAddress = "192.0.2.6"
	if ip, err := c.AdvertiseIP(); err != nil || ip.String() != "192.0.2.6" {
		t.Errorf("advertised address with --bind-address: %v %v, want the bind address", ip, err)
	}
	c.BindAddress = "127.0.0.1"
	if ip, err := c.AdvertiseIP(); err != nil || ip.IsUnspecified() {
		t.Errorf("advertised address with a loopback bind address: %v %v, want the host's interface (or loopback without one)", ip, err)
	}
	c.AdvertiseAddress = "192.0.2.7"
	if ip, err := c.AdvertiseIP(); err != nil || ip.String() != "192.0.2.7" {
		t.Errorf("--advertise-address: %v %v", ip, err)
	}
	c.BindAddress, c.AdvertiseAddress = "0.0.0.0", ""
	if ip, err := c.AdvertiseIP(); err == nil && ip.IsUnspecified() {
		t.Errorf("with an unspecified bind address the host's interface is advertised, got %v", ip)
	}
	for value, want := range map[string]string{"0.0.0.0": "--advertise-address", "bogus": "--advertise-address"} {
		c := server.DefaultConfig()
		c.AdvertiseAddress = value
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--advertise-address %q: %v", value, err)
		}
	}
	for value, want := range map[string]string{"master-count": "not supported", "other": "lease or none"} {
		c := server.DefaultConfig()
		c.EndpointReconcilerType = value
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--endpoint-reconciler-type %q: %v", value, err)
		}
	}
}
