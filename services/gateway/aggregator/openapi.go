package aggregator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// openAPIPrefix is the OpenAPI v3 discovery root; group version documents are below it.
const openAPIPrefix = "/openapi/v3"

// The OpenAPI v3 documents of remote group versions are their extension servers': the root
// lists them beside the gateway's own (kubectl's field validation and explain find them there)
// and a document's URL is proxied to the extension server, after the gateway's access control.

// openAPIGroupVersion returns the group version of /openapi/v3/apis/<group>/<version>.
func openAPIGroupVersion(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, openAPIPrefix+"/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
}

// serveOpenAPI handles the OpenAPI root and remote group versions' documents; false leaves the
// request to the gateway's own handler.
func (ag *Aggregator) serveOpenAPI(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	if r.Method != http.MethodGet {
		return false
	}
	snap := ag.current()
	if len(snap.remote) == 0 {
		return false
	}
	if r.URL.Path == openAPIPrefix || r.URL.Path == openAPIPrefix+"/" {
		ag.serveOpenAPIRoot(w, r, next, snap)
		return true
	}
	gv, ok := openAPIGroupVersion(r.URL.Path)
	if !ok {
		return false
	}
	rem := snap.remote[gv]
	if rem == nil {
		return false
	}
	if rem.buildErr != nil || !rem.svc.Load().IsAvailable() {
		ag.cfg.API.WriteError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	rem.proxy.ServeHTTP(w, r)
	return true
}

// bufferedResponse keeps what the gateway's own handler answers.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

// serveOpenAPIRoot answers the gateway's root with the available remote group versions added.
// Its ETag would not cover them, so the merged root has none (and conditional requests are
// answered in full).
func (ag *Aggregator) serveOpenAPIRoot(w http.ResponseWriter, r *http.Request, next http.Handler, snap *snapshot) {
	inner := r.Clone(r.Context())
	inner.Header.Del("If-None-Match")
	inner.Header.Del("If-Modified-Since")
	buf := &bufferedResponse{header: http.Header{}}
	next.ServeHTTP(buf, inner)
	var root map[string]json.RawMessage
	var paths map[string]json.RawMessage
	merged := buf.code == http.StatusOK && json.Unmarshal(buf.body.Bytes(), &root) == nil && json.Unmarshal(root["paths"], &paths) == nil
	if merged {
		var gvs []schema.GroupVersion
		for gv, rem := range snap.remote {
			if rem.buildErr == nil && rem.svc.Load().IsAvailable() {
				gvs = append(gvs, gv)
			}
		}
		sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
		for _, gv := range gvs {
			key := "apis/" + gv.Group + "/" + gv.Version
			entry, _ := json.Marshal(map[string]string{"serverRelativeURL": openAPIPrefix + "/" + key})
			paths[key] = entry
		}
		root["paths"], _ = json.Marshal(paths)
		body, err := json.Marshal(root)
		if err != nil {
			merged = false
		} else {
			buf.body.Reset()
			buf.body.Write(body)
			buf.header.Del("ETag")
			buf.header.Del("Content-Length")
			buf.header.Set("Content-Type", "application/json")
		}
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	if buf.code == 0 {
		buf.code = http.StatusOK
	}
	w.WriteHeader(buf.code)
	_, _ = w.Write(buf.body.Bytes())
}
