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

	"platform.io/libs/naming"
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
	body, err := a.codec.encode(s, out)
	if err != nil {
		out = output{format: formatJSON, mediaType: mediaJSON}
		body, _ = a.codec.encode(s, out)
	}
	writeWarnings(w, r)
	w.Header().Set("Content-Type", out.mediaType)
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
func (a *API) errorOutput(r *http.Request) output {
	js := output{format: formatJSON, mediaType: mediaJSON, pretty: prettyRequested(r)}
	if r.Header.Get("Accept") == "" || !isResourcePath(r.URL.EscapedPath()) {
		return js
	}
	opts := negotiateOptions{yaml: true} // no Table: conversions are for objects, not a Status
	if res := a.resourceOf(r); res != nil {
		opts.protobuf = res.Strategy().Protobuf()
	}
	out, err := negotiate(r, opts)
	if err != nil {
		return js
	}
	return out
}

// resourceOf is the served resource a resource path names (under its upstream group name too),
// or nil.
func (a *API) resourceOf(r *http.Request) *registry.Resource {
	gv, rest := splitGroupVersion(r.URL.Path)
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if len(parts) > 2 && parts[0] == "namespaces" && !request.NamespaceSubresource(parts[2]) {
		parts = parts[2:]
	}
	if res, ok := a.reg.Resource(gv.WithResource(parts[0])); ok {
		return res
	}
	if res, ok := a.reg.Resource(schema.GroupVersionResource{Group: naming.Group(gv.Group), Version: gv.Version, Resource: parts[0]}); ok {
		return res
	}
	return nil
}

// newStatusError builds an API error for the codes apimachinery has no constructor for.
func newStatusError(code int, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}}
}

// notAcceptable is the 406 for an Accept header the endpoint cannot satisfy.
func notAcceptable(msg string) error {
	return newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, msg)
}

// unsupportedMediaType is the 415 for a request body of a type the endpoint does not read, in
// upstream's words (which do not repeat the type sent).
func unsupportedMediaType(_ string, accepted ...string) error {
	msg := "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", ")
	return newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, msg)
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
