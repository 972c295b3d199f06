package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"platform.io/test/stack"
)

// Metadata-only reads with client-go's metadata client and a metadata informer (what garbage
// collectors use) against the shared split stack: ConfigMaps and a custom resource, each in
// Protobuf (the client's first choice) and in JSON. client-go names meta.k8s.io in every naming
// profile.
func TestMetadata(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ctx := ctxFor(t, 3*time.Minute)
	gizmos := createGizmoDefinition(t, ctx, dyn, "metadata-e2e.example.com")
	for _, useJSON := range []bool{false, true} {
		enc := map[bool]string{false: "protobuf", true: "json"}[useJSON]
		t.Run("configmaps/"+enc, func(t *testing.T) {
			ns := createNamespace(t, dyn, "e2e-metadata-")
			checkMetadataClient(t, ctx, s, dyn, configMapsGVR, ns, useJSON, metadataConfigMap)
		})
		t.Run("custom/"+enc, func(t *testing.T) {
			ns := createNamespace(t, dyn, "e2e-metadata-")
			checkMetadataClient(t, ctx, s, dyn, gizmos, ns, useJSON, gizmo(gizmos))
		})
	}
}

// The same in the all-in-one binary (gateway and embedded storage in one process), without the
// root CA publisher (its ConfigMap in the test's namespace would be one more to page through).
func TestMetadataAllInOne(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne, GatewayArgs: sharedControllersArgs})
	dyn := dynamicClient(t, s)
	ctx := ctxFor(t, 2*time.Minute)
	gizmos := createGizmoDefinition(t, ctx, dyn, "metadata-allinone.example.com")
	t.Run("configmaps/protobuf", func(t *testing.T) {
		checkMetadataClient(t, ctx, s, dyn, configMapsGVR, createNamespace(t, dyn, "e2e-metadata-"), false, metadataConfigMap)
	})
	t.Run("custom/json", func(t *testing.T) {
		checkMetadataClient(t, ctx, s, dyn, gizmos, createNamespace(t, dyn, "e2e-metadata-"), true, gizmo(gizmos))
	})
}

// metadataConfigMap is a ConfigMap with data (which metadata answers must not carry).
func metadataConfigMap(name string) *unstructured.Unstructured {
	return configMap(name, map[string]string{"set": "meta"}, map[string]string{"payload": "not metadata"})
}

// createGizmoDefinition creates a namespaced custom resource (Gizmo) in group, waits until it is
// established and deletes it at the end of the test.
func createGizmoDefinition(t *testing.T, ctx context.Context, dyn dynamic.Interface, group string) schema.GroupVersionResource {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crdsGVR.GroupVersion().String(), "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{"payload": map[string]any{"type": "string"}}},
				}}},
			}},
		},
	}}
	createEstablished(t, ctx, dyn, crd)
	t.Cleanup(func() {
		_ = dyn.Resource(crdsGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gizmos"}
}

// gizmo makes Gizmos of the definition's group.
func gizmo(gvr schema.GroupVersionResource) func(string) *unstructured.Unstructured {
	return func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Gizmo",
			"spec": map[string]any{"payload": "not metadata"},
		}}
		u.SetName(name)
		u.SetLabels(map[string]string{"set": "meta"})
		return u
	}
}

// mediaRecorder is the metadata client's transport: it records the media type of every answer
// to a metadata request and, for JSON, drops the Protobuf clauses from the client's Accept
// header (the client always asks for Protobuf first).
type mediaRecorder struct {
	next http.RoundTripper
	json bool

	mu   sync.Mutex
	seen map[string]int
}

func (m *mediaRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	accept := req.Header.Get("Accept")
	asMetadata := strings.Contains(accept, "as=PartialObjectMetadata")
	if asMetadata && m.json {
		var keep []string
		for _, c := range strings.Split(accept, ",") {
			if !strings.HasPrefix(strings.TrimSpace(c), "application/vnd.kubernetes.protobuf") {
				keep = append(keep, c)
			}
		}
		req = req.Clone(req.Context())
		req.Header.Set("Accept", strings.Join(keep, ","))
	}
	resp, err := m.next.RoundTrip(req)
	if err != nil || !asMetadata || resp.StatusCode >= 300 {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	seen := mt
	if req.URL.Query().Get("watch") == "" {
		// Not a watch: the answer's type too. client-go clears it from what it decodes, and falls
		// back to reading a whole object's JSON as metadata, so only the answer itself shows that
		// the server converted it.
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var tm runtime.TypeMeta
		if mt == "application/vnd.kubernetes.protobuf" && len(body) > 4 {
			var unk runtime.Unknown
			_ = unk.Unmarshal(body[4:])
			tm = unk.TypeMeta
		} else {
			_ = json.Unmarshal(body, &tm)
		}
		seen += " " + tm.APIVersion + " " + tm.Kind
	}
	m.mu.Lock()
	m.seen[seen]++
	m.mu.Unlock()
	return resp, nil
}

// answers are the media types (and, but for watches, the types) of the answers to metadata
// requests so far.
func (m *mediaRecorder) answers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for mt := range m.seen {
		out = append(out, mt)
	}
	sort.Strings(out)
	return out
}

// checkMetadataClient creates objects of gvr in ns (newObj) with the dynamic client and reads them
// with the metadata client (Get, List by pages, Watch from a list and with initial events) and a
// metadata informer, in Protobuf or JSON: every answer is metadata only, in meta.k8s.io/v1.
func checkMetadataClient(t *testing.T, ctx context.Context, s *stack.Stack, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, useJSON bool, newObj func(string) *unstructured.Unstructured) {
	rec := &mediaRecorder{json: useJSON, seen: map[string]int{}}
	cfg := restConfig(t, s, "e2e-admin")
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := dyn.Resource(gvr).Namespace(ns)
	metas := mc.Resource(gvr).Namespace(ns)
	uids := map[string]string{}
	for _, n := range []string{"m1", "m2", "m3"} {
		created, err := objs.Create(ctx, newObj(n), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = string(created.GetUID())
	}

	// Get (the answers' types are checked at the end, from the transport).
	got, err := metas.Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "m1" || got.Namespace != ns ||
		string(got.UID) != uids["m1"] || got.Labels["set"] != "meta" || got.ResourceVersion == "" {
		t.Errorf("get: %+v %+v", got.TypeMeta, got.ObjectMeta)
	}
	if _, err := metas.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing object: %v", err)
	}

	// List in pages of two: list metadata kept (continue, remainingItemCount).
	first, err := metas.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 2 || first.Continue == "" ||
		first.RemainingItemCount == nil || *first.RemainingItemCount != 1 || first.ResourceVersion == "" {
		t.Fatalf("first page: %+v %+v, %d items", first.TypeMeta, first.ListMeta, len(first.Items))
	}
	rest, err := metas.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range append(first.Items, rest.Items...) {
		names = append(names, it.Name)
		if string(it.UID) != uids[it.Name] || it.Labels["set"] != "meta" {
			t.Errorf("list item %+v", it.ObjectMeta)
		}
	}
	if !slices.Equal(names, []string{"m1", "m2", "m3"}) || rest.Continue != "" {
		t.Errorf("pages: %v, continue %q", names, rest.Continue)
	}
	all, err := metas.List(ctx, metav1.ListOptions{LabelSelector: "set=meta"})
	if err != nil || len(all.Items) != 3 {
		t.Fatalf("list by label: %v %v", err, all)
	}

	// Watch from the list's resourceVersion (the gateway's shared watch of the type).
	w, err := metas.Watch(ctx, metav1.ListOptions{ResourceVersion: all.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	m1 := newObj("m1")
	m1.SetLabels(map[string]string{"set": "meta", "changed": "yes"})
	m1.SetResourceVersion(got.ResourceVersion)
	if _, err := objs.Update(ctx, m1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := objs.Delete(ctx, "m2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Modified, "m1"}, {watch.Deleted, "m2"}} {
		ev := nextEvent(t, w)
		pom, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("watch event object %T", ev.Object)
		}
		if ev.Type != want.typ || pom.Name != want.name || string(pom.UID) != uids[want.name] || pom.ResourceVersion == "" {
			t.Errorf("watch event %s %+v, want %s of %s", ev.Type, pom.ObjectMeta, want.typ, want.name)
		}
		if want.name == "m1" && pom.Labels["changed"] != "yes" {
			t.Errorf("modified labels %v", pom.Labels)
		}
	}
	w.Stop()

	// Watch with the initial state: ADDED events, then the bookmark that ends them.
	w, err = metas.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var initial []string
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			pom, isPOM := ev.Object.(*metav1.PartialObjectMetadata)
			switch {
			case !isPOM:
				t.Fatalf("initial events: %s %T", ev.Type, ev.Object)
			case ev.Type == watch.Added:
				initial = append(initial, pom.Name)
			case ev.Type == watch.Bookmark && pom.Annotations[metav1.InitialEventsAnnotationKey] == "true":
				if pom.ResourceVersion == "" {
					t.Errorf("initial-events-end bookmark without a resourceVersion")
				}
				done = true
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no initial-events-end bookmark in 10s (initial events %v)", initial)
		}
	}
	if sort.Strings(initial); !slices.Equal(initial, []string{"m1", "m3"}) {
		t.Errorf("initial events %v", initial)
	}
	w.Stop()

	// A metadata informer: synced with what exists, then told of changes.
	inf := metadatainformer.NewFilteredMetadataInformer(mc, gvr, ns, 0, cache.Indexers{}, nil).Informer()
	events := make(chan string, 100)
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pom, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return fmt.Sprintf("not metadata: %T", obj)
		}
		return pom.Name
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + name(obj) },
		UpdateFunc: func(_, obj any) { events <- "update " + name(obj) },
		DeleteFunc: func(obj any) { events <- "delete " + name(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
		t.Fatal("the metadata informer did not sync")
	}
	var keys []string
	for _, obj := range inf.GetStore().List() {
		keys = append(keys, name(obj))
	}
	if sort.Strings(keys); !slices.Equal(keys, []string{"m1", "m3"}) {
		t.Errorf("informer store %v", keys)
	}
	expect := func(want string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got := <-events:
				if got == want {
					return
				}
				if strings.HasPrefix(got, "add m") || strings.HasPrefix(got, "update ") {
					continue // the initial adds, resyncs
				}
				t.Fatalf("informer event %q, want %q", got, want)
			case <-timeout:
				t.Fatalf("no informer event %q in 10s", want)
			}
		}
	}
	if _, err := objs.Create(ctx, newObj("m4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add m4")
	if err := objs.Delete(ctx, "m4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete m4")
	stop()

	mt := "application/vnd.kubernetes.protobuf"
	if useJSON {
		mt = "application/json"
	}
	want := []string{mt, mt + " meta.k8s.io/v1 PartialObjectMetadata", mt + " meta.k8s.io/v1 PartialObjectMetadataList"}
	if got := rec.answers(); !slices.Equal(got, want) {
		t.Errorf("answers to metadata requests: %q, want %q", got, want)
	}
}
