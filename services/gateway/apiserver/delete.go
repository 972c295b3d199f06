package apiserver

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
	"platform.io/services/gateway/negotiation"
)

// parseDeleteOptions reads DeleteOptions from the body (JSON or YAML) and the query.
func parseDeleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeDeleteOptions(r, body, opts); err != nil {
			return nil, err
		}
	}
	q := r.URL.Query()
	if s := q.Get("gracePeriodSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("gracePeriodSeconds must be an integer")
		}
		opts.GracePeriodSeconds = &n
	}
	if s := q.Get("propagationPolicy"); s != "" {
		p := metav1.DeletionPropagation(s)
		opts.PropagationPolicy = &p
	}
	if s := q.Get("orphanDependents"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, apierrors.NewBadRequest("orphanDependents must be true or false")
		}
		opts.OrphanDependents = &b //nolint:staticcheck // the deprecated option is still honoured, as upstream
	}
	dry, err := parseDryRun(r)
	if err != nil {
		return nil, err
	}
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q; the only supported value is %q", v, metav1.DryRunAll))
		}
	}
	if dry {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// Upstream's rules: one known propagation policy, not together with orphanDependents (422).
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}

// decodeDeleteOptions reads a DeleteOptions body in its Content-Type: JSON, YAML, or the
// Protobuf envelope (client-go's typed clients send Protobuf).
func decodeDeleteOptions(r *http.Request, body []byte, opts *metav1.DeleteOptions) error {
	mediaType := negotiation.MediaJSON
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return negotiation.UnsupportedMediaType(negotiation.MediaJSON, negotiation.MediaYAML, negotiation.MediaProtobuf)
		}
		mediaType = mt
	}
	switch mediaType {
	case negotiation.MediaProtobuf, negotiation.MediaUpstreamProtobuf:
		if len(body) < 4 || !bytes.Equal(body[:4], naming.ProtobufMagic[:]) {
			return apierrors.NewBadRequest("the DeleteOptions body does not start with the Protobuf envelope prefix")
		}
		var unk runtime.Unknown
		if err := unk.Unmarshal(body[4:]); err != nil {
			return apierrors.NewBadRequest("the DeleteOptions Protobuf envelope is malformed: " + err.Error())
		}
		if unk.Kind != "" && unk.Kind != "DeleteOptions" {
			return apierrors.NewBadRequest(fmt.Sprintf("the body must be DeleteOptions, not %s", unk.Kind))
		}
		if err := opts.Unmarshal(unk.Raw); err != nil {
			return apierrors.NewBadRequest("the DeleteOptions body is malformed: " + err.Error())
		}
		return nil
	case negotiation.MediaJSON, negotiation.MediaYAML, "application/x-yaml", "text/yaml":
		data := body
		if mediaType != negotiation.MediaJSON {
			converted, err := yaml.YAMLToJSON(body)
			if err != nil {
				return apierrors.NewBadRequest("the DeleteOptions body is not valid YAML: " + err.Error())
			}
			data = converted
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, opts); err != nil {
			return apierrors.NewBadRequest("the DeleteOptions body is malformed: " + err.Error())
		}
		if k := opts.Kind; k != "" && k != "DeleteOptions" {
			return apierrors.NewBadRequest(fmt.Sprintf("the body must be DeleteOptions, not %s", k))
		}
		return nil
	default:
		return negotiation.UnsupportedMediaType(negotiation.MediaJSON, negotiation.MediaYAML, negotiation.MediaProtobuf)
	}
}

// delete serves DELETE on an item.
func (a *API) delete(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, writeOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	obj, deleted, err := a.gen.Delete(r.Context(), info.res, info.namespace, info.name, opts)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if !deleted {
		// Finalizers pending: the object stays, marked with its deletionTimestamp.
		a.writeObject(w, r, http.StatusOK, info.res, obj, out)
		return
	}
	m := mustMeta(obj)
	status := &metav1.Status{
		Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name: info.name, Group: info.res.Group, Kind: info.res.Resource, UID: m.GetUID(),
		},
	}
	status.SetGroupVersionKind(schema.GroupVersion{Version: "v1"}.WithKind("Status"))
	body, err := a.enc.Encode(status, out)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	writeBody(w, r, http.StatusOK, out.MediaType, body)
}

// deleteCollection serves DELETE on a collection: every object the selectors match is deleted
// as by DELETE on it; the answer is the list of objects deleted or marked.
func (a *API) deleteCollection(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, writeOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	p, err := parseListParams(r, info.res)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	opts, err := parseDeleteOptions(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	p.limit, p.continueToken, p.resourceVersion, p.match = 0, "", "", 0
	items, lm, err := a.listObjects(r, info, p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	done := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		m := mustMeta(item)
		obj, _, err := a.gen.Delete(r.Context(), info.res, m.GetNamespace(), m.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		done = append(done, obj)
	}
	a.writeList(w, r, info.res, done, metav1.ListMeta{ResourceVersion: lm.ResourceVersion}, out)
}
