package apiserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"platform.io/services/gateway/gatewaytest"
)

// metadataAccept is the Accept header of client-go's metadata client (k8s.io/client-go/metadata)
// for kind, which names meta.k8s.io in every naming profile.
func metadataAccept(kind string) string {
	c := ";as=" + kind + ";g=meta.k8s.io;v=v1"
	return "application/vnd.kubernetes.protobuf" + c + ",application/json" + c + ",application/json"
}

// unprotobuf reads a Protobuf answer: the envelope's type, and its object into into.
func unprotobuf(t *testing.T, body []byte, into interface{ Unmarshal([]byte) error }) runtime.TypeMeta {
	t.Helper()
	if !bytes.HasPrefix(body, protobufPrefix) {
		t.Fatalf("not Protobuf: %q", body)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(body[4:]); err != nil {
		t.Fatal(err)
	}
	if err := into.Unmarshal(unk.Raw); err != nil {
		t.Fatalf("%+v: %v", unk.TypeMeta, err)
	}
	return unk.TypeMeta
}

// Spec "Content negotiation", PartialObjectMetadata: get, list (with paging) and writes answer
// objects' metadata only, in the meta group version the client named (either group, v1 or
// v1beta1), in JSON, YAML and Protobuf, for built-in and custom resources, never from the
// caches of whole objects' encodings; the wrong one of object and list is 406.
func TestPartialObjectMetadata(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	for _, n := range []string{"a", "b", "c"} {
		cm := configMap(n, map[string]string{"secret": "data"})
		cm["metadata"].(map[string]any)["labels"] = map[string]any{"app": n}
		cm["metadata"].(map[string]any)["annotations"] = map[string]any{"note": n}
		must(t, do(t, e, "POST", cms, cm), http.StatusCreated)
	}
	// Warm the JSON and list caches with the whole objects.
	must(t, do(t, e, "GET", cms+"/a", nil), http.StatusOK)
	must(t, do(t, e, "GET", cms, nil), http.StatusOK)
	must(t, do(t, e, "GET", cms+"?resourceVersion=0", nil), http.StatusOK)

	for _, gv := range []string{"meta.platform.io/v1", "meta.k8s.io/v1", "meta.k8s.io/v1beta1", "meta.platform.io/v1beta1"} {
		g, v, _ := strings.Cut(gv, "/")
		as := func(kind string) string { return "application/json;as=" + kind + ";g=" + g + ";v=" + v }
		r := do(t, e, "GET", cms+"/a", nil, "Accept", as("PartialObjectMetadata"))
		got := must(t, r, http.StatusOK)
		if got["kind"] != "PartialObjectMetadata" || got["apiVersion"] != gv || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s get: %q %s", gv, r.header.Get("Content-Type"), r.body)
		}
		if got["data"] != nil || path(got, "metadata.name") != "a" || path(got, "metadata.labels.app") != "a" || path(got, "metadata.annotations.note") != "a" ||
			path(got, "metadata.resourceVersion") == nil || path(got, "metadata.uid") == nil {
			t.Errorf("%s get: %s", gv, r.body)
		}
		for _, q := range []string{"", "?resourceVersion=0", "?limit=2"} {
			r = do(t, e, "GET", cms+q, nil, "Accept", as("PartialObjectMetadataList"))
			list := must(t, r, http.StatusOK)
			items, _ := list["items"].([]any)
			if list["kind"] != "PartialObjectMetadataList" || list["apiVersion"] != gv || path(list, "metadata.resourceVersion") == nil || len(items) == 0 {
				t.Fatalf("%s list%s: %s", gv, q, r.body)
			}
			for _, it := range items {
				it := it.(map[string]any)
				if it["kind"] != "PartialObjectMetadata" || it["apiVersion"] != gv || it["data"] != nil || path(it, "metadata.name") == nil {
					t.Errorf("%s list%s item: %v", gv, q, it)
				}
			}
			if q == "?limit=2" && (len(items) != 2 || path(list, "metadata.continue") == nil || path(list, "metadata.remainingItemCount") != float64(1)) {
				t.Errorf("%s first page: %s", gv, r.body)
			}
		}
		// The wrong one of the two is 406, in upstream's words.
		msg := do(t, e, "GET", cms, nil, "Accept", as("PartialObjectMetadata")).status(t, http.StatusNotAcceptable, "NotAcceptable")
		if !strings.Contains(msg, "you requested PartialObjectMetadata, but the requested object is a list (*v1.ConfigMapList)") {
			t.Errorf("PartialObjectMetadata of a list: %q", msg)
		}
		msg = do(t, e, "GET", cms+"/a", nil, "Accept", as("PartialObjectMetadataList")).status(t, http.StatusNotAcceptable, "NotAcceptable")
		if !strings.Contains(msg, "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.ConfigMap)") {
			t.Errorf("PartialObjectMetadataList of an object: %q", msg)
		}
	}

	// Errors stay Status objects; a missing object is 404, not 406.
	do(t, e, "GET", cms+"/missing", nil, "Accept", metadataAccept("PartialObjectMetadata")).status(t, http.StatusNotFound, "NotFound")

	// YAML and pretty JSON.
	r := do(t, e, "GET", cms+"/b", nil, "Accept", "application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	var y map[string]any
	if err := yaml.Unmarshal(r.body, &y); err != nil || r.header.Get("Content-Type") != "application/yaml" || y["kind"] != "PartialObjectMetadata" || y["data"] != nil || path(y, "metadata.name") != "b" {
		t.Errorf("YAML: %v %q %s", err, r.header.Get("Content-Type"), r.body)
	}
	r = do(t, e, "GET", cms+"?pretty=true", nil, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if got := must(t, r, http.StatusOK); got["kind"] != "PartialObjectMetadataList" || !bytes.Contains(r.body, []byte("\n  \"")) || bytes.Contains(r.body, []byte(`"secret": "data"`)) {
		t.Errorf("pretty list: %s", r.body)
	}

	// Protobuf, as client-go's metadata client asks, in both media types.
	for _, mt := range []string{"application/vnd.kubernetes.protobuf", "application/vnd.platform.protobuf"} {
		r = do(t, e, "GET", cms+"/c", nil, "Accept", strings.Replace(metadataAccept("PartialObjectMetadata"), "application/vnd.kubernetes.protobuf", mt, 1))
		var pom metav1.PartialObjectMetadata
		if tm := unprotobuf(t, r.body, &pom); r.header.Get("Content-Type") != mt || tm.Kind != "PartialObjectMetadata" || tm.APIVersion != "meta.k8s.io/v1" ||
			pom.Name != "c" || pom.Labels["app"] != "c" || pom.ResourceVersion == "" {
			t.Errorf("%s get: %q %+v %+v", mt, r.header.Get("Content-Type"), tm, pom.ObjectMeta)
		}
	}
	r = do(t, e, "GET", cms+"?limit=1", nil, "Accept", metadataAccept("PartialObjectMetadataList"))
	var pl metav1.PartialObjectMetadataList
	if tm := unprotobuf(t, r.body, &pl); tm.Kind != "PartialObjectMetadataList" || tm.APIVersion != "meta.k8s.io/v1" || len(pl.Items) != 1 || pl.Continue == "" ||
		pl.RemainingItemCount == nil || *pl.RemainingItemCount != 2 || pl.Items[0].Name != "a" {
		t.Errorf("Protobuf list: %+v %+v %d", tm, pl.ListMeta, len(pl.Items))
	}
	r = do(t, e, "GET", cms, nil, "Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1")
	var pl1 metav1beta1.PartialObjectMetadataList
	if tm := unprotobuf(t, r.body, &pl1); tm.APIVersion != "meta.k8s.io/v1beta1" || len(pl1.Items) != 3 || pl1.ResourceVersion == "" {
		t.Errorf("Protobuf v1beta1 list: %+v %+v %d", tm, pl1.ListMeta, len(pl1.Items))
	}

	// Writes answer metadata too (client-go's metadata client patches asking for it).
	r = do(t, e, "PATCH", cms+"/a", `{"metadata":{"labels":{"patched":"yes"}}}`, "Content-Type", "application/merge-patch+json",
		"Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	if got := must(t, r, http.StatusOK); got["kind"] != "PartialObjectMetadata" || got["data"] != nil || path(got, "metadata.labels.patched") != "yes" {
		t.Errorf("patch: %s", r.body)
	}
	r = do(t, e, "PATCH", cms+"/a", `{"metadata":{"labels":{"again":"yes"}}}`, "Content-Type", "application/merge-patch+json", "Accept", metadataAccept("PartialObjectMetadata"))
	var pom metav1.PartialObjectMetadata
	if tm := unprotobuf(t, r.body, &pom); r.code != http.StatusOK || tm.Kind != "PartialObjectMetadata" || pom.Labels["again"] != "yes" {
		t.Errorf("Protobuf patch: %d %+v %+v", r.code, tm, pom.ObjectMeta)
	}

	// A resource addressed under upstream's group name.
	r = do(t, e, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles?limit=1", nil, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if got := must(t, r, http.StatusOK); got["kind"] != "PartialObjectMetadataList" || path(got, "items") == nil || bytes.Contains(r.body, []byte(`"rules"`)) {
		t.Errorf("upstream group name: %s", r.body)
	}

	// A custom resource: Protobuf too, since PartialObjectMetadata is a built-in type.
	establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")
	const widgets = "/apis/example.com/v1/namespaces/default/widgets"
	must(t, do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"app":"w"}},"spec":{"size":2}}`), http.StatusCreated)
	must(t, do(t, e, "GET", widgets+"/w", nil), http.StatusOK)
	do(t, e, "GET", widgets+"/w", nil, "Accept", "application/vnd.kubernetes.protobuf").status(t, http.StatusNotAcceptable, "NotAcceptable")
	r = do(t, e, "GET", widgets+"/w", nil, "Accept", metadataAccept("PartialObjectMetadata"))
	pom = metav1.PartialObjectMetadata{}
	if tm := unprotobuf(t, r.body, &pom); tm.Kind != "PartialObjectMetadata" || pom.Name != "w" || pom.Labels["app"] != "w" {
		t.Errorf("custom resource get: %+v %+v", tm, pom.ObjectMeta)
	}
	r = do(t, e, "GET", widgets, nil, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.platform.io;v=v1")
	if got := must(t, r, http.StatusOK); got["kind"] != "PartialObjectMetadataList" || bytes.Contains(r.body, []byte(`"spec"`)) || len(got["items"].([]any)) != 1 {
		t.Errorf("custom resource list: %s", r.body)
	}
	msg := do(t, e, "GET", widgets, nil, "Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").status(t, http.StatusNotAcceptable, "NotAcceptable")
	if !strings.Contains(msg, "is a list (*unstructured.UnstructuredList)") {
		t.Errorf("custom resource 406: %q", msg)
	}
}

// readFrame reads one frame of a Protobuf watch stream.
func readFrame(t *testing.T, body io.Reader) metav1.WatchEvent {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(body, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(body, frame); err != nil {
		t.Fatal(err)
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame); err != nil {
		t.Fatal(err)
	}
	return ev
}

// Spec "Watch", PartialObjectMetadata: every event's object, bookmarks too (resourceVersion and
// the initial-events-end annotation kept), is PartialObjectMetadata, from the shared hub (beside
// watches of whole objects) and from storage watches, in JSON and Protobuf; a watch asking for
// PartialObjectMetadataList is 406.
func TestPartialObjectMetadataWatch(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *gatewayConfig) { c.WatchBookmarkInterval = 200 * time.Millisecond }})
	must(t, do(t, e, "POST", cms, configMap("first", map[string]string{"secret": "data"})), http.StatusCreated)
	rv := path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
	const asJSON = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

	// From the hub: a whole-object watch and metadata watches of the same events.
	whole := openWatch(t, e.Admin, e, cms+"?watch=1&resourceVersion="+rv)
	meta := openWatch(t, e.Admin, e, cms+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv, "Accept", asJSON)
	metaPlatform := openWatch(t, e.Admin, e, cms+"?watch=1&resourceVersion="+rv, "Accept", "application/json;as=PartialObjectMetadata;g=meta.platform.io;v=v1")
	if ct := meta.resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	must(t, do(t, e, "POST", cms, configMap("second", map[string]string{"secret": "data"})), http.StatusCreated)
	must(t, do(t, e, "DELETE", cms+"/second", nil), http.StatusOK)
	for _, want := range []string{"ADDED", "DELETED"} {
		if ev := whole.next(t, false); ev.Type != want || ev.Object["kind"] != "ConfigMap" || path(ev.Object, "data.secret") != "data" {
			t.Errorf("whole-object watch: %s %v", ev.Type, ev.Object)
		}
		ev := meta.next(t, false)
		if ev.Type != want || ev.Object["kind"] != "PartialObjectMetadata" || ev.Object["apiVersion"] != "meta.k8s.io/v1" || ev.Object["data"] != nil ||
			path(ev.Object, "metadata.name") != "second" || path(ev.Object, "metadata.resourceVersion") == nil {
			t.Errorf("metadata watch: %s %v", ev.Type, ev.Object)
		}
		if ev := metaPlatform.next(t, false); ev.Type != want || ev.Object["apiVersion"] != "meta.platform.io/v1" || ev.Object["data"] != nil {
			t.Errorf("metadata watch in meta.platform.io: %s %v", ev.Type, ev.Object)
		}
	}
	if ev := meta.next(t, true); ev.Type != "BOOKMARK" || ev.Object["kind"] != "PartialObjectMetadata" || path(ev.Object, "metadata.resourceVersion") == nil {
		t.Errorf("bookmark: %v", ev)
	}

	// From storage: initial events, then the initial-events-end bookmark.
	w := openWatch(t, e.Admin, e, cms+"?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan", "Accept", asJSON)
	if ev := w.next(t, false); ev.Type != "ADDED" || ev.Object["kind"] != "PartialObjectMetadata" || path(ev.Object, "metadata.name") != "first" || ev.Object["data"] != nil {
		t.Errorf("initial event: %v", ev)
	}
	ev := w.next(t, true)
	ann, _ := path(ev.Object, "metadata.annotations").(map[string]any)
	if ev.Type != "BOOKMARK" || ev.Object["kind"] != "PartialObjectMetadata" || path(ev.Object, "metadata.resourceVersion") == nil || ann["k8s.io/initial-events-end"] != "true" {
		t.Errorf("initial-events-end bookmark: %v", ev)
	}

	// Protobuf, from the hub and from storage, as client-go's metadata client asks.
	for _, q := range []string{"?watch=1&resourceVersion=" + rv, "?watch=1"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+cms+q, nil)
		req.Header.Set("Accept", metadataAccept("PartialObjectMetadata"))
		resp, err := e.Admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
			t.Errorf("%s: Content-Type %q", q, ct)
		}
		ev := readFrame(t, resp.Body)
		var pom metav1.PartialObjectMetadata
		if tm := unprotobuf(t, ev.Object.Raw, &pom); ev.Type != "ADDED" || tm.Kind != "PartialObjectMetadata" || tm.APIVersion != "meta.k8s.io/v1" || pom.Name == "" || pom.ResourceVersion == "" {
			t.Errorf("%s: %s %+v %+v", q, ev.Type, tm, pom.ObjectMeta)
		}
		cancel()
		resp.Body.Close()
	}

	msg := do(t, e, "GET", cms+"?watch=1", nil, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").status(t, http.StatusNotAcceptable, "NotAcceptable")
	if !strings.Contains(msg, "you requested PartialObjectMetadataList, but the requested object is not a list") {
		t.Errorf("PartialObjectMetadataList watch: %q", msg)
	}
}
