package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// typeKey names a kind by its upstream group, which is what the tables below are written in.
type typeKey struct{ group, kind string }

// fieldSet is a kind's selectable fields: the keys, and how to read them from an object.
type fieldSet struct {
	keys    []string
	extract func(runtime.Object) map[string]string
}

// fieldsOf builds a fieldSet from a typed extractor; the keys are those the extractor returns
// for an empty object, so the two cannot disagree.
func fieldsOf[T runtime.Object](extract func(T) map[string]string) fieldSet {
	var zero T
	keys := []string{}
	for k := range extract(newOf(zero)) {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return fieldSet{keys: keys, extract: func(obj runtime.Object) map[string]string {
		t, ok := obj.(T)
		if !ok {
			return map[string]string{}
		}
		return extract(t)
	}}
}

// selectableFields are the field selectors upstream supports per kind, beyond metadata.name and
// metadata.namespace.
var selectableFields = map[typeKey]fieldSet{
	{"", "Pod"}: fieldsOf(func(p *corev1.Pod) map[string]string {
		return map[string]string{
			"spec.nodeName":            p.Spec.NodeName,
			"spec.restartPolicy":       string(p.Spec.RestartPolicy),
			"spec.schedulerName":       p.Spec.SchedulerName,
			"spec.serviceAccountName":  p.Spec.ServiceAccountName,
			"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
			"status.phase":             string(p.Status.Phase),
			"status.podIP":             p.Status.PodIP,
			"status.nominatedNodeName": p.Status.NominatedNodeName,
		}
	}),
	{"", "Event"}: fieldsOf(func(e *corev1.Event) map[string]string {
		source := e.ReportingController
		if source == "" {
			source = e.Source.Component
		}
		return map[string]string{
			"involvedObject.kind":            e.InvolvedObject.Kind,
			"involvedObject.namespace":       e.InvolvedObject.Namespace,
			"involvedObject.name":            e.InvolvedObject.Name,
			"involvedObject.uid":             string(e.InvolvedObject.UID),
			"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
			"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
			"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
			"reason":                         e.Reason,
			"reportingComponent":             e.ReportingController,
			"source":                         source,
			"type":                           e.Type,
		}
	}),
	{"", "Secret"}: fieldsOf(func(s *corev1.Secret) map[string]string {
		return map[string]string{"type": string(s.Type)}
	}),
	{"", "Namespace"}: fieldsOf(func(n *corev1.Namespace) map[string]string {
		return map[string]string{"status.phase": string(n.Status.Phase)}
	}),
	{"", "Node"}: fieldsOf(func(n *corev1.Node) map[string]string {
		return map[string]string{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
	}),
	{"", "ReplicationController"}: fieldsOf(func(rc *corev1.ReplicationController) map[string]string {
		return map[string]string{"status.replicas": strconv.Itoa(int(rc.Status.Replicas))}
	}),
	{"apps", "ReplicaSet"}: fieldsOf(func(rs *appsv1.ReplicaSet) map[string]string {
		return map[string]string{"status.replicas": strconv.Itoa(int(rs.Status.Replicas))}
	}),
	{"batch", "Job"}: fieldsOf(func(j *batchv1.Job) map[string]string {
		return map[string]string{"status.successful": strconv.Itoa(int(j.Status.Succeeded))}
	}),
	{"certificates.k8s.io", "CertificateSigningRequest"}: fieldsOf(func(c *certificatesv1.CertificateSigningRequest) map[string]string {
		return map[string]string{"spec.signerName": c.Spec.SignerName}
	}),
}
