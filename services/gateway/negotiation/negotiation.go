// Package negotiation is the gateway's content negotiation: which representation a response
// takes (JSON, YAML, Protobuf, Table, PartialObjectMetadata) from the request's Accept header and
// what the endpoint can produce, and the encoding of objects into it. Upstream's
// endpoints/handlers/negotiation is the model.
package negotiation

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
)

// Media types the gateway reads and writes.
const (
	MediaJSON = "application/json"
	MediaYAML = "application/yaml"
	// MediaUpstreamProtobuf is upstream's name for the Protobuf encoding (kubectl's typed clients use it).
	MediaUpstreamProtobuf = naming.UpstreamProtobufMediaType
)

// MediaProtobuf is the Protobuf media type of the naming profile (in the kubernetes profile, the
// same as MediaUpstreamProtobuf).
var MediaProtobuf = naming.ProtobufMediaType

// Format is the shape of a response body.
type Format int

// The formats of response bodies.
const (
	FormatJSON Format = iota
	FormatYAML
	FormatProtobuf
	FormatTable
)

// Output is the negotiated representation of a response.
type Output struct {
	Format Format
	// MediaType is the Content-Type of the response.
	MediaType string
	// Pretty indents JSON.
	Pretty bool
	// TableGV is the group version the client named for Table (meta.platform.io/v1 or kubectl's meta.k8s.io/v1).
	TableGV schema.GroupVersion
	// Metadata is the conversion the client asked for with as=PartialObjectMetadata or
	// as=PartialObjectMetadataList, in the meta group version it named (either group, v1 or
	// v1beta1; the answer's apiVersion echoes it); zero when it asked for the objects themselves.
	// Format is then how the converted objects are encoded: JSON, YAML or Protobuf.
	Metadata schema.GroupVersionKind
	// Discovery is the apidiscovery group version the client asked aggregated discovery
	// (as=APIGroupDiscoveryList) in: upstream's group or the profile's, v2 (or v2beta1 where
	// offered); the answer's apiVersion and Content-Type echo it. Zero for every other answer.
	Discovery schema.GroupVersion
}

// KindAPIGroupDiscoveryList is the kind of aggregated discovery documents (/api and /apis).
const KindAPIGroupDiscoveryList = "APIGroupDiscoveryList"

// UpstreamDiscoveryGroup is upstream's group of the aggregated discovery types, the one kubectl
// and client-go name in every profile; DiscoveryGroup is the profile's name of it
// (apidiscovery.platform.io; the same in the kubernetes profile).
const UpstreamDiscoveryGroup = "apidiscovery.k8s.io"

// DiscoveryGroup is the naming profile's group of the aggregated discovery types.
var DiscoveryGroup = naming.Group(UpstreamDiscoveryGroup)

// IsDiscovery tells whether the answer is an aggregated discovery document.
func (o Output) IsDiscovery() bool { return o.Discovery.Version != "" }

// DiscoveryMediaType is the Content-Type of an aggregated discovery answer: the base media type
// with the group, version and kind the client asked for, which client-go matches to recognise
// the aggregated form.
func DiscoveryMediaType(base string, gv schema.GroupVersion) string {
	return base + ";g=" + gv.Group + ";v=" + gv.Version + ";as=" + KindAPIGroupDiscoveryList
}

// The kinds of the metadata-only conversions (Output.Metadata).
const (
	KindPartialObjectMetadata     = "PartialObjectMetadata"
	KindPartialObjectMetadataList = "PartialObjectMetadataList"
)

// IsMetadata tells whether objects are answered as PartialObjectMetadata (or
// PartialObjectMetadataList): encodings of the whole objects must not be used.
func (o Output) IsMetadata() bool { return o.Metadata.Kind != "" }

// MetaGroupVersions are the group versions PartialObjectMetadata is served in: the naming
// profile's meta group and upstream's (the one client-go names in every profile), v1 and, as
// upstream still serves it, v1beta1.
var MetaGroupVersions = []schema.GroupVersion{
	registry.MetaGroupVersion, registry.UpstreamMetaGroupVersion,
	{Group: registry.MetaGroupVersion.Group, Version: "v1beta1"}, {Group: registry.UpstreamMetaGroupVersion.Group, Version: "v1beta1"},
}

// metadataGroupVersion tells whether gv is one PartialObjectMetadata is served in.
func metadataGroupVersion(gv schema.GroupVersion) bool {
	for _, m := range MetaGroupVersions {
		if gv == m {
			return true
		}
	}
	return false
}

// JSON is the plain JSON output (pretty when asked): the representation of answers without
// negotiation (errors of non-resource paths).
func JSON(pretty bool) Output {
	return Output{Format: FormatJSON, MediaType: MediaJSON, Pretty: pretty}
}

// Options says which representations an endpoint can produce.
type Options struct {
	Protobuf bool // the kind has a Protobuf encoding
	Table    bool // GET of objects and collections, and watches
	YAML     bool // not for watch streams
	// Metadata offers PartialObjectMetadata and PartialObjectMetadataList (objects, collections
	// and watches of every resource), in JSON, YAML where offered, and Protobuf whatever the
	// kind's own encodings (they are built-in types).
	Metadata bool
	// Discovery offers aggregated discovery (as=APIGroupDiscoveryList, /api and /apis) in v2,
	// and in v2beta1 too with DiscoveryV2Beta1, in JSON, YAML where offered and Protobuf.
	Discovery, DiscoveryV2Beta1 bool
}

// ForResource narrows the options to what res's objects support: a kind without a Protobuf
// encoding (custom resources) answers 406 to a request for it alone (a listed fallback is used
// instead).
func (o Options) ForResource(res *registry.Resource) Options {
	if !res.Strategy().Protobuf() {
		o.Protobuf = false
	}
	return o
}

// acceptClause is one media range of an Accept header.
type acceptClause struct {
	mediaType string
	params    map[string]string
	q         float64
}

// parseAccept splits an Accept header into media ranges, most preferred first (stable for equal q).
func parseAccept(header string) []acceptClause {
	var out []acceptClause
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				q = f
			}
			delete(params, "q")
		}
		if q <= 0 {
			continue
		}
		out = append(out, acceptClause{mediaType: mt, params: params, q: q})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].q > out[j].q })
	return out
}

// Negotiate picks the response representation from the Accept header, or answers 406.
func Negotiate(r *http.Request, opts Options) (Output, error) {
	pretty := PrettyRequested(r)
	header := r.Header.Get("Accept")
	if header == "" {
		return Output{Format: FormatJSON, MediaType: MediaJSON, Pretty: pretty}, nil
	}
	clauses := parseAccept(header)
	for _, c := range clauses {
		as := c.params["as"]
		switch {
		case as == "Table":
			if !opts.Table || (c.mediaType != MediaJSON && c.mediaType != "*/*" && c.mediaType != "application/*") || c.params["v"] != "v1" {
				continue
			}
			gv := schema.GroupVersion{Group: c.params["g"], Version: "v1"}
			if gv != registry.MetaGroupVersion && gv != registry.UpstreamMetaGroupVersion {
				continue
			}
			return Output{Format: FormatTable, MediaType: MediaJSON, Pretty: pretty, TableGV: gv}, nil
		case as == KindPartialObjectMetadata || as == KindPartialObjectMetadataList:
			gvk := schema.GroupVersionKind{Group: c.params["g"], Version: c.params["v"], Kind: as}
			if !opts.Metadata || !metadataGroupVersion(gvk.GroupVersion()) {
				continue
			}
			switch c.mediaType {
			case MediaJSON, "application/*", "*/*":
				return Output{Format: FormatJSON, MediaType: MediaJSON, Pretty: pretty, Metadata: gvk}, nil
			case MediaYAML:
				if opts.YAML {
					return Output{Format: FormatYAML, MediaType: MediaYAML, Metadata: gvk}, nil
				}
			case MediaProtobuf, MediaUpstreamProtobuf:
				return Output{Format: FormatProtobuf, MediaType: c.mediaType, Metadata: gvk}, nil
			}
			continue
		case as == KindAPIGroupDiscoveryList:
			gv := schema.GroupVersion{Group: c.params["g"], Version: c.params["v"]}
			if !opts.Discovery || (gv.Group != UpstreamDiscoveryGroup && gv.Group != DiscoveryGroup) ||
				(gv.Version != "v2" && (gv.Version != "v2beta1" || !opts.DiscoveryV2Beta1)) {
				continue
			}
			switch c.mediaType {
			case MediaJSON, "application/*", "*/*":
				return Output{Format: FormatJSON, MediaType: DiscoveryMediaType(MediaJSON, gv), Pretty: pretty, Discovery: gv}, nil
			case MediaYAML:
				if opts.YAML {
					return Output{Format: FormatYAML, MediaType: DiscoveryMediaType(MediaYAML, gv), Discovery: gv}, nil
				}
			case MediaProtobuf, MediaUpstreamProtobuf:
				return Output{Format: FormatProtobuf, MediaType: DiscoveryMediaType(c.mediaType, gv), Discovery: gv}, nil
			}
			continue
		case as != "":
			// Other server-side conversions are not offered.
			continue
		}
		switch c.mediaType {
		case MediaJSON, "application/*", "*/*":
			return Output{Format: FormatJSON, MediaType: MediaJSON, Pretty: pretty}, nil
		case MediaYAML:
			if opts.YAML {
				return Output{Format: FormatYAML, MediaType: MediaYAML}, nil
			}
		case MediaProtobuf, MediaUpstreamProtobuf:
			if opts.Protobuf {
				return Output{Format: FormatProtobuf, MediaType: c.mediaType}, nil
			}
		}
	}
	return Output{}, NotAcceptable(notAcceptableMessage(opts))
}

// notAcceptableMessage lists what the endpoint could have produced, as upstream's 406 does.
func notAcceptableMessage(opts Options) string {
	types := []string{MediaJSON}
	if opts.YAML {
		types = append(types, MediaYAML)
	}
	if opts.Protobuf {
		types = append(types, MediaProtobuf)
	}
	if opts.Table {
		types = append(types, MediaJSON+";as=Table;g="+naming.MetaGroup+";v=v1")
	}
	if opts.Metadata {
		types = append(types, MediaJSON+";as="+KindPartialObjectMetadata+";g="+naming.MetaGroup+";v=v1",
			MediaJSON+";as="+KindPartialObjectMetadataList+";g="+naming.MetaGroup+";v=v1")
	}
	if opts.Discovery {
		types = append(types, DiscoveryMediaType(MediaJSON, schema.GroupVersion{Group: DiscoveryGroup, Version: "v2"}))
	}
	return "only the following media types are accepted: " + strings.Join(types, ", ")
}

// PrettyRequested reads ?pretty (a bare flag or a boolean).
func PrettyRequested(r *http.Request) bool {
	v, ok := r.URL.Query()["pretty"]
	if !ok {
		return false
	}
	if len(v) == 0 || v[0] == "" {
		return true
	}
	b, _ := strconv.ParseBool(v[0])
	return b
}

// Encoder writes objects in a negotiated representation.
type Encoder struct {
	protobuf *protobuf.Serializer
}

// NewEncoder returns the encoder of scheme's kinds.
func NewEncoder(scheme *runtime.Scheme) *Encoder {
	return &Encoder{protobuf: protobuf.NewSerializer(scheme, scheme)}
}

// Encode writes obj in the JSON, YAML or Protobuf form of out.
func (e *Encoder) Encode(obj runtime.Object, out Output) ([]byte, error) {
	switch out.Format {
	case FormatProtobuf:
		var buf bytes.Buffer
		if err := e.protobuf.Encode(obj, &buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case FormatYAML:
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return yaml.JSONToYAML(data)
	default:
		if out.Pretty {
			return json.MarshalIndent(obj, "", "  ")
		}
		return json.Marshal(obj)
	}
}

// JSONOrYAML encodes a value that is not an API object (the /version document).
func JSONOrYAML(v any, out Output) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil || out.Format != FormatYAML {
		return data, err
	}
	return yaml.JSONToYAML(data)
}

// StatusError builds an API error for the codes apimachinery has no constructor for.
func StatusError(code int, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}}
}

// NotAcceptable is the 406 for an Accept header the endpoint cannot satisfy.
func NotAcceptable(msg string) error {
	return StatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, msg)
}

// UnsupportedMediaType is the 415 for a request body of a type the endpoint does not read, in
// upstream's words (which do not repeat the type sent).
func UnsupportedMediaType(accepted ...string) error {
	msg := "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", ")
	return StatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, msg)
}
