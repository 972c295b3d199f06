package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

// Run runs every guarantee against the backend that newHarness starts.
func Run(t *testing.T, newHarness Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"UpdateIsCompareAndSwap", testUpdateCAS},
		{"DeleteWithPreconditions", testDeletePreconditions},
		{"DenseIncreasingRevisionsAgreeWithListAndWatch", testDenseRevisions},
		{"MostRecentReadsAreConsistent", testConsistentReads},
		{"ListAtExactRevision", testListExact},
		{"ResourceVersionSemantics", testRVSemantics},
		{"PagingAtFirstPageRevisionWhileWritesContinue", testPaging},
		{"ContinueTokensAreTamperSafe", testContinueTamper},
		{"ContinueTokensExpireWithCompaction", testContinueExpires},
		{"SelectorsAndNamespaces", testSelectors},
		{"WatchFromRetainedRevisionExactlyOnceInOrder", testWatchRetained},
		{"WatchWithInitialEvents", testWatchInitial},
		{"WatchSelectorTransitions", testWatchSelectors},
		{"WatchWithIndexAttributes", testWatchIndexAttributes},
		{"WatchFromCompactedRevisionIsExpired", testWatchCompacted},
		{"WatchFromFutureRevisionWaitsThenTooLarge", testWatchFuture},
		{"SlowWatcherBlocksNobodyAndExpiresPastCompaction", testSlowWatcher},
		{"BookmarksCarryProgressForIdleTypes", testBookmarks},
		{"RetentionCompactsByTimeAndSize", testRetention},
		{"BadInputIsInvalidNotACrash", testBadInput},
		{"ServiceRestartMidStreamResumesWithoutGapOrDuplicate", testServiceRestart},
		{"BackendCrashLosesNoAcknowledgedWrite", testBackendCrash},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness) })
	}
}

func testCreateAndGet(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	o := obj("ns1", "a", "v1", map[string]string{"app": "x"})
	o.Uid = "uid-a"
	o.Fields = map[string]string{"spec.nodeName": "n1"}
	created := mustCreate(t, c, rt, o)
	if created.GetResourceVersion() != 1 {
		t.Fatalf("first create of a type got revision %d, want 1", created.GetResourceVersion())
	}
	got, err := c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns1", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	g := got.GetObject()
	if !bytes.Equal(g.GetValue(), []byte("v1")) || g.GetResourceVersion() != 1 || g.GetUid() != "uid-a" {
		t.Fatalf("get returned %v", g)
	}
	// Labels and fields are index attributes: reads leave them out, selectors see them.
	if len(g.GetLabels()) != 0 || len(g.GetFields()) != 0 || len(created.GetLabels()) != 0 {
		t.Fatalf("reads returned index attributes: %v / %v", g, created)
	}
	for _, req := range []*storagev1.ListRequest{
		{Type: rt, LabelSelector: "app=x"},
		{Type: rt, FieldSelector: "spec.nodeName=n1"},
	} {
		if items := mustList(t, c, req).GetItems(); len(items) != 1 || len(items[0].GetLabels()) != 0 {
			t.Fatalf("%v: %v", req, items)
		}
	}
	_, err = c.Create(ctxFor(t), &storagev1.CreateRequest{Type: rt, Object: obj("ns1", "a", "v2", nil)})
	wantReason(t, err, storagev1.ErrorReason_ALREADY_EXISTS, "create of an existing key")
	_, err = c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns1", Name: "missing"})
	wantReason(t, err, storagev1.ErrorReason_NOT_FOUND, "get of a missing key")
	_, err = c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns2", Name: "a"})
	wantReason(t, err, storagev1.ErrorReason_NOT_FOUND, "get in another namespace")
	// The same name in another namespace and in another type are other keys.
	mustCreate(t, c, rt, obj("ns2", "a", "other", nil))
	if o2 := mustCreate(t, c, newType(), obj("ns1", "a", "v", nil)); o2.GetResourceVersion() != 1 {
		t.Fatalf("revisions are per type: a new type's first write got %d", o2.GetResourceVersion())
	}
}

func testUpdateCAS(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	o := obj("", "a", "v1", nil)
	o.Uid = "u1"
	created := mustCreate(t, c, rt, o)
	resp := mustUpdate(t, c, rt, obj("", "a", "v2", nil), created.GetResourceVersion())
	if resp.GetObject().GetResourceVersion() != 2 || string(resp.GetObject().GetValue()) != "v2" {
		t.Fatalf("update returned %v", resp.GetObject())
	}
	if resp.GetPrevious().GetResourceVersion() != 1 || string(resp.GetPrevious().GetValue()) != "v1" {
		t.Fatalf("update returned previous %v", resp.GetPrevious())
	}
	if resp.GetObject().GetUid() != "u1" {
		t.Fatalf("update changed the uid to %q", resp.GetObject().GetUid())
	}
	// A stale resourceVersion conflicts and changes nothing.
	_, err := c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("", "a", "v3", nil), Preconditions: &storagev1.Preconditions{ResourceVersion: 1}})
	wantReason(t, err, storagev1.ErrorReason_CONFLICT, "update with a stale resourceVersion")
	if se := err.(*storage.Error); se.CurrentRevision != 2 {
		t.Fatalf("conflict carries current revision %d, want 2", se.CurrentRevision)
	}
	_, err = c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("", "a", "v3", nil), Preconditions: &storagev1.Preconditions{Uid: "other"}})
	wantReason(t, err, storagev1.ErrorReason_CONFLICT, "update with a wrong uid")
	got, err := c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Name: "a"})
	if err != nil || string(got.GetObject().GetValue()) != "v2" || got.GetObject().GetResourceVersion() != 2 {
		t.Fatalf("after failed updates: %v %v", got, err)
	}
	// No precondition: unconditional.
	resp, err = c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("", "a", "v4", nil)})
	if err != nil || resp.GetObject().GetResourceVersion() != 3 {
		t.Fatalf("unconditional update: %v %v", resp, err)
	}
	_, err = c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("", "missing", "v", nil)})
	wantReason(t, err, storagev1.ErrorReason_NOT_FOUND, "update of a missing key")

	// Racing writers with the same expected revision: exactly one wins.
	const racers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("", "a", fmt.Sprint("r", i), nil), Preconditions: &storagev1.Preconditions{ResourceVersion: 3}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case storage.IsConflict(err):
				conflicts++
			default:
				t.Errorf("racing update: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != racers-1 {
		t.Fatalf("racing CAS: %d wins, %d conflicts; want 1 and %d", wins, conflicts, racers-1)
	}
}

func testDeletePreconditions(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	o := obj("ns", "a", "v1", nil)
	o.Uid = "u1"
	created := mustCreate(t, c, rt, o)
	_, err := c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: "ns", Name: "a", Preconditions: &storagev1.Preconditions{ResourceVersion: 99}})
	wantReason(t, err, storagev1.ErrorReason_CONFLICT, "delete with a wrong resourceVersion")
	_, err = c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: "ns", Name: "a", Preconditions: &storagev1.Preconditions{Uid: "u2"}})
	wantReason(t, err, storagev1.ErrorReason_CONFLICT, "delete with a wrong uid")
	resp, err := c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: "ns", Name: "a",
		Preconditions: &storagev1.Preconditions{ResourceVersion: created.GetResourceVersion(), Uid: "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.GetPrevious().GetValue()) != "v1" || resp.GetPrevious().GetResourceVersion() != 1 || resp.GetResourceVersion() != 2 {
		t.Fatalf("delete returned %v", resp)
	}
	_, err = c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns", Name: "a"})
	wantReason(t, err, storagev1.ErrorReason_NOT_FOUND, "get after delete")
	_, err = c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: "ns", Name: "a"})
	wantReason(t, err, storagev1.ErrorReason_NOT_FOUND, "second delete")
	// The name can be reused after deletion.
	if again := mustCreate(t, c, rt, obj("ns", "a", "v2", nil)); again.GetResourceVersion() != 3 {
		t.Fatalf("re-create got revision %d", again.GetResourceVersion())
	}
}

func testDenseRevisions(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	first := mustCreate(t, c, rt, obj("ns", "seed", "0", nil))
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: fmt.Sprint(first.GetResourceVersion())})
	const writers, perWriter = 8, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int64]string{} // revision -> what the writer did
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", i)
			rv := mustCreate(t, c, rt, obj("ns", name, "0", nil)).GetResourceVersion()
			record := func(rev int64, what string) {
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := acked[rev]; dup {
					t.Errorf("revision %d acknowledged twice: %s and %s", rev, prev, what)
				}
				acked[rev] = what
			}
			record(rv, "create "+name)
			for j := 1; j < perWriter-1; j++ {
				rv = mustUpdate(t, c, rt, obj("ns", name, fmt.Sprint(j), nil), rv).GetObject().GetResourceVersion()
				record(rv, fmt.Sprintf("update %s %d", name, j))
			}
			record(mustDelete(t, c, rt, "ns", name).GetResourceVersion(), "delete "+name)
		}()
	}
	wg.Wait()
	total := int64(writers * perWriter)
	for rev := int64(2); rev <= total+1; rev++ {
		if _, ok := acked[rev]; !ok {
			t.Fatalf("revision %d was never acknowledged: revisions are not dense (%d acknowledged)", rev, len(acked))
		}
	}
	if cur, _ := revision(t, c, rt); cur != total+1 {
		t.Fatalf("current revision %d, want %d", cur, total+1)
	}
	list := mustList(t, c, &storagev1.ListRequest{Type: rt})
	if list.GetResourceVersion() != total+1 || len(list.GetItems()) != 1 {
		t.Fatalf("list at %d with %d items, want revision %d with only the seed", list.GetResourceVersion(), len(list.GetItems()), total+1)
	}
	for rev := int64(2); rev <= total+1; rev++ {
		ev := w.next(false, 10*time.Second)
		if ev.GetResourceVersion() != rev || ev.GetObject().GetResourceVersion() != rev {
			t.Fatalf("watch event %d: got revision %d (object %d)", rev, ev.GetResourceVersion(), ev.GetObject().GetResourceVersion())
		}
		what := acked[rev]
		wantType := map[string]storagev1.EventType{"create": storagev1.EventType_ADDED, "update": storagev1.EventType_MODIFIED, "delete": storagev1.EventType_DELETED}[strings.Fields(what)[0]]
		if ev.GetType() != wantType || ev.GetObject().GetName() != strings.Fields(what)[1] {
			t.Fatalf("watch event at %d is %v %s, the write acknowledged there was %q", rev, ev.GetType(), ev.GetObject().GetName(), what)
		}
	}
	w.expectQuiet(200 * time.Millisecond)
}

func testConsistentReads(t *testing.T, f Factory) {
	h := f(t, nil)
	writer, reader := h.Client(), h.Client()
	rt := newType()
	rv := mustCreate(t, writer, rt, obj("ns", "a", "0", nil)).GetResourceVersion()
	for i := 1; i <= 100; i++ {
		rv = mustUpdate(t, writer, rt, obj("ns", "a", fmt.Sprint(i), nil), rv).GetObject().GetResourceVersion()
		got, err := reader.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns", Name: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetObject().GetResourceVersion() < rv || string(got.GetObject().GetValue()) != fmt.Sprint(i) {
			t.Fatalf("most recent get after write at %d returned revision %d value %q", rv, got.GetObject().GetResourceVersion(), got.GetObject().GetValue())
		}
		list := mustList(t, reader, &storagev1.ListRequest{Type: rt, Namespace: "ns"})
		if list.GetResourceVersion() < rv || len(list.GetItems()) != 1 || list.GetItems()[0].GetResourceVersion() < rv {
			t.Fatalf("most recent list after write at %d is at %d", rv, list.GetResourceVersion())
		}
	}
}

func snapshotOf(items []*storagev1.Object) map[string]string {
	m := map[string]string{}
	for _, it := range items {
		m[it.GetNamespace()+"/"+it.GetName()] = fmt.Sprintf("%s@%d", it.GetValue(), it.GetResourceVersion())
	}
	return m
}

func testListExact(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 5 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v0", nil))
	}
	at := mustList(t, c, &storagev1.ListRequest{Type: rt})
	want := snapshotOf(at.GetItems())
	// Change everything about the collection afterwards.
	mustUpdate(t, c, rt, obj("ns", "o1", "v1", nil), 2)
	mustDelete(t, c, rt, "ns", "o2")
	mustCreate(t, c, rt, obj("ns", "o9", "v0", nil))
	for _, req := range []*storagev1.ListRequest{
		{Type: rt, ResourceVersion: fmt.Sprint(at.GetResourceVersion()), ResourceVersionMatch: storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT},
		{Type: rt, ResourceVersion: fmt.Sprint(at.GetResourceVersion()), Limit: 100}, // limit + RV without match: Exact
	} {
		got := mustList(t, c, req)
		if got.GetResourceVersion() != at.GetResourceVersion() {
			t.Fatalf("exact list at %d answered at %d", at.GetResourceVersion(), got.GetResourceVersion())
		}
		if fmt.Sprint(snapshotOf(got.GetItems())) != fmt.Sprint(want) {
			t.Fatalf("exact list at %d:\n got %v\nwant %v", at.GetResourceVersion(), snapshotOf(got.GetItems()), want)
		}
	}
	// Every intermediate revision is readable and differs as the writes say.
	mid := mustList(t, c, &storagev1.ListRequest{Type: rt, ResourceVersion: fmt.Sprint(at.GetResourceVersion() + 2), ResourceVersionMatch: storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT})
	if s := snapshotOf(mid.GetItems()); len(s) != 4 || s["ns/o1"] != "v1@6" {
		t.Fatalf("list at %d: %v", at.GetResourceVersion()+2, s)
	}
}

func testRVSemantics(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 3 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	exact := storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT
	notOlder := storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_NOT_OLDER_THAN
	invalid := []struct {
		name string
		req  *storagev1.ListRequest
	}{
		{"Exact without resourceVersion", &storagev1.ListRequest{Type: rt, ResourceVersionMatch: exact}},
		{"Exact with resourceVersion 0", &storagev1.ListRequest{Type: rt, ResourceVersionMatch: exact, ResourceVersion: "0"}},
		{"NotOlderThan without resourceVersion", &storagev1.ListRequest{Type: rt, ResourceVersionMatch: notOlder}},
		{"malformed resourceVersion", &storagev1.ListRequest{Type: rt, ResourceVersion: "abc"}},
		{"negative resourceVersion", &storagev1.ListRequest{Type: rt, ResourceVersion: "-3"}},
		{"unknown resourceVersionMatch", &storagev1.ListRequest{Type: rt, ResourceVersion: "1", ResourceVersionMatch: 9}},
		{"negative limit", &storagev1.ListRequest{Type: rt, Limit: -1}},
	}
	for _, tc := range invalid {
		_, err := c.List(ctxFor(t), tc.req)
		wantReason(t, err, storagev1.ErrorReason_INVALID, tc.name)
	}
	// Not-older-than answers with data at least as new as asked; any ("0") with what the cache
	// holds, which the not-older-than reads before it have brought to revision 2 at least (asked
	// first, "0" could see the cache before it read the last create).
	for _, req := range []*storagev1.ListRequest{
		{Type: rt, ResourceVersion: "2", ResourceVersionMatch: notOlder},
		{Type: rt, ResourceVersion: "2"},
		{Type: rt, ResourceVersion: "0"},
		{Type: rt, ResourceVersion: "0", ResourceVersionMatch: notOlder},
	} {
		if got := mustList(t, c, req); got.GetResourceVersion() < 2 || len(got.GetItems()) < 2 {
			t.Fatalf("%v answered at %d with %d items", req, got.GetResourceVersion(), len(got.GetItems()))
		}
	}
	// Get: "0" is any, a revision is not-older-than, a future revision waits then fails.
	if g, err := c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns", Name: "o0", ResourceVersion: "2"}); err != nil || g.GetObject().GetResourceVersion() != 1 {
		t.Fatalf("get not older than 2: %v %v", g, err)
	}
	start := time.Now()
	_, err := c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns", Name: "o0", ResourceVersion: "1000"})
	wantReason(t, err, storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION, "get at a future revision")
	if !strings.Contains(err.Error(), "Too large resource version") || err.(*storage.Error).RetryAfterSeconds <= 0 {
		t.Fatalf("too-large error %q lacks the message or Retry-After", err)
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("future get failed after %v without waiting", waited)
	}
	_, err = c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, ResourceVersion: "1000", ResourceVersionMatch: exact})
	wantReason(t, err, storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION, "exact list at a future revision")
	_, err = c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, ResourceVersion: "1000", ResourceVersionMatch: notOlder})
	wantReason(t, err, storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION, "not-older-than list of a future revision")
	// A future revision that arrives during the wait is served.
	late := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, err := c.Create(ctxFor(t), &storagev1.CreateRequest{Type: rt, Object: obj("ns", "late", "v", nil)})
		late <- err
	}()
	if got := mustList(t, c, &storagev1.ListRequest{Type: rt, ResourceVersion: "4", ResourceVersionMatch: exact}); len(got.GetItems()) != 4 {
		t.Fatalf("list at 4 after waiting: %d items", len(got.GetItems()))
	}
	// The list may be served before the create's reply arrives (the cache can see a write
	// before its writer is acknowledged): wait for it, so it does not outlive the test.
	if err := <-late; err != nil {
		t.Fatalf("create ns/late: %v", err)
	}
	// After compaction: Exact of a compacted revision is expired; NotOlderThan still answers.
	if _, err := c.Compact(ctxFor(t), &storagev1.CompactRequest{Type: rt, Revision: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, ResourceVersion: "2", ResourceVersionMatch: exact})
	wantReason(t, err, storagev1.ErrorReason_EXPIRED, "exact list of a compacted revision")
	if got := mustList(t, c, &storagev1.ListRequest{Type: rt, ResourceVersion: "3", ResourceVersionMatch: exact}); len(got.GetItems()) != 3 {
		t.Fatalf("exact list at the compacted revision itself: %d items, want 3", len(got.GetItems()))
	}
	if got := mustList(t, c, &storagev1.ListRequest{Type: rt, ResourceVersion: "2", ResourceVersionMatch: notOlder}); got.GetResourceVersion() < 4 {
		t.Fatalf("not-older-than list of a compacted revision answered at %d", got.GetResourceVersion())
	}
}

func testPaging(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	const n = 50
	for i := range n {
		mustCreate(t, c, rt, obj("ns", fmt.Sprintf("o%03d", i), "v0", nil))
	}
	first := mustList(t, c, &storagev1.ListRequest{Type: rt, Namespace: "ns", Limit: 7})
	if len(first.GetItems()) != 7 || first.GetContinue() == "" || first.RemainingItemCount == nil || first.GetRemainingItemCount() != n-7 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(first.GetItems()), first.GetContinue(), first.RemainingItemCount)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writes continue while the client pages
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("o%03d", i%n)
			switch i % 3 {
			case 0:
				_, _ = c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("ns", name, fmt.Sprint("changed", i), nil)})
			case 1:
				_, _ = c.Delete(ctxFor(t), &storagev1.DeleteRequest{Type: rt, Namespace: "ns", Name: name})
			case 2:
				_, _ = c.Create(ctxFor(t), &storagev1.CreateRequest{Type: rt, Object: obj("ns", fmt.Sprint("new", i), "v", nil)})
			}
		}
	}()
	items := first.GetItems()
	token := first.GetContinue()
	for pages := 1; token != ""; pages++ {
		time.Sleep(5 * time.Millisecond)
		page := mustList(t, c, &storagev1.ListRequest{Type: rt, Namespace: "ns", Limit: 7, Continue: token})
		if page.GetResourceVersion() != first.GetResourceVersion() {
			t.Fatalf("page %d at revision %d, first page at %d", pages, page.GetResourceVersion(), first.GetResourceVersion())
		}
		items = append(items, page.GetItems()...)
		token = page.GetContinue()
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	close(stop)
	wg.Wait()
	if len(items) != n {
		t.Fatalf("pages returned %d items, want the %d that existed at the first page's revision", len(items), n)
	}
	for i, it := range items {
		if it.GetName() != fmt.Sprintf("o%03d", i) || string(it.GetValue()) != "v0" {
			t.Fatalf("item %d is %s=%s, want o%03d=v0 (state of the first page)", i, it.GetName(), it.GetValue(), i)
		}
	}
}

func testContinueTamper(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt, other := newType(), newType()
	for i := range 5 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
		mustCreate(t, c, other, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	page := mustList(t, c, &storagev1.ListRequest{Type: rt, Namespace: "ns", Limit: 2})
	tok := page.GetContinue()
	if strings.Contains(tok, "o1") {
		t.Fatalf("continue token %q shows the key in clear text", tok)
	}
	flipped := []byte(tok)
	flipped[3] ^= 0x01
	cases := map[string]*storagev1.ListRequest{
		"altered token":         {Type: rt, Namespace: "ns", Limit: 2, Continue: string(flipped)},
		"garbage token":         {Type: rt, Namespace: "ns", Limit: 2, Continue: "not-a-token"},
		"token of another type": {Type: other, Namespace: "ns", Limit: 2, Continue: tok},
		"token of another ns":   {Type: rt, Namespace: "ns2", Limit: 2, Continue: tok},
		"token with an RV":      {Type: rt, Namespace: "ns", Limit: 2, Continue: tok, ResourceVersion: "3"},
		"token with an RV match": {Type: rt, Namespace: "ns", Limit: 2, Continue: tok, ResourceVersion: "3",
			ResourceVersionMatch: storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT},
	}
	for name, req := range cases {
		_, err := c.List(ctxFor(t), req)
		wantReason(t, err, storagev1.ErrorReason_INVALID, name)
	}
	// resourceVersion "0" with a continue token is treated as the token alone.
	if got := mustList(t, c, &storagev1.ListRequest{Type: rt, Namespace: "ns", Limit: 2, Continue: tok, ResourceVersion: "0"}); len(got.GetItems()) != 2 || got.GetItems()[0].GetName() != "o2" {
		t.Fatalf("continue with resourceVersion 0: %v", got.GetItems())
	}
}

func testContinueExpires(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 5 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	page := mustList(t, c, &storagev1.ListRequest{Type: rt, Limit: 2})
	mustUpdate(t, c, rt, obj("ns", "o4", "v2", nil), 5)
	cur, _ := revision(t, c, rt)
	if _, err := c.Compact(ctxFor(t), &storagev1.CompactRequest{Type: rt, Revision: cur}); err != nil {
		t.Fatal(err)
	}
	_, err := c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, Limit: 2, Continue: page.GetContinue()})
	wantReason(t, err, storagev1.ErrorReason_EXPIRED, "continue after compaction")
	if _, compacted := revision(t, c, rt); compacted != cur {
		t.Fatalf("compacted revision %d, want %d", compacted, cur)
	}

	// The answer carries upstream's inconsistent continue: a token that lists the rest (after the
	// first page's last key) at the most recent revision, so changes made since show.
	var se *storage.Error
	if !errors.As(storage.FromError(err), &se) || se.Continue == "" || !strings.Contains(se.Message, "use the continue token in this response") {
		t.Fatalf("EXPIRED continue answer %#v: want a continue token and upstream's inconsistent-continue message", err)
	}
	mustCreate(t, c, rt, obj("ns", "o5", "v", nil))
	cur, _ = revision(t, c, rt)
	rest := mustList(t, c, &storagev1.ListRequest{Type: rt, Limit: 2, Continue: se.Continue})
	if names(rest.GetItems()) != "o2 o3" || rest.GetResourceVersion() != cur || rest.GetContinue() == "" {
		t.Fatalf("inconsistent continue: items %q at %d (continue %q), want o2 o3 at the current revision %d", names(rest.GetItems()), rest.GetResourceVersion(), rest.GetContinue(), cur)
	}
	// Its pages go on at that revision.
	mustUpdate(t, c, rt, obj("ns", "o5", "v3", nil), cur)
	last := mustList(t, c, &storagev1.ListRequest{Type: rt, Limit: 2, Continue: rest.GetContinue()})
	if names(last.GetItems()) != "o4 o5" || string(last.GetItems()[0].GetValue()) != "v2" || string(last.GetItems()[1].GetValue()) != "v" ||
		last.GetResourceVersion() != cur || last.GetContinue() != "" {
		t.Fatalf("page after the inconsistent continue: %q at %d (continue %q), want o4=v2 o5=v at %d", names(last.GetItems()), last.GetResourceVersion(), last.GetContinue(), cur)
	}
	// The token is as tamper-proof as any other.
	_, err = c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, Namespace: "ns", Limit: 2, Continue: se.Continue})
	wantReason(t, err, storagev1.ErrorReason_INVALID, "inconsistent continue token of another namespace")
}

// names are the names of objects, space-separated.
func names(objs []*storagev1.Object) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return strings.Join(out, " ")
}

func testSelectors(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i, ns := range []string{"a", "b", "c"} {
		for j := range 4 {
			o := obj(ns, fmt.Sprint("o", j), "v", map[string]string{"tier": []string{"web", "db"}[j%2], "idx": fmt.Sprint(i*4 + j)})
			o.Fields = map[string]string{"spec.phase": []string{"Running", "Pending"}[j%2]}
			mustCreate(t, c, rt, o)
		}
	}
	count := func(req *storagev1.ListRequest) int { return len(mustList(t, c, req).GetItems()) }
	checks := []struct {
		req  *storagev1.ListRequest
		want int
	}{
		{&storagev1.ListRequest{Type: rt}, 12},
		{&storagev1.ListRequest{Type: rt, Namespace: "b"}, 4},
		{&storagev1.ListRequest{Type: rt, LabelSelector: "tier=web"}, 6},
		{&storagev1.ListRequest{Type: rt, Namespace: "a", LabelSelector: "tier in (web,db),idx!=0"}, 3},
		{&storagev1.ListRequest{Type: rt, FieldSelector: "spec.phase=Pending"}, 6},
		{&storagev1.ListRequest{Type: rt, FieldSelector: "metadata.namespace=c,metadata.name=o2"}, 1},
		{&storagev1.ListRequest{Type: rt, LabelSelector: "missing"}, 0},
	}
	for _, ck := range checks {
		if got := count(ck.req); got != ck.want {
			t.Fatalf("%v: %d items, want %d", ck.req, got, ck.want)
		}
	}
	// Paging with a selector: no remainingItemCount, and the pages add up.
	page := mustList(t, c, &storagev1.ListRequest{Type: rt, LabelSelector: "tier=web", Limit: 4})
	if page.RemainingItemCount != nil || page.GetContinue() == "" {
		t.Fatalf("selector page: remaining %v continue %q", page.RemainingItemCount, page.GetContinue())
	}
	rest := mustList(t, c, &storagev1.ListRequest{Type: rt, LabelSelector: "tier=web", Limit: 4, Continue: page.GetContinue()})
	if len(page.GetItems())+len(rest.GetItems()) != 6 || rest.GetContinue() != "" {
		t.Fatalf("selector pages: %d + %d items, final continue %q", len(page.GetItems()), len(rest.GetItems()), rest.GetContinue())
	}
	for _, sel := range []string{"tier in (web", "=x", "a b"} {
		_, err := c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, LabelSelector: sel})
		wantReason(t, err, storagev1.ErrorReason_INVALID, "label selector "+sel)
	}
	_, err := c.List(ctxFor(t), &storagev1.ListRequest{Type: rt, FieldSelector: "spec.phase~x"})
	wantReason(t, err, storagev1.ErrorReason_INVALID, "field selector")
}

func testWatchRetained(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 10 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "4"})
	for i := range 5 {
		mustUpdate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v2", nil), int64(i+1))
	}
	for rev := int64(5); rev <= 15; rev++ {
		ev := w.next(false, 5*time.Second)
		wantType := storagev1.EventType_ADDED
		if rev > 10 {
			wantType = storagev1.EventType_MODIFIED
		}
		if ev.GetResourceVersion() != rev || ev.GetType() != wantType {
			t.Fatalf("event %d: got %v at %d", rev, ev.GetType(), ev.GetResourceVersion())
		}
	}
	w.expectQuiet(200 * time.Millisecond)
	// Two more watchers from other retained revisions see the same history.
	for _, from := range []int64{1, 12} {
		w2 := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: fmt.Sprint(from)})
		for rev := from + 1; rev <= 15; rev++ {
			if ev := w2.next(false, 5*time.Second); ev.GetResourceVersion() != rev {
				t.Fatalf("watch from %d: got %d, want %d", from, ev.GetResourceVersion(), rev)
			}
		}
		w2.expectQuiet(100 * time.Millisecond)
	}
}

func testWatchInitial(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 3 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	mustUpdate(t, c, rt, obj("ns", "o0", "v2", nil), 1)
	for _, rv := range []string{"", "0"} {
		w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: rv})
		seen := map[string]int64{}
		for range 3 {
			ev := w.next(false, 5*time.Second)
			if ev.GetType() != storagev1.EventType_ADDED {
				t.Fatalf("initial event %v", ev.GetType())
			}
			seen[ev.GetObject().GetName()] = ev.GetObject().GetResourceVersion()
		}
		if seen["o0"] != 4 || seen["o1"] != 2 || seen["o2"] != 3 {
			t.Fatalf("initial events (rv %q): %v", rv, seen)
		}
		w.expectQuiet(100 * time.Millisecond)
	}
	// The watch-list protocol: initial events at a revision, then a bookmark that ends them.
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "2", SendInitialEvents: true, AllowBookmarks: true})
	for range 2 {
		if ev := w.next(false, 5*time.Second); ev.GetType() != storagev1.EventType_ADDED || ev.GetObject().GetResourceVersion() > 2 {
			t.Fatalf("initial event at 2: %v", ev)
		}
	}
	if ev := w.next(true, 5*time.Second); ev.GetType() != storagev1.EventType_BOOKMARK || !ev.GetInitialEventsEnd() || ev.GetResourceVersion() != 2 {
		t.Fatalf("want the initial-events-end bookmark at 2, got %v", ev)
	}
	for rev := int64(3); rev <= 4; rev++ {
		if ev := w.next(false, 5*time.Second); ev.GetResourceVersion() != rev {
			t.Fatalf("after initial events: got %d want %d", ev.GetResourceVersion(), rev)
		}
	}
}

// A watch that asks for index attributes (the gateway's list cache) gets every object's labels
// and fields, in its initial events and in every change; other watches do not.
func testWatchIndexAttributes(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	withFields := func(o *storagev1.Object, fields map[string]string) *storagev1.Object { o.Fields = fields; return o }
	mustCreate(t, c, rt, withFields(obj("ns", "a", "v", map[string]string{"app": "x"}), map[string]string{"spec.nodeName": "n1"}))
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "", SendInitialEvents: true, AllowBookmarks: true, IndexAttributes: true})
	plain := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "1"})
	if ev := w.next(false, 5*time.Second); ev.GetType() != storagev1.EventType_ADDED || ev.GetObject().GetLabels()["app"] != "x" ||
		ev.GetObject().GetFields()["spec.nodeName"] != "n1" {
		t.Fatalf("initial event without its index attributes: %v", ev)
	}
	if ev := w.next(true, 5*time.Second); ev.GetType() != storagev1.EventType_BOOKMARK || !ev.GetInitialEventsEnd() || ev.GetResourceVersion() != 1 {
		t.Fatalf("want the initial-events-end bookmark at 1, got %v", ev)
	}
	mustUpdate(t, c, rt, withFields(obj("ns", "a", "v2", map[string]string{"app": "y"}), map[string]string{"spec.nodeName": "n2"}), 1)
	mustCreate(t, c, rt, obj("ns", "b", "v", map[string]string{"tier": "web"}))
	mustDelete(t, c, rt, "ns", "b")
	want := []struct {
		typ         storagev1.EventType
		name, label string
		field       string
		rev         int64
	}{
		{storagev1.EventType_MODIFIED, "a", "app=y", "n2", 2},
		{storagev1.EventType_ADDED, "b", "tier=web", "", 3},
		{storagev1.EventType_DELETED, "b", "tier=web", "", 4},
	}
	for _, wt := range want {
		ev := w.next(false, 5*time.Second)
		k, v, _ := strings.Cut(wt.label, "=")
		if ev.GetType() != wt.typ || ev.GetObject().GetName() != wt.name || ev.GetResourceVersion() != wt.rev ||
			ev.GetObject().GetLabels()[k] != v || ev.GetObject().GetFields()["spec.nodeName"] != wt.field {
			t.Fatalf("got %v, want %v %s@%d with %s and node %q", ev, wt.typ, wt.name, wt.rev, wt.label, wt.field)
		}
		if pev := plain.next(false, 5*time.Second); pev.GetResourceVersion() != wt.rev || len(pev.GetObject().GetLabels()) != 0 || len(pev.GetObject().GetFields()) != 0 {
			t.Fatalf("a watch without index attributes got %v", pev)
		}
	}
}

func testWatchSelectors(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, Namespace: "ns", LabelSelector: "app=x", ResourceVersion: "0"})
	mustCreate(t, c, rt, obj("ns", "a", "v", map[string]string{"app": "y"}))     // 1: not selected
	mustUpdate(t, c, rt, obj("ns", "a", "v", map[string]string{"app": "x"}), 1)  // 2: moves in -> ADDED
	mustUpdate(t, c, rt, obj("ns", "a", "v2", map[string]string{"app": "x"}), 2) // 3: MODIFIED
	mustUpdate(t, c, rt, obj("ns", "a", "v3", map[string]string{"app": "z"}), 3) // 4: moves out -> DELETED
	mustCreate(t, c, rt, obj("other", "b", "v", map[string]string{"app": "x"}))  // 5: other namespace
	mustCreate(t, c, rt, obj("ns", "c", "v", map[string]string{"app": "x"}))     // 6: ADDED
	mustDelete(t, c, rt, "ns", "c")                                              // 7: DELETED
	want := []struct {
		typ  storagev1.EventType
		name string
		rev  int64
		val  string
	}{
		{storagev1.EventType_ADDED, "a", 2, "v"},
		{storagev1.EventType_MODIFIED, "a", 3, "v2"},
		{storagev1.EventType_DELETED, "a", 4, "v2"}, // the last selected state, at the event's revision
		{storagev1.EventType_ADDED, "c", 6, "v"},
		{storagev1.EventType_DELETED, "c", 7, "v"},
	}
	for _, wt := range want {
		ev := w.next(false, 5*time.Second)
		if ev.GetType() != wt.typ || ev.GetObject().GetName() != wt.name || ev.GetResourceVersion() != wt.rev ||
			ev.GetObject().GetResourceVersion() != wt.rev || string(ev.GetObject().GetValue()) != wt.val {
			t.Fatalf("got %v %s@%d(obj %d)=%s, want %v %s@%d=%s", ev.GetType(), ev.GetObject().GetName(), ev.GetResourceVersion(),
				ev.GetObject().GetResourceVersion(), ev.GetObject().GetValue(), wt.typ, wt.name, wt.rev, wt.val)
		}
	}
	w.expectQuiet(100 * time.Millisecond)
}

func testWatchCompacted(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	for i := range 5 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	if _, err := c.Compact(ctxFor(t), &storagev1.CompactRequest{Type: rt, Revision: 3}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Watch(ctxFor(t), &storagev1.WatchRequest{Type: rt, ResourceVersion: "2"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantReason(t, err, storagev1.ErrorReason_EXPIRED, "watch from a compacted revision")
	// From the compacted revision itself every later change is still there.
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "3"})
	for rev := int64(4); rev <= 5; rev++ {
		if ev := w.next(false, 5*time.Second); ev.GetResourceVersion() != rev {
			t.Fatalf("watch from the compacted revision: got %d want %d", ev.GetResourceVersion(), rev)
		}
	}
	// A watcher that falls behind a later compaction is told so (410), not silently skipped.
	w2 := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "5"})
	w2.expectQuiet(50 * time.Millisecond)
	w2.cancel() // stop reading; restart a watch from 5 after compacting past it
	mustCreate(t, c, rt, obj("ns", "late", "v", nil))
	if _, err := c.Compact(ctxFor(t), &storagev1.CompactRequest{Type: rt, Revision: 6}); err != nil {
		t.Fatal(err)
	}
	stream, err = c.Watch(ctxFor(t), &storagev1.WatchRequest{Type: rt, ResourceVersion: "5"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantReason(t, err, storagev1.ErrorReason_EXPIRED, "watch resumed from a revision compacted meanwhile")
}

func testWatchFuture(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	mustCreate(t, c, rt, obj("ns", "a", "v", nil))
	start := time.Now()
	stream, err := c.Watch(ctxFor(t), &storagev1.WatchRequest{Type: rt, ResourceVersion: "50"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantReason(t, err, storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION, "watch from a future revision")
	if time.Since(start) < 400*time.Millisecond {
		t.Fatalf("future watch failed after %v without waiting", time.Since(start))
	}
	// If the revision arrives while the watch waits, it starts after it.
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "3"})
	mustCreate(t, c, rt, obj("ns", "b", "v", nil))
	mustCreate(t, c, rt, obj("ns", "c", "v", nil))
	mustCreate(t, c, rt, obj("ns", "d", "v", nil))
	if ev := w.next(false, 5*time.Second); ev.GetResourceVersion() != 4 || ev.GetObject().GetName() != "d" {
		t.Fatalf("watch from 3 first delivered %s@%d, want d@4", ev.GetObject().GetName(), ev.GetResourceVersion())
	}
}

func testSlowWatcher(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	mustCreate(t, c, rt, obj("ns", "seed", "v", nil))
	// The slow watcher stops reading at once; the fast one reads everything while it stalls.
	slowCtx, cancelSlow := context.WithCancel(context.Background())
	defer cancelSlow()
	slow, err := c.Watch(slowCtx, &storagev1.WatchRequest{Type: rt, ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	fast := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "1"})
	// Far more than gRPC's flow-control windows buffer, so the slow watch's sends block.
	const n, size = 32, 2500 << 10
	big := strings.Repeat("x", size)
	for i := range n {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("big", i), big, nil))
		if ev := fast.next(false, 10*time.Second); ev.GetResourceVersion() != int64(i+2) {
			t.Fatalf("fast watcher got %d, want %d", ev.GetResourceVersion(), i+2)
		}
	}
	if _, err := c.Compact(ctxFor(t), &storagev1.CompactRequest{Type: rt, Revision: n + 1}); err != nil {
		t.Fatal(err)
	}
	// The slow watcher gets what was already in flight, in order, then EXPIRED; never a gap.
	next := int64(2)
	for {
		evs, err := slow.Recv()
		if err != nil {
			wantReason(t, err, storagev1.ErrorReason_EXPIRED, "slow watcher after compaction")
			break
		}
		for _, ev := range evs {
			if ev.GetResourceVersion() != next {
				t.Fatalf("slow watcher got %d, want %d", ev.GetResourceVersion(), next)
			}
			next++
		}
	}
	if next > n+1 {
		t.Fatalf("slow watcher received all %d events before compaction: it never stalled, the test proves nothing", n)
	}
}

func testBookmarks(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	idle, busy := newType(), newType()
	mustCreate(t, c, idle, obj("ns", "a", "v", nil))
	w := startWatch(t, c, &storagev1.WatchRequest{Type: idle, ResourceVersion: "1", AllowBookmarks: true, BookmarkIntervalMs: 100})
	for i := range 5 { // other types' writes do not disturb an idle type's progress
		mustCreate(t, c, busy, obj("ns", fmt.Sprint("o", i), "v", nil))
	}
	for range 3 {
		ev := w.next(true, 2*time.Second)
		if ev.GetType() != storagev1.EventType_BOOKMARK || ev.GetResourceVersion() != 1 || ev.GetObject() != nil {
			t.Fatalf("idle type: want a bookmark at 1, got %v", ev)
		}
	}
	mustCreate(t, c, idle, obj("ns", "b", "v", nil))
	var sawEvent bool
	for {
		ev := w.next(true, 2*time.Second)
		if ev.GetType() != storagev1.EventType_BOOKMARK {
			sawEvent = ev.GetResourceVersion() == 2
			continue
		}
		if ev.GetResourceVersion() == 2 && sawEvent {
			break
		}
		if ev.GetResourceVersion() != 1 || sawEvent {
			t.Fatalf("bookmark at %d after event seen=%v", ev.GetResourceVersion(), sawEvent)
		}
	}
	// A filtered watch still learns progress through bookmarks.
	wf := startWatch(t, c, &storagev1.WatchRequest{Type: idle, ResourceVersion: "2", LabelSelector: "none=here", AllowBookmarks: true, BookmarkIntervalMs: 100})
	mustCreate(t, c, idle, obj("ns", "c", "v", nil))
	deadline := time.Now().Add(3 * time.Second)
	for {
		ev := wf.next(true, 2*time.Second)
		if ev.GetType() != storagev1.EventType_BOOKMARK {
			t.Fatalf("filtered watch got %v", ev)
		}
		if ev.GetResourceVersion() == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("filtered watch never got a bookmark at 3")
		}
	}
	// Without allowBookmarks there are none.
	wn := startWatch(t, c, &storagev1.WatchRequest{Type: idle, ResourceVersion: "3", BookmarkIntervalMs: 50})
	select {
	case ev := <-wn.events:
		t.Fatalf("watch without bookmarks got %v", ev)
	case <-time.After(300 * time.Millisecond):
	}
}

func testRetention(t *testing.T, f Factory) {
	t.Run("ByTime", func(t *testing.T) {
		c := f(t, func(cfg *server.Config) {
			cfg.HistoryRetention = 500 * time.Millisecond
			cfg.CompactionInterval = 100 * time.Millisecond
		}).Client()
		rt := newType()
		for i := range 5 {
			mustCreate(t, c, rt, obj("ns", fmt.Sprint("o", i), "v", nil))
		}
		waitCompacted(t, c, rt, 5)
		// The background compactor compacts the backend, then the server's cache: the backend's
		// compacted revision may show a moment before the cache drops its history. Wait (with a
		// bound) for what the spec promises: a watch from before the retention expires.
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithCancel(ctxFor(t))
			stream, err := c.Watch(ctx, &storagev1.WatchRequest{Type: rt, ResourceVersion: "1"})
			if err == nil {
				_, err = stream.Recv()
			}
			cancel()
			if storage.ReasonOf(err) == storagev1.ErrorReason_EXPIRED || time.Now().After(deadline) {
				wantReason(t, err, storagev1.ErrorReason_EXPIRED, "watch from a revision older than the retention")
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := mustList(t, c, &storagev1.ListRequest{Type: rt}); len(got.GetItems()) != 5 {
			t.Fatalf("compaction lost live objects: %d left", len(got.GetItems()))
		}
	})
	t.Run("BySize", func(t *testing.T) {
		c := f(t, func(cfg *server.Config) {
			cfg.HistoryMaxEvents = 10
			cfg.CompactionInterval = 100 * time.Millisecond
		}).Client()
		rt := newType()
		rv := mustCreate(t, c, rt, obj("ns", "a", "0", nil)).GetResourceVersion()
		for i := 1; i < 40; i++ {
			rv = mustUpdate(t, c, rt, obj("ns", "a", fmt.Sprint(i), nil), rv).GetObject().GetResourceVersion()
		}
		waitCompacted(t, c, rt, 30)
		w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "30"})
		for rev := int64(31); rev <= 40; rev++ {
			if ev := w.next(false, 5*time.Second); ev.GetResourceVersion() != rev {
				t.Fatalf("watch within the bound: got %d want %d", ev.GetResourceVersion(), rev)
			}
		}
	})
}

func waitCompacted(t *testing.T, c *storage.Client, rt *storagev1.ResourceType, atLeast int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, compacted := revision(t, c, rt); compacted >= atLeast {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("compacted revision still %d, want >= %d", compacted, atLeast)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testBadInput(t *testing.T, f Factory) {
	c := f(t, nil).Client()
	rt := newType()
	long := strings.Repeat("x", 300)
	creates := map[string]*storagev1.CreateRequest{
		"no type":               {Object: obj("ns", "a", "v", nil)},
		"bad resource":          {Type: &storagev1.ResourceType{Resource: "Bad/Res"}, Object: obj("ns", "a", "v", nil)},
		"bad group":             {Type: &storagev1.ResourceType{Group: "UPPER_case", Resource: "things"}, Object: obj("ns", "a", "v", nil)},
		"no object":             {Type: rt},
		"empty name":            {Type: rt, Object: obj("ns", "", "v", nil)},
		"slash in name":         {Type: rt, Object: obj("ns", "a/b", "v", nil)},
		"dot-dot name":          {Type: rt, Object: obj("ns", "..", "v", nil)},
		"percent in name":       {Type: rt, Object: obj("ns", "a%2f", "v", nil)},
		"control char in name":  {Type: rt, Object: obj("ns", "a\x00b", "v", nil)},
		"long name":             {Type: rt, Object: obj("ns", long, "v", nil)},
		"bad namespace":         {Type: rt, Object: obj("Not A Namespace", "a", "v", nil)},
		"bad label key":         {Type: rt, Object: obj("ns", "a", "v", map[string]string{"bad key": "v"})},
		"bad label value":       {Type: rt, Object: obj("ns", "a", "v", map[string]string{"k": "bad value!"})},
		"bad uid":               {Type: rt, Object: &storagev1.Object{Namespace: "ns", Name: "a", Uid: "a|b"}},
		"object over the limit": {Type: rt, Object: &storagev1.Object{Namespace: "ns", Name: "a", Value: make([]byte, server.MaxObjectBytes+1)}},
	}
	for name, req := range creates {
		_, err := c.Create(ctxFor(t), req)
		wantReason(t, err, storagev1.ErrorReason_INVALID, name)
	}
	_, err := c.Update(ctxFor(t), &storagev1.UpdateRequest{Type: rt, Object: obj("ns", "a", "v", nil), Preconditions: &storagev1.Preconditions{ResourceVersion: -1}})
	wantReason(t, err, storagev1.ErrorReason_INVALID, "negative precondition")
	_, err = c.Get(ctxFor(t), &storagev1.GetRequest{Type: rt, Namespace: "ns", Name: "a", ResourceVersion: "1e3"})
	wantReason(t, err, storagev1.ErrorReason_INVALID, "malformed get resourceVersion")
	_, err = c.Watch(ctxFor(t), &storagev1.WatchRequest{Type: rt, ResourceVersion: "x"})
	if err == nil {
		var stream *storage.WatchStream
		stream, err = c.Watch(ctxFor(t), &storagev1.WatchRequest{Type: rt, ResourceVersion: "x"})
		if err == nil {
			_, err = stream.Recv()
		}
	}
	wantReason(t, err, storagev1.ErrorReason_INVALID, "malformed watch resourceVersion")
	// Nothing was stored and the service still works.
	if cur, _ := revision(t, c, rt); cur != 0 {
		t.Fatalf("bad input changed the revision to %d", cur)
	}
	mustCreate(t, c, rt, obj("ns", "a", "v", nil))
}

func testServiceRestart(t *testing.T, f Factory) {
	h := f(t, nil)
	rt := newType()
	c := h.Client()
	mustCreate(t, c, rt, obj("ns", "seed", "v", nil))
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "1"})
	for i := range 20 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("before", i), "v", nil))
	}
	// Read part of the stream, then lose the service mid-stream.
	last := int64(1)
	for range 10 {
		ev := w.next(false, 5*time.Second)
		if ev.GetResourceVersion() != last+1 {
			t.Fatalf("before restart: got %d after %d", ev.GetResourceVersion(), last)
		}
		last = ev.GetResourceVersion()
	}
	w.cancel()
	h.RestartService(t)
	c = h.Client()
	for i := range 20 {
		mustCreate(t, c, rt, obj("ns", fmt.Sprint("after", i), "v", nil))
	}
	// Resume from the last revision seen: no gap, no duplicate.
	w2 := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: fmt.Sprint(last)})
	for last < 41 {
		ev := w2.next(false, 5*time.Second)
		if ev.GetResourceVersion() != last+1 {
			t.Fatalf("after restart: got %d after %d", ev.GetResourceVersion(), last)
		}
		last = ev.GetResourceVersion()
	}
	w2.expectQuiet(100 * time.Millisecond)

	// A watch open while the service stops is ended (not left hanging) so its client can resume.
	w3 := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: "41"})
	w3.expectQuiet(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- w3.expectEnd(10 * time.Second) }()
	h.RestartService(t)
	if err := <-done; err == nil {
		t.Fatal("watch ended without error at shutdown")
	}
}

func testBackendCrash(t *testing.T, f Factory) {
	h := f(t, nil)
	rt := newType()
	c := h.Client()
	var acked []*storagev1.Object
	rv := int64(0)
	for i := range 50 {
		o := mustCreate(t, c, rt, obj("ns", fmt.Sprintf("o%02d", i), fmt.Sprint(i), nil))
		acked = append(acked, o)
		rv = o.GetResourceVersion()
	}
	h.CrashBackend(t)
	c = h.Client()
	deadline := time.Now().Add(15 * time.Second)
	var list *storagev1.ListResponse
	for {
		var err error
		list, err = c.List(ctxFor(t), &storagev1.ListRequest{Type: rt})
		if err == nil {
			break
		}
		if !storage.IsUnavailable(err) || time.Now().After(deadline) {
			t.Fatalf("list after backend crash: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if list.GetResourceVersion() != rv || len(list.GetItems()) != len(acked) {
		t.Fatalf("after the crash: revision %d with %d items, acknowledged %d writes up to %d", list.GetResourceVersion(), len(list.GetItems()), len(acked), rv)
	}
	items := list.GetItems()
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	for i, it := range items {
		if it.GetName() != acked[i].GetName() || it.GetResourceVersion() != acked[i].GetResourceVersion() {
			t.Fatalf("item %d: %s@%d, acknowledged %s@%d", i, it.GetName(), it.GetResourceVersion(), acked[i].GetName(), acked[i].GetResourceVersion())
		}
	}
	// Revisions continue densely and the history survived for watchers.
	next := mustCreate(t, c, rt, obj("ns", "next", "v", nil))
	if next.GetResourceVersion() != rv+1 {
		t.Fatalf("first write after the crash got %d, want %d", next.GetResourceVersion(), rv+1)
	}
	w := startWatch(t, c, &storagev1.WatchRequest{Type: rt, ResourceVersion: fmt.Sprint(rv - 5)})
	for want := rv - 4; want <= rv+1; want++ {
		if ev := w.next(false, 5*time.Second); ev.GetResourceVersion() != want {
			t.Fatalf("watch across the crash: got %d want %d", ev.GetResourceVersion(), want)
		}
	}
}
