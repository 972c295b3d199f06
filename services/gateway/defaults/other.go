package defaults

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

// rbacGroup is the group Platform serves RBAC under; upstream defaults to its own name for it,
// rbac.authorization.k8s.io.
var rbacGroup = naming.Group(rbacv1.GroupName)

func roleBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	def(&ref.APIGroup, rbacGroup)
	for i := range subjects {
		s := &subjects[i]
		if s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind {
			def(&s.APIGroup, rbacGroup)
		} // a ServiceAccount's apiGroup is "" (the zero value already)
	}
}

func networkPolicy(np *networkingv1.NetworkPolicy) {
	s := &np.Spec
	if len(s.PolicyTypes) == 0 { // every policy isolates ingress; one with egress rules egress too
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(s.Egress) > 0 {
			s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	for i := range s.Ingress {
		networkPolicyPorts(s.Ingress[i].Ports)
	}
	for i := range s.Egress {
		networkPolicyPorts(s.Egress[i].Ports)
	}
}

func networkPolicyPorts(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		defPtr(&ports[i].Protocol, corev1.ProtocolTCP)
	}
}

func mutatingWebhook(w *admissionregistrationv1.MutatingWebhook) {
	defPtr(&w.FailurePolicy, admissionregistrationv1.Fail)
	defPtr(&w.MatchPolicy, admissionregistrationv1.Equivalent)
	defPtr(&w.NamespaceSelector, metav1.LabelSelector{})
	defPtr(&w.ObjectSelector, metav1.LabelSelector{})
	defPtr(&w.TimeoutSeconds, 10)
	defPtr(&w.ReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy)
	webhookTarget(&w.ClientConfig, w.Rules)
}

func validatingWebhook(w *admissionregistrationv1.ValidatingWebhook) {
	defPtr(&w.FailurePolicy, admissionregistrationv1.Fail)
	defPtr(&w.MatchPolicy, admissionregistrationv1.Equivalent)
	defPtr(&w.NamespaceSelector, metav1.LabelSelector{})
	defPtr(&w.ObjectSelector, metav1.LabelSelector{})
	defPtr(&w.TimeoutSeconds, 10)
	webhookTarget(&w.ClientConfig, w.Rules)
}

// webhookTarget defaults what both webhook kinds share: the service port and the rules' scope.
func webhookTarget(cc *admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) {
	if cc.Service != nil {
		defPtr(&cc.Service.Port, 443)
	}
	for i := range rules {
		defPtr(&rules[i].Scope, admissionregistrationv1.AllScopes)
	}
}

// matchResources defaults the resource matching of admission policies and their bindings.
func matchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	defPtr(&m.MatchPolicy, admissionregistrationv1.Equivalent)
	defPtr(&m.NamespaceSelector, metav1.LabelSelector{})
	defPtr(&m.ObjectSelector, metav1.LabelSelector{})
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			defPtr(&rules[i].Scope, admissionregistrationv1.AllScopes)
		}
	}
}

func csiDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	defPtr(&s.AttachRequired, true)
	defPtr(&s.PodInfoOnMount, false)
	defPtr(&s.StorageCapacity, false)
	defPtr(&s.FSGroupPolicy, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	defPtr(&s.RequiresRepublish, false)
	defPtr(&s.SELinuxMount, false)
}
