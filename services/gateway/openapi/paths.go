package openapi

import (
	"reflect"
	"strings"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
)

// Media types of request and response bodies.
const (
	mediaJSON      = "application/json"
	mediaYAML      = "application/yaml"
	mediaJSONWatch = "application/json;stream=watch"
)

var mediaProtobufWatch = naming.ProtobufMediaType + ";stream=watch"

// objectMediaTypes are the representations of objects, for request and response bodies.
var objectMediaTypes = []string{mediaJSON, mediaYAML, naming.ProtobufMediaType}

// patchMediaTypes are the patch formats a PATCH body may use.
var patchMediaTypes = []string{
	"application/json-patch+json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
	"application/apply-patch+yaml",
}

// watchMediaTypes are the encodings of watch streams.
var watchMediaTypes = []string{mediaJSONWatch, mediaProtobufWatch}

// Custom resources have no Protobuf encoding and no strategic merge patch (they have no patch
// strategies), as upstream's.
var (
	customObjectMediaTypes = []string{mediaJSON, mediaYAML}
	customPatchMediaTypes  = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
	customWatchMediaTypes  = []string{mediaJSONWatch}
)

// resourceMediaTypes returns the object, patch and watch media types of a resource's operations.
func resourceMediaTypes(res *registry.Resource) (objects, patches, watches []string) {
	if res.Custom != nil {
		return customObjectMediaTypes, customPatchMediaTypes, customWatchMediaTypes
	}
	return objectMediaTypes, patchMediaTypes, watchMediaTypes
}

// Component names of the meta kinds the operations use.
var (
	deleteOptionsName   = componentName(reflect.TypeFor[metav1.DeleteOptions]())
	statusName          = componentName(reflect.TypeFor[metav1.Status]())
	watchEventName      = componentName(reflect.TypeFor[metav1.WatchEvent]())
	patchName           = componentName(reflect.TypeFor[metav1.Patch]())
	apiResourceListName = componentName(reflect.TypeFor[metav1.APIResourceList]())
	metaRoots           = []reflect.Type{
		reflect.TypeFor[metav1.DeleteOptions](), reflect.TypeFor[metav1.Status](), reflect.TypeFor[metav1.WatchEvent](),
		reflect.TypeFor[metav1.Patch](), reflect.TypeFor[metav1.APIResourceList](),
	}
)

// Parameters, shared (read-only) by every document.
var (
	paramName      = obj{"name": "name", "in": "path", "required": true, "schema": obj{"type": "string"}}
	paramNamespace = obj{"name": "namespace", "in": "path", "required": true, "schema": obj{"type": "string"}}
	paramPretty    = query("pretty", "string")

	writeParams = []any{query("dryRun", "string"), query("fieldManager", "string"), query("fieldValidation", "string")}
	patchParams = append(append([]any(nil), writeParams...), query("force", "boolean"))
	listParams  = []any{
		query("allowWatchBookmarks", "boolean"), query("continue", "string"), query("fieldSelector", "string"),
		query("labelSelector", "string"), query("limit", "integer"), query("resourceVersion", "string"),
		query("resourceVersionMatch", "string"), query("sendInitialEvents", "boolean"),
		query("timeoutSeconds", "integer"), query("watch", "boolean"),
	}
	deleteParams = []any{
		query("dryRun", "string"), query("gracePeriodSeconds", "integer"),
		query("orphanDependents", "boolean"), query("propagationPolicy", "string"),
	}
	deleteCollectionParams = append(append([]any(nil), deleteParams...),
		query("continue", "string"), query("fieldSelector", "string"), query("labelSelector", "string"),
		query("limit", "integer"), query("resourceVersion", "string"), query("resourceVersionMatch", "string"),
		query("sendInitialEvents", "boolean"), query("timeoutSeconds", "integer"))
)

func query(name, typ string) obj {
	return obj{"name": name, "in": "query", "schema": obj{"type": typ}}
}

// body is a request body or response content: the same schema in each media type.
func body(component string, mediaTypes ...string) obj {
	c := obj{}
	for _, m := range mediaTypes {
		c[m] = obj{"schema": obj{"$ref": refPrefix + component}}
	}
	return c
}

func response(description, component string, mediaTypes ...string) obj {
	return obj{"description": description, "content": body(component, mediaTypes...)}
}

var unauthorized = obj{"description": "Unauthorized"}

// pathsBuilder collects the paths of one group version.
type pathsBuilder struct {
	gv     *registry.GroupVersion
	prefix string // /api/v1 or /apis/<group>/<version>
	ident  string // CoreV1, AppsV1, RbacAuthorizationV1: the operationId infix
	tag    string // core_v1, apps_v1, rbacAuthorization_v1
	paths  obj
	// scaleKind is the schema name of autoscaling/v1 Scale, for scale subresources; tokenKind
	// that of TokenRequest, for the token subresource of service accounts.
	scaleKind, tokenKind string
}

// camel joins the dot- and dash-separated words of s, each capitalized.
func camel(s string) string {
	var sb strings.Builder
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' }) {
		r := []rune(w)
		r[0] = unicode.ToUpper(r[0])
		sb.WriteString(string(r))
	}
	return sb.String()
}

func newPathsBuilder(gv *registry.GroupVersion) *pathsBuilder {
	group := strings.TrimSuffix(gv.Group, "."+naming.GroupSuffix)
	prefix := groupVersionPrefix(gv.GroupVersion)
	if gv.Group == "" {
		group = "core"
	}
	ident := camel(group) + camel(gv.Version)
	tagGroup := []rune(camel(group))
	tagGroup[0] = unicode.ToLower(tagGroup[0])
	return &pathsBuilder{
		gv: gv, prefix: prefix, ident: ident,
		tag:   string(tagGroup) + "_" + gv.Version,
		paths: obj{},
	}
}

// pathItem returns the path item for p, creating it with its path-level parameters.
func (pb *pathsBuilder) pathItem(p string, params ...any) obj {
	if item, ok := pb.paths[p].(obj); ok {
		return item
	}
	item := obj{"parameters": append(append([]any(nil), params...), paramPretty)}
	pb.paths[p] = item
	return item
}

// operation builds one operation of a resource.
func (pb *pathsBuilder) operation(id, action string, res *registry.Resource, params []any) obj {
	op := obj{
		"operationId": id,
		"tags":        []string{pb.tag},
		extAction:     action,
		extGVK:        gvkObject(res.GroupVersionKind()),
		"responses":   obj{"401": unauthorized},
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	return op
}

// respond adds a response to an operation.
func respond(op obj, code string, r obj) obj {
	op["responses"].(obj)[code] = r
	return op
}

// addDiscovery adds the group version's resource list (GET <prefix>/).
func (pb *pathsBuilder) addDiscovery() {
	pb.paths[pb.prefix+"/"] = obj{"get": obj{
		"operationId": "get" + pb.ident + "APIResources",
		"tags":        []string{pb.tag},
		"responses": obj{
			"200": response("OK", apiResourceListName, objectMediaTypes...),
			"401": unauthorized,
		},
	}}
}

// addResource adds the paths and operations of one resource, by its verbs.
// kind and list are the component names of the resource's kind and list kind.
func (pb *pathsBuilder) addResource(res *registry.Resource, kind, list string) {
	verbs := map[string]bool{}
	for _, v := range res.Verbs {
		verbs[v] = true
	}
	ns, collection, scopeParams := "", pb.prefix+"/"+res.Resource, []any{}
	if res.Namespaced {
		ns = "Namespaced"
		collection = pb.prefix + "/namespaces/{namespace}/" + res.Resource
		scopeParams = []any{paramNamespace}
	}
	item := collection + "/{name}"
	objectTypes, _, _ := resourceMediaTypes(res)
	id := func(verb, extra string) string { return verb + pb.ident + extra + ns + res.Kind }
	objectResponse := func(op obj, codes ...string) obj {
		for _, c := range codes {
			respond(op, c, response(statusText[c], kind, objectTypes...))
		}
		return op
	}

	if verbs["list"] || verbs["create"] || verbs["deletecollection"] {
		p := pb.pathItem(collection, scopeParams...)
		if verbs["list"] {
			p["get"] = pb.listOperation(id("list", ""), res, list)
		}
		if verbs["create"] {
			op := objectResponse(pb.operation(id("create", ""), "post", res, writeParams), "200", "201", "202")
			op["requestBody"] = obj{"required": true, "content": body(kind, objectTypes...)}
			p["post"] = op
		}
		if verbs["deletecollection"] {
			op := pb.operation(id("delete", "Collection"), "deletecollection", res, deleteCollectionParams)
			respond(op, "200", response("OK", statusName, objectTypes...))
			op["requestBody"] = obj{"content": body(deleteOptionsName, objectTypes...)}
			p["delete"] = op
		}
	}
	if res.Namespaced && verbs["list"] {
		p := pb.pathItem(pb.prefix + "/" + res.Resource)
		p["get"] = pb.listOperation("list"+pb.ident+res.Kind+"ForAllNamespaces", res, list)
	}
	itemParams := append([]any{paramName}, scopeParams...)
	if verbs["get"] || verbs["update"] || verbs["patch"] || verbs["delete"] {
		p := pb.pathItem(item, itemParams...)
		pb.itemOperations(p, res, kind, verbs, id, "", objectResponse)
		if verbs["delete"] {
			op := pb.operation(id("delete", ""), "delete", res, deleteParams)
			respond(op, "200", response("OK", statusName, objectTypes...))
			respond(op, "202", response("Accepted", kind, objectTypes...))
			op["requestBody"] = obj{"content": body(deleteOptionsName, objectTypes...)}
			p["delete"] = op
		}
	}
	for _, sub := range res.Subresources {
		p := pb.pathItem(item+"/"+sub, itemParams...)
		if sub == "token" {
			// A TokenRequest is posted and answered; nothing else is served there.
			op := pb.operation(id("create", "Token"), "post", res, writeParams)
			for _, c := range []string{"200", "201", "202"} {
				respond(op, c, response(statusText[c], pb.tokenKind, objectTypes...))
			}
			op["requestBody"] = obj{"required": true, "content": body(pb.tokenKind, objectTypes...)}
			op[extGVK] = gvkObject(registry.TokenRequestGroupVersionKind)
			p["post"] = op
			continue
		}
		if sub == "finalize" {
			// A namespace's finalize is replaced, never read or patched (upstream's operations).
			pb.itemOperations(p, res, kind, map[string]bool{"update": verbs["update"]}, id, camel(sub), objectResponse)
			continue
		}
		if sub != "scale" {
			pb.itemOperations(p, res, kind, verbs, id, camel(sub), objectResponse)
			continue
		}
		// The scale subresource speaks autoscaling/v1 Scale.
		scaleResponse := func(op obj, codes ...string) obj {
			for _, c := range codes {
				respond(op, c, response(statusText[c], pb.scaleKind, objectTypes...))
			}
			op[extGVK] = gvkObject(registry.ScaleGroupVersionKind)
			return op
		}
		pb.itemOperations(p, res, pb.scaleKind, verbs, id, camel(sub), scaleResponse)
	}
}

// itemOperations adds read, replace and patch of one object (or of its subresource).
func (pb *pathsBuilder) itemOperations(p obj, res *registry.Resource, kind string, verbs map[string]bool,
	id func(verb, extra string) string, sub string, objectResponse func(obj, ...string) obj) {
	objectTypes, patchTypes, _ := resourceMediaTypes(res)
	if verbs["get"] {
		p["get"] = objectResponse(pb.operation(id("read", "")+sub, "get", res, nil), "200")
	}
	if verbs["update"] {
		op := objectResponse(pb.operation(id("replace", "")+sub, "put", res, writeParams), "200", "201")
		op["requestBody"] = obj{"required": true, "content": body(kind, objectTypes...)}
		p["put"] = op
	}
	if verbs["patch"] {
		op := objectResponse(pb.operation(id("patch", "")+sub, "patch", res, patchParams), "200", "201")
		op["requestBody"] = obj{"required": true, "content": body(patchName, patchTypes...)}
		p["patch"] = op
	}
}

// listOperation is GET of a collection: a list, or a watch with ?watch=true.
func (pb *pathsBuilder) listOperation(id string, res *registry.Resource, list string) obj {
	op := pb.operation(id, "list", res, listParams)
	objectTypes, _, watchTypes := resourceMediaTypes(res)
	r := response("OK", list, objectTypes...)
	content := r["content"].(obj)
	for m, v := range body(watchEventName, watchTypes...) {
		content[m] = v
	}
	return respond(op, "200", r)
}

var statusText = map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}
