package defaults

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rl builds a resource list from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// sameJSON reports whether a and b serialize alike (what a client reads back), with a message
// showing both when not.
func sameJSON(t *testing.T, a, b any) (bool, string) {
	t.Helper()
	ja, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb), "got:\n" + string(ja) + "\nwant:\n" + string(jb)
}

// Fixtures. Each call returns fresh values, since Apply changes what it is given.

func ctr(name, image string) corev1.Container { return corev1.Container{Name: name, Image: image} }

func defaultedContainer(name, image string, policy corev1.PullPolicy) corev1.Container {
	return corev1.Container{Name: name, Image: image, ImagePullPolicy: policy,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}
}

func minimalPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{ctr("app", "nginx:1.27")}}
}

func defaultedPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                    []corev1.Container{defaultedContainer("app", "nginx:1.27", corev1.PullIfNotPresent)},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SecurityContext:               &corev1.PodSecurityContext{},
		SchedulerName:                 "default-scheduler",
	}
}

func minimalTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: minimalPodSpec()}
}

func defaultedTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: defaultedPodSpec()}
}

// richPodSpec has one of everything a pod spec defaults inside: each volume source, probes,
// lifecycle hooks, downward API references, ports, resources, init and ephemeral containers.
func richPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		HostNetwork: true,
		Volumes: []corev1.Volume{
			{Name: "none"},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
			{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}}},
			{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data"}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t:3260", IQN: "iqn.x"}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i"}}},
			{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}},
			{Name: "sio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s"}}},
		},
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: rl("cpu", "100m", "memory", "64Mi")}}},
		Containers: []corev1.Container{{
			Name: "app", Image: "nginx:1.27",
			Ports:          []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP, HostPort: 5353}},
			Env:            []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
			Resources:      corev1.ResourceRequirements{Limits: rl("cpu", "0.0001"), Requests: rl("memory", "1Gi")},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}, PeriodSeconds: 5},
			StartupProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}},
				PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
		}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox:latest"}}},
		Overhead:            rl("cpu", "0.0001"),
	}
}

// defaultedRichPodSpec is richPodSpec defaulted as a pod template (without Pod-only defaults).
func defaultedRichPodSpec() corev1.PodSpec {
	mode := ptr[int32](0o644)
	init := defaultedContainer("init", "busybox", corev1.PullAlways)
	init.Resources = corev1.ResourceRequirements{Limits: rl("cpu", "100m", "memory", "64Mi")}
	app := defaultedContainer("app", "nginx:1.27", corev1.PullIfNotPresent)
	app.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP, HostPort: 5353}}
	app.Env = []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}}
	app.Resources = corev1.ResourceRequirements{Limits: rl("cpu", "1m"), Requests: rl("memory", "1Gi")}
	app.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	app.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000, Service: ptr("")}},
		TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3}
	app.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	app.Lifecycle = &corev1.Lifecycle{
		PreStop:   &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
		PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	debug := defaultedContainer("debug", "busybox:latest", corev1.PullAlways)
	return corev1.PodSpec{
		HostNetwork: true,
		Volumes: []corev1.Volume{
			{Name: "none", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: ptr(corev1.HostPathUnset)}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: mode}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: mode}}},
			{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode, Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode, Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr[int64](3600)}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: ptr(corev1.PersistentVolumeFilesystem)}}}}},
			{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data", PullPolicy: corev1.PullAlways}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t:3260", IQN: "iqn.x", ISCSIInterface: "default"}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i",
				RBDPool: "rbd", RadosUser: "admin", Keyring: "/etc/ceph/keyring"}}},
			{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u",
				CachingMode: ptr(corev1.AzureDataDiskCachingReadWrite), FSType: ptr("ext4"), ReadOnly: ptr(false), Kind: ptr(corev1.AzureSharedBlobDisk)}}},
			{Name: "sio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s", StorageMode: "ThinProvisioned", FSType: "xfs"}}},
		},
		InitContainers:                []corev1.Container{init},
		Containers:                    []corev1.Container{app},
		EphemeralContainers:           []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(debug)}},
		Overhead:                      rl("cpu", "1m"),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SecurityContext:               &corev1.PodSecurityContext{},
		SchedulerName:                 "default-scheduler",
	}
}

// setPodSpec has every field a pod spec defaults already set, to values other than the defaults.
func setPodSpec() corev1.PodSpec {
	mode := ptr[int32](0o400)
	c := corev1.Container{Name: "app", Image: "nginx", ImagePullPolicy: corev1.PullNever,
		TerminationMessagePath: "/tmp/msg", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Ports:     []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolSCTP}},
		Env:       []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
		Resources: corev1.ResourceRequirements{Limits: rl("cpu", "500m"), Requests: rl("cpu", "250m")},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTPS}},
			TimeoutSeconds: 2, PeriodSeconds: 3, SuccessThreshold: 4, FailureThreshold: 5},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000, Service: ptr("health")}},
			TimeoutSeconds: 2, PeriodSeconds: 3, SuccessThreshold: 4, FailureThreshold: 5},
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/start", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTPS}}},
	}
	return corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: ptr(corev1.HostPathDirectory)}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: mode}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: mode}}},
			{Name: "dapi", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode, Items: []corev1.DownwardAPIVolumeFile{
				{Path: "l", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}}}}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode, Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t", ExpirationSeconds: ptr[int64](600)}}}}}},
			{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: ptr(corev1.PersistentVolumeBlock)}}}}},
			{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "r", PullPolicy: corev1.PullNever}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{ISCSIInterface: "tcp"}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{RBDPool: "p", RadosUser: "u", Keyring: "/k"}}},
			{Name: "az", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{CachingMode: ptr(corev1.AzureDataDiskCachingNone),
				FSType: ptr("xfs"), ReadOnly: ptr(true), Kind: ptr(corev1.AzureManagedDisk)}}},
			{Name: "sio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{StorageMode: "ThickProvisioned", FSType: "ext4"}}},
		},
		InitContainers:                []corev1.Container{*c.DeepCopy()},
		Containers:                    []corev1.Container{c},
		EphemeralContainers:           []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(*c.DeepCopy())}},
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr[int64](5),
		DNSPolicy:                     corev1.DNSDefault,
		SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr[int64](1000)},
		SchedulerName:                 "custom",
	}
}

func setTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: setPodSpec()}
}

func TestApplyDefaults(t *testing.T) {
	richPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: richPodSpec()}
	}
	defaultedRichPod := func() *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: defaultedRichPodSpec()}
		// Pod-only: requests default to limits, host network ports, service links.
		p.Spec.InitContainers[0].Resources.Requests = rl("cpu", "100m", "memory", "64Mi")
		p.Spec.Containers[0].Resources.Requests = rl("memory", "1Gi", "cpu", "1m")
		p.Spec.Containers[0].Ports[0].HostPort = 80
		p.Spec.EnableServiceLinks = ptr(true)
		return p
	}
	pvcTemplate := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}}
	defaultedPVCTemplate := *pvcTemplate.DeepCopy()
	defaultedPVCTemplate.Spec.VolumeMode = ptr(corev1.PersistentVolumeFilesystem)
	defaultedPVCTemplate.Status.Phase = corev1.ClaimPending
	rbacGroup := "rbac.authorization.platform.io"

	for _, tc := range []struct {
		name     string
		in, want runtime.Object
	}{
		// core/v1
		{"Secret", &corev1.Secret{}, &corev1.Secret{Type: corev1.SecretTypeOpaque}},
		{"Secret stringData merged into data", &corev1.Secret{Data: map[string][]byte{"a": []byte("old"), "b": []byte("kept")}, StringData: map[string]string{"a": "new", "c": "added"}},
			&corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("new"), "b": []byte("kept"), "c": []byte("added")}}},
		{"Service ClusterIP", &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)},
					{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}}}}},
		{"Service ClusterIP with external IPs", &corev1.Service{Spec: corev1.ServiceSpec{ExternalIPs: []string{"192.0.2.1"}}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone, ExternalIPs: []string{"192.0.2.1"},
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster}}},
		{"Service NodePort", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, SessionAffinity: corev1.ServiceAffinityNone,
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster}}},
		{"Service LoadBalancer", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityNone,
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster), ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				AllocateLoadBalancerNodePorts: ptr(true)}}},
		{"Service ExternalName", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", Ports: []corev1.ServicePort{{Port: 443}}}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(443)}}}}},
		{"Service ClientIP affinity", &corev1.Service{Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](10800)}},
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster)}}},
		{"Service None affinity drops its config", &corev1.Service{Spec: corev1.ServiceSpec{SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](5)}}}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster)}}},
		{"Namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{corev1.LabelMetadataName: "forged", "x": "y"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{corev1.LabelMetadataName: "team", "x": "y"}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}},
		{"Namespace without labels", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{corev1.LabelMetadataName: "a"}},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}},
		{"Namespace from generateName (not named yet)", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "a-"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "a-"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}},
		{"Pod", richPod(), defaultedRichPod()},
		{"Pod minimal", &corev1.Pod{Spec: minimalPodSpec()},
			func() runtime.Object {
				p := &corev1.Pod{Spec: defaultedPodSpec()}
				p.Spec.EnableServiceLinks = ptr(true)
				return p
			}()},
		{"PodTemplate", &corev1.PodTemplate{Template: corev1.PodTemplateSpec{Spec: richPodSpec()}},
			&corev1.PodTemplate{Template: corev1.PodTemplateSpec{Spec: defaultedRichPodSpec()}}},
		{"ReplicationController", &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: ptr(minimalTemplate())}},
			&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr[int32](1), Selector: map[string]string{"app": "web"}, Template: ptr(defaultedTemplate())}}},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}},
			&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")},
				VolumeMode: ptr(corev1.PersistentVolumeFilesystem)}}},
		{"PersistentVolume", &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: rl("storage", "1Gi"),
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}}},
			&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: rl("storage", "1Gi"),
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data", Type: ptr(corev1.HostPathUnset)}},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, VolumeMode: ptr(corev1.PersistentVolumeFilesystem)}}},
		{"PersistentVolume RBD", &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{RBD: &corev1.RBDPersistentVolumeSource{RBDImage: "i"}}}},
			&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource:        corev1.PersistentVolumeSource{RBD: &corev1.RBDPersistentVolumeSource{RBDImage: "i", RBDPool: "rbd", RadosUser: "admin", Keyring: "/etc/ceph/keyring"}},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain, VolumeMode: ptr(corev1.PersistentVolumeFilesystem)}}},
		{"Endpoints", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}},
			&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}}},
		{"LimitRange", &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, Max: rl("cpu", "2", "memory", "1Gi"), Min: rl("cpu", "10m", "ephemeral-storage", "1Mi"), Default: rl("memory", "512Mi")},
			{Type: corev1.LimitTypePod, Max: rl("cpu", "4")}}}},
			&corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
				{Type: corev1.LimitTypeContainer, Max: rl("cpu", "2", "memory", "1Gi"), Min: rl("cpu", "10m", "ephemeral-storage", "1Mi"),
					Default: rl("cpu", "2", "memory", "512Mi"), DefaultRequest: rl("cpu", "2", "memory", "512Mi", "ephemeral-storage", "1Mi")},
				{Type: corev1.LimitTypePod, Max: rl("cpu", "4")}}}}},
		{"ResourceQuota rounds up", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: rl("cpu", "0.0001", "pods", "10")}},
			&corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: rl("cpu", "1m", "pods", "10")}}},

		// apps/v1
		{"Deployment", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: minimalTemplate()}},
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](1), Template: defaultedTemplate(),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr(intstr.FromString("25%")), MaxSurge: ptr(intstr.FromString("25%"))}},
				RevisionHistoryLimit: ptr[int32](10), ProgressDeadlineSeconds: ptr[int32](600)}}},
		{"Deployment Recreate", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}},
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](1), Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				RevisionHistoryLimit: ptr[int32](10), ProgressDeadlineSeconds: ptr[int32](600), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr[int64](30), DNSPolicy: corev1.DNSClusterFirst,
					SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler"}}}}},
		{"ReplicaSet", &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: minimalTemplate()}},
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](1), Template: defaultedTemplate()}}},
		{"StatefulSet", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: minimalTemplate(), VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*pvcTemplate.DeepCopy()}}},
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](1), Template: defaultedTemplate(),
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{defaultedPVCTemplate},
				PodManagementPolicy:  appsv1.OrderedReadyPodManagement,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](0)}},
				RevisionHistoryLimit: ptr[int32](10),
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}}}},
		{"StatefulSet explicit RollingUpdate type", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			UpdateStrategy:                       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}}},
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](1), PodManagementPolicy: appsv1.OrderedReadyPodManagement,
				UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
				RevisionHistoryLimit: ptr[int32](10),
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr[int64](30), DNSPolicy: corev1.DNSClusterFirst,
					SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler"}}}}},
		{"DaemonSet", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: minimalTemplate()}},
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: defaultedTemplate(),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr(intstr.FromInt32(1)), MaxSurge: ptr(intstr.FromInt32(0))}},
				RevisionHistoryLimit: ptr[int32](10)}}},

		// batch/v1
		{"Job", &batchv1.Job{Spec: batchv1.JobSpec{Template: minimalTemplate()}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: batchv1.JobSpec{Parallelism: ptr[int32](1), Completions: ptr[int32](1), BackoffLimit: ptr[int32](6),
					CompletionMode: ptr(batchv1.NonIndexedCompletion), Suspend: ptr(false), PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed),
					ManualSelector: ptr(false), Template: defaultedTemplate()}}},
		{"Job parallel, per-index backoff, failure policy", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"own": "label"}},
			Spec: batchv1.JobSpec{Completions: ptr[int32](5), BackoffLimitPerIndex: ptr[int32](2), CompletionMode: ptr(batchv1.IndexedCompletion),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}},
				Template: minimalTemplate()}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"own": "label"}},
				Spec: batchv1.JobSpec{Parallelism: ptr[int32](1), Completions: ptr[int32](5), BackoffLimit: ptr[int32](math.MaxInt32), BackoffLimitPerIndex: ptr[int32](2),
					CompletionMode: ptr(batchv1.IndexedCompletion), Suspend: ptr(false), PodReplacementPolicy: ptr(batchv1.Failed), ManualSelector: ptr(false),
					PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
						OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}},
					Template: defaultedTemplate()}}},
		{"CronJob", &batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: minimalTemplate()}}}},
			&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.AllowConcurrent, Suspend: ptr(false),
				SuccessfulJobsHistoryLimit: ptr[int32](3), FailedJobsHistoryLimit: ptr[int32](1),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: defaultedTemplate()}}}}},

		// autoscaling/v2
		{"HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5}},
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5, MinReplicas: ptr[int32](1),
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr[int32](80)}}}}}}},
		{"HorizontalPodAutoscaler behavior", &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr[int32](2), MaxReplicas: 5,
			Metrics:  []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](60)}}}},
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr[int32](2), MaxReplicas: 5,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](0), SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
							{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](60), SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}}}}},

		// rbac/v1
		{"RoleBinding", &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}},
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{
				{Kind: "User", APIGroup: rbacGroup, Name: "alice"}, {Kind: "Group", APIGroup: rbacGroup, Name: "devs"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}}},
		{"ClusterRoleBinding", &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "r"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}},
			&rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: "r"}, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacGroup, Name: "alice"}}}},

		// networking/v1
		{"NetworkPolicy ingress only", &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(80))}}}}}},
			&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(80))}}}}}}},
		{"NetworkPolicy with egress", &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolUDP)}, {}}}}}},
			&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolUDP)}, {Protocol: ptr(corev1.ProtocolTCP)}}}}}}},

		// discovery/v1
		{"EndpointSlice", &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr[int32](80)}}},
			&discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](80)}}}},

		// admissionregistration/v1
		{"MutatingWebhookConfiguration", &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "w",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}},
			Rules:        []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"}}}}}},
			&admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "w",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Port: ptr[int32](443)}},
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{Scope: ptr(admissionregistrationv1.AllScopes)}}},
				FailurePolicy: ptr(admissionregistrationv1.Fail), MatchPolicy: ptr(admissionregistrationv1.Equivalent),
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, TimeoutSeconds: ptr[int32](10),
				ReinvocationPolicy: ptr(admissionregistrationv1.NeverReinvocationPolicy)}}}},
		{"ValidatingWebhookConfiguration", &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "w",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr("https://example.com")}}}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "w",
				ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr("https://example.com")},
				FailurePolicy: ptr(admissionregistrationv1.Fail), MatchPolicy: ptr(admissionregistrationv1.Equivalent),
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, TimeoutSeconds: ptr[int32](10)}}}},
		{"ValidatingAdmissionPolicy", &admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}}}}},
			&admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{MatchPolicy: ptr(admissionregistrationv1.Equivalent),
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Rule: admissionregistrationv1.Rule{Scope: ptr(admissionregistrationv1.AllScopes)}}}}}}}},
		{"ValidatingAdmissionPolicyBinding", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "p", MatchResources: &admissionregistrationv1.MatchResources{}}},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
				MatchResources: &admissionregistrationv1.MatchResources{MatchPolicy: ptr(admissionregistrationv1.Equivalent),
					NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}}}}},

		// scheduling/v1, storage/v1
		{"PriorityClass", &schedulingv1.PriorityClass{Value: 1000}, &schedulingv1.PriorityClass{Value: 1000, PreemptionPolicy: ptr(corev1.PreemptLowerPriority)}},
		{"StorageClass", &storagev1.StorageClass{Provisioner: "p"}, &storagev1.StorageClass{Provisioner: "p",
			ReclaimPolicy: ptr(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr(storagev1.VolumeBindingImmediate)}},
		{"CSIDriver", &storagev1.CSIDriver{}, &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr(true), PodInfoOnMount: ptr(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}, StorageCapacity: ptr(false),
			FSGroupPolicy: ptr(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), RequiresRepublish: ptr(false), SELinuxMount: ptr(false)}}},

		// apiextensions.k8s.io/v1
		{"CustomResourceDefinition", &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}}},
			&apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Names:      apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", Singular: "widget", ListKind: "WidgetList"},
				Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}},
				Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}},
				Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopyObject()
			Apply(got)
			if same, msg := sameJSON(t, got, tc.want); !same || !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("Apply:\n%s", msg)
			}
			// Idempotent: applying to the defaulted object changes nothing at all.
			again := got.DeepCopyObject()
			Apply(again)
			if !reflect.DeepEqual(again, got) {
				_, msg := sameJSON(t, again, got)
				t.Fatalf("second Apply changed the object:\n%s", msg)
			}
		})
	}
}

// TestApplyKeepsClientValues gives each kind every defaulted field already set (mostly to values
// other than the defaults): Apply must change nothing.
func TestApplyKeepsClientValues(t *testing.T) {
	template := setTemplate()
	for _, obj := range []runtime.Object{
		&corev1.Secret{Type: corev1.SecretTypeTLS},
		&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}},
			Ports:                 []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(8080)}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyLocal),
			AllocateLoadBalancerNodePorts: ptr(false)}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{corev1.LabelMetadataName: "ns"}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		&corev1.Pod{Spec: func() corev1.PodSpec {
			s := setPodSpec()
			s.EnableServiceLinks = ptr(false)
			s.HostNetwork = true
			s.Containers[0].Ports[0].HostPort = 8080
			s.InitContainers[0].Ports[0].HostPort = 8080
			return s
		}()},
		&corev1.PodTemplate{Template: setTemplate()},
		&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"own": "label"}},
			Spec: corev1.ReplicationControllerSpec{Replicas: ptr[int32](0), Selector: map[string]string{"app": "web", "tier": "x"}, Template: &template}},
		&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: ptr(corev1.PersistentVolumeBlock)}},
		&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeMode: ptr(corev1.PersistentVolumeBlock),
			PersistentVolumeSource: corev1.PersistentVolumeSource{ISCSI: &corev1.ISCSIPersistentVolumeSource{ISCSIInterface: "tcp"}}}},
		&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 53, Protocol: corev1.ProtocolSCTP}}}}},
		&corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: rl("cpu", "2"), Default: rl("cpu", "1"), DefaultRequest: rl("cpu", "500m")}}}},
		&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](0), Template: setTemplate(),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("50%"))}},
			RevisionHistoryLimit: ptr[int32](0), ProgressDeadlineSeconds: ptr[int32](60)}},
		&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](3), Template: setTemplate()}},
		&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](3), Template: setTemplate(), PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](2)}},
			RevisionHistoryLimit: ptr[int32](1),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: ptr(corev1.PersistentVolumeBlock)},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}}},
		&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](1), Template: setTemplate(), PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}, RevisionHistoryLimit: ptr[int32](10),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}}},
		&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: setTemplate(), RevisionHistoryLimit: ptr[int32](3),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr(intstr.FromString("10%")), MaxSurge: ptr(intstr.FromInt32(1))}}}},
		&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: setTemplate(), RevisionHistoryLimit: ptr[int32](3),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"own": "label"}}, Spec: batchv1.JobSpec{
			Parallelism: ptr[int32](2), Completions: ptr[int32](4), BackoffLimit: ptr[int32](1), CompletionMode: ptr(batchv1.IndexedCompletion),
			Suspend: ptr(true), PodReplacementPolicy: ptr(batchv1.Failed), ManualSelector: ptr(true), Template: setTemplate(),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse}}}}}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: batchv1.JobSpec{Parallelism: ptr[int32](3), BackoffLimit: ptr[int32](6), CompletionMode: ptr(batchv1.NonIndexedCompletion),
			Suspend: ptr(false), PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed), ManualSelector: ptr(false), Template: setTemplate()}},
		&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "@hourly", ConcurrencyPolicy: batchv1.ForbidConcurrent, Suspend: ptr(true),
			SuccessfulJobsHistoryLimit: ptr[int32](0), FailedJobsHistoryLimit: ptr[int32](0),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: setTemplate()}}}},
		&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr[int32](0),
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](30), SelectPolicy: ptr(autoscalingv2.DisabledPolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{}},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](30), SelectPolicy: ptr(autoscalingv2.MinChangePolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}}}},
		&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "r"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "a"}, {Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}},
		&rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "r"},
			Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "example.com", Name: "g"}}},
		&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolSCTP)}}}}}},
		&discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolUDP)}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "w",
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Port: ptr[int32](8443)}},
			Rules:         []admissionregistrationv1.RuleWithOperations{{Rule: admissionregistrationv1.Rule{Scope: ptr(admissionregistrationv1.NamespacedScope)}}},
			FailurePolicy: ptr(admissionregistrationv1.Ignore), MatchPolicy: ptr(admissionregistrationv1.Exact),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"c": "d"}},
			TimeoutSeconds: ptr[int32](3), ReinvocationPolicy: ptr(admissionregistrationv1.IfNeededReinvocationPolicy)}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "w",
			FailurePolicy: ptr(admissionregistrationv1.Ignore), MatchPolicy: ptr(admissionregistrationv1.Exact),
			NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, TimeoutSeconds: ptr[int32](30)}}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: ptr(admissionregistrationv1.Ignore),
			MatchConstraints: &admissionregistrationv1.MatchResources{MatchPolicy: ptr(admissionregistrationv1.Exact),
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
				ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Rule: admissionregistrationv1.Rule{Scope: ptr(admissionregistrationv1.ClusterScope)}}}}}}},
		&schedulingv1.PriorityClass{PreemptionPolicy: ptr(corev1.PreemptNever)},
		&storagev1.StorageClass{ReclaimPolicy: ptr(corev1.PersistentVolumeReclaimRetain), VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer)},
		&storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{AttachRequired: ptr(false), PodInfoOnMount: ptr(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}, StorageCapacity: ptr(true),
			FSGroupPolicy: ptr(storagev1.FileFSGroupPolicy), RequiresRepublish: ptr(true), SELinuxMount: ptr(true)}},
		&apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Names:      apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets", Singular: "gadget", ListKind: "Widgets"},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1beta1"}}},
		// Not a kind with defaults.
		&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("me")}},
		&coordinationv1.Lease{},
	} {
		t.Run(reflect.TypeOf(obj).Elem().Name(), func(t *testing.T) {
			got := obj.DeepCopyObject()
			Apply(got)
			if !reflect.DeepEqual(got, obj) {
				_, msg := sameJSON(t, got, obj)
				t.Fatalf("Apply changed a fully set object:\n%s", msg)
			}
		})
	}
}

func TestImagePullPolicy(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"library/nginx", corev1.PullAlways},
		{"docker.io/library/nginx:1.27-alpine", corev1.PullIfNotPresent},
		{"repo:5000/img", corev1.PullAlways}, // a registry port, not a tag
		{"repo:5000/img:v2", corev1.PullIfNotPresent},
		{"localhost/img", corev1.PullAlways},
		{"[::1]:5000/team/img:latest", corev1.PullAlways},
		{"registry.example.com/a/b/c", corev1.PullAlways},
		{"img@" + digest, corev1.PullIfNotPresent},                              // a digest alone
		{"img:latest@" + digest, corev1.PullAlways},                             // the tag counts
		{"img:1.0@" + digest, corev1.PullIfNotPresent},                          //
		{"img@sha256:abc", corev1.PullIfNotPresent},                             // malformed digest: invalid
		{"img:latest@md5:" + strings.Repeat("a", 32), corev1.PullIfNotPresent},  // unsupported digest
		{"", corev1.PullIfNotPresent},                                           // invalid: no name
		{"NGINX", corev1.PullIfNotPresent},                                      // invalid: uppercase repository
		{"nginx:Latest", corev1.PullIfNotPresent},                               // tags are case-sensitive
		{"nginx:", corev1.PullIfNotPresent},                                     // invalid: empty tag
		{strings.Repeat("ab", 32), corev1.PullIfNotPresent},                     // an image ID, not a name
		{"registry.example.com/" + strings.Repeat("a", 250), corev1.PullAlways}, // the registry does not count
		{strings.Repeat("a", 250), corev1.PullIfNotPresent},                     // name over 255 characters once normalized
	} {
		t.Run(tc.image, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr("c", tc.image)},
				InitContainers: []corev1.Container{ctr("i", tc.image)}}}
			Apply(p)
			if got := p.Spec.Containers[0].ImagePullPolicy; got != tc.want {
				t.Errorf("container: imagePullPolicy = %q, want %q", got, tc.want)
			}
			if got := p.Spec.InitContainers[0].ImagePullPolicy; got != tc.want {
				t.Errorf("init container: imagePullPolicy = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestServiceTargetPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   intstr.IntOrString
		want intstr.IntOrString
	}{
		{"unset", intstr.IntOrString{}, intstr.FromInt32(8443)},
		{"zero", intstr.FromInt32(0), intstr.FromInt32(8443)},
		{"empty name", intstr.FromString(""), intstr.FromInt32(8443)},
		{"number", intstr.FromInt32(9000), intstr.FromInt32(9000)},
		{"name", intstr.FromString("https"), intstr.FromString("https")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8443, TargetPort: tc.in}}}}
			Apply(svc)
			if got := svc.Spec.Ports[0].TargetPort; got != tc.want {
				t.Errorf("targetPort = %v, want %v", got.String(), tc.want.String())
			}
		})
	}
}

// TestApplyDoesNotAlias checks that defaults copied from one place to another (template labels,
// limits) are copies: changing one later must not change the other.
func TestApplyDoesNotAlias(t *testing.T) {
	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: ptr(minimalTemplate())}}
	Apply(rc)
	rc.Spec.Template.Labels["app"] = "changed"
	if rc.Spec.Selector["app"] != "web" || rc.Labels["app"] != "web" {
		t.Errorf("selector %v and labels %v follow the template's labels", rc.Spec.Selector, rc.Labels)
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i",
		Resources: corev1.ResourceRequirements{Limits: rl("cpu", "1")}}}}}
	Apply(p)
	a, b := p.Spec.Containers[0].Resources.Limits, p.Spec.Containers[0].Resources.Requests
	if len(a) != 1 || len(b) != 1 || reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() {
		t.Errorf("requests %v not a separate copy of limits %v", b, a)
	}
	// Each defaulted pointer is its own.
	d1, d2 := &appsv1.Deployment{}, &appsv1.Deployment{}
	Apply(d1)
	Apply(d2)
	if d1.Spec.Replicas == d2.Spec.Replicas || d1.Spec.Strategy.RollingUpdate.MaxSurge == d2.Spec.Strategy.RollingUpdate.MaxSurge {
		t.Error("two objects share a defaulted pointer")
	}
}

func TestApplyUnknownKind(t *testing.T) {
	for _, obj := range []runtime.Object{
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}},
		&corev1.ConfigMap{},
		&corev1.ServiceAccount{},
		&corev1.Node{Status: corev1.NodeStatus{Capacity: rl("cpu", "4")}},
		&corev1.PodList{Items: []corev1.Pod{{}}}, // lists are not request bodies
	} {
		before := obj.DeepCopyObject()
		Apply(obj)
		if !reflect.DeepEqual(before, obj) {
			t.Errorf("Apply(%T) changed it", obj)
		}
	}
	Apply(nil) // no panic
}
