package printers

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// objectMeta is object metadata created ago before now.
func objectMeta(name string, ago time.Duration) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-ago))}
}

func ptr[T any](v T) *T { return &v }

func TestCells(t *testing.T) {
	deleted := metav1.NewTime(now)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	twoContainers := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "proxy", Image: "proxy:2"}}}

	tests := []struct {
		name    string
		obj     runtime.Object
		columns []string
		cells   []any
	}{{
		name: "pod running, one of two containers ready",
		obj: &corev1.Pod{ObjectMeta: objectMeta("web", 5*time.Minute), Spec: twoContainers, Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, RestartCount: 1, State: running},
				{Name: "proxy", RestartCount: 2, State: running},
			}}},
		columns: []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
		cells:   []any{"web", "1/2", "Running", int64(3), "5m", "10.0.0.7", "<none>", "<none>", "<none>"},
	}, {
		name: "pod terminating",
		obj: func() runtime.Object {
			p := &corev1.Pod{ObjectMeta: objectMeta("old", 3*time.Hour+2*time.Minute), Spec: twoContainers}
			p.DeletionTimestamp = &deleted
			p.Spec.NodeName = "node-1"
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "lb"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: "lb", Status: corev1.ConditionTrue}}}
			return p
		}(),
		columns: []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
		cells:   []any{"old", "0/2", "Terminating", int64(0), "3h2m", "<none>", "node-1", "<none>", "1/1"},
	}, {
		name: "pod crash looping",
		obj: &corev1.Pod{ObjectMeta: objectMeta("crash", 12*24*time.Hour), Spec: twoContainers, Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				{Name: "proxy", Ready: true, State: running},
			}}},
		columns: []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
		cells:   []any{"crash", "1/2", "CrashLoopBackOff", int64(7), "12d", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "pod initializing",
		obj: &corev1.Pod{ObjectMeta: objectMeta("init", time.Minute), Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup"}, {Name: "migrate"}},
			Containers:     []corev1.Container{{Name: "app"}},
		}, Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "migrate", RestartCount: 2, State: running},
			}}},
		columns: []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
		cells:   []any{"init", "0/1", "Init:1/2", int64(2), "60s", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "service node port",
		obj: &corev1.Service{ObjectMeta: objectMeta("web", time.Hour), Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{
				{Port: 80, Protocol: corev1.ProtocolTCP},
				{Port: 443, NodePort: 30443, Protocol: corev1.ProtocolTCP},
				{Port: 53, Protocol: corev1.ProtocolUDP},
			},
			Selector: map[string]string{"app": "web", "tier": "front"},
		}},
		columns: []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"},
		cells:   []any{"web", "NodePort", "10.96.0.10", "<none>", "80/TCP,443:30443/TCP,53/UDP", "60m", "app=web,tier=front"},
	}, {
		name: "service load balancer without type defaults",
		obj: &corev1.Service{ObjectMeta: objectMeta("lb", time.Hour), Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ClusterIPs: []string{"10.96.0.11"}, Ports: []corev1.ServicePort{{Port: 8080}},
		}},
		columns: []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"},
		cells:   []any{"lb", "LoadBalancer", "10.96.0.11", "<pending>", "8080/TCP", "60m", "<none>"},
	}, {
		name:    "service cluster IP unset",
		obj:     &corev1.Service{ObjectMeta: objectMeta("plain", time.Hour)},
		columns: []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"},
		cells:   []any{"plain", "ClusterIP", "<none>", "<none>", "<none>", "60m", "<none>"},
	}, {
		name: "config map counts data and binary data",
		obj: &corev1.ConfigMap{ObjectMeta: objectMeta("cfg", 30*time.Second),
			Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": {3}}},
		columns: []string{"Name", "Data", "Age"},
		cells:   []any{"cfg", int64(3), "30s"},
	}, {
		name: "endpoints",
		obj: &corev1.Endpoints{ObjectMeta: objectMeta("web", time.Hour), Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "fd00::3"}, {IP: "10.0.0.4"}},
			Ports:     []corev1.EndpointPort{{Port: 8080}},
		}}},
		columns: []string{"Name", "Endpoints", "Age"},
		cells:   []any{"web", "10.0.0.1:8080,10.0.0.2:8080,[fd00::3]:8080 + 1 more...", "60m"},
	}, {
		name: "node with Platform and upstream roles",
		obj: &corev1.Node{
			ObjectMeta: func() metav1.ObjectMeta {
				m := objectMeta("node-1", 48*time.Hour)
				m.Namespace = ""
				m.Labels = map[string]string{"node-role.platform.io/worker": "", "node-role.kubernetes.io/control-plane": "", "zone": "a"}
				return m
			}(),
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.33.1", OSImage: "Debian 13"},
			},
		},
		columns: []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"},
		cells:   []any{"node-1", "Ready,SchedulingDisabled", "control-plane,worker", "2d", "v1.33.1", "192.168.1.10", "<none>", "Debian 13", "<unknown>", "<unknown>"},
	}, {
		name: "event",
		obj: &corev1.Event{ObjectMeta: objectMeta("web.1", time.Hour), Type: "Warning", Reason: "BackOff",
			Message:        "Back-off restarting failed container\n",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{app}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp: metav1.NewTime(now.Add(-time.Hour)), LastTimestamp: metav1.NewTime(now.Add(-2 * time.Minute)), Count: 12},
		columns: []string{"Name", "Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count"},
		cells:   []any{"web.1", "2m", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container", "60m", int64(12)},
	}, {
		name: "deployment",
		obj: &appsv1.Deployment{ObjectMeta: objectMeta("web", 10*time.Minute),
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{Spec: twoContainers}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
		columns: []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"},
		cells:   []any{"web", "2/3", int64(3), int64(2), "10m", "app,proxy", "app:1,proxy:2", "app=web"},
	}, {
		name:    "stateful set without replicas shows the default",
		obj:     &appsv1.StatefulSet{ObjectMeta: objectMeta("db", 10*time.Minute)},
		columns: []string{"Name", "Ready", "Age", "Containers", "Images"},
		cells:   []any{"db", "0/1", "10m", "", ""},
	}, {
		name: "controller revision",
		obj: &appsv1.ControllerRevision{ObjectMeta: func() metav1.ObjectMeta {
			m := objectMeta("db-7d9f", time.Minute)
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: ptr(true)}}
			return m
		}(), Revision: 4},
		columns: []string{"Name", "Controller", "Revision", "Age"},
		cells:   []any{"db-7d9f", "statefulset.apps/db", int64(4), "60s"},
	}, {
		name: "job complete",
		obj: &batchv1.Job{ObjectMeta: objectMeta("pi", time.Hour),
			Spec: batchv1.JobSpec{Completions: ptr(int32(2))},
			Status: batchv1.JobStatus{Succeeded: 2,
				StartTime: ptr(metav1.NewTime(now.Add(-time.Hour))), CompletionTime: ptr(metav1.NewTime(now.Add(-time.Hour + 95*time.Second))),
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
		columns: []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"},
		cells:   []any{"pi", "Complete", "2/2", "95s", "60m", "", "", "<none>"},
	}, {
		name: "cron job",
		obj: &batchv1.CronJob{ObjectMeta: objectMeta("nightly", 72*time.Hour),
			Spec:   batchv1.CronJobSpec{Schedule: "0 3 * * *", TimeZone: ptr("Europe/Paris")},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "nightly-1"}}, LastScheduleTime: ptr(metav1.NewTime(now.Add(-9 * time.Hour)))}},
		columns: []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"},
		cells:   []any{"nightly", "0 3 * * *", "Europe/Paris", false, int64(1), "9h", "3d", "", "", "<none>"},
	}, {
		name: "horizontal pod autoscaler",
		obj: &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: objectMeta("web", time.Hour),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
				MaxReplicas:    10,
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
						Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{AverageUtilization: ptr(int32(80))}}},
					{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
						Target: autoscalingv2.MetricTarget{AverageValue: ptr(resource.MustParse("500m"))}}},
					{Type: autoscalingv2.ExternalMetricSourceType},
				}},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, CurrentMetrics: []autoscalingv2.MetricStatus{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
					Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(41))}}},
			}}},
		columns: []string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"},
		cells:   []any{"web", "Deployment/web", "cpu: 41%/80%, <unknown>/500m + 1 more...", int64(1), int64(10), int64(2), "60m"},
	}, {
		name: "cluster role binding",
		obj: &rbacv1.ClusterRoleBinding{ObjectMeta: objectMeta("admins", time.Hour),
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{
				{Kind: rbacv1.UserKind, Name: "alice"}, {Kind: rbacv1.UserKind, Name: "bob"},
				{Kind: rbacv1.GroupKind, Name: "ops"},
				{Kind: rbacv1.ServiceAccountKind, Namespace: "ci", Name: "deployer"},
			}},
		columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
		cells:   []any{"admins", "ClusterRole/cluster-admin", "60m", "alice, bob", "ops", "ci/deployer"},
	}, {
		name:    "cluster role",
		obj:     &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 21, 4, 43, 44, 0, time.UTC))}},
		columns: []string{"Name", "Created At"},
		cells:   []any{"view", "2026-11-21T04:43:44Z"},
	}, {
		name: "default storage class",
		obj: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "csi.example.com"},
		columns: []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"},
		cells:   []any{"standard (default)", "csi.example.com", "Delete", "Immediate", false, "60m"},
	}, {
		name: "pod disruption budget",
		obj: &policyv1.PodDisruptionBudget{ObjectMeta: objectMeta("web", time.Hour),
			Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromString("50%"))},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}},
		columns: []string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"},
		cells:   []any{"web", "50%", "N/A", int64(1), "60m"},
	}, {
		name: "bound claim",
		obj: &corev1.PersistentVolumeClaim{ObjectMeta: objectMeta("data", time.Hour),
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptr("fast")},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce},
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		columns: []string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"},
		cells:   []any{"data", "Bound", "pv-1", "10Gi", "RWO,RWOP", "fast", "<unset>", "60m", "<unset>"},
	}, {
		name:    "unstructured custom resource uses the default",
		obj:     &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1", "creationTimestamp": "2026-11-21T04:43:44Z"}}},
		columns: []string{"Name", "Created At"},
		cells:   []any{"w1", "2026-11-21T04:43:44Z"},
	}, {
		name:    "kind without a printer uses the default",
		obj:     &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 21, 4, 43, 44, 0, time.UTC))}},
		columns: []string{"Name", "Created At"},
		cells:   []any{"b", "2026-11-21T04:43:44Z"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := For(tt.obj)
			var columns []string
			for _, c := range p.Columns {
				columns = append(columns, c.Name)
			}
			if !reflect.DeepEqual(columns, tt.columns) {
				t.Errorf("columns = %q, want %q", columns, tt.columns)
			}
			cells, err := p.Cells(tt.obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cells, tt.cells) {
				t.Errorf("cells =\n%#v\nwant\n%#v", cells, tt.cells)
			}
		})
	}
}

// TestEveryPrinter checks every registered printer on a zero object of its type: Name comes first,
// column types are known, there is one cell per column, and each cell has its column's Go type
// (int64 for integer, bool for boolean), so the Table deep-copies and encodes.
func TestEveryPrinter(t *testing.T) {
	cellTypes := map[string]reflect.Type{
		"string": reflect.TypeFor[string](), "date": reflect.TypeFor[string](),
		"integer": reflect.TypeFor[int64](), "boolean": reflect.TypeFor[bool](),
	}
	for typ, p := range registry {
		t.Run(typ.String(), func(t *testing.T) {
			obj := reflect.New(typ.Elem()).Interface().(runtime.Object)
			if For(obj) != p {
				t.Fatal("For does not find the printer")
			}
			if c := p.Columns[0]; c.Name != "Name" || c.Type != "string" || c.Format != "name" {
				t.Errorf("first column = %+v, want Name", c)
			}
			cells, err := p.Cells(obj, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(cells) != len(p.Columns) {
				t.Fatalf("%d cells for %d columns", len(cells), len(p.Columns))
			}
			for i, c := range p.Columns {
				if c.Priority != 0 && c.Priority != 1 {
					t.Errorf("column %q has priority %d", c.Name, c.Priority)
				}
				want, ok := cellTypes[c.Type]
				if !ok {
					t.Errorf("column %q has type %q", c.Name, c.Type)
					continue
				}
				if got := reflect.TypeOf(cells[i]); got != want {
					t.Errorf("column %q (%s): cell %#v is a %v", c.Name, c.Type, cells[i], got)
				}
			}
			table := &metav1.Table{ColumnDefinitions: p.Columns, Rows: []metav1.TableRow{{Cells: cells}}}
			if _, err := json.Marshal(table.DeepCopy()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestKindsWithColumns lists the kinds that must have kubectl's columns rather than the default.
func TestKindsWithColumns(t *testing.T) {
	for _, obj := range []runtime.Object{
		&corev1.Pod{}, &corev1.Namespace{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{},
		&corev1.Endpoints{}, &corev1.Node{}, &corev1.ServiceAccount{}, &corev1.Event{}, &corev1.PersistentVolume{},
		&corev1.PersistentVolumeClaim{}, &corev1.ReplicationController{}, &corev1.ResourceQuota{},
		&corev1.LimitRange{}, &corev1.PodTemplate{},
		&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ControllerRevision{},
		&batchv1.Job{}, &batchv1.CronJob{}, &autoscalingv2.HorizontalPodAutoscaler{}, &policyv1.PodDisruptionBudget{},
		&networkingv1.Ingress{}, &networkingv1.IngressClass{}, &networkingv1.NetworkPolicy{},
		&rbacv1.Role{}, &rbacv1.ClusterRole{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRoleBinding{},
		&certificatesv1.CertificateSigningRequest{}, &coordinationv1.Lease{}, &eventsv1.Event{},
		&storagev1.StorageClass{}, &storagev1.CSIDriver{}, &storagev1.VolumeAttachment{},
		&schedulingv1.PriorityClass{}, &nodev1.RuntimeClass{}, &discoveryv1.EndpointSlice{},
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		if For(obj) == Default() {
			t.Errorf("%T has no printer of its own", obj)
		}
	}
}

func TestDefaultOnZeroObjects(t *testing.T) {
	for _, obj := range []runtime.Object{&unstructured.Unstructured{}, &corev1.Binding{}} {
		cells, err := Default().Cells(obj, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := []any{"", "0001-01-01T00:00:00Z"}; !reflect.DeepEqual(cells, want) {
			t.Errorf("%T: cells = %#v, want %#v", obj, cells, want)
		}
	}
}

func TestWrongObjects(t *testing.T) {
	pods := For(&corev1.Pod{})
	for _, obj := range []runtime.Object{&corev1.Service{}, (*corev1.Pod)(nil), nil} {
		if _, err := pods.Cells(obj, now); err == nil {
			t.Errorf("pod printer printed %#v", obj)
		}
	}
	if _, err := Default().Cells(&metav1.Status{}, now); err == nil {
		t.Error("default printer printed an object without metadata")
	}
	if For(nil) != Default() {
		t.Error("For(nil) is not the default printer")
	}
}

func TestAge(t *testing.T) {
	for ago, want := range map[time.Duration]string{
		5 * time.Minute:                "5m",
		3*time.Hour + 2*time.Minute:    "3h2m",
		12 * 24 * time.Hour:            "12d",
		90 * 24 * time.Hour:            "90d",
		3*365*24*time.Hour + time.Hour: "3y",
	} {
		if got := age(metav1.NewTime(now.Add(-ago)), now); got != want {
			t.Errorf("age %v = %q, want %q", ago, got, want)
		}
	}
	if got := age(metav1.Time{}, now); got != "<unknown>" {
		t.Errorf("age of unset time = %q", got)
	}
}
