package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/request"
)

// statusOf returns the Status body of any error; errors that are not API errors are 500s.
func statusOf(err error) *metav1.Status {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return &s
	}
	s := apierrors.NewInternalError(err).Status()
	return &s
}

// writeError answers with err as a Status object (JSON, as upstream does before or without
// negotiation), setting Retry-After when the error suggests one.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s := statusOf(err)
	s.Kind, s.APIVersion = "Status", "v1"
	if s.Details != nil && s.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(s.Details.RetryAfterSeconds)))
	}
	if s.Code >= 500 {
		a.log.ErrorContext(r.Context(), "request failed", append(requestAttrs(r.Context()), "method", r.Method, "path", r.URL.Path, "code", s.Code, "reason", s.Reason, "message", s.Message)...)
	}
	out := a.errorOutput(r)
	body, err := a.enc.Encode(s, out)
	if err != nil {
		out = negotiation.Output{Format: negotiation.FormatJSON, MediaType: negotiation.MediaJSON}
		body, _ = a.enc.Encode(s, out)
	}
	writeWarnings(w, r)
	w.Header().Set("Content-Type", out.MediaType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(s.Code))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// errorOutput is the representation of an error's Status, as upstream's ErrorNegotiated: the
// first media type of the Accept header that the endpoint serves (JSON, YAML and, for built-in
// resources, Protobuf: a typed client asking for Protobuf gets its errors in Protobuf too), and
// JSON when none is (also for every path that is not a resource's, which serve JSON only).
func (a *API) errorOutput(r *http.Request) negotiation.Output {
	js := negotiation.Output{Format: negotiation.FormatJSON, MediaType: negotiation.MediaJSON, Pretty: negotiation.PrettyRequested(r)}
	if r.Header.Get("Accept") == "" || !isResourcePath(r.URL.EscapedPath()) {
		return js
	}
	opts := negotiation.Options{YAML: true} // no Table: conversions are for objects, not a Status
	if res := a.resourceOf(r); res != nil {
		opts.Protobuf = res.Strategy().Protobuf()
	}
	out, err := negotiation.Negotiate(r, opts)
	if err != nil {
		return js
	}
	return out
}

// resourceOf is the served resource a resource request names (under its upstream group name
// too, as the chain's request info resolved it), or nil.
func (a *API) resourceOf(r *http.Request) *registry.Resource {
	ri, ok := request.InfoFrom(r.Context())
	if !ok {
		ri = a.Resolver().Resolve(r)
	}
	if !ri.IsResourceRequest || len(ri.Parts) == 0 {
		return nil
	}
	res, _ := a.reg.Resource(schema.GroupVersionResource{Group: ri.APIGroup, Version: ri.APIVersion, Resource: ri.Parts[0]})
	return res
}

// strictDecodingError is the 400 for unknown or duplicate fields under fieldValidation=Strict,
// in upstream's words.
func strictDecodingError(res *registry.Resource, fields []string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
		res.Kind, res.Version, res.Kind, strings.Join(fields, ", ")))
}

// notFoundPath is upstream's 404 for a URL that names nothing.
func notFoundPath() error {
	e := apierrors.NewNotFound(schema.GroupResource{}, "")
	e.ErrStatus.Message = "the server could not find the requested resource"
	e.ErrStatus.Details = nil
	return e
}
