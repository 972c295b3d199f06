package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
func (a *API) writeObject(w http.ResponseWriter, r *http.Request, code int, res *registry.Resource, obj runtime.Object, out output) {
	requestInfoFrom(r.Context()).toWire(obj)
	if out.format == formatTable {
		table, err := a.table(res, []runtime.Object{obj}, out, r)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		obj = table
	}
	body, err := a.codec.encode(obj, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, code, out.mediaType, body)
}

// writeList answers with a collection: <Kind>List with its list metadata, or a Table.
func (a *API) writeList(w http.ResponseWriter, r *http.Request, res *registry.Resource, items []runtime.Object, lm metav1.ListMeta, out output) {
	var body []byte
	var err error
	info := requestInfoFrom(r.Context())
	if info != nil && !info.wire.Empty() {
		for _, item := range items {
			info.toWire(item)
		}
	}
	listGV := info.outGVK(res.GroupVersion().WithKind(res.ListKind)).GroupVersion()
	switch out.format {
	case formatTable:
		var table *metav1.Table
		table, err = a.table(res, items, out, r)
		if err == nil {
			table.ListMeta = lm
			body, err = a.codec.encode(table, out)
		}
	case formatJSON:
		if !out.pretty {
			encoded := make([][]byte, len(items))
			for i, item := range items {
				if encoded[i], err = json.Marshal(item); err != nil {
					break
				}
			}
			if err == nil {
				body, err = encodeJSONList(res.ListKind, listGV, encoded, lm)
			}
			break
		}
		fallthrough
	default:
		var list runtime.Object
		list, err = a.typedList(res, items, lm)
		if err == nil {
			list.GetObjectKind().SetGroupVersionKind(listGV.WithKind(res.ListKind))
			body, err = a.codec.encode(list, out)
		}
	}
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.mediaType, body)
}

// typedList builds the <Kind>List object of res holding items.
func (a *API) typedList(res *registry.Resource, items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	return res.Strategy().NewList(items, lm)
}

// encodeJSONList writes a JSON list from its items' encodings, without building the typed
// list: the same document encoding/json would produce for it, with less copying for large
// collections.
func encodeJSONList(listKind string, gv schema.GroupVersion, items [][]byte, lm metav1.ListMeta) ([]byte, error) {
	size := 256
	for _, it := range items {
		size += len(it) + 1
	}
	var buf bytes.Buffer
	buf.Grow(size)
	buf.WriteString(`{"kind":`)
	writeJSONString(&buf, listKind)
	buf.WriteString(`,"apiVersion":`)
	writeJSONString(&buf, gv.String())
	buf.WriteString(`,"metadata":`)
	m, err := json.Marshal(&lm)
	if err != nil {
		return nil, err
	}
	buf.Write(m)
	buf.WriteString(`,"items":[`)
	for i, item := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(item)
	}
	buf.WriteString("]}")
	return buf.Bytes(), nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
}

// table renders objects as a Table: the kind's columns, one row per object, and each row's
// object as PartialObjectMetadata (includeObject=Metadata, the default), the whole object
// (Object), or nothing (None).
func (a *API) table(res *registry.Resource, objs []runtime.Object, out output, r *http.Request) (*metav1.Table, error) {
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
	table.SetGroupVersionKind(out.tableGV.WithKind("Table"))
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
			pom.SetGroupVersionKind(out.tableGV.WithKind("PartialObjectMetadata"))
			row.Object.Object = pom
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}
