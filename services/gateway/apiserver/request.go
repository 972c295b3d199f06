package apiserver

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/registry"
)

// requestInfo is what a resource request addresses and which verb it is.
type requestInfo struct {
	res         *registry.Resource
	namespace   string
	name        string
	subresource string
	verb        string
}

// namespaceSubresources are the subresources of namespaces; a path namespaces/<ns>/<x> names a
// namespace subresource when x is one of them and a collection in the namespace otherwise.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseResourcePath reads the part of a resource URL after /api/v1 or /apis/<group>/<version>:
// [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
func (a *API) parseResourcePath(r *http.Request, gv schema.GroupVersion, rest string) (*requestInfo, error) {
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, rest)
		}
	}
	info := &requestInfo{}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources[parts[2]] {
		info.namespace = parts[1]
		parts = parts[2:]
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
	if info.subresource != "" && !res.HasSubresource(info.subresource) && !(res.Resource == "namespaces" && res.Group == "" && info.subresource == "finalize") {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: res.Group, Resource: res.Resource + "/" + info.subresource}, info.name)
	}
	if info.namespace != "" && !res.Namespaced {
		return nil, apierrors.NewNotFound(res.GroupResource(), rest)
	}
	if res.Resource == "namespaces" && res.Group == "" && info.name != "" {
		// A namespace's own name is not its namespace.
		info.namespace = ""
	}
	verb, err := verbFor(r, info)
	if err != nil {
		return nil, err
	}
	info.verb = verb
	if !res.Virtual || verb == "create" {
		return info, nil
	}
	return nil, apierrors.NewMethodNotSupported(res.GroupResource(), verb)
}

// verbFor maps the HTTP method and the address to the API verb, as the spec's verb table does.
func verbFor(r *http.Request, info *requestInfo) (string, error) {
	item := info.name != ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if isWatch(r) {
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

// isWatch reads ?watch=1|true.
func isWatch(r *http.Request) bool {
	v := r.URL.Query().Get("watch")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// notFoundType is the 404 for a URL naming a resource type that is not served.
func notFoundType(gvr schema.GroupVersionResource) error {
	err := apierrors.NewNotFound(schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, "")
	err.ErrStatus.Message = "the server could not find the requested resource"
	return err
}

type requestInfoKey struct{}

func withRequestInfo(ctx context.Context, info *requestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}
