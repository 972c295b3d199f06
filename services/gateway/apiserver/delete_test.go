package apiserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
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

// Spec: deleting a namespace also deletes every namespace-scoped resource in it; meanwhile it is
// Terminating and takes no new content.
func TestNamespaceDeletion(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", "/api/v1/namespaces", `{"metadata":{"name":"doomed"}}`), http.StatusCreated)
	const doomed = "/api/v1/namespaces/doomed/configmaps"
	must(t, do(t, e, "POST", doomed, configMap("a", nil)), http.StatusCreated)
	held := configMap("held", nil)
	held["metadata"].(map[string]any)["finalizers"] = []string{"example.com/hold"}
	must(t, do(t, e, "POST", doomed, held), http.StatusCreated)
	must(t, do(t, e, "POST", "/apis/apps/v1/namespaces/doomed/deployments", deployment("d")), http.StatusCreated)

	ns := must(t, do(t, e, "DELETE", "/api/v1/namespaces/doomed", nil), http.StatusOK)
	if path(ns, "status.phase") != "Terminating" || path(ns, "metadata.deletionTimestamp") == nil {
		t.Fatalf("deleted namespace: %v", ns)
	}
	msg := do(t, e, "POST", doomed, configMap("late", nil)).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, "being terminated") {
		t.Errorf("create in a terminating namespace: %q", msg)
	}
	waitFor(t, "content without finalizers to go", func() bool {
		return do(t, e, "GET", doomed+"/a", nil).code == http.StatusNotFound &&
			do(t, e, "GET", "/apis/apps/v1/namespaces/doomed/deployments/d", nil).code == http.StatusNotFound
	})
	h := must(t, do(t, e, "GET", doomed+"/held", nil), http.StatusOK)
	if path(h, "metadata.deletionTimestamp") == nil {
		t.Errorf("object with a finalizer not marked: %v", h["metadata"])
	}
	must(t, do(t, e, "GET", "/api/v1/namespaces/doomed", nil), http.StatusOK)
	h["metadata"].(map[string]any)["finalizers"] = nil
	must(t, do(t, e, "PUT", doomed+"/held", h), http.StatusOK)
	waitFor(t, "the namespace to go", func() bool {
		return do(t, e, "GET", "/api/v1/namespaces/doomed", nil).code == http.StatusNotFound
	})
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
