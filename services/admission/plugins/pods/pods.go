// Package pods holds the built-in admission plugins that act on pods (and on what pods
// reference: namespaces' scheduling annotations, PriorityClasses, RuntimeClasses, service
// accounts, LimitRanges, Pod Security levels): AlwaysPullImages, DefaultTolerationSeconds,
// ExtendedResourceToleration, LimitPodHardAntiAffinityTopology, PodNodeSelector,
// PodTolerationRestriction, SecurityContextDeny, Priority, RuntimeClass, ServiceAccount,
// LimitRanger and PodSecurity. Each behaves as upstream's plugin of the same name in Kubernetes
// 1.33, with Platform's spelling of the identifiers derived from the product name.
package pods

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/admission/admission"
)

// Register adds the factories of this package's plugins to r.
func Register(r *admission.Registry) {
	r.Register(admission.AlwaysPullImages, newAlwaysPullImages)
	r.Register(admission.DefaultTolerationSeconds, newDefaultTolerationSeconds)
	r.Register(admission.ExtendedResourceToleration, newExtendedResourceToleration)
	r.Register(admission.LimitPodHardAntiAffinityTopology, newAntiAffinity)
	r.Register(admission.PodNodeSelector, newPodNodeSelector)
	r.Register(admission.PodTolerationRestriction, newPodTolerationRestriction)
	r.Register(admission.SecurityContextDeny, newSecurityContextDeny)
	r.Register(admission.Priority, newPriority)
	r.Register(admission.RuntimeClass, newRuntimeClass)
	r.Register(admission.ServiceAccount, newServiceAccount)
	r.Register(admission.LimitRanger, newLimitRanger)
	r.Register(admission.PodSecurity, newPodSecurity)
}

// Resources and groups the plugins match on (Platform's group names; the core group is "").
const (
	coreGroup = ""
	podsRes   = "pods"
)

// Subresources of pods some plugins act on.
const (
	ephemeralContainers = "ephemeralcontainers"
	resize              = "resize"
)

// podInterest is the interest in the main pods resource for ops.
func podInterest(ops ...admission.Operation) admission.Interest {
	return admission.Interest{Operations: ops, APIGroups: []string{coreGroup}, Resources: []string{podsRes}, Scope: "Namespaced"}
}

// isPod tells whether a is a request for the pods resource itself (no subresource).
func isPod(a *admission.Attributes) bool { return a.Is(coreGroup, podsRes, "") }

// isPodWrite tells whether a creates or updates a pod (the main resource): what upstream's
// plugins built with admission.NewHandler(Create, Update) handle. A delete has no object to
// read (the stored pod is its old object), so such plugins must let it through.
func isPodWrite(a *admission.Attributes) bool {
	return isPod(a) && (a.Operation == admission.Create || a.Operation == admission.Update)
}

// podOf returns a's object as a pod; upstream rejects a pod request whose object is not one
// with this 400.
func podOf(a *admission.Attributes) (*corev1.Pod, error) {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return nil, apierrors.NewBadRequest("Resource was marked with kind Pod but was unable to be converted")
	}
	return pod, nil
}

// oldPodOf returns a's old object as a pod, nil when there is none.
func oldPodOf(a *admission.Attributes) *corev1.Pod {
	pod, _ := a.OldObject.(*corev1.Pod)
	return pod
}

// forbidden is upstream's admission.NewForbidden: 403 naming the resource and the object, not
// wrapping an error that already is a Forbidden.
func forbidden(a *admission.Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	return admission.Forbidden(a, err)
}

// forbiddenPod is the 403 some upstream plugins build themselves from the pod's name (empty for
// a pod that only has generateName, as upstream's message then shows).
func forbiddenPod(a *admission.Attributes, pod *corev1.Pod, err error) error {
	return apierrors.NewForbidden(a.GroupResource(), pod.Name, err)
}

// forbiddenWithMessage is a 403 for a's object whose message is msg exactly.
func forbiddenWithMessage(a *admission.Attributes, msg string) error {
	err := &apierrors.StatusError{}
	if !errors.As(admission.Forbidden(a, errors.New(msg)), &err) {
		return unknownError(msg)
	}
	err.ErrStatus.Message = msg
	return err
}

// unknownError is what upstream's API server answers when an admission plugin fails with an
// error that is not a Status: 500 with no reason and the error's text as the message. Some
// upstream plugins reject that way, and clients see exactly this.
func unknownError(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: msg,
	}}
}

// aggregate joins errors as upstream's utilerrors.NewAggregate prints them: the one message, or
// "[a, b]"; nil for none.
func aggregate(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msg := "["
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return errors.New(msg + "]")
}

// visitContainers calls f with every container of spec and its field path, in upstream's order
// (init containers, containers, ephemeral containers), until f returns false.
func visitContainers(spec *corev1.PodSpec, f func(c *corev1.Container, path *field.Path) bool) {
	p := field.NewPath("spec")
	for i := range spec.InitContainers {
		if !f(&spec.InitContainers[i], p.Child("initContainers").Index(i)) {
			return
		}
	}
	for i := range spec.Containers {
		if !f(&spec.Containers[i], p.Child("containers").Index(i)) {
			return
		}
	}
	for i := range spec.EphemeralContainers {
		if !f((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), p.Child("ephemeralContainers").Index(i)) {
			return
		}
	}
}

// decodeConfig reads a plugin's JSON configuration into v, with an error naming the plugin.
func decodeConfig(plugin string, config []byte, v any) error {
	if err := json.Unmarshal(config, v); err != nil {
		return fmt.Errorf("%s: reading the configuration: %w", plugin, err)
	}
	return nil
}
