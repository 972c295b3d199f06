package resourcequota_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/plugins/quota/evaluator"
	admissionserver "platform.io/services/admission/server"
	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/resourcequota"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// bound covers the informers' delivery and a sync.
const bound = 20 * time.Second

// env is a real gateway with storage (admission plugins off, so that what the tests see in
// status.used is the controller's count alone) and clients of the controller manager and of an
// admin.
type env struct {
	ctl, admin *apiclient.Clients
	ctx        context.Context
	// informers are the controller's: create waits until they hold what it created.
	informers  informers.SharedInformerFactory
	controller *resourcequota.Controller
}

var seq atomic.Int64

func start(t *testing.T, syncPeriod time.Duration) *env {
	t.Helper()
	gw := gatewaytest.Start(t, gatewaytest.Options{
		Configure:          func(c *server.Config) { c.EnableControllers = false },
		ConfigureAdmission: func(c *admissionserver.Config) { c.DisablePlugins = admission.DefaultEnabled },
	})
	clients := func(user string, groups ...string) *apiclient.Clients {
		cert, key := gw.ClientCert(user, groups...)
		c, err := apiclient.New(&rest.Config{Host: gw.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: gw.CAFile, CertData: cert, KeyData: key}, QPS: 200, Burst: 400})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	e := &env{ctl: clients(naming.ControllerManagerUser), admin: clients("test-admin", "system:masters")}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	f := informers.NewSharedInformerFactory(e.ctl.Kubernetes, 0)
	e.informers = f
	c, err := resourcequota.New(e.ctl.Kubernetes, e.ctl.Dynamic, e.ctl.Discovery, f, resourcequota.Options{SyncPeriod: syncPeriod})
	if err != nil {
		t.Fatal(err)
	}
	e.controller = c
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		f.Shutdown()
	})
	return e
}

func (e *env) namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("quota-%d-%d", time.Now().UnixNano()%100000, seq.Add(1))
	if _, err := e.admin.Kubernetes.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func pod(name string, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: requests}}}}}
}

func (e *env) create(t *testing.T, ns string, objs ...any) {
	t.Helper()
	core := e.admin.Kubernetes.CoreV1()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = core.Pods(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = core.ConfigMaps(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = core.Secrets(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = core.Services(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.PersistentVolumeClaim:
			_, err = core.PersistentVolumeClaims(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.ResourceQuota:
			_, err = core.ResourceQuotas(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = e.admin.Kubernetes.AppsV1().Deployments(ns).Create(e.ctx, o, metav1.CreateOptions{})
		case *appsv1.ReplicaSet:
			_, err = e.admin.Kubernetes.AppsV1().ReplicaSets(ns).Create(e.ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("cannot create %T", o)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
		e.waitSeen(t, ns, o)
	}
}

// waitSeen waits (bounded) until the controller's informer holds a counted object the test
// created: the controller counts what its informers hold, and (as upstream) a new object reaches
// a quota's count through admission, not through an informer event, so a quota created right
// after it must find it there.
func (e *env) waitSeen(t *testing.T, ns string, o any) {
	t.Helper()
	core := e.informers.Core().V1()
	var inf cache.SharedIndexInformer
	switch o.(type) {
	case *corev1.Pod:
		inf = core.Pods().Informer()
	case *corev1.ConfigMap:
		inf = core.ConfigMaps().Informer()
	case *corev1.Secret:
		inf = core.Secrets().Informer()
	case *corev1.Service:
		inf = core.Services().Informer()
	case *corev1.PersistentVolumeClaim:
		inf = core.PersistentVolumeClaims().Informer()
	default:
		return
	}
	name := o.(metav1.Object).GetName()
	testenv.Eventually(t, bound, "the controller's informer has "+ns+"/"+name, func() (bool, string) {
		_, exists, err := inf.GetStore().GetByKey(ns + "/" + name)
		return exists && err == nil, fmt.Sprint(err)
	})
}

// waitStatus waits until the quota's status.hard and status.used are the wanted ones.
func (e *env) waitStatus(t *testing.T, ns, name string, hard, used corev1.ResourceList) {
	t.Helper()
	testenv.Eventually(t, bound, "quota "+name+" status", func() (bool, string) {
		q, err := e.admin.Kubernetes.CoreV1().ResourceQuotas(ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		ok := evaluator.Equals(q.Status.Hard, hard) && evaluator.Equals(q.Status.Used, used)
		return ok, fmt.Sprintf("hard %s, used %s; want hard %s, used %s", evaluator.Format(q.Status.Hard), evaluator.Format(q.Status.Used), evaluator.Format(hard), evaluator.Format(used))
	})
}

func quota(name string, hard corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

// Upstream rule: status.hard is spec.hard, and status.used is what the namespace's objects use,
// for every resource the quota names: object counts (legacy and count/ names, other groups
// included), compute requests of pods, load balancers and node ports of services, claims'
// storage overall and per class.
func TestStatusFromObjects(t *testing.T) {
	e := start(t, time.Hour)
	ns := e.namespace(t)
	other := e.namespace(t)
	gold := "gold"
	e.create(t, ns,
		pod("a", rl("cpu", "250m", "memory", "64Mi")), pod("b", nil),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod("x", nil).Spec}}},
	)
	// Objects of another namespace do not count.
	e.create(t, other, pod("a", rl("cpu", "1")), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}})
	goldStorage := "gold" + evaluator.StorageClassSuffix + "requests.storage"
	hard := rl("pods", "10", "count/pods", "10", "requests.cpu", "2", "requests.memory", "1Gi", "configmaps", "5", "count/secrets", "5",
		"services.loadbalancers", "2", "services.nodeports", "10", "requests.storage", "10Gi", goldStorage, "5Gi",
		"count/deployments.apps", "3", "resourcequotas", "2")
	e.create(t, ns, quota("q", hard))
	e.waitStatus(t, ns, "q", hard, rl("pods", "2", "count/pods", "2", "requests.cpu", "250m", "requests.memory", "64Mi", "configmaps", "1", "count/secrets", "1",
		"services.loadbalancers", "1", "services.nodeports", "2", "requests.storage", "1Gi", goldStorage, "1Gi",
		"count/deployments.apps", "1", "resourcequotas", "1"))
}

// Upstream rule (replenishment): deleting a counted object gives its usage back, without
// waiting for the sync period.
func TestDeleteReleasesUsage(t *testing.T) {
	e := start(t, time.Hour)
	ns := e.namespace(t)
	e.create(t, ns, pod("a", rl("cpu", "1")), pod("b", rl("cpu", "500m")), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}})
	hard := rl("pods", "5", "requests.cpu", "4", "count/configmaps", "3")
	e.create(t, ns, quota("q", hard))
	e.waitStatus(t, ns, "q", hard, rl("pods", "2", "requests.cpu", "1500m", "count/configmaps", "1"))
	core := e.admin.Kubernetes.CoreV1()
	if err := core.Pods(ns).Delete(e.ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("pods", "1", "requests.cpu", "500m", "count/configmaps", "1"))
	if err := core.ConfigMaps(ns).Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("pods", "1", "requests.cpu", "500m", "count/configmaps", "0"))
}

// Upstream rule: a pod that has finished stops counting in pods and compute resources (it still
// counts in count/pods while it exists).
func TestFinishedPodReleasesCompute(t *testing.T) {
	e := start(t, time.Hour)
	ns := e.namespace(t)
	e.create(t, ns, pod("job", rl("cpu", "1")))
	hard := rl("pods", "5", "count/pods", "5", "requests.cpu", "4")
	e.create(t, ns, quota("q", hard))
	e.waitStatus(t, ns, "q", hard, rl("pods", "1", "count/pods", "1", "requests.cpu", "1"))
	core := e.admin.Kubernetes.CoreV1()
	p, err := core.Pods(ns).Get(e.ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := core.Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("pods", "0", "count/pods", "1", "requests.cpu", "0"))
}

// Upstream rules: a change of spec.hard is reflected in status.hard with the new resources
// measured; a scoped quota counts only the objects in its scopes.
func TestSpecChangeAndScopes(t *testing.T) {
	e := start(t, time.Hour)
	ns := e.namespace(t)
	e.create(t, ns, pod("besteffort", nil), pod("burstable", rl("memory", "32Mi")), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
	be := quota("be", rl("pods", "3"))
	be.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	e.create(t, ns, be)
	e.waitStatus(t, ns, "be", rl("pods", "3"), rl("pods", "1"))

	e.create(t, ns, quota("q", rl("pods", "5")))
	e.waitStatus(t, ns, "q", rl("pods", "5"), rl("pods", "2"))
	core := e.admin.Kubernetes.CoreV1()
	q, err := core.ResourceQuotas(ns).Get(e.ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard = rl("pods", "4", "secrets", "2")
	if _, err := core.ResourceQuotas(ns).Update(e.ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", rl("pods", "4", "secrets", "2"), rl("pods", "2", "secrets", "1"))
}

// Upstream rule: every quota is recounted each sync period, which repairs a status.used that
// drifted (a charge for a request refused after admission, a write this controller missed).
func TestSyncPeriodRepairsDrift(t *testing.T) {
	e := start(t, 500*time.Millisecond)
	ns := e.namespace(t)
	e.create(t, ns, pod("a", nil))
	hard := rl("pods", "5")
	e.create(t, ns, quota("q", hard))
	e.waitStatus(t, ns, "q", hard, rl("pods", "1"))
	core := e.admin.Kubernetes.CoreV1()
	q, err := core.ResourceQuotas(ns).Get(e.ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Used = rl("pods", "4")
	if _, err := core.ResourceQuotas(ns).UpdateStatus(e.ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("pods", "1"))
}

func replicaSet(name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.ReplicaSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("x", nil).Spec}}}
}

// Upstream rule (replenishment of object counts): deleting an object a quota counts by
// count/<resource>.<group>, of a resource no informer of the controller watches from the start
// (replica sets, deployments, quotas themselves), gives its count back without waiting for the
// sync period: the resource is monitored once a quota counts it, and no longer once none does.
func TestDeleteReleasesObjectCounts(t *testing.T) {
	e := start(t, time.Hour)
	ns := e.namespace(t)
	e.create(t, ns, replicaSet("a"), replicaSet("b"), quota("other", rl("pods", "1")))
	hard := rl("count/replicasets.apps", "5", "count/resourcequotas", "3")
	e.create(t, ns, quota("q", hard))
	e.waitStatus(t, ns, "q", hard, rl("count/replicasets.apps", "2", "count/resourcequotas", "2"))
	testenv.Eventually(t, bound, "replica sets monitored", func() (bool, string) {
		m := e.controller.Monitored()
		return len(m) == 1 && m[0].Resource == "replicasets", fmt.Sprint(m)
	})
	apps := e.admin.Kubernetes.AppsV1()
	if err := apps.ReplicaSets(ns).Delete(e.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("count/replicasets.apps", "1", "count/resourcequotas", "2"))
	if err := e.admin.Kubernetes.CoreV1().ResourceQuotas(ns).Delete(e.ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, ns, "q", hard, rl("count/replicasets.apps", "1", "count/resourcequotas", "1"))
}
