// Package defaults sets the default values upstream's API server sets on the built-in kinds when
// it decodes a request body (the SetDefaults_* functions of k8s.io/kubernetes/pkg/apis/*/v1, as
// of Kubernetes 1.33), so objects read back as they would from upstream: a Secret is Opaque, a
// Deployment has a RollingUpdate strategy, a container has its termination message path, and so
// on. Only defaulting lives here; what upstream's registries do at create time (allocating a
// Service's cluster IPs and IP families, generating a Job's selector) does not.
package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// Apply sets upstream's default values on obj in place, for the kinds it knows; objects of other
// kinds are left alone. A value the client set is kept, with upstream's two exceptions: a
// Namespace's kubernetes.io/metadata.name label always equals its name, and a Service whose
// session affinity is None has no session affinity config. Apply is idempotent. It is meant for
// every create and update body, after decoding and before validation, as upstream's decoder does.
func Apply(obj runtime.Object) {
	switch o := obj.(type) {
	// core/v1
	case *corev1.Pod:
		pod(o)
	case *corev1.PodTemplate:
		podSpec(&o.Template.Spec)
	case *corev1.ReplicationController:
		replicationController(o)
	case *corev1.Service:
		service(o)
	case *corev1.Secret:
		def(&o.Type, corev1.SecretTypeOpaque)
		// stringData is write-only: merged into data (winning over it), as upstream's strategy does.
		if len(o.StringData) > 0 {
			if o.Data == nil {
				o.Data = make(map[string][]byte, len(o.StringData))
			}
			for k, v := range o.StringData {
				o.Data[k] = []byte(v)
			}
		}
		o.StringData = nil
	case *corev1.Namespace:
		namespace(o)
	case *corev1.PersistentVolume:
		persistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		pvcSpec(&o.Spec)
	case *corev1.Endpoints:
		for i := range o.Subsets {
			for j := range o.Subsets[i].Ports {
				def(&o.Subsets[i].Ports[j].Protocol, corev1.ProtocolTCP)
			}
		}
	case *corev1.LimitRange:
		for i := range o.Spec.Limits {
			limitRangeItem(&o.Spec.Limits[i])
		}
	case *corev1.ResourceQuota:
		roundUp(o.Spec.Hard)

	// apps/v1
	case *appsv1.Deployment:
		deployment(o)
	case *appsv1.ReplicaSet:
		defPtr(&o.Spec.Replicas, 1)
		podSpec(&o.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		statefulSet(o)
	case *appsv1.DaemonSet:
		daemonSet(o)

	// batch/v1
	case *batchv1.Job:
		job(o)
	case *batchv1.CronJob:
		cronJob(o)

	// autoscaling/v2
	case *autoscalingv2.HorizontalPodAutoscaler:
		horizontalPodAutoscaler(o)

	// rbac/v1
	case *rbacv1.RoleBinding:
		roleBinding(&o.RoleRef, o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		roleBinding(&o.RoleRef, o.Subjects)

	// networking/v1
	case *networkingv1.NetworkPolicy:
		networkPolicy(o)

	// discovery/v1
	case *discoveryv1.EndpointSlice:
		for i := range o.Ports {
			defPtr(&o.Ports[i].Name, "")
			defPtr(&o.Ports[i].Protocol, corev1.ProtocolTCP)
		}

	// admissionregistration/v1
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			mutatingWebhook(&o.Webhooks[i])
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			validatingWebhook(&o.Webhooks[i])
		}
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		defPtr(&o.Spec.FailurePolicy, admissionregistrationv1.Fail)
		matchResources(o.Spec.MatchConstraints)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		matchResources(o.Spec.MatchResources)

	// scheduling/v1
	case *schedulingv1.PriorityClass:
		defPtr(&o.PreemptionPolicy, corev1.PreemptLowerPriority)

	// storage/v1
	case *storagev1.StorageClass:
		defPtr(&o.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete)
		defPtr(&o.VolumeBindingMode, storagev1.VolumeBindingImmediate)
	case *storagev1.CSIDriver:
		csiDriver(o)

	// apiextensions.k8s.io/v1: the package ships upstream's own defaulters.
	case *apiextensionsv1.CustomResourceDefinition:
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(o)
	}
}

// def sets *p to v when *p is the zero value.
func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// defPtr points *p at a copy of v when *p is nil.
func defPtr[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// roundUp rounds every quantity of rl up to a whole number of thousandths, as upstream does with
// every resource list it decodes (so "0.0001" becomes "1m").
func roundUp(rl corev1.ResourceList) {
	for name, q := range rl {
		if q.RoundUp(resource.Milli) {
			continue // already whole thousandths: leave the value (and its spelling) alone
		}
		rl[name] = q
	}
}
