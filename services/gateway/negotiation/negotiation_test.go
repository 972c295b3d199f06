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

// TestNegotiateDiscovery: as=APIGroupDiscoveryList where offered (/api, /apis), in upstream's
// apidiscovery group or the profile's, v2 (v2beta1 only where offered), JSON, YAML and both
// Protobuf media types; the Content-Type echoes the group, version and kind; anything else falls
// to the next clause.
func TestNegotiateDiscovery(t *testing.T) {
	root := Options{YAML: true, Discovery: true}
	v2 := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	beta := "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	for _, c := range []struct {
		accept string
		opts   Options
		media  string
		gv     string
	}{
		{v2 + "," + beta + ",application/json", root, v2, "apidiscovery.k8s.io/v2"},
		{beta + ",application/json", root, MediaJSON, ""},
		{beta + ",application/json", Options{YAML: true, Discovery: true, DiscoveryV2Beta1: true}, beta, "apidiscovery.k8s.io/v2beta1"},
		{v2 + ",application/json", Options{YAML: true}, MediaJSON, ""},
		{"application/json;g=" + DiscoveryGroup + ";v=v2;as=APIGroupDiscoveryList", root, "application/json;g=" + DiscoveryGroup + ";v=v2;as=APIGroupDiscoveryList", DiscoveryGroup + "/v2"},
		{"application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", root, "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"},
		{MediaUpstreamProtobuf + ";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", root, MediaUpstreamProtobuf + ";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"},
		{"application/json;g=apidiscovery.example.com;v=v2;as=APIGroupDiscoveryList,application/json", root, MediaJSON, ""},
	} {
		r := httptest.NewRequest("GET", "/apis", nil)
		r.Header.Set("Accept", c.accept)
		out, err := Negotiate(r, c.opts)
		if err != nil || out.MediaType != c.media || (c.gv == "") == out.IsDiscovery() || (c.gv != "" && out.Discovery.String() != c.gv) {
			t.Errorf("Accept %q: %+v %v, want %s %s", c.accept, out, err, c.media, c.gv)
		}
	}
	r := httptest.NewRequest("GET", "/apis", nil)
	r.Header.Set("Accept", beta)
	if _, err := Negotiate(r, root); !apierrors.IsNotAcceptable(err) {
		t.Errorf("v2beta1 alone where it is not offered: %v", err)
	}
}
