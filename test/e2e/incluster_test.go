package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// What in-cluster clients and controllers expect of the API server (issue 39), against real
// processes with client-go and kubectl, in the split stack and the all-in-one (and, run with
// PLATFORM_NAMING_PROFILE=kubernetes, in upstream's names):
//
//   - the kubernetes Service in the default namespace (cluster IP the first address of
//     --service-cluster-ip-range, 443 to the gateway's port), its Endpoints and EndpointSlice
//     listing every running gateway, kept by leases: a replica joins when it starts, leaves when
//     it stops, and leaves once its lease lapses when it dies;
//   - pod deletion with grace periods (0 deletes at once, also through `kubectl delete --force`
//     in a namespace with scoped quotas; a positive period marks a pod a node runs; a pod no node
//     runs goes at once);
//   - upstream's pod update rules and immutable fields (422 with upstream's messages);
//   - quota usage given back when counted objects (pods, replica sets, deployments) are deleted;
//   - a namespace holding pods, deployments, replica sets and scoped quotas removed within 30 s
//     of its deletion.

var (
	endpointSlicesGVR = schema.GroupVersionResource{Group: naming.Group("discovery.k8s.io"), Version: "v1", Resource: "endpointslices"}
	namespaceBound    = 30 * time.Second
)

func kubeClient(t *testing.T, s *stack.Stack) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-incluster"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gatewayPort is the port of the stack's gateway.
func gatewayPort(t *testing.T, s *stack.Stack) int32 {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return int32(p)
}

// kubernetesEndpoints reads the addresses the kubernetes Endpoints and EndpointSlice list, and
// checks that both list the same ones, ready, with port ("https").
func kubernetesEndpoints(ctx context.Context, t *testing.T, s *stack.Stack, kube kubernetes.Interface, port int32) ([]string, error) {
	t.Helper()
	ep, err := kube.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, naming.APIServerServiceName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Ports) != 1 || ep.Subsets[0].Ports[0] != (corev1.EndpointPort{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}) ||
		ep.Labels[naming.LabelSkipMirror] != "true" {
		return nil, fmt.Errorf("endpoints %+v, labels %v", ep.Subsets, ep.Labels)
	}
	var ips []string
	for _, a := range ep.Subsets[0].Addresses {
		ips = append(ips, a.IP)
	}
	slice, err := dynamicClient(t, s).Resource(endpointSlicesGVR).Namespace(metav1.NamespaceDefault).Get(ctx, naming.APIServerServiceName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if slice.GetLabels()[naming.LabelServiceName] != naming.APIServerServiceName || nestedString(slice, "addressType") != "IPv4" {
		return nil, fmt.Errorf("endpoint slice labels %v, addressType %q", slice.GetLabels(), nestedString(slice, "addressType"))
	}
	ports, _, _ := unstructured.NestedSlice(slice.Object, "ports")
	if len(ports) != 1 || fmt.Sprint(ports[0]) != fmt.Sprint(map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}) {
		return nil, fmt.Errorf("endpoint slice ports %v", ports)
	}
	endpoints, _, _ := unstructured.NestedSlice(slice.Object, "endpoints")
	var sliceIPs []string
	for _, e := range endpoints {
		m := e.(map[string]any)
		addrs, _, _ := unstructured.NestedStringSlice(m, "addresses")
		ready, _, _ := unstructured.NestedBool(m, "conditions", "ready")
		if len(addrs) != 1 || !ready {
			return nil, fmt.Errorf("endpoint slice endpoint %v", m)
		}
		sliceIPs = append(sliceIPs, addrs[0])
	}
	if !slices.Equal(ips, sliceIPs) {
		return nil, fmt.Errorf("endpoints list %v, the endpoint slice %v", ips, sliceIPs)
	}
	return ips, nil
}

// checkKubernetesService waits for the kubernetes Service of a stack with the default flags:
// 10.0.0.1, 443 to the gateway's port, one gateway in its endpoints.
func checkKubernetesService(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	kube := kubeClient(t, s)
	port := gatewayPort(t, s)
	var svc *corev1.Service
	stack.Eventually(t, 20*time.Second, "the kubernetes service", func() error {
		var err error
		svc, err = kube.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, naming.APIServerServiceName, metav1.GetOptions{})
		return err
	})
	p := svc.Spec.Ports
	if svc.Spec.ClusterIP != "10.0.0.1" || svc.Spec.Type != corev1.ServiceTypeClusterIP || len(p) != 1 || p[0].Name != "https" || p[0].Port != 443 ||
		p[0].TargetPort.IntVal != port || p[0].Protocol != corev1.ProtocolTCP || len(svc.Spec.Selector) != 0 ||
		svc.Labels["component"] != "apiserver" || svc.Labels["provider"] != naming.APIServerServiceProvider {
		t.Errorf("kubernetes service: %+v, labels %v", svc.Spec, svc.Labels)
	}
	stack.Eventually(t, 20*time.Second, "the gateway in the kubernetes endpoints", func() error {
		ips, err := kubernetesEndpoints(ctx, t, s, kube, port)
		if err == nil && (len(ips) != 1 || net.ParseIP(ips[0]) == nil) {
			err = fmt.Errorf("addresses %v, want the gateway's", ips)
		}
		return err
	})
	// kubectl shows it as upstream's.
	k := newKubectl(t, s, metav1.NamespaceDefault)
	out := k.ok("", "get", "service", naming.APIServerServiceName)
	if !strings.Contains(out, "10.0.0.1") || !strings.Contains(out, "443/TCP") {
		t.Errorf("kubectl get service %s:\n%s", naming.APIServerServiceName, out)
	}
}

// inClusterWorkloads runs the pod, quota and namespace rules of the issue in a namespace of its
// own on s.
func inClusterWorkloads(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := ctxFor(t, 3*time.Minute)
	kube := kubeClient(t, s)
	core, apps := kube.CoreV1(), kube.AppsV1()
	ns := createNamespace(t, dynamicClient(t, s), "e2e-incluster-")

	// Scoped quotas (BestEffort, Terminating) and object counts.
	best := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "best-effort"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}}
	terminating := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "terminating"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}}}
	counts := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "counts"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"count/replicasets.apps": resource.MustParse("3"), "count/deployments.apps": resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}}}
	for _, q := range []*corev1.ResourceQuota{best, terminating, counts} {
		if _, err := core.ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	used := func(name string, want map[corev1.ResourceName]string) func() error {
		return func() error {
			q, err := core.ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for r, v := range want {
				if got, ok := q.Status.Used[r]; !ok || got.Cmp(resource.MustParse(v)) != 0 {
					return fmt.Errorf("%s used %v", name, q.Status.Used)
				}
			}
			return nil
		}
	}
	// Admission refuses what a quota counts until the controller has measured it, and pods until
	// the namespace's default service account exists: create once both are there.
	create := func(what string, fn func() error) {
		t.Helper()
		stack.Eventually(t, 20*time.Second, "creating "+what, func() error {
			err := fn()
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	deadline := int64(600)
	pod := func(name, node string, edit ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "incluster"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}
		for _, e := range edit {
			e(p)
		}
		return p
	}
	withDeadline := func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &deadline }
	for _, p := range []*corev1.Pod{pod("forced", ""), pod("bounded", "", withDeadline), pod("pending", ""), pod("running", "node-1"), pod("edited", "")} {
		create("pod "+p.Name, func() error { _, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{}); return err })
	}
	stack.Eventually(t, 20*time.Second, "the scoped quotas' usage", func() error {
		if err := used("best-effort", map[corev1.ResourceName]string{corev1.ResourcePods: "5"})(); err != nil {
			return err
		}
		return used("terminating", map[corev1.ResourceName]string{corev1.ResourcePods: "1"})()
	})

	// A forced delete in a namespace with scoped quotas (once refused: "expected *api.Pod but
	// got <nil>").
	k := newKubectl(t, s, ns)
	out, errs, code := k.run("", "delete", "pod", "forced", "--grace-period=0", "--force")
	if code != 0 || !strings.Contains(out, `pod "forced" force deleted`) {
		t.Errorf("kubectl delete pod --grace-period=0 --force: exit %d\n%s%s", code, out, errs)
	}
	if _, err := core.Pods(ns).Get(ctx, "forced", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the force-deleted pod: %v", err)
	}
	// A pod no node runs goes at once, whatever the period; one on a node is marked and waits
	// for its node, then goes with a period of 0.
	thirty := int64(30)
	if err := core.Pods(ns).Delete(ctx, "pending", metav1.DeleteOptions{GracePeriodSeconds: &thirty}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods(ns).Get(ctx, "pending", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the unscheduled pod deleted with a period: %v", err)
	}
	before := time.Now()
	if err := core.Pods(ns).Delete(ctx, "running", metav1.DeleteOptions{GracePeriodSeconds: &thirty}); err != nil {
		t.Fatal(err)
	}
	running, err := core.Pods(ns).Get(ctx, "running", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scheduled pod deleted with a period: %v", err)
	}
	if g := running.DeletionGracePeriodSeconds; g == nil || *g != 30 || running.DeletionTimestamp == nil ||
		running.DeletionTimestamp.Time.Before(before.Add(28*time.Second)) || running.DeletionTimestamp.Time.After(time.Now().Add(32*time.Second)) {
		t.Errorf("the scheduled pod deleted with 30 s: deletionGracePeriodSeconds %v, deletionTimestamp %v", g, running.DeletionTimestamp)
	}
	zero := int64(0)
	if err := core.Pods(ns).Delete(ctx, "running", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods(ns).Get(ctx, "running", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the scheduled pod deleted with 0: %v", err)
	}
	stack.Eventually(t, 20*time.Second, "the deleted pods' usage given back", used("best-effort", map[corev1.ResourceName]string{corev1.ResourcePods: "2"}))

	// Pod updates: the image may change, the resources may not.
	edited, err := core.Pods(ns).Get(ctx, "edited", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edited.Spec.Containers[0].Image = "nginx:1.28"
	if edited, err = core.Pods(ns).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating a pod's image: %v", err)
	}
	edited.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	_, err = core.Pods(ns).Update(ctx, edited, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)") {
		t.Errorf("updating a pod's resources: %v", err)
	}
	_, errs, code = k.run("", "patch", "pod", "edited", "-p", `{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}}}]}}`)
	if code == 0 || !strings.Contains(errs, "pod updates may not change fields other than") {
		t.Errorf("kubectl patch of a pod's resources: exit %d, %s", code, errs)
	}

	// Workloads: a deployment and replica sets, counted; a selector is immutable.
	labels := map[string]string{"app": "incluster"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("x", "").Spec}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	create("deployment web", func() error { _, err := apps.Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); return err })
	for _, name := range []string{"rs-a", "rs-b"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
		create("replica set "+name, func() error { _, err := apps.ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); return err })
	}
	stack.Eventually(t, 20*time.Second, "the workloads counted", used("counts", map[corev1.ResourceName]string{"count/replicasets.apps": "2", "count/deployments.apps": "1"}))
	d, err := apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	d.Spec.Template.Labels = map[string]string{"app": "other"}
	if _, err := apps.Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector: Invalid value") || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("changing a deployment's selector: %v", err)
	}
	// Deleting a counted replica set gives its count back (not only at the 5-minute resync).
	if err := apps.ReplicaSets(ns).Delete(ctx, "rs-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 20*time.Second, "the deleted replica set's count given back", used("counts", map[corev1.ResourceName]string{"count/replicasets.apps": "1", "count/deployments.apps": "1"}))

	// The namespace, with pods, a deployment, a replica set and scoped quotas, goes within 30 s.
	start := time.Now()
	if err := core.Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, namespaceBound+10*time.Second, "the namespace removed", func() error {
		n, err := core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions)
	})
	if took := time.Since(start); took > namespaceBound {
		t.Errorf("the namespace took %v to go, more than %v", took.Round(time.Second), namespaceBound)
	}
}

// TestInClusterSplit: the split stack (the shared one).
func TestInClusterSplit(t *testing.T) {
	s := useShared(t)
	t.Run("KubernetesService", func(t *testing.T) { checkKubernetesService(t, s) })
	t.Run("Workloads", func(t *testing.T) { inClusterWorkloads(t, s) })
}

// TestInClusterAllInOne: the all-in-one.
func TestInClusterAllInOne(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	t.Run("KubernetesService", func(t *testing.T) { checkKubernetesService(t, s) })
	t.Run("Workloads", func(t *testing.T) { inClusterWorkloads(t, s) })
}

// TestInClusterGatewayReplicas: gateways of one split stack, each at an address of its own on
// the same port (as a cluster's API servers), are all listed in the kubernetes endpoints; one
// that stops leaves at once, one that dies leaves once its lease lapses (15 s, reconciled every
// 10 s by the others), and one that comes back is listed again.
func TestInClusterGatewayReplicas(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.Split, GatewayArgs: []string{"--advertise-address=127.0.0.1"},
		ControllersArgs: sharedControllersArgs})
	ctx := ctxFor(t, 3*time.Minute)
	kube := kubeClient(t, s)
	port := gatewayPort(t, s)
	listed := func(want ...string) func() error {
		return func() error {
			ips, err := kubernetesEndpoints(ctx, t, s, kube, port)
			if err == nil && !slices.Equal(ips, want) {
				err = fmt.Errorf("addresses %v, want %v", ips, want)
			}
			return err
		}
	}
	stack.Eventually(t, 20*time.Second, "the first gateway listed", listed("127.0.0.1"))
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		if _, err := s.StartGatewayReplicaAt(ip); err != nil {
			t.Fatal(err)
		}
	}
	stack.Eventually(t, 20*time.Second, "three gateways listed", listed("127.0.0.1", "127.0.0.2", "127.0.0.3"))
	replicas := s.GatewayReplicas()
	if len(replicas) != 2 {
		t.Fatalf("replicas %v", replicas)
	}
	logsOnFailure(t, s, replicas...)

	// A replica stopped (SIGTERM) leaves at once.
	if err := s.StopService(replicas[0], false); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 5*time.Second, "the stopped replica gone", listed("127.0.0.1", "127.0.0.3"))

	// A replica killed leaves once its lease lapses: within its TTL plus an interval.
	killed := time.Now()
	if err := s.StopService(replicas[1], true); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 40*time.Second, "the killed replica gone", listed("127.0.0.1"))
	if took := time.Since(killed); took < 5*time.Second {
		t.Errorf("the killed replica left after %v: before its lease could lapse", took)
	}

	// Started again, it is listed again.
	if err := s.StartService(replicas[1]); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 30*time.Second, "the restarted replica listed", listed("127.0.0.1", "127.0.0.3"))
}
