package apiserver

import (
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
)

// Media types the gateway reads and writes.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
	// mediaUpstreamProtobuf is upstream's name for the Protobuf encoding (kubectl's typed clients use it).
	mediaUpstreamProtobuf = naming.UpstreamProtobufMediaType
)

// mediaProtobuf is the Protobuf media type of the naming profile (in the kubernetes profile, the
// same as mediaUpstreamProtobuf).
var mediaProtobuf = naming.ProtobufMediaType

// format is the shape of a response body.
type format int

const (
	formatJSON format = iota
	formatYAML
	formatProtobuf
	formatTable
)

// output is the negotiated representation of a response.
type output struct {
	format format
	// mediaType is the Content-Type of the response.
	mediaType string
	// pretty indents JSON.
	pretty bool
	// tableGV is the group version the client named for Table (meta.platform.io/v1 or kubectl's meta.k8s.io/v1).
	tableGV schema.GroupVersion
}

// negotiateOptions says which representations an endpoint can produce.
type negotiateOptions struct {
	protobuf bool // the kind has a Protobuf encoding
	table    bool // GET of objects and collections, and watches
	yaml     bool // not for watch streams
}

// forResource narrows the options to what res's objects support: a kind without a Protobuf
// encoding (custom resources) answers 406 to a request for it alone (a listed fallback is used
// instead).
func (o negotiateOptions) forResource(res *registry.Resource) negotiateOptions {
	if !res.Strategy().Protobuf() {
		o.protobuf = false
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

// negotiate picks the response representation from the Accept header, or answers 406.
func negotiate(r *http.Request, opts negotiateOptions) (output, error) {
	pretty := prettyRequested(r)
	header := r.Header.Get("Accept")
	if header == "" {
		return output{format: formatJSON, mediaType: mediaJSON, pretty: pretty}, nil
	}
	clauses := parseAccept(header)
	for _, c := range clauses {
		as := c.params["as"]
		switch {
		case as == "Table":
			if !opts.table || (c.mediaType != mediaJSON && c.mediaType != "*/*" && c.mediaType != "application/*") || c.params["v"] != "v1" {
				continue
			}
			gv := schema.GroupVersion{Group: c.params["g"], Version: "v1"}
			if gv != registry.MetaGroupVersion && gv != registry.UpstreamMetaGroupVersion {
				continue
			}
			return output{format: formatTable, mediaType: mediaJSON, pretty: pretty, tableGV: gv}, nil
		case as != "":
			// PartialObjectMetadata and other server-side conversions are not offered.
			continue
		}
		switch c.mediaType {
		case mediaJSON, "application/*", "*/*":
			return output{format: formatJSON, mediaType: mediaJSON, pretty: pretty}, nil
		case mediaYAML:
			if opts.yaml {
				return output{format: formatYAML, mediaType: mediaYAML}, nil
			}
		case mediaProtobuf, mediaUpstreamProtobuf:
			if opts.protobuf {
				return output{format: formatProtobuf, mediaType: c.mediaType}, nil
			}
		}
	}
	return output{}, notAcceptable(notAcceptableMessage(opts))
}

// notAcceptableMessage lists what the endpoint could have produced, as upstream's 406 does.
func notAcceptableMessage(opts negotiateOptions) string {
	types := []string{mediaJSON}
	if opts.yaml {
		types = append(types, mediaYAML)
	}
	if opts.protobuf {
		types = append(types, mediaProtobuf)
	}
	if opts.table {
		types = append(types, mediaJSON+";as=Table;g="+naming.MetaGroup+";v=v1")
	}
	return "only the following media types are accepted: " + strings.Join(types, ", ")
}

// prettyRequested reads ?pretty (a bare flag or a boolean).
func prettyRequested(r *http.Request) bool {
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
