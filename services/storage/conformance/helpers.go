package conformance

import (
	"context"
	"testing"
	"time"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
)

func mustCreate(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, o *storagev1.Object) *storagev1.Object {
	t.Helper()
	resp, err := c.Create(ctxFor(t), &storagev1.CreateRequest{Type: rt, Object: o})
	if err != nil {
		t.Fatalf("create %s/%s: %v", o.GetNamespace(), o.GetName(), err)
	}
	return resp.GetObject()
}

func mustUpdate(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, o *storagev1.Object, rv int64) *storagev1.UpdateResponse {
	t.Helper()
	resp, err := c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: o, Preconditions: &storagev1.Preconditions{ResourceVersion: rv}})
	if err != nil {
		t.Fatalf("update %s/%s: %v", o.GetNamespace(), o.GetName(), err)
	}
	return resp
}

func mustDelete(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, ns, name string) *storagev1.DeleteResponse {
	t.Helper()
	resp, err := c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: ns, Name: name})
	if err != nil {
		t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
	return resp
}

func mustList(t *testing.T, c *storage.Client, req *storagev1.ListRequest) *storagev1.ListResponse {
	t.Helper()
	resp, err := c.List(ctxFor(t), req)
	if err != nil {
		t.Fatalf("list %v: %v", req, err)
	}
	return resp
}

func revision(t *testing.T, c *storage.Client, rt *storagev1.ResourceType) (int64, int64) {
	t.Helper()
	resp, err := c.Revision(ctxFor(t), &storagev1.RevisionRequest{Type: rt})
	if err != nil {
		t.Fatalf("revision: %v", err)
	}
	return resp.GetCurrent(), resp.GetCompacted()
}

func wantReason(t *testing.T, err error, want storagev1.ErrorReason, what string) {
	t.Helper()
	if got := storage.ReasonOf(err); got != want {
		t.Fatalf("%s: got error %v (reason %v), want reason %v", what, err, got, want)
	}
}

// watcher collects a watch's events in the background.
type watcher struct {
	t      *testing.T
	events chan *storagev1.Event
	errc   chan error
	cancel context.CancelFunc
}

func startWatch(t *testing.T, c *storage.Client, req *storagev1.WatchRequest) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Watch(ctx, req)
	if err != nil {
		cancel()
		t.Fatalf("watch: %v", err)
	}
	w := &watcher{t: t, events: make(chan *storagev1.Event, 100000), errc: make(chan error, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		for {
			evs, err := stream.Recv()
			if err != nil {
				w.errc <- err
				return
			}
			for _, ev := range evs {
				w.events <- ev
			}
		}
	}()
	return w
}

// next returns the next event, skipping bookmarks unless keepBookmarks.
func (w *watcher) next(keepBookmarks bool, timeout time.Duration) *storagev1.Event {
	w.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-w.events:
			if ev.GetType() == storagev1.EventType_BOOKMARK && !keepBookmarks {
				continue
			}
			return ev
		case err := <-w.errc:
			w.t.Fatalf("watch ended: %v", err)
		case <-deadline:
			w.t.Fatalf("no watch event within %v", timeout)
		}
	}
}

// expectEnd waits for the watch to end and returns its error.
func (w *watcher) expectEnd(timeout time.Duration) error {
	w.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case <-w.events:
		case err := <-w.errc:
			return err
		case <-deadline:
			w.t.Fatalf("watch did not end within %v", timeout)
		}
	}
}

// expectQuiet asserts that no non-bookmark event arrives for d.
func (w *watcher) expectQuiet(d time.Duration) {
	w.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-w.events:
			if ev.GetType() != storagev1.EventType_BOOKMARK {
				w.t.Fatalf("unexpected event %v %s rv=%d", ev.GetType(), ev.GetObject().GetName(), ev.GetResourceVersion())
			}
		case err := <-w.errc:
			w.t.Fatalf("watch ended: %v", err)
		case <-deadline:
			return
		}
	}
}
