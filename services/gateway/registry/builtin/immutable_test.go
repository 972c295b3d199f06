package builtin

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestImmutableFields: upstream's immutable fields of the kinds without a strategy of their own.
// Each case changes one field of a stored object: allowed changes pass, the others are refused
// with upstream's message at the field's path; creates are not ruled here.
func TestImmutableFields(t *testing.T) {
	sel := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
	}
	i32 := func(n int32) *int32 { return &n }
	yes, no := true, false
	retain, del := corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	never := corev1.PreemptNever
	indexed := batchv1.IndexedCompletion
	job := func(edit func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{Spec: batchv1.JobSpec{Completions: i32(3), Parallelism: i32(1), Selector: sel("a"),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
		if edit != nil {
			edit(j)
		}
		return j
	}
	suspended := func(j *batchv1.Job) { j.Spec.Suspend = &yes }
	started := func(j *batchv1.Job) {
		now := metav1.NewTime(time.Now())
		j.Spec.Suspend = &yes
		j.Status.StartTime = &now
	}
	for _, tc := range []struct {
		name     string
		old, obj runtime.Object
		want     string // "" allowed, else the error's text contains it
	}{
		{"deployment replicas", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: sel("a"), Replicas: i32(1)}},
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: sel("a"), Replicas: i32(5)}}, ""},
		{"deployment selector", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: sel("a")}},
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: sel("b")}}, "spec.selector: Invalid value"},
		{"replica set selector", &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: sel("a")}},
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: sel("b")}}, "spec.selector: Invalid value"},
		{"daemon set selector", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: sel("a")}},
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: sel("b")}}, "field is immutable"},
		{"stateful set replicas and template", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: sel("a"), Replicas: i32(1)}},
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: sel("a"), Replicas: i32(3), Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}}}}}, ""},
		{"stateful set service name", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: sel("a"), ServiceName: "a"}},
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: sel("a"), ServiceName: "b"}},
			"spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"},
		{"controller revision data", &appsv1.ControllerRevision{Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"a":1}`)}},
			&appsv1.ControllerRevision{Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"a":2}`)}}, "data: Invalid value"},
		{"job parallelism", job(nil), job(func(j *batchv1.Job) { j.Spec.Parallelism = i32(2) }), ""},
		{"job completions", job(nil), job(func(j *batchv1.Job) { j.Spec.Completions = i32(4) }), "spec.completions: Invalid value"},
		{"elastic indexed job", job(func(j *batchv1.Job) { j.Spec.CompletionMode = &indexed; j.Spec.Parallelism = i32(3) }),
			job(func(j *batchv1.Job) {
				j.Spec.CompletionMode = &indexed
				j.Spec.Completions = i32(5)
				j.Spec.Parallelism = i32(5)
			}), ""},
		{"indexed job completions alone", job(func(j *batchv1.Job) { j.Spec.CompletionMode = &indexed }),
			job(func(j *batchv1.Job) { j.Spec.CompletionMode = &indexed; j.Spec.Completions = i32(5) }), "can only be modified in tandem with spec.parallelism"},
		{"job selector", job(nil), job(func(j *batchv1.Job) { j.Spec.Selector = sel("b") }), "spec.selector"},
		{"job template", job(nil), job(func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "y" }), "spec.template: Invalid value"},
		{"suspended job scheduling", job(suspended), job(func(j *batchv1.Job) {
			suspended(j)
			j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
			j.Spec.Template.Labels = map[string]string{"l": "v"}
		}), ""},
		{"suspended job image", job(suspended), job(func(j *batchv1.Job) { suspended(j); j.Spec.Template.Spec.Containers[0].Image = "y" }), "spec.template"},
		{"started job scheduling", job(started), job(func(j *batchv1.Job) {
			started(j)
			j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
		}), "spec.template"},
		{"secret data", &corev1.Secret{Data: map[string][]byte{"k": []byte("1")}}, &corev1.Secret{Data: map[string][]byte{"k": []byte("2")}}, ""},
		{"secret type", &corev1.Secret{Type: corev1.SecretTypeOpaque}, &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson}, "type: Invalid value"},
		{"immutable secret data", &corev1.Secret{Immutable: &yes, Data: map[string][]byte{"k": []byte("1")}},
			&corev1.Secret{Immutable: &yes, Data: map[string][]byte{"k": []byte("2")}}, "data: Forbidden: field is immutable when `immutable` is set"},
		{"immutable secret made mutable", &corev1.Secret{Immutable: &yes}, &corev1.Secret{Immutable: &no}, "immutable: Forbidden: field is immutable when `immutable` is set"},
		{"configmap made immutable", &corev1.ConfigMap{}, &corev1.ConfigMap{Immutable: &yes}, ""},
		{"immutable configmap data", &corev1.ConfigMap{Immutable: &yes, Data: map[string]string{"k": "1"}},
			&corev1.ConfigMap{Immutable: &yes, Data: map[string]string{"k": "2"}}, "data: Forbidden: field is immutable when `immutable` is set"},
		{"immutable configmap binary data", &corev1.ConfigMap{Immutable: &yes},
			&corev1.ConfigMap{Immutable: &yes, BinaryData: map[string][]byte{"k": {1}}}, "binaryData: Forbidden"},
		{"service cluster IP", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.5", ClusterIPs: []string{"10.0.0.5"}}},
			&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.6", ClusterIPs: []string{"10.0.0.6"}}}, "spec.clusterIPs[0]: Invalid value: \"10.0.0.6\": may not change once set"},
		{"service to ExternalName", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.5"}},
			&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}, ""},
		{"service ports", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.5"}},
			&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.5", Ports: []corev1.ServicePort{{Port: 80}}}}, ""},
		{"endpoint slice address type", &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4},
			&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6}, "addressType: Invalid value"},
		{"storage class parameters", &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del},
			&storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del, Parameters: map[string]string{"a": "b"}}, "parameters: Forbidden: updates to parameters are forbidden."},
		{"storage class provisioner", &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del},
			&storagev1.StorageClass{Provisioner: "q", ReclaimPolicy: &del}, "provisioner: Forbidden: updates to provisioner are forbidden."},
		{"storage class reclaim policy", &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del},
			&storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &retain}, "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."},
		{"storage class binding mode", &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del},
			&storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del, VolumeBindingMode: &wait}, "volumeBindingMode: Invalid value"},
		{"storage class expansion", &storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del},
			&storagev1.StorageClass{Provisioner: "p", ReclaimPolicy: &del, AllowVolumeExpansion: &yes}, ""},
		{"volume attachment", &storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{Attacher: "a", NodeName: "n"}},
			&storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{Attacher: "a", NodeName: "m"}}, "spec: Invalid value"},
		{"priority class value", &schedulingv1.PriorityClass{Value: 1}, &schedulingv1.PriorityClass{Value: 2}, "value: Forbidden: may not be changed in an update."},
		{"priority class preemption", &schedulingv1.PriorityClass{Value: 1}, &schedulingv1.PriorityClass{Value: 1, PreemptionPolicy: &never}, "preemptionPolicy: Invalid value"},
		{"priority class description", &schedulingv1.PriorityClass{Value: 1}, &schedulingv1.PriorityClass{Value: 1, Description: "d"}, ""},
		{"runtime class handler", &nodev1.RuntimeClass{Handler: "a"}, &nodev1.RuntimeClass{Handler: "b"}, "handler: Invalid value"},
		{"ingress class controller", &networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Controller: "a/b"}},
			&networkingv1.IngressClass{Spec: networkingv1.IngressClassSpec{Controller: "a/c"}}, "spec.controller: Invalid value"},
		{"ip address parent", &networkingv1.IPAddress{Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Name: "a"}}},
			&networkingv1.IPAddress{Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Name: "b"}}}, "spec.parentRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := (&Strategy{}).Validate(tc.obj, tc.old)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs.ToAggregate())
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want)):
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
			if errs := (&Strategy{}).Validate(tc.obj, nil); len(errs) > 0 {
				t.Errorf("create refused: %v", errs)
			}
		})
	}
}
