package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/warning"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry/generic"
)

// writeOptions are the negotiation options for responses to writes. The answer may be the
// object's PartialObjectMetadata, as upstream converts every response (client-go's metadata
// client patches asking for it).
var writeOptions = negotiation.Options{Protobuf: true, YAML: true, Metadata: true}

// parseDryRun reads dryRun: absent or empty means a real request, All means every stage but
// persistence, anything else is 400.
func parseDryRun(r *http.Request) (bool, error) {
	values := r.URL.Query()["dryRun"]
	dry := false
	for _, v := range values {
		switch v {
		case "":
		case metav1.DryRunAll:
			dry = true
		default:
			return false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q; the only supported value is %q", v, metav1.DryRunAll))
		}
	}
	return dry, nil
}

// warn records warnings of the request's decoding (unknown or duplicate fields) for the
// response. They go before admission's, which came later in the request (upstream records each
// when it happens); every Warning header is written with the response (writeBody, writeError).
func warn(r *http.Request, msgs []string) {
	if len(msgs) == 0 {
		return
	}
	if info := requestInfoFrom(r.Context()); info != nil {
		info.warnings = append(append([]string(nil), msgs...), info.warnings...)
	}
}

// writeWarnings sets one Warning header per message (RFC 7234 code 299, as upstream), within
// the spec's size limits.
func writeWarnings(w http.ResponseWriter, r *http.Request) {
	info := requestInfoFrom(r.Context())
	if info == nil {
		return
	}
	for _, m := range warning.Limit(info.warnings) {
		w.Header().Add("Warning", "299 - "+strconv.Quote(m))
	}
}

// writeRequest is what create and update read from a request before touching storage.
type writeRequest struct {
	out      negotiation.Output
	dryRun   bool
	obj      runtime.Object
	meta     metav1.Object
	warnings []string
	// manager owns the fields the write sets (managedFields).
	manager string
	// bodyGV is the group version the body named.
	bodyGV schema.GroupVersion
}

// readWrite negotiates the response and decodes and checks the body of a create or update.
func (a *API) readWrite(r *http.Request, info *requestInfo) (*writeRequest, error) {
	out, err := negotiation.Negotiate(r, writeOptions.ForResource(info.res))
	if err != nil {
		return nil, err
	}
	dry, err := parseDryRun(r)
	if err != nil {
		return nil, err
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		return nil, err
	}
	obj, warnings, bodyGV, err := decodeBody(r, info.res, fv)
	if err != nil {
		return nil, err
	}
	// Upstream defaults at decoding, before validation.
	applyDefaults(info.res, obj)
	if err := checkRequired(info.res, obj); err != nil {
		return nil, err
	}
	m := mustMeta(obj)
	if info.res.Namespaced {
		switch ns := m.GetNamespace(); {
		case ns == "":
			m.SetNamespace(info.namespace)
		case info.namespace == "":
			return nil, apierrors.NewBadRequest("a namespaced object cannot be written outside a namespace; use the namespaces/<namespace>/ URL")
		case ns != info.namespace:
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		m.SetNamespace("")
	}
	manager, err := fieldManagerName(r, false)
	if err != nil {
		return nil, err
	}
	return &writeRequest{out: out, dryRun: dry, obj: obj, meta: m, warnings: warnings, manager: manager, bodyGV: bodyGV}, nil
}

// create serves POST on a collection.
func (a *API) create(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.subresource != "" {
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), "create on a subresource"))
		return
	}
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if wr.meta.GetResourceVersion() != "" {
		a.writeError(w, r, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created"))
		return
	}
	obj, err := a.gen.Create(r.Context(), info.res, &generic.Create{Obj: wr.obj, Manager: wr.manager, DryRun: wr.dryRun})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	warn(r, wr.warnings)
	a.writeObject(w, r, http.StatusCreated, info.res, obj, wr.out)
}

// update serves PUT on an item or its status (or a namespace's finalize) subresource. PUT of an
// object that does not exist creates it, as the spec's verb table says.
func (a *API) update(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if wr.meta.GetName() != info.name {
		a.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", wr.meta.GetName(), info.name)))
		return
	}
	obj, created, err := a.updateObject(r.Context(), info, wr)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	warn(r, wr.warnings)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	a.writeObject(w, r, code, info.res, obj, wr.out)
}

// updateObject replaces an object through the store: the body is what the client asks for (a
// copy each attempt, since the stages change it); a resourceVersion or uid in it is a
// precondition. A missing object is created from it (not through a subresource).
func (a *API) updateObject(ctx context.Context, info *requestInfo, wr *writeRequest) (runtime.Object, bool, error) {
	return a.gen.Update(ctx, &generic.Update{
		Res: info.res, Namespace: info.namespace, Name: info.name, Subresource: info.subresource,
		Manager: wr.manager, DryRun: wr.dryRun, Create: true,
		Transform: func(context.Context, runtime.Object) (runtime.Object, error) { return wr.obj.DeepCopyObject(), nil },
	})
}
