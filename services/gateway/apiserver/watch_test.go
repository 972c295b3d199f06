package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/gatewaytest"
)

// event is one decoded watch event.
type event struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// watchStream reads watch events from an open response until it ends.
type watchStream struct {
	resp   *http.Response
	events chan event
	cancel context.CancelFunc
}

func openWatch(t *testing.T, c *http.Client, e *gatewaytest.Env, p string, headers ...string) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+p, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	cl := *c
	cl.Timeout = 0
	resp, err := cl.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("watch %s: %d", p, resp.StatusCode)
	}
	w := &watchStream{resp: resp, events: make(chan event, 1000), cancel: cancel}
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("watch line is not an event: %q", sc.Text())
				return
			}
			w.events <- ev
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return w
}

// next returns the next event that is not a bookmark (unless bookmarks are wanted).
func (w *watchStream) next(t *testing.T, bookmarks bool) event {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type == "BOOKMARK" && !bookmarks {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event in 10s")
		}
	}
}

// Spec "Watch": a watch from a list's resourceVersion misses nothing, in order, over HTTP/2 and
// HTTP/1.1 (chunked); DELETED events; synthetic ADDED events for the initial state.
func TestWatch(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", cms, configMap("before", nil)), http.StatusCreated)
	list := must(t, do(t, e, "GET", cms, nil), http.StatusOK)
	rv := path(list, "metadata.resourceVersion").(string)
	for name, client := range map[string]*http.Client{"http2": e.Admin, "http1.1": e.HTTP1("admin", "system:masters")} {
		t.Run(name, func(t *testing.T) {
			rv := path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
			w := openWatch(t, client, e, cms+"?watch=1&resourceVersion="+rv)
			if name == "http1.1" && (w.resp.ProtoMajor != 1 || len(w.resp.TransferEncoding) == 0 || w.resp.TransferEncoding[0] != "chunked") {
				t.Errorf("HTTP/1.1 watch: proto %s, transfer encoding %v", w.resp.Proto, w.resp.TransferEncoding)
			}
			if ct := w.resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("watch Content-Type %q", ct)
			}
			n := name
			must(t, do(t, e, "POST", cms, configMap(n, nil)), http.StatusCreated)
			must(t, do(t, e, "PUT", cms+"/"+n, configMap(n, map[string]string{"a": "b"})), http.StatusOK)
			must(t, do(t, e, "DELETE", cms+"/"+n, nil), http.StatusOK)
			var last int
			for _, want := range []string{"ADDED", "MODIFIED", "DELETED"} {
				ev := w.next(t, false)
				if ev.Type != want || path(ev.Object, "metadata.name") != n || ev.Object["kind"] != "ConfigMap" {
					t.Fatalf("event %s %v, want %s of %s", ev.Type, ev.Object["metadata"], want, n)
				}
				cur := atoi(path(ev.Object, "metadata.resourceVersion").(string))
				if cur <= last {
					t.Errorf("resourceVersion %d after %d", cur, last)
				}
				last = cur
			}
		})
	}
	// Without a resourceVersion: synthetic ADDED events for what exists, then changes.
	w := openWatch(t, e.Admin, e, cms+"?watch=true")
	if ev := w.next(t, false); ev.Type != "ADDED" || path(ev.Object, "metadata.name") != "before" {
		t.Errorf("initial event %s %v", ev.Type, ev.Object["metadata"])
	}
	// Watch of one item (kubectl get cm NAME -w).
	one := openWatch(t, e.Admin, e, cms+"?watch=1&fieldSelector=metadata.name%3Dbefore&resourceVersion="+rv)
	must(t, do(t, e, "POST", cms, configMap("other", nil)), http.StatusCreated)
	must(t, do(t, e, "PUT", cms+"/before", configMap("before", map[string]string{"x": "y"})), http.StatusOK)
	if ev := one.next(t, false); ev.Type != "MODIFIED" || path(ev.Object, "metadata.name") != "before" {
		t.Errorf("field-selected watch got %s %v", ev.Type, ev.Object["metadata"])
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// Spec: bookmarks (allowWatchBookmarks), sendInitialEvents with the initial-events-end bookmark,
// timeoutSeconds, and Table watch events.
func TestWatchOptions(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *gatewayConfig) { c.WatchBookmarkInterval = 200 * time.Millisecond }})
	must(t, do(t, e, "POST", cms, configMap("a", nil)), http.StatusCreated)
	list := must(t, do(t, e, "GET", cms, nil), http.StatusOK)
	rv := path(list, "metadata.resourceVersion").(string)

	w := openWatch(t, e.Admin, e, cms+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv)
	ev := w.next(t, true)
	if ev.Type != "BOOKMARK" || ev.Object["kind"] != "ConfigMap" || path(ev.Object, "metadata.resourceVersion") == "" || path(ev.Object, "metadata.name") != nil {
		t.Errorf("bookmark %v", ev)
	}

	w = openWatch(t, e.Admin, e, cms+"?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
	if ev := w.next(t, false); ev.Type != "ADDED" {
		t.Errorf("sendInitialEvents: first event %v", ev.Type)
	}
	if ev := w.next(t, true); ev.Type != "BOOKMARK" || path(ev.Object, "metadata.annotations").(map[string]any)["k8s.io/initial-events-end"] != "true" {
		t.Errorf("initial-events-end bookmark: %v", ev)
	}
	do(t, e, "GET", cms+"?watch=1&sendInitialEvents=true", nil).status(t, http.StatusBadRequest, "BadRequest")
	do(t, e, "GET", cms+"?watch=1&resourceVersionMatch=NotOlderThan", nil).status(t, http.StatusBadRequest, "BadRequest")

	start := time.Now()
	w = openWatch(t, e.Admin, e, cms+"?watch=1&timeoutSeconds=1&resourceVersion="+rv)
	for range w.events {
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("timeoutSeconds=1 ended the watch after %v", d)
	}

	w = openWatch(t, e.Admin, e, cms+"?watch=1&resourceVersion="+rv, "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	must(t, do(t, e, "POST", cms, configMap("b", nil)), http.StatusCreated)
	ev = w.next(t, false)
	if ev.Type != "ADDED" || ev.Object["kind"] != "Table" || len(ev.Object["rows"].([]any)) != 1 || ev.Object["columnDefinitions"] == nil {
		t.Errorf("Table watch event %v", ev)
	}
	must(t, do(t, e, "POST", cms, configMap("c", nil)), http.StatusCreated)
	if ev = w.next(t, false); ev.Object["columnDefinitions"] != nil {
		t.Errorf("column definitions repeated in a later Table event: %v", ev.Object["columnDefinitions"])
	}
}

// Spec: 410 when the requested history is gone: an ERROR event with a Status for watches.
func TestWatchExpired(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureStorage: func(c *storageConfig) {
		c.HistoryMaxEvents = 5
		c.CompactionInterval = 50 * time.Millisecond
	}})
	first := must(t, do(t, e, "POST", cms, configMap("a", nil)), http.StatusCreated)
	for i := 0; i < 30; i++ {
		must(t, do(t, e, "PUT", cms+"/a", configMap("a", map[string]string{"i": strings.Repeat("x", i)})), http.StatusOK)
	}
	time.Sleep(300 * time.Millisecond)
	w := openWatch(t, e.Admin, e, cms+"?watch=1&resourceVersion="+path(first, "metadata.resourceVersion").(string))
	ev := w.next(t, false)
	if ev.Type != "ERROR" || ev.Object["kind"] != "Status" || ev.Object["code"] != float64(410) || ev.Object["reason"] != "Expired" {
		t.Errorf("watch from a compacted version: %v", ev)
	}
	do(t, e, "GET", cms+"?resourceVersionMatch=Exact&resourceVersion="+path(first, "metadata.resourceVersion").(string), nil).status(t, http.StatusGone, "Expired")
}

// Protobuf watch streams, as client-go's typed clients ask for them: "<type>;stream=watch",
// frames of a 4-byte big-endian length and a WatchEvent whose object is the Protobuf envelope.
// Both the shared hub (from a resourceVersion) and a storage watch (initial events) serve them.
func TestProtobufWatch(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", cms, configMap("first", nil)), http.StatusCreated)
	for _, base := range []string{"?watch=1&resourceVersion=", "?watch=1"} {
		for _, mt := range []string{"application/vnd.platform.protobuf", "application/vnd.kubernetes.protobuf"} {
			q := base
			if strings.HasSuffix(q, "=") {
				q += path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
			}
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+cms+q, nil)
			req.Header.Set("Accept", mt+", application/json")
			resp, err := e.Admin.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if ct := resp.Header.Get("Content-Type"); ct != mt+";stream=watch" {
				t.Errorf("%s: Content-Type %q", q, ct)
			}
			name := fmt.Sprintf("pb-%d", time.Now().UnixNano())
			must(t, do(t, e, "POST", cms, configMap(name, nil)), http.StatusCreated)
			want := name
			if !strings.Contains(q, "resourceVersion") {
				want = "first" // initial events come first
			}
			var size [4]byte
			if _, err := io.ReadFull(resp.Body, size[:]); err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(resp.Body, frame); err != nil {
				t.Fatal(err)
			}
			var ev metav1.WatchEvent
			var unk runtime.Unknown
			var cm corev1.ConfigMap
			if err := ev.Unmarshal(frame); err != nil || ev.Type != "ADDED" || !bytes.HasPrefix(ev.Object.Raw, protobufPrefix) {
				t.Fatalf("%s %s: frame %v %+v", q, mt, err, ev.Type)
			}
			if err := unk.Unmarshal(ev.Object.Raw[4:]); err != nil || unk.Kind != "ConfigMap" || cm.Unmarshal(unk.Raw) != nil || cm.Name != want || cm.ResourceVersion == "" {
				t.Errorf("%s %s: object %v %+v %s", q, mt, err, unk.TypeMeta, cm.Name)
			}
			cancel()
			resp.Body.Close()
		}
	}
}
