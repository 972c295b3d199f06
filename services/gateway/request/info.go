// Package request reads what an HTTP request asks of the API before anything else runs:
// upstream's request info. The handler chain resolves it once per request (the first filter after
// panic recovery) and every later step reads the same Info from the context: authentication's
// audit record, authorization, the in-flight limits, the timeout, metrics and the resource
// handlers. So what is authorized is exactly what is served.
package request

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/auth"
)

// Info is what a request addresses and which verb it is, as upstream's RequestInfo.
type Info struct {
	// IsResourceRequest tells a request for a resource (below /api/<version>/ or
	// /apis/<group>/<version>/) from one for any other path (discovery, health, metrics, ...).
	IsResourceRequest bool
	// Path is the request's URL path.
	Path string
	// Verb is the API verb: get, list, watch, create, update, patch, delete, deletecollection
	// (and proxy for the legacy /proxy/ prefix) for resource requests; the lower-cased HTTP method
	// (HEAD read as get) for other paths.
	Verb string
	// APIPrefix is "api" or "apis" for resource requests.
	APIPrefix string
	// APIGroup and APIVersion are the group version the request is served under: for a client
	// that named upstream's name of a group Platform renames, Platform's name (WireGroup keeps
	// the client's).
	APIGroup, APIVersion string
	// WireGroup is the group as the client spelled it when that differs from APIGroup.
	WireGroup string
	// Namespace, Resource, Subresource and Name are the address within the group version.
	// Namespace is the namespace's own name for namespaces/<name> (as upstream: a namespaced
	// grant on namespaces covers that namespace); Name comes from a fieldSelector on
	// metadata.name for lists and watches that name no object in the path.
	Namespace, Resource, Subresource, Name string
	// InNamespace tells that the path addressed something in Namespace (namespaces/<ns>/<resource>
	// ...), not the namespace itself (namespaces/<name>, whose Namespace is its own name).
	InNamespace bool
	// Parts are the path segments after the group version (and after namespaces/<ns> when that
	// prefixes a namespaced resource): resource[/name[/subresource[/...]]].
	Parts []string
	// ByPrefixVerb is set when the verb came from a legacy /watch/ or /proxy/ path prefix.
	ByPrefixVerb bool
}

// Attributes are the authorization attributes of the request for user u.
func (i *Info) Attributes(u *auth.User) auth.Attributes {
	if !i.IsResourceRequest {
		return auth.Attributes{User: u, Verb: i.Verb, Path: i.Path}
	}
	return auth.Attributes{User: u, Verb: i.Verb, ResourceRequest: true, APIGroup: i.APIGroup, APIVersion: i.APIVersion,
		Resource: i.Resource, Subresource: i.Subresource, Namespace: i.Namespace, Name: i.Name, Path: i.Path}
}

// LongRunning tells requests that are not bounded by the request timeout nor counted by the
// in-flight limits: watches and connection upgrades (exec, attach, port-forward through an
// extension API server).
func (i *Info) LongRunning(r *http.Request) bool {
	return i.Verb == "watch" || r.Header.Get("Upgrade") != ""
}

// Resolver builds the Info of requests.
type Resolver struct {
	// Served maps the group version a client named to the one it is served under (upstream's
	// name of a group Platform renames to Platform's); nil leaves every group as named.
	Served func(schema.GroupVersion) schema.GroupVersion
}

// namespaceSubresources are the subresources of namespaces: namespaces/<ns>/<x> names a
// subresource of the namespace when x is one of them, a collection in the namespace otherwise.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// NamespaceSubresource tells whether namespaces/<ns>/<x> names a subresource of the namespace.
func NamespaceSubresource(x string) bool { return namespaceSubresources[x] }

// Resolve reads r's Info, as upstream's RequestInfoFactory does (the path's shape alone, without
// asking what is served): /api/<v>/... and /apis/<g>/<v>/... with something after the version
// are resource requests, everything else is a non-resource request.
func (res *Resolver) Resolve(r *http.Request) *Info {
	info := &Info{Path: r.URL.Path, Verb: NonResourceVerb(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return info
	}
	prefix := parts[0]
	parts = parts[1:]
	var gv schema.GroupVersion
	if prefix == "apis" {
		if len(parts) < 3 {
			return info
		}
		gv.Group, parts = parts[0], parts[1:]
	}
	gv.Version, parts = parts[0], parts[1:]
	served := gv
	if res != nil && res.Served != nil {
		served = res.Served(gv)
	}
	info.IsResourceRequest = true
	info.APIPrefix = prefix
	info.APIGroup, info.APIVersion = served.Group, served.Version
	if served.Group != gv.Group {
		info.WireGroup = gv.Group
	}

	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			// Nothing addressed: the verb alone. The handlers answer 404.
			info.Verb = parts[0]
			info.ByPrefixVerb = true
			return info
		}
		info.Verb, info.ByPrefixVerb = parts[0], true
		parts = parts[1:]
	} else {
		info.Verb = methodVerb(r.Method)
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			info.Namespace = parts[1]
			if len(parts) > 2 && !namespaceSubresources[parts[2]] {
				parts = parts[2:]
				info.InNamespace = true
			}
		}
	}
	info.Parts = parts
	switch {
	case len(parts) >= 3 && info.Verb != "proxy":
		info.Subresource = parts[2]
		fallthrough
	case len(parts) >= 2:
		info.Name = parts[1]
		fallthrough
	case len(parts) >= 1:
		info.Resource = parts[0]
	}
	if info.ByPrefixVerb {
		return info
	}
	q := r.URL.Query()
	switch info.Verb {
	case "get":
		// Watching one object (?watch on an item) is a watch; a collection is listed or watched.
		switch {
		case watchParam(q.Get("watch")):
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		}
		if info.Name == "" {
			// A list or watch of one object by name is authorized for that name (so a grant
			// limited to resourceNames covers an informer of one object), as upstream.
			if fs := q.Get("fieldSelector"); fs != "" {
				if sel, err := fields.ParseSelector(fs); err == nil {
					if name, ok := sel.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
						info.Name = name
					}
				}
			}
		}
	case "delete":
		if info.Name == "" {
			info.Verb = "deletecollection"
		}
	}
	return info
}

// watchParam reads ?watch=1|true (any strconv.ParseBool truth).
func watchParam(v string) bool {
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// IsWatch tells whether a request asks for a watch with ?watch.
func IsWatch(r *http.Request) bool { return watchParam(r.URL.Query().Get("watch")) }

// methodVerb is the API verb of an HTTP method on a resource path, before the address decides
// between get, list and watch, or delete and deletecollection.
func methodVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// NonResourceVerb is the authorization verb of a request for a non-resource URL: the lower-cased
// HTTP method, HEAD authorized as get (upstream's request info).
func NonResourceVerb(method string) string {
	if method == http.MethodHead {
		return "get"
	}
	return strings.ToLower(method)
}

// splitPath splits a path on "/", without the empty parts of its leading and trailing slashes.
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

type infoKey struct{}

// WithInfo returns a context carrying the request's Info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the request's Info, if the chain resolved it.
func InfoFrom(ctx context.Context) (*Info, bool) {
	info, ok := ctx.Value(infoKey{}).(*Info)
	return info, ok
}
