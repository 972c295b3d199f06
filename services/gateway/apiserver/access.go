package apiserver

import (
	"context"
	"strings"

	"platform.io/libs/naming"
	"platform.io/services/gateway/audit"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
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

// authorizeCreate checks that the caller may also create the object a write is about to create
// (an update or apply of an object that does not exist), as upstream authorizes create-on-update:
// a grant of patch or update alone does not create. Writes the gateway makes itself (no user)
// are not checked.
func (a *API) authorizeCreate(ctx context.Context, res *registry.Resource, namespace, name string) error {
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return nil
	}
	_, err := auth.Authorize(ctx, a.log, a.authz, auth.Attributes{User: u, Verb: "create", ResourceRequest: true,
		APIGroup: res.Group, APIVersion: res.Version, Resource: res.Resource, Namespace: namespace, Name: name})
	return err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cut(s, sep string) (string, string, bool) { return strings.Cut(s, sep) }

func cutPrefix(s, prefix string) (string, bool) { return strings.CutPrefix(s, prefix) }
