package apiserver

import (
	"context"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/request"
)

// requestInfo is what a resource request addresses and which verb it is.
type requestInfo struct {
	res         *registry.Resource
	namespace   string
	name        string
	subresource string
	verb        string
	// wire is the group version the client addressed when it used upstream's name of a group
	// Platform serves under its own name (rbac.authorization.k8s.io for
	// rbac.authorization.platform.io): objects are read from and written to the client in it.
	// Zero when the client used Platform's name.
	wire schema.GroupVersion
	// dryRun is the request's dryRun=All (admission is told).
	dryRun bool
	// warnings are admission's warnings for the client (Warning headers, on success and on
	// failure); auditAnnotations are its annotations for the audit record.
	warnings         []string
	auditAnnotations map[string]string
}

// addAdmissionNotes records an admission answer's warnings and audit annotations.
func (info *requestInfo) addAdmissionNotes(warnings []string, annotations map[string]string) {
	for _, w := range warnings {
		if !contains(info.warnings, w) {
			info.warnings = append(info.warnings, w)
		}
	}
	for k, v := range annotations {
		if info.auditAnnotations == nil {
			info.auditAnnotations = map[string]string{}
		}
		info.auditAnnotations[k] = v
	}
}

// outGVK is the kind an object of res leaves in: the client's group when it addressed the
// upstream name, the served one otherwise.
func (info *requestInfo) outGVK(gvk schema.GroupVersionKind) schema.GroupVersionKind {
	if info == nil || info.wire.Empty() || gvk.GroupVersion() != info.res.GroupVersion() {
		return gvk
	}
	return info.wire.WithKind(gvk.Kind)
}

// toWire sets obj's kind to the one it leaves in (see outGVK).
func (info *requestInfo) toWire(obj runtime.Object) {
	if info == nil || info.wire.Empty() || obj == nil {
		return
	}
	ok := obj.GetObjectKind()
	ok.SetGroupVersionKind(info.outGVK(ok.GroupVersionKind()))
}

// sameGroup tells whether a group version named by a client (in a URL or a body's apiVersion)
// is want under either name: Platform's, or upstream's for the groups Platform renames.
func sameGroup(gv, want schema.GroupVersion) bool {
	return gv.Version == want.Version && (gv.Group == want.Group || naming.Group(gv.Group) == want.Group)
}

// parseResourcePath reads the address the chain resolved for a resource request
// (/api/v1/... or /apis/<group>/<version>/...: [namespaces/<ns>/]<resource>[/<name>[/<subresource>]])
// against what is served: 404 for what is not, 405 for a verb the address does not take.
func (a *API) parseResourcePath(r *http.Request, ri *request.Info) (*requestInfo, error) {
	gv := schema.GroupVersion{Group: ri.APIGroup, Version: ri.APIVersion}
	if _, ok := a.reg.GroupVersion(gv); !ok {
		if ri.WireGroup != "" {
			gv.Group = ri.WireGroup
		}
		return nil, notFoundType(gv.WithResource(""))
	}
	if ri.ByPrefixVerb {
		// The legacy /watch/ and /proxy/ prefixes are not served.
		return nil, notFoundType(gv.WithResource(ri.Verb))
	}
	parts := ri.Parts
	rest := strings.Join(parts, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, rest)
		}
	}
	info := &requestInfo{}
	if ri.InNamespace {
		info.namespace = ri.Namespace
	}
	if ri.WireGroup != "" {
		info.wire = schema.GroupVersion{Group: ri.WireGroup, Version: ri.APIVersion}
	}
	gvr := gv.WithResource(parts[0])
	res, ok := a.reg.Resource(gvr)
	if !ok {
		return nil, notFoundType(gvr)
	}
	info.res = res
	if len(parts) > 1 {
		info.name = parts[1]
	}
	if len(parts) > 2 {
		info.subresource = parts[2]
	}
	if len(parts) > 3 {
		return nil, apierrors.NewNotFound(res.GroupResource(), rest)
	}
	if info.subresource != "" && !res.HasSubresource(info.subresource) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: res.Group, Resource: res.Resource + "/" + info.subresource}, info.name)
	}
	if info.namespace != "" && !res.Namespaced {
		return nil, apierrors.NewNotFound(res.GroupResource(), rest)
	}
	verb, err := verbFor(r, info)
	if err != nil {
		return nil, err
	}
	info.verb = verb
	if info.subresource == "" && !slices.Contains(res.Verbs, verb) {
		// A verb the resource does not take (virtual kinds are created only, computed ones read,
		// namespaces not deleted by collection).
		return nil, apierrors.NewMethodNotSupported(res.GroupResource(), verb)
	}
	return info, nil
}

// verbFor maps the HTTP method and the address to the API verb, as the spec's verb table does.
func verbFor(r *http.Request, info *requestInfo) (string, error) {
	item := info.name != ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if request.IsWatch(r) {
			if info.subresource != "" {
				return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), "watch")
			}
			return "watch", nil
		}
		if item {
			return "get", nil
		}
		return "list", nil
	case http.MethodPost:
		if item && info.subresource == "token" {
			return "create", nil
		}
		if item && !info.res.Virtual {
			return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), "create on an item")
		}
		return "create", nil
	case http.MethodPut:
		if !item {
			return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), "update of a collection")
		}
		return "update", nil
	case http.MethodPatch:
		if !item {
			return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), "patch of a collection")
		}
		return "patch", nil
	case http.MethodDelete:
		if info.subresource != "" {
			return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), "delete of a subresource")
		}
		if item {
			return "delete", nil
		}
		return "deletecollection", nil
	}
	return "", apierrors.NewMethodNotSupported(info.res.GroupResource(), r.Method)
}

// notFoundType is the 404 for a URL naming a resource type that is not served.
func notFoundType(gvr schema.GroupVersionResource) error {
	err := apierrors.NewNotFound(schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, "")
	err.ErrStatus.Message = "the server could not find the requested resource"
	return err
}

type requestInfoKey struct{}

// requestInfoFrom returns the request's address and verb, if the handler set them.
func requestInfoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

func withRequestInfo(ctx context.Context, info *requestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}
