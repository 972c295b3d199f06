package evaluator

import (
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func container(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

var always = corev1.ContainerRestartPolicyAlways

func TestUsage(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	grace := int64(30)
	noNodePorts := false
	gold := "gold"
	cases := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want corev1.ResourceList
	}{
		{
			name: "upstream: a pod counts once in pods and count/pods, with its containers' requests and limits summed",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
				container("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m")),
				container("b", rl("cpu", "300m"), rl("memory", "1Gi")),
			}}},
			want: rl("pods", "1", "count/pods", "1", "cpu", "400m", "requests.cpu", "400m", "memory", "64Mi", "requests.memory", "64Mi",
				"limits.cpu", "200m", "limits.memory", "1Gi"),
		},
		{
			name: "upstream: an init container that needs more than the containers sets the pod's request",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container("init", rl("cpu", "2"), nil)},
				Containers:     []corev1.Container{container("a", rl("cpu", "500m"), nil)},
			}},
			want: rl("pods", "1", "count/pods", "1", "cpu", "2", "requests.cpu", "2"),
		},
		{
			name: "upstream (sidecars): a restartable init container adds to the containers and to every later init container",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					func() corev1.Container {
						c := container("proxy", rl("cpu", "200m"), nil)
						c.RestartPolicy = &always
						return c
					}(),
					container("migrate", rl("cpu", "1"), nil),
				},
				Containers: []corev1.Container{container("a", rl("cpu", "500m"), nil)},
			}},
			// max(500m + 200m, 1 + 200m)
			want: rl("pods", "1", "count/pods", "1", "cpu", "1200m", "requests.cpu", "1200m"),
		},
		{
			name: "upstream: the pod overhead adds to requests, and to the limits that are set",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{
				Overhead:   rl("cpu", "100m", "memory", "10Mi"),
				Containers: []corev1.Container{container("a", rl("cpu", "1"), rl("cpu", "2"))},
			}},
			want: rl("pods", "1", "count/pods", "1", "cpu", "1100m", "requests.cpu", "1100m", "memory", "10Mi", "requests.memory", "10Mi", "limits.cpu", "2100m"),
		},
		{
			name: "upstream: huge pages and extended resources are counted as requests",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
				container("a", rl("hugepages-2Mi", "4Mi", "vendor.example/gpu", "2"), rl("vendor.example/gpu", "2")),
			}}},
			want: rl("pods", "1", "count/pods", "1", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi", "requests.vendor.example/gpu", "2"),
		},
		{
			name: "upstream: a finished pod counts only in count/pods",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{container("a", rl("cpu", "1"), nil)}},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			want: rl("count/pods", "1"),
		},
		{
			name: "upstream: a pod stuck terminating past its grace period stops counting compute resources",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, DeletionGracePeriodSeconds: &grace},
				Spec: corev1.PodSpec{Containers: []corev1.Container{container("a", rl("cpu", "1"), nil)}}},
			want: rl("count/pods", "1"),
		},
		{
			name: "upstream: a pod within its grace period still counts",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-10 * time.Second)}, DeletionGracePeriodSeconds: &grace},
				Spec: corev1.PodSpec{Containers: []corev1.Container{container("a", rl("cpu", "1"), nil)}}},
			want: rl("pods", "1", "count/pods", "1", "cpu", "1", "requests.cpu", "1"),
		},
		{
			name: "upstream (in-place resize): a container counts the larger of desired and actual resources",
			gr:   schema.GroupResource{Resource: "pods"},
			obj: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{container("a", rl("cpu", "1"), nil)}},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "2")}}}}},
			want: rl("pods", "1", "count/pods", "1", "cpu", "2", "requests.cpu", "2"),
		},
		{
			name: "upstream: a NodePort service uses one node port per port",
			gr:   schema.GroupResource{Resource: "services"},
			obj:  &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 1}, {Port: 2}, {Port: 3}}}},
			want: rl("services", "1", "count/services", "1", "services.nodeports", "3", "services.loadbalancers", "0"),
		},
		{
			name: "upstream: a LoadBalancer without node port allocation uses no node ports",
			gr:   schema.GroupResource{Resource: "services"},
			obj: &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: &noNodePorts,
				Ports: []corev1.ServicePort{{Port: 1}}}},
			want: rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "1"),
		},
		{
			name: "upstream: a claim's storage is rounded up to whole bytes and charged to its class",
			gr:   schema.GroupResource{Resource: "persistentvolumeclaims"},
			obj: &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold,
				Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1500m")}}},
			want: rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "2",
				"gold"+StorageClassSuffix+"persistentvolumeclaims", "1", "gold"+StorageClassSuffix+"requests.storage", "2"),
		},
		{
			name: "upstream: the beta storage-class annotation wins over the field",
			gr:   schema.GroupResource{Resource: "persistentvolumeclaims"},
			obj: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{naming.BetaStorageClassAnnotation: "silver"}},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold}},
			want: rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "silver"+StorageClassSuffix+"persistentvolumeclaims", "1"),
		},
		{
			name: "upstream (expansion recovery): more allocated than requested counts the allocation",
			gr:   schema.GroupResource{Resource: "persistentvolumeclaims"},
			obj: &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "5Gi")}},
				Status: corev1.PersistentVolumeClaimStatus{AllocatedResources: rl("storage", "8Gi")}},
			want: rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "8Gi"),
		},
		{
			name: "upstream: secrets count under count/secrets and the legacy secrets",
			gr:   schema.GroupResource{Resource: "secrets"},
			obj:  &corev1.Secret{},
			want: rl("count/secrets", "1", "secrets", "1"),
		},
		{
			name: "upstream: other groups count under count/<resource>.<group>",
			gr:   schema.GroupResource{Group: "apps", Resource: "deployments"},
			obj:  &corev1.Secret{},
			want: rl("count/deployments.apps", "1"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := For(tc.gr, func() time.Time { return now })
			got, err := ev.Usage(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !Equals(got, tc.want) {
				t.Errorf("usage\n got %s\nwant %s", Format(got), Format(tc.want))
			}
		})
	}
}

func TestScopes(t *testing.T) {
	deadline := int64(10)
	cases := []struct {
		name  string
		scope corev1.ScopedResourceSelectorRequirement
		pod   *corev1.Pod
		want  bool
	}{
		{"upstream: BestEffort is a pod without cpu or memory requests and limits", exists(corev1.ResourceQuotaScopeBestEffort), &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{container("a", rl("vendor.example/gpu", "1"), nil)}}}, true},
		{"upstream: a memory limit makes a pod NotBestEffort", exists(corev1.ResourceQuotaScopeNotBestEffort), &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{container("i", nil, rl("memory", "1Mi"))}}}, true},
		{"upstream: the QoS class in the status decides when set", exists(corev1.ResourceQuotaScopeBestEffort), &corev1.Pod{Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable}}, false},
		{"upstream: Terminating is a pod with an active deadline", exists(corev1.ResourceQuotaScopeTerminating), &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}, true},
		{"upstream: NotTerminating is a pod without one", exists(corev1.ResourceQuotaScopeNotTerminating), &corev1.Pod{}, true},
		{"upstream: PriorityClass Exists needs a class", exists(corev1.ResourceQuotaScopePriorityClass), &corev1.Pod{}, false},
		{"upstream: PriorityClass NotIn matches a pod without a class", corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"high"}}, &corev1.Pod{}, true},
		{"upstream: PriorityClass DoesNotExist matches a pod without a class", corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpDoesNotExist}, &corev1.Pod{}, true},
		{"upstream: CrossNamespacePodAffinity is an affinity term with a namespace selector", exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity),
			&corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{PodAffinityTerm: corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{}}}}}}}}, true},
	}
	ev := For(schema.GroupResource{Resource: "pods"}, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ev.MatchingScopes(tc.pod, []corev1.ScopedResourceSelectorRequirement{tc.scope})
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) == 1) != tc.want {
				t.Errorf("matched %v, want %v", len(got) == 1, tc.want)
			}
		})
	}
}

func exists(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
	return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
}

func TestMatchingResources(t *testing.T) {
	hard := []corev1.ResourceName{"pods", "count/pods", "requests.cpu", "limits.memory", "requests.hugepages-1Gi", "requests.vendor.example/gpu",
		"vendor.example/gpu", "services", "services.nodeports", "configmaps", "count/configmaps", "requests.storage",
		corev1.ResourceName("gold" + StorageClassSuffix + "requests.storage"), "count/deployments.apps"}
	cases := []struct {
		gr   schema.GroupResource
		want string
	}{
		{schema.GroupResource{Resource: "pods"}, "count/pods,limits.memory,pods,requests.cpu,requests.hugepages-1Gi,requests.vendor.example/gpu"},
		{schema.GroupResource{Resource: "services"}, "services,services.nodeports"},
		{schema.GroupResource{Resource: "configmaps"}, "configmaps,count/configmaps"},
		{schema.GroupResource{Resource: "persistentvolumeclaims"}, "gold" + StorageClassSuffix + "requests.storage,requests.storage"},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, "count/deployments.apps"},
	}
	for _, tc := range cases {
		t.Run("upstream: the quota names "+tc.gr.String()+" counts in", func(t *testing.T) {
			got := For(tc.gr, nil).MatchingResources(hard)
			names := make([]string, 0, len(got))
			for _, n := range got {
				names = append(names, string(n))
			}
			sort.Strings(names)
			if s := strings.Join(names, ","); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
	if For(schema.GroupResource{Resource: "events"}, nil) != nil {
		t.Error("upstream: events are ignored by quota, but an evaluator was returned")
	}
}

func TestArithmetic(t *testing.T) {
	if got := Format(SubtractNonNegative(rl("a", "1", "b", "5"), rl("a", "3", "c", "1"))); got != "a=0,b=5,c=0" {
		t.Errorf("SubtractNonNegative = %s", got)
	}
	if got := Format(Subtract(rl("a", "1"), rl("a", "3", "c", "1"))); got != "a=-2,c=-1" {
		t.Errorf("Subtract = %s", got)
	}
	if ok, exceeded := LessThanOrEqual(rl("a", "2", "b", "1"), rl("a", "1", "b", "1", "c", "0")); ok || len(exceeded) != 1 || exceeded[0] != "a" {
		t.Errorf("LessThanOrEqual = %v %v", ok, exceeded)
	}
	if !Equals(rl("a", "1000m"), rl("a", "1")) || Equals(rl("a", "1"), rl("a", "1", "b", "0")) {
		t.Error("Equals compares quantities by value and keys exactly")
	}
}
