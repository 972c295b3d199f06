package apiserver_test

import (
	"net/http"
	"testing"

	"platform.io/libs/naming"
	"platform.io/services/gateway/gatewaytest"
)

// Issue 14 "One Event store": core v1 Events and events.<suffix>/v1 Events are the same objects
// seen through two APIs, with the spec's field mapping: created through one, they are read,
// listed, watched, updated and deleted through the other.
func TestEventsOneStore(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	core := "/api/v1/namespaces/default/events"
	eventsGV := naming.Group("events.k8s.io") + "/v1"
	events := "/apis/" + eventsGV + "/namespaces/default/events"

	// Created through core v1, read through events v1.
	created := must(t, do(t, e, "POST", core, `{"metadata":{"name":"legacy"},"involvedObject":{"kind":"Pod","name":"p1","namespace":"default"},
		"reason":"Pulled","message":"image pulled","type":"Normal","source":{"component":"kubelet","host":"node-1"},
		"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:01:00Z","count":3}`), http.StatusCreated)
	got := must(t, do(t, e, "GET", events+"/legacy", nil), http.StatusOK)
	for p, want := range map[string]any{
		"apiVersion": eventsGV, "kind": "Event",
		"metadata.uid": path(created, "metadata.uid"), "metadata.resourceVersion": path(created, "metadata.resourceVersion"),
		"regarding.name": "p1", "regarding.kind": "Pod", "note": "image pulled", "reason": "Pulled", "type": "Normal",
		"deprecatedSource.component": "kubelet", "deprecatedSource.host": "node-1", "deprecatedCount": float64(3),
		"deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:01:00Z",
	} {
		if v := path(got, p); v != want {
			t.Errorf("events v1 view of a core event: %s = %v, want %v", p, v, want)
		}
	}
	for _, p := range []string{"involvedObject", "message", "source", "count"} {
		if v := path(got, p); v != nil {
			t.Errorf("events v1 view carries the core field %s: %v", p, v)
		}
	}

	// Created through events v1, read through core v1.
	must(t, do(t, e, "POST", events, `{"metadata":{"name":"modern"},"eventTime":"2026-01-01T00:00:00.000000Z","type":"Warning",
		"action":"Scheduling","reason":"FailedScheduling","reportingController":"platform.io/scheduler","reportingInstance":"scheduler-1",
		"regarding":{"kind":"Pod","name":"p2","namespace":"default"},"note":"no nodes",
		"series":{"count":2,"lastObservedTime":"2026-01-01T00:05:00.000000Z"}}`), http.StatusCreated)
	got = must(t, do(t, e, "GET", core+"/modern", nil), http.StatusOK)
	for p, want := range map[string]any{
		"apiVersion": "v1", "involvedObject.name": "p2", "message": "no nodes", "reportingComponent": "platform.io/scheduler",
		"reportingInstance": "scheduler-1", "action": "Scheduling", "eventTime": "2026-01-01T00:00:00.000000Z",
		"series.count": float64(2), "series.lastObservedTime": "2026-01-01T00:05:00.000000Z",
	} {
		if v := path(got, p); v != want {
			t.Errorf("core view of an events v1 event: %s = %v, want %v", p, v, want)
		}
	}
	// Storage indexes the core fields whichever API wrote the event.
	sel := must(t, do(t, e, "GET", core+"?fieldSelector=involvedObject.name%3Dp2", nil), http.StatusOK)
	if items := sel["items"].([]any); len(items) != 1 || path(items[0].(map[string]any), "metadata.name") != "modern" {
		t.Errorf("core field selector over an events v1 event: %v", sel["items"])
	}

	// Both lists hold both; a watch through events v1 sees a core update.
	for _, p := range []string{core, events} {
		list := must(t, do(t, e, "GET", p, nil), http.StatusOK)
		if n := len(list["items"].([]any)); n != 2 {
			t.Errorf("%s lists %d events, want 2", p, n)
		}
	}
	rv := path(must(t, do(t, e, "GET", events, nil), http.StatusOK), "metadata.resourceVersion").(string)
	w := openWatch(t, e.Admin, e, events+"?watch=1&resourceVersion="+rv)
	legacy := must(t, do(t, e, "GET", core+"/legacy", nil), http.StatusOK)
	legacy["message"] = "image pulled again"
	legacy["count"] = 4
	must(t, do(t, e, "PUT", core+"/legacy", legacy), http.StatusOK)
	ev := w.next(t, false)
	if ev.Type != "MODIFIED" || path(ev.Object, "note") != "image pulled again" || path(ev.Object, "deprecatedCount") != float64(4) || path(ev.Object, "apiVersion") != eventsGV {
		t.Errorf("events v1 watch of a core update: %s %v", ev.Type, ev.Object)
	}

	// Updated through events v1, deleted through core v1.
	modern := must(t, do(t, e, "GET", events+"/modern", nil), http.StatusOK)
	modern["note"] = "still no nodes"
	must(t, do(t, e, "PUT", events+"/modern", modern), http.StatusOK)
	if v := path(must(t, do(t, e, "GET", core+"/modern", nil), http.StatusOK), "message"); v != "still no nodes" {
		t.Errorf("core view after an events v1 update: message %v", v)
	}
	must(t, do(t, e, "DELETE", core+"/modern", nil), http.StatusOK)
	do(t, e, "GET", events+"/modern", nil).status(t, http.StatusNotFound, "NotFound")
	if ev := w.next(t, false); ev.Type != "MODIFIED" || path(ev.Object, "metadata.name") != "modern" {
		t.Errorf("events v1 watch: %s %v, want the update of modern", ev.Type, ev.Object)
	}
	if ev := w.next(t, false); ev.Type != "DELETED" || path(ev.Object, "metadata.name") != "modern" {
		t.Errorf("events v1 watch of a core delete: %s %v", ev.Type, ev.Object)
	}
}
