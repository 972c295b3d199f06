// Package openapi serves OpenAPI v3 documents of the resource API, as upstream's /openapi/v3:
// a discovery root naming one document per group version, and the documents themselves, with
// paths and operations derived from the registry and component schemas derived from the Go types
// by reflection, or for custom resources from their definitions' schemas (custom.go). kubectl
// reads them to learn that the server validates fields (the fieldValidation parameter of each
// kind's PATCH operation) and to explain resources.
package openapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"platform.io/services/gateway/registry"
)

// Prefix is the URL path of the discovery root; group version documents are below it.
const Prefix = "/openapi/v3"

// document is one encoded document with its hash (hex SHA-256 of the bytes, upper case).
type document struct {
	data []byte
	hash string
}

func newDocument(v any) (*document, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &document{data: data, hash: fmt.Sprintf("%X", sha256.Sum256(data))}, nil
}

// Handler serves /openapi/v3 and the group version documents below it. The documents of the
// built-in group versions are built by New; those of custom resource group versions are built
// when they are first asked for after the registry changed (see custom.go).
type Handler struct {
	reg *registry.Registry
	// b holds the component schemas of the Go types; read-only once New returns.
	b *schemaBuilder
	// metaNames are the meta kinds every document's operations refer to.
	metaNames []string
	// builtin are the built-in documents, keyed by the path below /openapi/v3/: "api/v1",
	// "apis/apps/v1".
	builtin map[string]*document

	// mu guards the custom documents and the current snapshot.
	mu sync.Mutex
	// generation is the registry generation snapshot was built for.
	generation uint64
	custom     map[string]*customDocument
	snapshot   *snapshot

	// OpenAPI v2 (v2.go), under mu: the built-in part, built on the first v2 request; each custom
	// group version's part and the merged document, rebuilt when the registry or the aggregated
	// documents change.
	aggregatedV2 AggregatedV2
	v2Service    *handler.OpenAPIService
	v2Builtin    *spec.Swagger
	v2Custom     map[string]*v2Part
	v2Merged     *spec.Swagger
	v2Etag       string
}

// plan is what the documents of one built-in group version are made of.
type plan struct {
	key   string
	gv    schema.GroupVersion
	paths *pathsBuilder
	roots []string
}

// snapshot is what is served at one registry generation: the root and every document.
type snapshot struct {
	root *document
	docs map[string]*document
	// failed are the custom group versions whose document could not be built.
	failed map[string]error
}

// discoveryRoot is the body of /openapi/v3 (upstream's handler3.OpenAPIV3Discovery).
type discoveryRoot struct {
	Paths map[string]discoveryEntry `json:"paths"`
}

type discoveryEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// New builds the OpenAPI v3 document of every built-in group version the registry serves. The
// documents of custom resource group versions follow the registry as it changes.
func New(reg *registry.Registry) (*Handler, error) {
	b := newSchemaBuilder(reg.Scheme)
	var metaNames []string
	for _, t := range metaRoots {
		name, err := b.ref(t)
		if err != nil {
			return nil, err
		}
		metaNames = append(metaNames, name)
	}
	// The components custom resource documents refer to, whether or not a built-in one does.
	for _, t := range customRoots {
		if _, err := b.ref(t); err != nil {
			return nil, err
		}
	}
	plans, err := builtinPlans(reg, b, metaNames)
	if err != nil {
		return nil, err
	}
	if err := b.encode(); err != nil {
		return nil, err
	}
	h := &Handler{reg: reg, b: b, metaNames: metaNames, builtin: map[string]*document{}}
	for _, p := range plans {
		doc, err := newDocument(obj{
			"openapi": "3.0.0",
			"info":    obj{"title": "Platform", "version": p.gv.String()},
			"paths":   p.paths.paths,
			"components": obj{
				"schemas": b.closure(p.roots),
			},
		})
		if err != nil {
			return nil, fmt.Errorf("openapi: encoding %s: %w", p.gv, err)
		}
		h.builtin[p.key] = doc
	}
	if _, err := h.current(); err != nil {
		return nil, err
	}
	return h, nil
}

// builtinPlans derives the paths of every built-in group version and the components each
// document needs. The first call (New) builds the components; later ones (the v2 document,
// built when first asked for) only look them up.
func builtinPlans(reg *registry.Registry, b *schemaBuilder, metaNames []string) ([]plan, error) {
	known := reg.Scheme.AllKnownTypes()
	var plans []plan
	for _, g := range reg.Groups() {
		if !reg.BuiltinGroup(g.Name) {
			continue
		}
		for _, gv := range g.Versions {
			pb := newPathsBuilder(gv)
			pb.addDiscovery()
			roots := append([]string(nil), metaNames...)
			for _, res := range gv.Resources {
				kind, err := b.ref(reflect.TypeOf(res.New()))
				if err != nil {
					return nil, err
				}
				roots = append(roots, kind)
				list := ""
				if t, ok := known[gv.WithKind(res.ListKind)]; ok {
					if list, err = b.ref(t); err != nil {
						return nil, err
					}
					roots = append(roots, list)
				}
				if res.HasSubresource("scale") {
					if pb.scaleKind, err = b.ref(reflect.TypeOf(&autoscalingv1.Scale{})); err != nil {
						return nil, err
					}
					roots = append(roots, pb.scaleKind)
				}
				if res.HasSubresource("token") {
					if pb.tokenKind, err = b.ref(reflect.TypeOf(&authenticationv1.TokenRequest{})); err != nil {
						return nil, err
					}
					roots = append(roots, pb.tokenKind)
				}
				pb.addResource(res, kind, list)
			}
			plans = append(plans, plan{key: strings.TrimPrefix(pb.prefix, "/"), gv: gv.GroupVersion, paths: pb, roots: roots})
		}
	}
	return plans, nil
}

// Install registers GET and HEAD of /openapi/v3 and of the documents below it, and of
// /openapi/v2, on r (the handler chain authenticates and authorizes them as non-resource paths).
func (h *Handler) Install(r *mux.Router) {
	r.HandleFunc(Prefix, h.serveRoot).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(Prefix+"/{path:.+}", h.serveGroupVersion).Methods(http.MethodGet, http.MethodHead)
	h.installV2(r)
}

// Size returns the total size in bytes of the encoded documents, the root included.
func (h *Handler) Size() int {
	snap, err := h.current()
	if err != nil {
		return 0
	}
	n := len(snap.root.data)
	for _, d := range snap.docs {
		n += len(d.data)
	}
	return n
}

func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request) {
	if !acceptsJSON(r) {
		writeStatus(w, notAcceptable)
		return
	}
	snap, err := h.current()
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	serve(w, r, snap.root)
}

func (h *Handler) serveGroupVersion(w http.ResponseWriter, r *http.Request) {
	key := mux.Vars(r)["path"]
	if key == "" {
		key = strings.TrimPrefix(r.URL.Path, Prefix+"/")
	}
	if unescaped, err := url.PathUnescape(key); err == nil {
		key = unescaped
	}
	snap, err := h.current()
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	doc, ok := snap.docs[key]
	if !ok {
		if err := snap.failed[key]; err != nil {
			writeStatus(w, apierrors.NewInternalError(err).Status())
			return
		}
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, "").Status())
		return
	}
	if !acceptsJSON(r) {
		writeStatus(w, notAcceptable)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != doc.hash {
			// A stale link: send the client to the current document, as upstream does.
			u := *r.URL
			u.RawQuery = url.Values{"hash": {doc.hash}}.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
			return
		}
		// The hash names these exact bytes, so caches may keep them for good.
		w.Header().Set("Vary", "Accept")
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	serve(w, r, doc)
}

// serve writes a document with its ETag; ServeContent answers HEAD and If-None-Match.
func serve(w http.ResponseWriter, r *http.Request, doc *document) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", `"`+doc.hash+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(doc.data))
}

// acceptsJSON tells whether the request's Accept header admits application/json (no header does).
func acceptsJSON(r *http.Request) bool {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return true
	}
	for _, v := range accept {
		for _, rng := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(rng, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*", "*/*", "":
				return true
			}
		}
	}
	return false
}

// notAcceptable answers requests that do not accept JSON, the only encoding served.
var notAcceptable = metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
	Message: "only application/json is served",
}

// writeStatus answers with a Status object, as the rest of the API does for errors.
func writeStatus(w http.ResponseWriter, s metav1.Status) {
	s.Kind, s.APIVersion = "Status", "v1"
	data, _ := json.Marshal(s)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(s.Code))
	_, _ = w.Write(data)
}
