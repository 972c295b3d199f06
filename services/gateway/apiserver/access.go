package apiserver

import (
	"context"
	"strings"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/auth"
)

// auditPatchAnnotation is the prefix of mutating webhooks' patch annotations.
var auditPatchAnnotation = "patch.webhook.admission." + naming.GroupSuffix + "/"

// auditAdmissionAnnotations adds admission's annotations to the audit record; the patch
// annotations of mutating webhooks are kept at level Request and above only (spec 001).
func auditAdmissionAnnotations(ctx context.Context, annotations map[string]string) {
	for k, v := range annotations {
		if strings.HasPrefix(k, auditPatchAnnotation) {
			audit.AddAnnotationAtLevel(ctx, audit.LevelRequest, k, v)
		} else {
			audit.AddAnnotation(ctx, k, v)
		}
	}
}

// dependencyError is the answer for a failed call to another service (auth.DependencyError).
func (a *API) dependencyError(ctx context.Context, err error) error {
	return auth.DependencyError(ctx, a.log, err)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
