package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/custom"
)

// MaxRequestBytes bounds a request body (upstream's default --max-request-bytes is 3 MiB);
// larger bodies get 413.
const MaxRequestBytes = 3 << 20

// fieldValidation is the level of the fieldValidation query parameter.
type fieldValidation int

const (
	validationWarn fieldValidation = iota
	validationIgnore
	validationStrict
)

func parseFieldValidation(r *http.Request) (fieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "", "Warn":
		return validationWarn, nil
	case "Ignore":
		return validationIgnore, nil
	case "Strict":
		return validationStrict, nil
	default:
		return 0, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, not %q", v))
	}
}

// readBody reads a request body up to MaxRequestBytes, answering 413 beyond it.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxRequestBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", MaxRequestBytes))
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading the request body: " + err.Error())
	}
	if len(data) > MaxRequestBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", MaxRequestBytes))
	}
	return data, nil
}

// decodeBody decodes a request body into a new object of res's kind. Unknown and duplicate fields
// are handled at level v: dropped, returned as warnings, or a 400 listing all of them. Wrong
// types and malformed documents are a 400 at every level.
//
// bodyGV is the group version the body named (upstream's name of the group, when a typed client
// sent it), for answering in it.
func decodeBody(r *http.Request, res *registry.Resource, v fieldValidation) (obj runtime.Object, warnings []string, bodyGV schema.GroupVersion, err error) {
	data, err := readBody(r)
	if err != nil {
		return nil, nil, bodyGV, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, bodyGV, apierrors.NewBadRequest("the request body is empty")
	}
	mediaType := negotiation.MediaJSON
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return nil, nil, bodyGV, negotiation.UnsupportedMediaType(negotiation.MediaJSON, negotiation.MediaYAML, negotiation.MediaProtobuf)
		}
		mediaType = mt
	}
	st := res.Strategy()
	into := st.New()
	var strict []string
	switch mediaType {
	case negotiation.MediaJSON:
		strict, err = decodeJSON(data, into, false)
	case negotiation.MediaYAML, "application/x-yaml", "text/yaml":
		strict, err = decodeJSON(data, into, true)
	case negotiation.MediaProtobuf, negotiation.MediaUpstreamProtobuf:
		if !st.Protobuf() {
			return nil, nil, bodyGV, negotiation.UnsupportedMediaType(negotiation.MediaJSON, negotiation.MediaYAML)
		}
		err = builtin.DecodeProtobuf(data, into)
	default:
		return nil, nil, bodyGV, negotiation.UnsupportedMediaType(negotiation.MediaJSON, negotiation.MediaYAML, negotiation.MediaProtobuf)
	}
	if err != nil {
		return nil, nil, bodyGV, apierrors.NewBadRequest(err.Error())
	}
	bodyGV = into.GetObjectKind().GroupVersionKind().GroupVersion()
	if err := checkKind(into, res); err != nil {
		return nil, nil, bodyGV, err
	}
	unknown, err := st.Normalize(into)
	if err != nil {
		return nil, nil, bodyGV, err
	}
	strict = append(strict, unknown...)
	if len(strict) > 0 && v == validationStrict {
		return nil, nil, bodyGV, strictDecodingError(res, strict)
	}
	if v == validationIgnore {
		return into, nil, bodyGV, nil
	}
	// One warning per duplicate key of a YAML body, as upstream warns.
	for _, m := range strict {
		warnings = append(warnings, yamlWarnings(m)...)
	}
	return into, warnings, bodyGV, nil
}

// decodeJSON decodes a JSON (or YAML) document into a typed object and returns the unknown and
// duplicate fields it saw.
func decodeJSON(data []byte, into runtime.Object, isYAML bool) ([]string, error) {
	var strict []string
	if isYAML {
		if _, err := yaml.YAMLToJSONStrict(data); err != nil {
			// A duplicate key is the only thing the strict conversion rejects that the lax one accepts.
			strict = append(strict, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		}
		converted, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("the request body is not valid YAML: %w", err)
		}
		data = converted
	}
	if !json.Valid(data) {
		var probe any
		err := json.Unmarshal(data, &probe)
		return nil, fmt.Errorf("the request body is not valid JSON: %v", err)
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("the request body must be a JSON object")
	}
	if u, ok := into.(*unstructured.Unstructured); ok {
		dups, err := custom.DecodeUnstructured(data, u)
		return append(strict, dups...), err
	}
	strictErrs, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return nil, err
	}
	for _, e := range strictErrs {
		strict = append(strict, e.Error())
	}
	return strict, nil
}

// checkKind makes sure the body is the resource's kind; a body without kind and apiVersion takes
// them from the URL, as upstream's decoder defaults them. A body may name the group under
// upstream's name (typed clients do); the object continues under the served one.
func checkKind(obj runtime.Object, res *registry.Resource) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	want := res.GroupVersionKind()
	if gvk.Kind != "" && gvk.Kind != want.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", gvk.Kind, want.Kind))
	}
	if gv := gvk.GroupVersion(); (gv.Group != "" || gv.Version != "") && !sameGroup(gv, want.GroupVersion()) {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gv.String(), want.GroupVersion().String()))
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	return nil
}
