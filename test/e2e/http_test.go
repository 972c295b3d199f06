package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/test/stack"
)

// httpClients are raw clients of the stack: one that speaks HTTP/2 and one limited to HTTP/1.1.
func httpClients(t *testing.T, s *stack.Stack) (h2, h1 *http.Client) {
	t.Helper()
	tc, err := s.TLSConfig("e2e-http", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	h2 = &http.Client{Transport: &http.Transport{TLSClientConfig: tc.Clone(), ForceAttemptHTTP2: true}}
	h1 = &http.Client{Transport: &http.Transport{
		TLSClientConfig:   tc.Clone(),
		ForceAttemptHTTP2: false,
		// A non-nil, empty TLSNextProto turns HTTP/2 off.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}
	t.Cleanup(func() {
		h2.CloseIdleConnections()
		h1.CloseIdleConnections()
	})
	return h2, h1
}

// rawEvent is one line of a JSON watch stream.
type rawEvent struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string `json:"kind"`
		Code     int    `json:"code"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"object"`
}

func (e rawEvent) String() string {
	if e.Type == "ERROR" {
		return fmt.Sprintf("ERROR %d %s: %s", e.Object.Code, e.Object.Reason, e.Object.Message)
	}
	return e.Type + " " + e.Object.Metadata.Name + "@" + e.Object.Metadata.ResourceVersion
}

// rawWatch is an open watch over a raw client.
type rawWatch struct {
	resp   *http.Response
	events chan rawEvent
	cancel context.CancelFunc
	mu     sync.Mutex
	endErr error // how the stream ended (nil for a clean end)
}

// openRawWatch opens a watch; it returns nil and the error when the gateway does not answer 200.
func openRawWatch(c *http.Client, url string, wantProto int) (*rawWatch, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch answered %s: %s", resp.Status, body)
	}
	if resp.ProtoMajor != wantProto {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("watch served over %s, want HTTP/%d", resp.Proto, wantProto)
	}
	if wantProto == 1 && !slices.Contains(resp.TransferEncoding, "chunked") {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("HTTP/1.1 watch without chunked transfer encoding: %v", resp.TransferEncoding)
	}
	w := &rawWatch{resp: resp, events: make(chan rawEvent, 1000), cancel: cancel}
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev rawEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				w.setEnd(fmt.Errorf("a watch line is not an event: %q", sc.Text()))
				return
			}
			w.events <- ev
		}
		w.setEnd(sc.Err())
	}()
	return w, nil
}

func (w *rawWatch) setEnd(err error) {
	w.mu.Lock()
	w.endErr = err
	w.mu.Unlock()
}

func (w *rawWatch) end() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.endErr
}

func (w *rawWatch) Close() {
	w.cancel()
	w.resp.Body.Close()
}

// write is a change the test made: its event type, object name and resourceVersion.
type write struct{ typ, name, rv string }

func (w write) String() string { return w.typ + " " + w.name + "@" + w.rv }

// Spec 000 "List, paging and watch behaviour" 4 and "Query parameters" (watch: a chunked stream of
// JSON watch events), over HTTP/2 and over HTTP/1.1 (chunked transfer encoding); and the
// operational rule that the gateway survives a restart of the storage service: within 20 s
// requests succeed again, and an open watch either continues or ends cleanly (never with 410: the
// history is intact), so a client resuming from the last resourceVersion it saw gets every later
// change exactly once, in order.
func TestWatchHTTP1AndHTTP2AcrossStorageRestart(t *testing.T) {
	t.Parallel()
	// Without the root CA publisher, as the shared stack: the watches count every event in the
	// test's namespace, where the publisher adds its ConfigMap whenever its informers have synced
	// (on the busy CI machine, once after the storage restart).
	s := startStack(t, stack.Options{Mode: stack.Split, ControllersArgs: sharedControllersArgs})
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-http-")
	ctx := ctxFor(t, 80*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	h2, h1 := httpClients(t, s)
	collection := s.URL + "/api/v1/namespaces/" + ns + "/configmaps"

	var writes []write
	create := func(name string) {
		t.Helper()
		got, err := cms.Create(ctx, configMap(name, nil, map[string]string{"v": "0"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, write{"ADDED", name, got.GetResourceVersion()})
	}
	update := func(name string) {
		t.Helper()
		cur, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setNested(t, cur, cur.GetResourceVersion(), "data", "v")
		got, err := cms.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, write{"MODIFIED", name, got.GetResourceVersion()})
	}

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watchers := map[string]*http.Client{"HTTP/2": h2, "HTTP/1.1": h1}
	protos := map[string]int{"HTTP/2": 2, "HTTP/1.1": 1}
	open := map[string]*rawWatch{}
	for name, c := range watchers {
		w, err := openRawWatch(c, collection+"?watch=true&resourceVersion="+list.GetResourceVersion(), protos[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(w.Close)
		open[name] = w
	}
	for i := range 10 {
		create(fmt.Sprintf("cm-%d", i))
	}
	// Both streams deliver the ten creates, in order, with the resourceVersions the creates returned.
	seen := map[string][]rawEvent{}
	for name, w := range open {
		seen[name] = collect(t, name, w, 10)
		if got, want := fmt.Sprint(seen[name]), fmt.Sprint(writes); got != want {
			t.Fatalf("%s watch: %s, want %s", name, got, want)
		}
	}

	// Restart the storage service under the open watches.
	restarted := time.Now()
	if err := s.Restart("storage", false); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 20*time.Second, "requests succeed after the storage restart", func() error {
		resp, err := h2.Get(collection)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("list: %s %s", resp.Status, body)
		}
		return nil
	})
	t.Logf("requests succeed %v after the storage restart began", time.Since(restarted).Round(time.Millisecond))
	for i := range 5 {
		update(fmt.Sprintf("cm-%d", i))
	}
	create("cm-late")
	if err := cms.Delete(ctx, "cm-9", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	writes = append(writes, write{typ: "DELETED", name: "cm-9"})
	update("cm-late")

	for name, w := range open {
		last := seen[name][len(seen[name])-1]
		var after []rawEvent
		resumed := false
		for len(after) < len(writes)-10 {
			ev, ok := nextRaw(t, name, w)
			if ok && ev.Type != "ERROR" {
				after = append(after, ev)
				last = ev
				continue
			}
			// The stream ended (with an ERROR event, or not): resume from the last version seen.
			if ok {
				if ev.Object.Code == http.StatusGone {
					t.Fatalf("%s watch: 410 after a storage restart: the history should be intact: %s", name, ev)
				}
				t.Logf("%s watch ended with %s", name, ev)
				for range w.events {
				}
			}
			if err := w.end(); err != nil {
				t.Logf("%s watch stream ended: %v", name, err)
			}
			resumed = true
			w.Close()
			stack.Eventually(t, 20*time.Second, name+" watch resumes", func() error {
				nw, err := openRawWatch(watchers[name], collection+"?watch=true&resourceVersion="+last.Object.Metadata.ResourceVersion, protos[name])
				if err != nil {
					return err
				}
				t.Cleanup(nw.Close)
				w = nw
				return nil
			})
		}
		t.Logf("%s watch: resumed after the storage restart: %v", name, resumed)
		// Every change after the ten creates, once, in order; deletes carry the deletion's version.
		var got []string
		for _, ev := range after {
			got = append(got, ev.Type+" "+ev.Object.Metadata.Name)
		}
		var want []string
		for i, wr := range writes[10:] {
			want = append(want, wr.typ+" "+wr.name)
			if wr.rv != "" && i < len(after) && after[i].Object.Metadata.ResourceVersion != wr.rv {
				t.Errorf("%s watch: event %d is %s, want resourceVersion %s", name, i, after[i], wr.rv)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s watch after the restart: %v, want %v", name, got, want)
		}
		// Nothing more (no duplicates).
		select {
		case ev, ok := <-w.events:
			if ok {
				t.Errorf("%s watch: unexpected event %s", name, ev)
			}
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// collect reads n events (no bookmarks are asked for) from w.
func collect(t *testing.T, name string, w *rawWatch, n int) []rawEvent {
	t.Helper()
	var out []rawEvent
	for len(out) < n {
		ev, ok := nextRaw(t, name, w)
		if !ok {
			t.Fatalf("%s watch ended (%v) after %v", name, w.end(), out)
		}
		if ev.Type == "ERROR" {
			t.Fatalf("%s watch: %s", name, ev)
		}
		out = append(out, ev)
	}
	return out
}

// nextRaw is the next event, or false when the stream has ended; it fails after 20 s.
func nextRaw(t *testing.T, name string, w *rawWatch) (rawEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.events:
		return ev, ok
	case <-time.After(20 * time.Second):
		t.Fatalf("%s watch: no event and no end in 20s", name)
		return rawEvent{}, false
	}
}
