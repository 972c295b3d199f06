package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"platform.io/libs/naming"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// The kubernetes Service, as kube-apiserver keeps it (its kubernetesservice controller and lease
// endpoint reconciler): every gateway keeps the Service default/kubernetes (naming.APIServerServiceName)
// with the first address of the service cluster IP range and port 443 ("https") to the gateways'
// secure port, and, with the lease reconciler, its Endpoints and EndpointSlice listing every
// running gateway. Each gateway holds a lease on its advertised address, a storage entry renewed
// every interval that lapses after its TTL, and rewrites the endpoints from the unexpired leases
// whenever they differ; a gateway that shuts down removes its lease and its address at once, one
// that dies leaves the list once its lease lapses. The leases are upstream's /masterleases:
// storage entries no resource serves (masterLeaseType), so no client can forge one.

// Endpoint reconciler types (--endpoint-reconciler-type).
const (
	EndpointReconcilerLease = "lease"
	EndpointReconcilerNone  = "none"
)

// Upstream's timing of the reconciler (DefaultEndpointReconcilerInterval and
// DefaultEndpointReconcilerTTL).
const (
	DefaultEndpointReconcilerInterval = 10 * time.Second
	DefaultEndpointReconcilerTTL      = 15 * time.Second
)

// KubernetesServiceConfig is what the controller keeps.
type KubernetesServiceConfig struct {
	// ServiceIP is the Service's cluster IP (the first address of --service-cluster-ip-range);
	// ServicePort its port (443).
	ServiceIP   net.IP
	ServicePort int32
	// AdvertiseIP is this gateway's address in the endpoints (--advertise-address) and
	// SecurePort the port it serves on (the Service's targetPort).
	AdvertiseIP net.IP
	SecurePort  int32
	// Reconciler is the endpoint reconciler: EndpointReconcilerLease, or EndpointReconcilerNone
	// (the endpoints are someone else's; the Service is kept all the same).
	Reconciler string
	// Interval is how often the Service and the lease are renewed and the endpoints reconciled;
	// LeaseTTL how long a lease lasts without renewal.
	Interval, LeaseTTL time.Duration
}

// KubernetesService keeps the kubernetes Service and its endpoints (see above).
type KubernetesService struct {
	a   *API
	cfg KubernetesServiceConfig
	// mu serialises reconciliations; stopped ends them (Stop).
	mu      sync.Mutex
	stopped bool
}

// KubernetesService returns the controller of the kubernetes Service.
func (a *API) KubernetesService(cfg KubernetesServiceConfig) *KubernetesService {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultEndpointReconcilerInterval
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultEndpointReconcilerTTL
	}
	if cfg.ServicePort == 0 {
		cfg.ServicePort = 443
	}
	return &KubernetesService{a: a, cfg: cfg}
}

// Run keeps the Service and the endpoints every interval until ctx ends or Stop is called.
func (k *KubernetesService) Run(ctx context.Context) {
	t := time.NewTicker(k.cfg.Interval)
	defer t.Stop()
	for {
		// A pass never outlasts the interval (Stop waits for a pass in flight).
		pass, cancel := context.WithTimeout(ctx, k.cfg.Interval)
		err := k.Sync(pass)
		cancel()
		if err != nil && ctx.Err() == nil {
			k.a.log.WarnContext(ctx, "keeping the kubernetes service", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync makes one pass: the Service, then (lease reconciler) this gateway's lease and the
// endpoints.
func (k *KubernetesService) Sync(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return nil
	}
	if err := k.ensureService(ctx); err != nil {
		return fmt.Errorf("the %s service: %w", naming.APIServerServiceName, err)
	}
	if k.cfg.Reconciler != EndpointReconcilerLease {
		return nil
	}
	// The lease first, whatever happens next: at least some gateway then lists this one.
	if err := k.updateLease(ctx); err != nil {
		return fmt.Errorf("renewing the lease of %s: %w", k.cfg.AdvertiseIP, err)
	}
	return k.reconcileEndpoints(ctx)
}

// Stop ends the reconciliation and, with the lease reconciler, removes this gateway's lease and
// address from the endpoints (upstream's RemoveEndpoints on shutdown), so clients stop being sent
// to it before it stops serving.
func (k *KubernetesService) Stop(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return nil
	}
	k.stopped = true
	if k.cfg.Reconciler != EndpointReconcilerLease {
		return nil
	}
	_, err := k.a.store.Delete(ctx, &storagev1.DeleteRequest{Type: masterLeaseType, Name: k.cfg.AdvertiseIP.String()})
	if err != nil && !apierrors.IsNotFound(generic.FromStorage(err, masterLeaseResource, k.cfg.AdvertiseIP.String())) {
		return err
	}
	if err := k.reconcileEndpoints(ctx); !errors.Is(err, errNoLeases) {
		return err
	}
	// The last gateway leaves its address listed, as upstream's last API server does.
	return nil
}

// errNoLeases: no lease is current, which the reconciler takes as a storage problem rather than
// as no gateway running (the one reconciling has just renewed its own).
var errNoLeases = errors.New("no gateway addresses are leased, refusing to erase all endpoints of the kubernetes service")

// resource returns a served resource (false when --runtime-config turned it off).
func (k *KubernetesService) resource(gvr schema.GroupVersionResource) (*registry.Resource, bool) {
	return k.a.reg.Resource(gvr)
}

var (
	servicesGVR       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	endpointsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}
	endpointSlicesGVR = schema.GroupVersionResource{Group: naming.Group(discoveryv1.GroupName), Version: "v1", Resource: "endpointslices"}
)

// servicePorts are the Service's ports: 443 ("https") to the secure port.
func (k *KubernetesService) servicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: k.cfg.ServicePort, TargetPort: intstr.FromInt32(k.cfg.SecurePort)}}
}

// ensureService creates the Service when it is missing, and gives it back its ports and type
// when they changed (its cluster IP is immutable, as upstream leaves it).
func (k *KubernetesService) ensureService(ctx context.Context) error {
	res, ok := k.resource(servicesGVR)
	if !ok {
		return nil
	}
	ports := k.servicePorts()
	_, _, err := k.a.gen.Update(ctx, &generic.Update{
		Res: res, Namespace: metav1.NamespaceDefault, Name: naming.APIServerServiceName, Manager: naming.APIServerFieldManager, Create: true,
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			if cur == nil {
				return k.newService(res), nil
			}
			svc := cur.DeepCopyObject().(*corev1.Service)
			if svc.Spec.Type == corev1.ServiceTypeClusterIP && portsEqual(svc.Spec.Ports, ports) {
				return nil, errUnchanged
			}
			k.a.log.WarnContext(ctx, "resetting the kubernetes service's ports and type", "ports", ports)
			svc.Spec.Ports = ports
			svc.Spec.Type = corev1.ServiceTypeClusterIP
			return svc, nil
		},
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// newService is the Service as kube-apiserver creates it (selector-less: the endpoints are the
// reconciler's).
func (k *KubernetesService) newService(res *registry.Resource) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	family := corev1.IPv4Protocol
	if k.cfg.ServiceIP.To4() == nil {
		family = corev1.IPv6Protocol
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: naming.APIServerServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"provider": naming.APIServerServiceProvider, "component": "apiserver"}},
		Spec: corev1.ServiceSpec{
			Ports:           k.servicePorts(),
			ClusterIP:       k.cfg.ServiceIP.String(),
			ClusterIPs:      []string{k.cfg.ServiceIP.String()},
			IPFamilies:      []corev1.IPFamily{family},
			IPFamilyPolicy:  &single,
			SessionAffinity: corev1.ServiceAffinityNone,
			Type:            corev1.ServiceTypeClusterIP,
		},
	}
	svc.SetGroupVersionKind(res.GroupVersionKind())
	applyDefaults(res, svc)
	return svc
}

// portsEqual compares the ports kube-apiserver checks (name, protocol, port, target port).
func portsEqual(a, b []corev1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Protocol != b[i].Protocol || a[i].Port != b[i].Port || a[i].TargetPort != b[i].TargetPort {
			return false
		}
	}
	return true
}

// masterLeaseType is the storage type of the leases (upstream's /masterleases/ keys): one entry
// per advertised address, named by it. No served resource reads it.
var (
	masterLeaseType     = &storagev1.ResourceType{Resource: "masterleases"}
	masterLeaseResource = schema.GroupResource{Resource: "masterleases"}
)

// masterLease is a lease's stored value: the address, and when it lapses unless renewed.
type masterLease struct {
	IP        string    `json:"ip"`
	Port      int32     `json:"port"`
	RenewTime time.Time `json:"renewTime"`
	TTL       int64     `json:"ttlSeconds"`
}

func (l masterLease) expired(now time.Time) bool {
	return now.After(l.RenewTime.Add(time.Duration(l.TTL) * time.Second))
}

// updateLease renews (or takes) this gateway's lease.
func (k *KubernetesService) updateLease(ctx context.Context) error {
	name := k.cfg.AdvertiseIP.String()
	value, err := json.Marshal(masterLease{IP: name, Port: k.cfg.SecurePort, RenewTime: k.a.now().UTC(), TTL: int64(k.cfg.LeaseTTL / time.Second)})
	if err != nil {
		return err
	}
	for attempt := 0; attempt < generic.MaxAttempts; attempt++ {
		cur, err := k.a.store.Get(ctx, &storagev1.GetRequest{Type: masterLeaseType, Name: name})
		if apierrors.IsNotFound(generic.FromStorage(err, masterLeaseResource, name)) {
			_, err = k.a.store.Create(ctx, &storagev1.CreateRequest{Type: masterLeaseType, Object: &storagev1.Object{Name: name, Value: value}})
			if apierrors.IsAlreadyExists(generic.FromStorage(err, masterLeaseResource, name)) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		_, err = k.a.store.Update(ctx, &storagev1.UpdateRequest{Type: masterLeaseType, Object: &storagev1.Object{Name: name, Value: value},
			Preconditions: &storagev1.Preconditions{ResourceVersion: cur.Object.ResourceVersion}})
		if e := generic.FromStorage(err, masterLeaseResource, name); apierrors.IsConflict(e) || apierrors.IsNotFound(e) {
			continue
		}
		return err
	}
	return fmt.Errorf("too many concurrent writers of the lease %s", name)
}

// leasedIPs lists the addresses whose leases have not lapsed, sorted; lapsed leases are removed
// (a compare-and-swap delete: a lease renewed meanwhile stays).
func (k *KubernetesService) leasedIPs(ctx context.Context) ([]string, error) {
	list, err := k.a.store.List(ctx, &storagev1.ListRequest{Type: masterLeaseType})
	if err != nil {
		return nil, err
	}
	now := k.a.now()
	var ips []string
	for _, o := range list.Items {
		var l masterLease
		if err := json.Unmarshal(o.Value, &l); err != nil || net.ParseIP(l.IP) == nil {
			continue
		}
		if l.expired(now) {
			_, _ = k.a.store.Delete(ctx, &storagev1.DeleteRequest{Type: masterLeaseType, Name: o.Name,
				Preconditions: &storagev1.Preconditions{ResourceVersion: o.ResourceVersion}})
			continue
		}
		ips = append(ips, l.IP)
	}
	slices.Sort(ips)
	return slices.Compact(ips), nil
}

// reconcileEndpoints writes the Endpoints and the EndpointSlice of the Service from the leases,
// as upstream's lease reconciler and endpoints adapter: one subset (or slice) of the addresses of
// the Service IP's family, sorted, each ready, with the gateway's port; nothing is written when
// they are right. No lease at all is taken as a storage problem, not as "no gateway": the
// endpoints are then left as they are (so the last gateway to stop stays listed, as upstream's).
func (k *KubernetesService) reconcileEndpoints(ctx context.Context) error {
	ips, err := k.leasedIPs(ctx)
	if err != nil {
		return err
	}
	ipv4 := k.cfg.ServiceIP.To4() != nil
	ips = slices.DeleteFunc(ips, func(ip string) bool { return (net.ParseIP(ip).To4() != nil) != ipv4 })
	if len(ips) == 0 {
		return errNoLeases
	}
	port := corev1.EndpointPort{Name: "https", Port: k.cfg.SecurePort, Protocol: corev1.ProtocolTCP}
	if err := k.writeEndpoints(ctx, ips, port); err != nil {
		return fmt.Errorf("the kubernetes endpoints: %w", err)
	}
	if err := k.writeEndpointSlice(ctx, ips, port, ipv4); err != nil {
		return fmt.Errorf("the kubernetes endpoint slice: %w", err)
	}
	return nil
}

// writeEndpoints keeps default/kubernetes Endpoints (labelled skip-mirror, as upstream's).
func (k *KubernetesService) writeEndpoints(ctx context.Context, ips []string, port corev1.EndpointPort) error {
	res, ok := k.resource(endpointsGVR)
	if !ok {
		return nil
	}
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{port}}
	for _, ip := range ips {
		subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip})
	}
	labels := map[string]string{naming.LabelSkipMirror: "true"}
	_, _, err := k.a.gen.Update(ctx, &generic.Update{
		Res: res, Namespace: metav1.NamespaceDefault, Name: naming.APIServerServiceName, Manager: naming.APIServerFieldManager, Create: true,
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: naming.APIServerServiceName, Namespace: metav1.NamespaceDefault}}
			if cur != nil {
				ep = cur.DeepCopyObject().(*corev1.Endpoints)
				if equality.Semantic.DeepEqual(ep.Subsets, []corev1.EndpointSubset{subset}) && equality.Semantic.DeepEqual(ep.Labels, labels) {
					return nil, errUnchanged
				}
				k.a.log.InfoContext(ctx, "resetting the endpoints of the kubernetes service", "addresses", ips)
			}
			ep.Labels = labels
			ep.Subsets = []corev1.EndpointSubset{subset}
			ep.SetGroupVersionKind(res.GroupVersionKind())
			return ep, nil
		},
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// writeEndpointSlice keeps default/kubernetes EndpointSlice (labelled with the Service's name) and
// deletes any other slice that claims the Service, as upstream's adapter.
func (k *KubernetesService) writeEndpointSlice(ctx context.Context, ips []string, port corev1.EndpointPort, ipv4 bool) error {
	res, ok := k.resource(endpointSlicesGVR)
	if !ok {
		return nil
	}
	addressType := discoveryv1.AddressTypeIPv4
	if !ipv4 {
		addressType = discoveryv1.AddressTypeIPv6
	}
	ready := true
	var endpoints []discoveryv1.Endpoint
	for _, ip := range ips {
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	ports := []discoveryv1.EndpointPort{{Name: &port.Name, Protocol: &port.Protocol, Port: &port.Port}}
	labels := map[string]string{naming.LabelServiceName: naming.APIServerServiceName}
	// Other slices of the Service (another address type left behind) go.
	list, err := k.a.store.List(ctx, &storagev1.ListRequest{Type: generic.StorageType(res), Namespace: metav1.NamespaceDefault,
		LabelSelector: naming.LabelServiceName + "=" + naming.APIServerServiceName})
	if err != nil {
		return err
	}
	for _, o := range list.Items {
		if o.Name == naming.APIServerServiceName {
			continue
		}
		rv := strconv.FormatInt(o.ResourceVersion, 10)
		if _, _, err := k.a.gen.Delete(ctx, res, metav1.NamespaceDefault, o.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		_, _, err = k.a.gen.Update(ctx, &generic.Update{
			Res: res, Namespace: metav1.NamespaceDefault, Name: naming.APIServerServiceName, Manager: naming.APIServerFieldManager, Create: true,
			Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: naming.APIServerServiceName, Namespace: metav1.NamespaceDefault}}
				if cur != nil {
					slice = cur.DeepCopyObject().(*discoveryv1.EndpointSlice)
					if slice.AddressType != addressType {
						// The address type is immutable: the slice is made again.
						return nil, errReplace
					}
					if equality.Semantic.DeepEqual(slice.Endpoints, endpoints) && equality.Semantic.DeepEqual(slice.Ports, ports) &&
						equality.Semantic.DeepEqual(slice.Labels, labels) {
						return nil, errUnchanged
					}
				}
				slice.Labels = labels
				slice.AddressType = addressType
				slice.Endpoints = endpoints
				slice.Ports = ports
				slice.SetGroupVersionKind(res.GroupVersionKind())
				return slice, nil
			},
		})
		switch {
		case errors.Is(err, errUnchanged):
			return nil
		case errors.Is(err, errReplace):
			if _, _, err := k.a.gen.Delete(ctx, res, metav1.NamespaceDefault, naming.APIServerServiceName, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			continue
		}
		return err
	}
	return err
}
