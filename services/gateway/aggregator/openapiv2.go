package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/transport"
	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"platform.io/libs/naming"
	"platform.io/services/gateway/auth"
)

// The OpenAPI v2 documents of remote APIServices, for the gateway's /openapi/v2 (which merges
// them, openapi.Handler.SetAggregatedV2), as upstream's kube-aggregator downloads them: from
// each available extension server's /openapi/v2 (JSON, as system:platform-aggregator in
// system:masters over the proxy's TLS, with If-None-Match), when the APIServices change and
// every minute; a document keeps only its group version's paths (and the definitions they
// use). A failed download keeps the last document; an APIService that goes away or is no
// longer available takes its document with it.

// openAPIV2Interval is how often the documents are downloaded again (upstream's one minute).
const openAPIV2Interval = time.Minute

// openAPIV2MaxBytes bounds a downloaded document.
const openAPIV2MaxBytes = 32 << 20

// openAPIV2Doc is one extension server's document.
type openAPIV2Doc struct {
	// key is the APIService's spec key it was downloaded for; etag the server's ETag.
	key, etag string
	spec      *spec.Swagger
}

// openAPIV2State holds the documents and a version bumped whenever they change.
type openAPIV2State struct {
	mu      sync.Mutex
	docs    map[string]*openAPIV2Doc
	version uint64
}

// OpenAPIV2 returns the extension servers' v2 documents by APIService name and their version
// (openapi.AggregatedV2).
func (ag *Aggregator) OpenAPIV2() (map[string]*spec.Swagger, string) {
	s := &ag.openAPIV2
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*spec.Swagger, len(s.docs))
	for name, d := range s.docs {
		out[name] = d.spec
	}
	return out, strconv.FormatUint(s.version, 10)
}

// runOpenAPIV2 keeps the documents current until ctx ends.
func (ag *Aggregator) runOpenAPIV2(ctx context.Context) {
	tick := time.NewTicker(openAPIV2Interval)
	defer tick.Stop()
	for {
		ag.syncOpenAPIV2(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ag.changedOpenAPI:
		case <-tick.C:
		}
	}
}

// syncOpenAPIV2 downloads the document of every available remote APIService and drops those
// of the others.
func (ag *Aggregator) syncOpenAPIV2(ctx context.Context) {
	snap := ag.current()
	s := &ag.openAPIV2
	s.mu.Lock()
	prev := s.docs
	s.mu.Unlock()
	next := map[string]*openAPIV2Doc{}
	changed := false
	for _, rem := range snap.remote {
		svc := rem.svc.Load()
		if svc == nil || !svc.IsAvailable() || rem.transport == nil {
			continue
		}
		old := prev[rem.name]
		if old != nil && old.key != rem.key {
			old = nil
		}
		doc, err := ag.downloadOpenAPIV2(ctx, rem, old)
		if err != nil {
			if old != nil {
				next[rem.name] = old
			}
			ag.log.Debug("downloading an extension server's OpenAPI v2 document", "apiservice", rem.name, "error", err)
			continue
		}
		if doc != nil {
			next[rem.name] = doc
			changed = changed || doc != old
		}
	}
	changed = changed || len(next) != len(prev)
	for name := range prev {
		if next[name] == nil {
			changed = true
		}
	}
	if !changed {
		return
	}
	s.mu.Lock()
	s.docs = next
	s.version++
	s.mu.Unlock()
}

// downloadOpenAPIV2 fetches one extension server's document; old (its last one) is returned as
// it is when the server answers 304. A server without /openapi/v2 (404) has no document.
func (ag *Aggregator) downloadOpenAPIV2(ctx context.Context, rem *remote, old *openAPIV2Doc) (*openAPIV2Doc, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+rem.host+"/openapi/v2", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if old != nil && old.etag != "" {
		req.Header.Set("If-None-Match", old.etag)
	}
	transport.SetAuthProxyHeaders(req, naming.AggregatorUser, "", []string{auth.GroupMasters}, nil)
	resp, err := rem.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && old != nil:
		return old, nil
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET /openapi/v2: %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, openAPIV2MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > openAPIV2MaxBytes {
		return nil, fmt.Errorf("GET /openapi/v2: more than %d bytes", openAPIV2MaxBytes)
	}
	sw := &spec.Swagger{}
	if err := json.Unmarshal(data, sw); err != nil {
		return nil, fmt.Errorf("GET /openapi/v2: %w", err)
	}
	gv := rem.svc.Load().GroupVersion()
	// Only the APIService's group version: what else the server describes is not routed to it.
	sw = aggregator.FilterSpecByPathsWithoutSideEffects(sw, []string{"/apis/" + gv.Group + "/" + gv.Version + "/"})
	return &openAPIV2Doc{key: rem.key, etag: resp.Header.Get("Etag"), spec: sw}, nil
}
