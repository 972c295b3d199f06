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
