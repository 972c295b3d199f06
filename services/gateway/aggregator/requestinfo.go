package aggregator

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/apiserver"
	"platform.io/services/gateway/auth"
)

// groupVersionOf returns the group version of /apis/<group>/<version> and the paths below it.
func groupVersionOf(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
}

// attributesOf reads a request for an aggregated group version as upstream's request info
// does, for authorization: /apis/<g>/<v> itself is a non-resource path; below it the
// (namespaced) resource, name and subresource, and the verb from the method (list and watch
// for collections, watch for ?watch=true and the legacy /watch/ prefix).
func attributesOf(r *http.Request, gv schema.GroupVersion) auth.Attributes {
	rest := strings.TrimPrefix(r.URL.Path, "/apis/"+gv.Group+"/"+gv.Version)
	rest = strings.Trim(rest, "/")
	if rest == "" {
		return auth.Attributes{Verb: apiserver.NonResourceVerb(r.Method), Path: r.URL.Path}
	}
	parts := strings.Split(rest, "/")
	attrs := auth.Attributes{ResourceRequest: true, APIGroup: gv.Group, APIVersion: gv.Version}
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix = true
		parts = parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		attrs.Namespace = parts[1]
		if len(parts) == 2 {
			// The namespace itself, as upstream reads /namespaces/<name>.
			parts = []string{"namespaces", parts[1]}
			attrs.Namespace = parts[1]
		} else {
			parts = parts[2:]
		}
	}
	if len(parts) > 0 {
		attrs.Resource = parts[0]
	}
	if len(parts) > 1 {
		attrs.Name = parts[1]
	}
	if len(parts) > 2 {
		attrs.Subresource = parts[2]
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watchPrefix || q.Get("watch") == "true" || q.Get("watch") == "1":
			attrs.Verb = "watch"
		case attrs.Name == "":
			attrs.Verb = "list"
		default:
			attrs.Verb = "get"
		}
	case http.MethodPost:
		attrs.Verb = "create"
	case http.MethodPut:
		attrs.Verb = "update"
	case http.MethodPatch:
		attrs.Verb = "patch"
	case http.MethodDelete:
		if attrs.Name == "" {
			attrs.Verb = "deletecollection"
		} else {
			attrs.Verb = "delete"
		}
	default:
		attrs.Verb = strings.ToLower(r.Method)
	}
	return attrs
}

// longRunning tells watches and connection upgrades (exec, port-forward) apart: they are not
// bounded by the request timeout.
func longRunning(r *http.Request, attrs auth.Attributes) bool {
	return attrs.Verb == "watch" || r.Header.Get("Upgrade") != ""
}
