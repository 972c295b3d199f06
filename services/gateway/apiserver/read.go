package apiserver

import (
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/listcache"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// readOptions are the negotiation options for reads of objects and collections.
var readOptions = negotiation.Options{Protobuf: true, Table: true, YAML: true, Metadata: true}

// get serves GET on an item (and on its status subresource, which reads the whole object).
func (a *API) get(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.res.Computed {
		a.serveComputed(w, r, info)
		return
	}
	out, err := negotiation.Negotiate(r, readOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	resp, err := a.store.Get(r.Context(), &storagev1.GetRequest{
		Type: generic.StorageType(info.res), Namespace: info.namespace, Name: info.name, ResourceVersion: q.Get("resourceVersion"),
	})
	if err != nil {
		a.writeError(w, r, generic.FromStorage(err, info.res.GroupResource(), info.name))
		return
	}
	if out.Format == negotiation.FormatJSON && !out.Pretty && !out.IsMetadata() && info.wire.Empty() {
		body, err := a.jsonCache.StoredJSON(info.res, resp.Object)
		if err != nil {
			a.writeError(w, r, apierrors.NewInternalError(err))
			return
		}
		writeBody(w, r, http.StatusOK, out.MediaType, body)
		return
	}
	obj, err := a.gen.Decode(info.res, resp.Object)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	a.writeObject(w, r, http.StatusOK, info.res, obj, out)
}

// listParams are the query parameters of list, watch and deletecollection.
type listParams struct {
	labelSelector, fieldSelector string
	resourceVersion              string
	match                        storagev1.ResourceVersionMatch
	limit                        int64
	continueToken                string
}

// parseListParams reads and checks the list parameters; selectors that do not parse or name
// fields the kind cannot select by are 400s.
func parseListParams(r *http.Request, res *registry.Resource) (listParams, error) {
	q := r.URL.Query()
	p := listParams{
		labelSelector:   q.Get("labelSelector"),
		fieldSelector:   q.Get("fieldSelector"),
		resourceVersion: q.Get("resourceVersion"),
		continueToken:   q.Get("continue"),
	}
	if p.labelSelector != "" {
		if _, err := labels.Parse(p.labelSelector); err != nil {
			return p, apierrors.NewBadRequest("unable to parse requirement: " + err.Error())
		}
	}
	if p.fieldSelector != "" {
		sel, err := fields.ParseSelector(p.fieldSelector)
		if err != nil {
			return p, apierrors.NewBadRequest(err.Error())
		}
		for _, req := range sel.Requirements() {
			if !res.FieldSelectable(req.Field) {
				return p, apierrors.NewBadRequest("field label not supported: " + req.Field)
			}
		}
	}
	switch m := q.Get("resourceVersionMatch"); m {
	case "":
	case string(metav1.ResourceVersionMatchExact):
		p.match = storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT
	case string(metav1.ResourceVersionMatchNotOlderThan):
		p.match = storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_NOT_OLDER_THAN
	default:
		return p, apierrors.NewBadRequest("resourceVersionMatch must be Exact or NotOlderThan, not " + strconv.Quote(m))
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return p, apierrors.NewBadRequest("limit must be a non-negative integer, not " + strconv.Quote(s))
		}
		p.limit = n
	}
	return p, nil
}

// list serves GET on a collection: one namespace's, or across all namespaces.
func (a *API) list(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.res.Computed {
		a.serveComputed(w, r, info)
		return
	}
	out, err := negotiation.Negotiate(r, readOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	p, err := parseListParams(r, info.res)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	resp, lm, encs, err := a.listStored(r, info, p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out.Format == negotiation.FormatJSON && !out.Pretty && !out.IsMetadata() && info.wire.Empty() {
		// The common case: items' encodings kept by the list cache, or from the JSON cache; no
		// typed list built.
		encoded := make([][]byte, len(resp.Items))
		for i, o := range resp.Items {
			var enc *listcache.ItemEncoding
			if encs != nil {
				enc = encs[i]
			}
			if encoded[i] = enc.Get(info.res); encoded[i] != nil {
				continue
			}
			if encoded[i], err = a.jsonCache.StoredJSON(info.res, o); err != nil {
				a.writeError(w, r, apierrors.NewInternalError(err))
				return
			}
			enc.Set(info.res, encoded[i])
		}
		a.writeJSONList(w, r, out.MediaType, info.res.ListKind, info.res.GroupVersion(), encoded, lm)
		return
	}
	items, err := a.decodeItems(info.res, resp.Items)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeList(w, r, info.res, items, lm, out)
}

// listStored reads one page (or all) of a collection from the list cache or storage, with its
// list metadata, and (from the list cache) each item's encoding holder.
func (a *API) listStored(r *http.Request, info *requestInfo, p listParams) (*storagev1.ListResponse, metav1.ListMeta, []*listcache.ItemEncoding, error) {
	cp := listcache.Params{LabelSelector: p.labelSelector, FieldSelector: p.fieldSelector, ResourceVersion: p.resourceVersion,
		Match: p.match, Limit: p.limit, Continue: p.continueToken}
	if !a.cfg.DisableWatchHub && listcache.Serves(cp) {
		if resp, encs, err := a.listCaches.For(info.res).List(r.Context(), info.namespace, cp); err == nil {
			return resp, metav1.ListMeta{ResourceVersion: strconv.FormatInt(resp.ResourceVersion, 10)}, encs, nil
		}
	}
	resp, err := a.store.List(r.Context(), &storagev1.ListRequest{
		Type: generic.StorageType(info.res), Namespace: info.namespace,
		LabelSelector: p.labelSelector, FieldSelector: p.fieldSelector,
		Limit: p.limit, Continue: p.continueToken,
		ResourceVersion: p.resourceVersion, ResourceVersionMatch: p.match,
	})
	if err != nil {
		return nil, metav1.ListMeta{}, nil, generic.FromStorage(err, info.res.GroupResource(), "")
	}
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(resp.ResourceVersion, 10), Continue: resp.Continue}
	if resp.RemainingItemCount != nil && p.labelSelector == "" && p.fieldSelector == "" {
		n := *resp.RemainingItemCount
		lm.RemainingItemCount = &n
	}
	return resp, lm, nil, nil
}

// decodeItems decodes stored objects.
func (a *API) decodeItems(res *registry.Resource, stored []*storagev1.Object) ([]runtime.Object, error) {
	items := make([]runtime.Object, 0, len(stored))
	for _, o := range stored {
		obj, err := a.gen.Decode(res, o)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		items = append(items, obj)
	}
	return items, nil
}

// listObjects reads one page (or all) of a collection from storage and decodes it.
func (a *API) listObjects(r *http.Request, info *requestInfo, p listParams) ([]runtime.Object, metav1.ListMeta, error) {
	resp, lm, _, err := a.listStored(r, info, p)
	if err != nil {
		return nil, lm, err
	}
	items, err := a.decodeItems(info.res, resp.Items)
	return items, lm, err
}
