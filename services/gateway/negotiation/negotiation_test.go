package negotiation

import (
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/naming"
)

// TestNegotiate: the first acceptable clause by q-value wins; Table only where offered and only
// for meta v1 in either group; YAML and Protobuf only where offered; nothing acceptable is 406
// listing what is.
func TestNegotiate(t *testing.T) {
	all := Options{Protobuf: true, Table: true, YAML: true}
	table := "application/json;as=Table;g=" + naming.MetaGroup + ";v=v1"
	for _, c := range []struct {
		accept string
		opts   Options
		want   Format
		media  string
	}{
		{"", all, FormatJSON, MediaJSON},
		{"*/*", all, FormatJSON, MediaJSON},
		{MediaYAML, all, FormatYAML, MediaYAML},
		{MediaUpstreamProtobuf + ", " + MediaJSON, all, FormatProtobuf, MediaUpstreamProtobuf},
		{MediaProtobuf + ";q=0.5, " + MediaYAML, all, FormatYAML, MediaYAML},
		{MediaProtobuf + ", " + MediaJSON, Options{}, FormatJSON, MediaJSON},
		{table + ", " + MediaJSON, all, FormatTable, MediaJSON},
		{table + ", " + MediaJSON, Options{}, FormatJSON, MediaJSON},
		{"application/json;as=Table;g=meta.k8s.io;v=v1", all, FormatTable, MediaJSON},
		{"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json", all, FormatJSON, MediaJSON},
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		out, err := Negotiate(r, c.opts)
		if err != nil || out.Format != c.want || out.MediaType != c.media {
			t.Errorf("Accept %q: %+v %v, want format %d %s", c.accept, out, err, c.want, c.media)
		}
	}
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	r.Header.Set("Accept", MediaYAML)
	_, err := Negotiate(r, Options{Protobuf: true})
	if !apierrors.IsNotAcceptable(err) || !strings.Contains(err.Error(), MediaProtobuf) || strings.Contains(err.Error(), MediaYAML) {
		t.Errorf("YAML where only JSON and Protobuf are offered: %v", err)
	}
	if !PrettyRequested(httptest.NewRequest("GET", "/x?pretty", nil)) || PrettyRequested(httptest.NewRequest("GET", "/x?pretty=false", nil)) {
		t.Error("?pretty is a bare flag or a boolean")
	}
}

// TestNegotiateMetadata: as=PartialObjectMetadata and as=PartialObjectMetadataList in either meta
// group, v1 or v1beta1, in JSON, YAML where offered and both Protobuf media types even where the
// kind itself has no Protobuf encoding; the group version the client named is kept for the answer.
func TestNegotiateMetadata(t *testing.T) {
	reads := Options{Protobuf: true, Table: true, YAML: true, Metadata: true}
	custom := Options{Table: true, YAML: true, Metadata: true} // a custom resource: no Protobuf of its own
	watch := Options{Table: true, Metadata: true}
	const pom = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	for _, c := range []struct {
		accept string
		opts   Options
		want   Format
		media  string
		gvk    string // "" for no conversion
	}{
		{MediaJSON + pom, reads, FormatJSON, MediaJSON, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{"*/*" + pom, reads, FormatJSON, MediaJSON, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{MediaJSON + ";as=PartialObjectMetadataList;g=" + naming.MetaGroup + ";v=v1", reads, FormatJSON, MediaJSON, naming.MetaGroup + "/v1, Kind=PartialObjectMetadataList"},
		{MediaJSON + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1", reads, FormatJSON, MediaJSON, "meta.k8s.io/v1beta1, Kind=PartialObjectMetadataList"},
		{MediaYAML + pom, reads, FormatYAML, MediaYAML, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{MediaYAML + pom + ", " + MediaJSON, watch, FormatJSON, MediaJSON, ""},
		// client-go's metadata client.
		{MediaUpstreamProtobuf + pom + "," + MediaJSON + pom + "," + MediaJSON, reads, FormatProtobuf, MediaUpstreamProtobuf, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{MediaUpstreamProtobuf + pom + "," + MediaJSON + pom + "," + MediaJSON, custom, FormatProtobuf, MediaUpstreamProtobuf, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{MediaUpstreamProtobuf + pom + "," + MediaJSON + pom + "," + MediaJSON, watch, FormatProtobuf, MediaUpstreamProtobuf, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		{MediaProtobuf + pom, custom, FormatProtobuf, MediaProtobuf, "meta.k8s.io/v1, Kind=PartialObjectMetadata"},
		// Not offered, another group or version, no group: the next clause.
		{MediaJSON + pom + ", " + MediaJSON, Options{Protobuf: true, YAML: true}, FormatJSON, MediaJSON, ""},
		{MediaJSON + ";as=PartialObjectMetadata;g=other.io;v=v1, " + MediaJSON, reads, FormatJSON, MediaJSON, ""},
		{MediaJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v2, " + MediaJSON, reads, FormatJSON, MediaJSON, ""},
		{MediaJSON + ";as=PartialObjectMetadata;v=v1, " + MediaJSON, reads, FormatJSON, MediaJSON, ""},
		{"text/html" + pom + ", " + MediaJSON, reads, FormatJSON, MediaJSON, ""},
	} {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		r.Header.Set("Accept", c.accept)
		out, err := Negotiate(r, c.opts)
		got := ""
		if out.IsMetadata() {
			got = out.Metadata.String()
		}
		if err != nil || out.Format != c.want || out.MediaType != c.media || got != c.gvk {
			t.Errorf("Accept %q: %+v %v, want format %d %s %q", c.accept, out, err, c.want, c.media, c.gvk)
		}
	}
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	r.Header.Set("Accept", MediaJSON+";as=PartialObjectMetadata;g=meta.k8s.io;v=v2")
	if _, err := Negotiate(r, reads); !apierrors.IsNotAcceptable(err) || !strings.Contains(err.Error(), "as=PartialObjectMetadata;") {
		t.Errorf("only an unserved version: %v", err)
	}
}
