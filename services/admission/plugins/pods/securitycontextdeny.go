package pods

import (
	"context"
	"errors"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"platform.io/services/admission/admission"
)

// securityContextDeny is SecurityContextDeny: it rejects pods that set the security context
// fields a cluster without any pod security policy would otherwise let anyone use to run as
// another user or group or with other SELinux labels (supplementalGroups, seLinuxOptions,
// runAsUser, fsGroup at pod level; seLinuxOptions, runAsUser in init containers and
// containers). Upstream deprecated it in 1.27 and removed it in 1.30 in favour of PodSecurity;
// Platform keeps it because the spec lists it, with its last behaviour.
type securityContextDeny struct{}

func newSecurityContextDeny(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	if deps.Log != nil {
		deps.Log.Warn("the SecurityContextDeny admission plugin is deprecated: use PodSecurity (restricted or baseline levels) instead",
			slog.String("plugin", admission.SecurityContextDeny))
	}
	return securityContextDeny{}, nil
}

func (securityContextDeny) Name() string { return admission.SecurityContextDeny }

// Interests: pod creates and updates.
func (securityContextDeny) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create, admission.Update)}
}

func (securityContextDeny) Validate(_ context.Context, a *admission.Attributes) error {
	if !isPodWrite(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	deny := func(msg string) error { return forbiddenPod(a, pod, errors.New(msg)) }
	if sc := pod.Spec.SecurityContext; sc != nil {
		switch {
		case sc.SupplementalGroups != nil:
			return deny("pod.Spec.SecurityContext.SupplementalGroups is forbidden")
		case sc.SELinuxOptions != nil:
			return deny("pod.Spec.SecurityContext.SELinuxOptions is forbidden")
		case sc.RunAsUser != nil:
			return deny("pod.Spec.SecurityContext.RunAsUser is forbidden")
		case sc.FSGroup != nil:
			return deny("pod.Spec.SecurityContext.FSGroup is forbidden")
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.SecurityContext == nil {
				continue
			}
			if c.SecurityContext.SELinuxOptions != nil {
				return deny("SecurityContext.SELinuxOptions is forbidden")
			}
			if c.SecurityContext.RunAsUser != nil {
				return deny("SecurityContext.RunAsUser is forbidden")
			}
		}
	}
	return nil
}
