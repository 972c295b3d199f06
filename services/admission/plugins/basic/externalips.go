package basic

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/services/admission/admission"
)

// denyServiceExternalIPs is DenyServiceExternalIPs: a Service may not start using external IPs
// or add new ones (whoever controls a Service's externalIPs can intercept traffic to those
// addresses, CVE-2020-8554); removing them, or keeping the ones it has, is allowed.
type denyServiceExternalIPs struct{}

func newDenyServiceExternalIPs(admission.Deps, []byte) (admission.Plugin, error) {
	return denyServiceExternalIPs{}, nil
}

func (denyServiceExternalIPs) Name() string { return admission.DenyServiceExternalIPs }

// Interests: Service creates and updates.
func (denyServiceExternalIPs) Interests() []admission.Interest {
	return []admission.Interest{{Operations: []admission.Operation{admission.Create, admission.Update}, APIGroups: []string{""}, Resources: []string{"services"}, Scope: "Namespaced"}}
}

func (denyServiceExternalIPs) Validate(_ context.Context, a *admission.Attributes) error {
	// Creates and updates only, as upstream's handler (a delete has no object).
	if !a.Is("", "services", "") || (a.Operation != admission.Create && a.Operation != admission.Update) {
		return nil
	}
	svc, ok := a.Object.(*corev1.Service)
	if !ok || svc == nil {
		return apierrors.NewInternalError(fmt.Errorf("Expected Service resource, got: %v", a.Kind))
	}
	var old *corev1.Service
	if a.OldObject != nil {
		o, ok := a.OldObject.(*corev1.Service)
		if !ok {
			return apierrors.NewInternalError(fmt.Errorf("Expected Service resource, got: %v", a.Kind))
		}
		old = o
	}
	if externalIPsSubset(svc, old) {
		return nil
	}
	return forbidden(a, errors.New("Use of external IPs is denied by admission control"))
}

// externalIPsSubset tells whether every external IP of svc was already on old.
func externalIPsSubset(svc, old *corev1.Service) bool {
	if len(svc.Spec.ExternalIPs) == 0 {
		return true
	}
	if old == nil {
		return false
	}
	had := map[string]bool{}
	for _, ip := range old.Spec.ExternalIPs {
		had[ip] = true
	}
	for _, ip := range svc.Spec.ExternalIPs {
		if !had[ip] {
			return false
		}
	}
	return true
}
