package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// Spec "Deletion of a resource": finalizers hold an object in Finalizing with its
// deletionTimestamp; removing the last one removes it; no new finalizers while deleting.
func TestDeletionWithFinalizers(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	cm := configMap("f", nil)
	cm["metadata"].(map[string]any)["finalizers"] = []string{"example.com/a", "example.com/b"}
	must(t, do(t, e, "POST", cms, cm), http.StatusCreated)
	del := must(t, do(t, e, "DELETE", cms+"/f", nil), http.StatusOK)
	if del["kind"] != "ConfigMap" || path(del, "metadata.deletionTimestamp") == nil {
		t.Fatalf("first delete: %v", del)
	}
	ts := path(del, "metadata.deletionTimestamp")
	again := must(t, do(t, e, "DELETE", cms+"/f", nil), http.StatusOK)
	if path(again, "metadata.deletionTimestamp") != ts {
		t.Errorf("a second delete moved deletionTimestamp: %v -> %v", ts, path(again, "metadata.deletionTimestamp"))
	}
	cur := must(t, do(t, e, "GET", cms+"/f", nil), http.StatusOK)
	// deletionTimestamp cannot be cleared by an update, and no finalizer can be added.
	cur["metadata"].(map[string]any)["finalizers"] = []string{"example.com/a", "example.com/b", "example.com/c"}
	do(t, e, "PUT", cms+"/f", cur).status(t, http.StatusUnprocessableEntity, "Invalid")
	cur = must(t, do(t, e, "GET", cms+"/f", nil), http.StatusOK)
	delete(cur["metadata"].(map[string]any), "deletionTimestamp")
	cur["metadata"].(map[string]any)["finalizers"] = []string{"example.com/b"}
	upd := must(t, do(t, e, "PUT", cms+"/f", cur), http.StatusOK)
	if path(upd, "metadata.deletionTimestamp") != ts {
		t.Errorf("update cleared deletionTimestamp: %v", upd["metadata"])
	}
	cur = must(t, do(t, e, "GET", cms+"/f", nil), http.StatusOK)
	cur["metadata"].(map[string]any)["finalizers"] = []string{}
	must(t, do(t, e, "PUT", cms+"/f", cur), http.StatusOK)
	do(t, e, "GET", cms+"/f", nil).status(t, http.StatusNotFound, "NotFound")

	// Preconditions.
	c := must(t, do(t, e, "POST", cms, configMap("p", nil)), http.StatusCreated)
	do(t, e, "DELETE", cms+"/p", `{"preconditions":{"uid":"wrong"}}`).status(t, http.StatusConflict, "Conflict")
	do(t, e, "DELETE", cms+"/p", `{"preconditions":{"resourceVersion":"1"}}`).status(t, http.StatusConflict, "Conflict")
	must(t, do(t, e, "DELETE", cms+"/p", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"`+path(c, "metadata.uid").(string)+`"}}`), http.StatusOK)
}

// The namespace deleter's side of the protocol, as upstream's namespace controller drives it: a
// deleted namespace is Terminating and held by spec.finalizers (a second DELETE is a conflict);
// the finalize subresource clears them and changes nothing else; with no finalizer of either kind
// left that update removes the namespace (upstream's ShouldDeleteDuringUpdate), so the
// controller's closing DELETE finds it gone; metadata finalizers still hold it like any object.
func TestNamespaceFinalizeThenDelete(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) { c.EnableControllers = false }})
	must(t, do(t, e, "POST", "/api/v1/namespaces", `{"metadata":{"name":"fin-a","finalizers":["example.com/hold"]}}`), http.StatusCreated)
	must(t, do(t, e, "POST", "/api/v1/namespaces", `{"metadata":{"name":"fin-b"}}`), http.StatusCreated)
	// Namespaces are deleted one by one, as upstream's: not by collection, and discovery says so
	// (with their finalize subresource, which only takes updates).
	do(t, e, "DELETE", "/api/v1/namespaces", nil).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	core := must(t, do(t, e, "GET", "/api/v1", nil), http.StatusOK)
	if ns := find(core["resources"].([]any), "name", "namespaces"); ns == nil || slices.Contains(ns["verbs"].([]any), any("deletecollection")) {
		t.Errorf("discovery of namespaces: %v", ns)
	}
	if fin := find(core["resources"].([]any), "name", "namespaces/finalize"); fin == nil || len(fin["verbs"].([]any)) != 1 || fin["verbs"].([]any)[0] != "update" {
		t.Errorf("discovery of namespaces/finalize: %v", fin)
	}
	for _, name := range []string{"fin-a", "fin-b"} {
		must(t, do(t, e, "DELETE", "/api/v1/namespaces/"+name, nil), http.StatusOK)
	}
	// The content finalizer holds it: a second DELETE is a conflict with upstream's message.
	msg := do(t, e, "DELETE", "/api/v1/namespaces/fin-a", nil).status(t, http.StatusConflict, "Conflict")
	if !strings.Contains(msg, "ensuring all content is removed") {
		t.Errorf("delete of a namespace being emptied: %q", msg)
	}
	for _, name := range []string{"fin-a", "fin-b"} {
		ns := must(t, do(t, e, "GET", "/api/v1/namespaces/"+name, nil), http.StatusOK)
		ns["spec"].(map[string]any)["finalizers"] = []string{}
		ns["metadata"].(map[string]any)["labels"] = map[string]any{"changed": "no"}
		got := must(t, do(t, e, "PUT", "/api/v1/namespaces/"+name+"/finalize", ns), http.StatusOK)
		if f := path(got, "spec.finalizers"); f != nil && len(f.([]any)) != 0 {
			t.Errorf("%s: finalize left %v", name, f)
		}
		if path(got, "metadata.labels.changed") != nil {
			t.Errorf("%s: finalize changed the labels: %v", name, path(got, "metadata.labels"))
		}
	}
	// fin-b had nothing else holding it: the finalize update removed it.
	must(t, do(t, e, "GET", "/api/v1/namespaces/fin-b", nil), http.StatusNotFound)
	must(t, do(t, e, "DELETE", "/api/v1/namespaces/fin-b", nil), http.StatusNotFound)
	// fin-a keeps its metadata finalizer: deleting it again keeps it, until the finalizer goes.
	must(t, do(t, e, "DELETE", "/api/v1/namespaces/fin-a", nil), http.StatusOK)
	ns := must(t, do(t, e, "GET", "/api/v1/namespaces/fin-a", nil), http.StatusOK)
	ns["metadata"].(map[string]any)["finalizers"] = nil
	must(t, do(t, e, "PUT", "/api/v1/namespaces/fin-a", ns), http.StatusOK)
	must(t, do(t, e, "GET", "/api/v1/namespaces/fin-a", nil), http.StatusNotFound)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func deployment(name string) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]string{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
			},
		},
	}
}

// Spec "Dry-run": every stage but persistence, on POST, PUT and DELETE; other values are 400.
func TestDryRun(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	r := must(t, do(t, e, "POST", cms+"?dryRun=All", configMap("dry", nil)), http.StatusCreated)
	if path(r, "metadata.uid") == nil || path(r, "metadata.name") != "dry" {
		t.Errorf("dry-run create answer %v", r)
	}
	do(t, e, "GET", cms+"/dry", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "POST", cms+"?dryRun=All", configMap("Bad_Name", nil)).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "POST", "/api/v1/namespaces/nosuch/configmaps?dryRun=All", configMap("x", nil)).status(t, http.StatusNotFound, "NotFound")
	// ?dryRun with no value is a real request.
	must(t, do(t, e, "POST", cms+"?dryRun", configMap("real", nil)), http.StatusCreated)
	cur := must(t, do(t, e, "GET", cms+"/real", nil), http.StatusOK)
	must(t, do(t, e, "PUT", cms+"/real?dryRun=All", configMap("real", map[string]string{"a": "b"})), http.StatusOK)
	if after := must(t, do(t, e, "GET", cms+"/real", nil), http.StatusOK); path(after, "metadata.resourceVersion") != path(cur, "metadata.resourceVersion") {
		t.Errorf("dry-run PUT changed the object")
	}
	must(t, do(t, e, "DELETE", cms+"/real?dryRun=All", nil), http.StatusOK)
	must(t, do(t, e, "GET", cms+"/real", nil), http.StatusOK)
	do(t, e, "DELETE", cms+"/real?dryRun=true", nil).status(t, http.StatusBadRequest, "BadRequest")
	do(t, e, "PUT", cms+"/real?dryRun=Yes", configMap("real", nil)).status(t, http.StatusBadRequest, "BadRequest")
}

// Spec: subresources: the main resource cannot change status; status cannot change the rest.
func TestStatusSubresource(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const deps = "/apis/apps/v1/namespaces/default/deployments"
	d := deployment("d")
	d["status"] = map[string]any{"replicas": 5}
	created := must(t, do(t, e, "POST", deps, d), http.StatusCreated)
	if path(created, "status.replicas") != nil || path(created, "metadata.generation") != float64(1) {
		t.Errorf("create kept client status or lacks generation: %v %v", created["status"], path(created, "metadata.generation"))
	}
	created["status"] = map[string]any{"replicas": 3}
	st := must(t, do(t, e, "PUT", deps+"/d/status", created), http.StatusOK)
	if path(st, "status.replicas") != float64(3) {
		t.Errorf("status update: %v", st["status"])
	}
	st["status"] = map[string]any{"replicas": 9}
	st["spec"].(map[string]any)["replicas"] = 4
	main := must(t, do(t, e, "PUT", deps+"/d", st), http.StatusOK)
	if path(main, "status.replicas") != float64(3) || path(main, "spec.replicas") != float64(4) || path(main, "metadata.generation") != float64(2) {
		t.Errorf("main update: status %v spec.replicas %v generation %v", main["status"], path(main, "spec.replicas"), path(main, "metadata.generation"))
	}
	main["spec"].(map[string]any)["replicas"] = 7
	s2 := must(t, do(t, e, "PUT", deps+"/d/status", main), http.StatusOK)
	if path(s2, "spec.replicas") != float64(4) {
		t.Errorf("status update changed spec: %v", path(s2, "spec.replicas"))
	}
	got := must(t, do(t, e, "GET", deps+"/d/status", nil), http.StatusOK)
	if got["kind"] != "Deployment" {
		t.Errorf("GET status: %v", got["kind"])
	}
	do(t, e, "PUT", "/api/v1/namespaces/default/configmaps/x/status", configMap("x", nil)).status(t, http.StatusNotFound, "NotFound")
}

// Deletion options as upstream: Orphan and Foreground make the object wait for the garbage
// collector (the orphan or foregroundDeletion finalizer, with deletionTimestamp); Background
// and no policy delete at once; the deprecated orphanDependents still works; a later delete may
// switch the policy while the object waits; bad options are 422 DeleteOptions.
func TestDeletePropagation(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	finalizers := func(obj map[string]any) []string {
		var out []string
		fs, _ := path(obj, "metadata.finalizers").([]any)
		for _, f := range fs {
			out = append(out, f.(string))
		}
		return out
	}
	for _, tc := range []struct {
		name, query, body string
		want              []string // nil: deleted at once
	}{
		{name: "orphan", query: "?propagationPolicy=Orphan", want: []string{"orphan"}},
		{name: "foreground", body: `{"propagationPolicy":"Foreground"}`, want: []string{"foregroundDeletion"}},
		{name: "background", body: `{"propagationPolicy":"Background"}`},
		{name: "default"},
		{name: "orphan-deps", query: "?orphanDependents=true", want: []string{"orphan"}},
		{name: "no-orphan-deps", body: `{"orphanDependents":false}`},
	} {
		must(t, do(t, e, "POST", cms, configMap("gc-"+tc.name, nil)), http.StatusCreated)
		var body any
		if tc.body != "" {
			body = tc.body
		}
		del := must(t, do(t, e, "DELETE", cms+"/gc-"+tc.name+tc.query, body), http.StatusOK)
		if tc.want == nil {
			if del["kind"] != "Status" && path(del, "metadata.deletionTimestamp") != nil {
				t.Errorf("%s: not deleted at once: %v", tc.name, del)
			}
			do(t, e, "GET", cms+"/gc-"+tc.name, nil).status(t, http.StatusNotFound, "NotFound")
			continue
		}
		if path(del, "metadata.deletionTimestamp") == nil || !slices.Equal(finalizers(del), tc.want) {
			t.Errorf("%s: want deletionTimestamp and finalizers %v, got %v", tc.name, tc.want, del["metadata"])
		}
	}
	// A second delete switches orphan to foreground; the deletionTimestamp stays.
	first := must(t, do(t, e, "GET", cms+"/gc-orphan", nil), http.StatusOK)
	second := must(t, do(t, e, "DELETE", cms+"/gc-orphan", `{"propagationPolicy":"Foreground"}`), http.StatusOK)
	if !slices.Equal(finalizers(second), []string{"foregroundDeletion"}) || path(second, "metadata.deletionTimestamp") != path(first, "metadata.deletionTimestamp") {
		t.Errorf("switching to foreground: %v (was %v)", second["metadata"], first["metadata"])
	}
	// Removing the collector's finalizer (what the collector does) removes the object.
	second["metadata"].(map[string]any)["finalizers"] = []string{}
	must(t, do(t, e, "PUT", cms+"/gc-orphan", second), http.StatusOK)
	do(t, e, "GET", cms+"/gc-orphan", nil).status(t, http.StatusNotFound, "NotFound")

	// Bad options.
	must(t, do(t, e, "POST", cms, configMap("gc-bad", nil)), http.StatusCreated)
	do(t, e, "DELETE", cms+"/gc-bad?propagationPolicy=Sometimes", nil).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "DELETE", cms+"/gc-bad", `{"propagationPolicy":"Orphan","orphanDependents":true}`).status(t, http.StatusUnprocessableEntity, "Invalid")
	// Both collector finalizers at once, and an owner reference without a uid, are invalid.
	bad := configMap("gc-both", nil)
	bad["metadata"].(map[string]any)["finalizers"] = []string{"orphan", "foregroundDeletion"}
	do(t, e, "POST", cms, bad).status(t, http.StatusUnprocessableEntity, "Invalid")
	noUID := configMap("gc-nouid", nil)
	noUID["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}
	do(t, e, "POST", cms, noUID).status(t, http.StatusUnprocessableEntity, "Invalid")
	must(t, do(t, e, "GET", cms+"/gc-bad", nil), http.StatusOK)
}
