package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
)

// writeBody writes an encoded body with its content type.
func writeBody(w http.ResponseWriter, r *http.Request, code int, mediaType string, body []byte) {
	writeWarnings(w, r)
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// writeObject answers with one object in the negotiated representation.
func (a *API) writeObject(w http.ResponseWriter, r *http.Request, code int, res *registry.Resource, obj runtime.Object, out negotiation.Output) {
	requestInfoFrom(r.Context()).toWire(obj)
	switch {
	case out.Format == negotiation.FormatTable:
		table, err := a.table(res, []runtime.Object{obj}, out, r)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		obj = table
	case out.IsMetadata():
		pom, err := asMetadata(obj, out)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		obj = pom
	}
	body, err := a.enc.Encode(obj, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, code, out.MediaType, body)
}

// writeList answers with a collection: <Kind>List with its list metadata, a Table, or a
// PartialObjectMetadataList.
func (a *API) writeList(w http.ResponseWriter, r *http.Request, res *registry.Resource, items []runtime.Object, lm metav1.ListMeta, out negotiation.Output) {
	var body []byte
	var err error
	if out.IsMetadata() {
		// Before the JSON fast path below: its items are the whole objects.
		list, err := asMetadataList(res, items, lm, out)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if body, err = a.enc.Encode(list, out); err != nil {
			a.writeError(w, r, apierrors.NewInternalError(err))
			return
		}
		writeBody(w, r, http.StatusOK, out.MediaType, body)
		return
	}
	info := requestInfoFrom(r.Context())
	if info != nil && !info.wire.Empty() {
		for _, item := range items {
			info.toWire(item)
		}
	}
	listGV := info.outGVK(res.GroupVersion().WithKind(res.ListKind)).GroupVersion()
	switch out.Format {
	case negotiation.FormatTable:
		var table *metav1.Table
		table, err = a.table(res, items, out, r)
		if err == nil {
			table.ListMeta = lm
			body, err = a.enc.Encode(table, out)
		}
	case negotiation.FormatJSON:
		if !out.Pretty {
			encoded := make([][]byte, len(items))
			for i, item := range items {
				if encoded[i], err = json.Marshal(item); err != nil {
					break
				}
			}
			if err == nil {
				a.writeJSONList(w, r, out.MediaType, res.ListKind, listGV, encoded, lm)
				return
			}
			break
		}
		fallthrough
	default:
		var list runtime.Object
		list, err = a.typedList(res, items, lm)
		if err == nil {
			list.GetObjectKind().SetGroupVersionKind(listGV.WithKind(res.ListKind))
			body, err = a.enc.Encode(list, out)
		}
	}
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.MediaType, body)
}

// typedList builds the <Kind>List object of res holding items.
func (a *API) typedList(res *registry.Resource, items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	return res.Strategy().NewList(items, lm)
}

// appendJSONList appends a JSON list of its items' encodings to buf (grown once to the list's
// size), without building the typed list: the same document encoding/json would produce for it,
// with less copying for large collections.
func appendJSONList(buf []byte, listKind string, gv schema.GroupVersion, items [][]byte, lm metav1.ListMeta) ([]byte, error) {
	m, err := json.Marshal(&lm)
	if err != nil {
		return nil, err
	}
	kind, err := json.Marshal(listKind)
	if err != nil {
		return nil, err
	}
	apiVersion, err := json.Marshal(gv.String())
	if err != nil {
		return nil, err
	}
	size := len(kind) + len(apiVersion) + len(m) + 64
	for _, it := range items {
		size += len(it) + 1
	}
	buf = slices.Grow(buf, size)
	buf = append(buf, `{"kind":`...)
	buf = append(buf, kind...)
	buf = append(buf, `,"apiVersion":`...)
	buf = append(buf, apiVersion...)
	buf = append(buf, `,"metadata":`...)
	buf = append(buf, m...)
	buf = append(buf, `,"items":[`...)
	for i, item := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, item...)
	}
	return append(buf, "]}"...), nil
}

// listBuffers holds the buffers JSON lists are assembled in (*[]byte): a list of 2,000
// ConfigMaps is about 1.5 MB, otherwise allocated, zeroed and collected once per list. A
// ResponseWriter does not retain what it is given to Write (io.Writer), so a buffer is reused as
// soon as the body is written.
var listBuffers sync.Pool

// maxPooledListBuffer bounds the buffers kept for reuse.
const maxPooledListBuffer = 32 << 20

// writeJSONList answers with a JSON list of items' encodings (see appendJSONList), assembled in a reused buffer.
func (a *API) writeJSONList(w http.ResponseWriter, r *http.Request, mediaType, listKind string, gv schema.GroupVersion, items [][]byte, lm metav1.ListMeta) {
	bp, _ := listBuffers.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	body, err := appendJSONList((*bp)[:0], listKind, gv, items, lm)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, mediaType, body)
	if cap(body) <= maxPooledListBuffer {
		*bp = body
		listBuffers.Put(bp)
	}
}

// table renders objects as a Table: the kind's columns, one row per object, and each row's
// object as PartialObjectMetadata (includeObject=Metadata, the default), the whole object
// (Object), or nothing (None).
func (a *API) table(res *registry.Resource, objs []runtime.Object, out negotiation.Output, r *http.Request) (*metav1.Table, error) {
	include := metav1.IncludeMetadata
	switch v := r.URL.Query().Get("includeObject"); v {
	case "", string(metav1.IncludeMetadata):
	case string(metav1.IncludeNone), string(metav1.IncludeObject):
		include = metav1.IncludeObjectPolicy(v)
	default:
		return nil, apierrors.NewBadRequest("includeObject must be None, Metadata or Object, not " + strconv.Quote(v))
	}
	st := res.Strategy()
	sample := st.New()
	if len(objs) > 0 {
		sample = objs[0]
	}
	p, err := st.Printer(sample)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	table := &metav1.Table{ColumnDefinitions: p.Columns, Rows: make([]metav1.TableRow, 0, len(objs))}
	table.SetGroupVersionKind(out.TableGV.WithKind("Table"))
	now := a.now()
	for _, obj := range objs {
		cells, err := p.Cells(obj, now)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		row := metav1.TableRow{Cells: cells}
		switch include {
		case metav1.IncludeObject:
			row.Object.Object = obj
		case metav1.IncludeMetadata:
			acc, err := meta.Accessor(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			pom := meta.AsPartialObjectMetadata(acc)
			pom.SetGroupVersionKind(out.TableGV.WithKind("PartialObjectMetadata"))
			row.Object.Object = pom
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// asMetadata is obj as PartialObjectMetadata in the group version the client named (out.Metadata),
// as upstream's transformObject converts it; PartialObjectMetadataList asked of one object is 406.
func asMetadata(obj runtime.Object, out negotiation.Output) (runtime.Object, error) {
	if out.Metadata.Kind != negotiation.KindPartialObjectMetadata {
		return nil, negotiation.NotAcceptable(fmt.Sprintf("you requested %s, but the requested object is not a list (%T)", out.Metadata.Kind, obj))
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	pom := meta.AsPartialObjectMetadata(acc)
	pom.SetGroupVersionKind(out.Metadata)
	return pom, nil
}

// asMetadataList is a collection as PartialObjectMetadataList in the group version the client
// named, keeping the list metadata (resourceVersion, continue, remainingItemCount); each item is a
// PartialObjectMetadata of that group version. PartialObjectMetadata asked of a collection is 406.
func asMetadataList(res *registry.Resource, items []runtime.Object, lm metav1.ListMeta, out negotiation.Output) (runtime.Object, error) {
	if out.Metadata.Kind != negotiation.KindPartialObjectMetadataList {
		var list any = "list"
		if l, err := res.Strategy().NewList(nil, metav1.ListMeta{}); err == nil {
			list = l
		}
		return nil, negotiation.NotAcceptable(fmt.Sprintf("you requested %s, but the requested object is a list (%T)", out.Metadata.Kind, list))
	}
	itemGVK := out.Metadata.GroupVersion().WithKind(negotiation.KindPartialObjectMetadata)
	parts := make([]metav1.PartialObjectMetadata, 0, len(items))
	for _, item := range items {
		acc, err := meta.Accessor(item)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		pom := meta.AsPartialObjectMetadata(acc)
		pom.SetGroupVersionKind(itemGVK)
		parts = append(parts, *pom)
	}
	var list runtime.Object
	if out.Metadata.Version == "v1beta1" {
		// v1beta1's list is a type of its own (other Protobuf field numbers).
		list = &metav1beta1.PartialObjectMetadataList{ListMeta: lm, Items: parts}
	} else {
		list = &metav1.PartialObjectMetadataList{ListMeta: lm, Items: parts}
	}
	list.GetObjectKind().SetGroupVersionKind(out.Metadata)
	return list, nil
}
