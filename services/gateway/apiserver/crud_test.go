package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

const cms = "/api/v1/namespaces/default/configmaps"

// Spec: verbs table (POST create, GET get/list, PUT update, DELETE delete) and the common
// object metadata the server assigns.
func TestCRUD(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	created := must(t, do(t, e, "POST", cms, configMap("a", map[string]string{"k": "v"})), http.StatusCreated)
	for _, f := range []string{"metadata.uid", "metadata.resourceVersion", "metadata.creationTimestamp"} {
		if s, _ := path(created, f).(string); s == "" {
			t.Errorf("created object has no %s: %v", f, created)
		}
	}
	if path(created, "metadata.namespace") != "default" || created["kind"] != "ConfigMap" || created["apiVersion"] != "v1" {
		t.Errorf("created object: %v", created)
	}
	got := must(t, do(t, e, "GET", cms+"/a", nil), http.StatusOK)
	if path(got, "metadata.resourceVersion") != path(created, "metadata.resourceVersion") || path(got, "data.k") != "v" {
		t.Errorf("get = %v", got)
	}
	list := must(t, do(t, e, "GET", cms, nil), http.StatusOK)
	if list["kind"] != "ConfigMapList" || len(list["items"].([]any)) != 1 || path(list, "metadata.resourceVersion") == "" {
		t.Errorf("list = %v", list)
	}

	// PUT with the current resourceVersion updates; with a stale one it is a 409.
	upd := configMap("a", map[string]string{"k": "w"})
	upd["metadata"].(map[string]any)["resourceVersion"] = path(created, "metadata.resourceVersion")
	updated := must(t, do(t, e, "PUT", cms+"/a", upd), http.StatusOK)
	if path(updated, "metadata.resourceVersion") == path(created, "metadata.resourceVersion") || path(updated, "metadata.uid") != path(created, "metadata.uid") {
		t.Errorf("update = %v", updated)
	}
	do(t, e, "PUT", cms+"/a", upd).status(t, http.StatusConflict, "Conflict")
	// PUT without resourceVersion is unconditional; PUT of a new name creates.
	must(t, do(t, e, "PUT", cms+"/a", configMap("a", map[string]string{"k": "x"})), http.StatusOK)
	must(t, do(t, e, "PUT", cms+"/b", configMap("b", nil)), http.StatusCreated)
	// An unchanged PUT writes nothing: same resourceVersion.
	cur := must(t, do(t, e, "GET", cms+"/b", nil), http.StatusOK)
	same := must(t, do(t, e, "PUT", cms+"/b", cur), http.StatusOK)
	if path(same, "metadata.resourceVersion") != path(cur, "metadata.resourceVersion") {
		t.Errorf("a no-op update changed the resourceVersion: %v -> %v", path(cur, "metadata.resourceVersion"), path(same, "metadata.resourceVersion"))
	}

	del := must(t, do(t, e, "DELETE", cms+"/a", nil), http.StatusOK)
	if del["kind"] != "Status" || del["status"] != "Success" || path(del, "details.name") != "a" {
		t.Errorf("delete = %v", del)
	}
	msg := do(t, e, "GET", cms+"/a", nil).status(t, http.StatusNotFound, "NotFound")
	if !strings.Contains(msg, `configmaps "a" not found`) {
		t.Errorf("404 message %q", msg)
	}
	do(t, e, "DELETE", cms+"/a", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "POST", cms, configMap("b", nil)).status(t, http.StatusConflict, "AlreadyExists")
	// HEAD works like GET without a body.
	if r := do(t, e, "HEAD", cms+"/b", nil); r.code != http.StatusOK || len(r.body) != 0 {
		t.Errorf("HEAD = %d %q", r.code, r.body)
	}
}

// Spec: metadata rules: name or generateName, namespace from the URL, system fields not forgeable.
func TestCreateMetadataRules(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	gen := map[string]any{"metadata": map[string]any{"generateName": "gen-"}}
	a := must(t, do(t, e, "POST", cms, gen), http.StatusCreated)
	name, _ := path(a, "metadata.name").(string)
	if !strings.HasPrefix(name, "gen-") || len(name) != len("gen-")+5 {
		t.Errorf("generated name %q", name)
	}
	do(t, e, "POST", cms, map[string]any{"metadata": map[string]any{}}).status(t, http.StatusUnprocessableEntity, "Invalid")
	do(t, e, "POST", cms, configMap("Not_Valid", nil)).status(t, http.StatusUnprocessableEntity, "Invalid")
	forged := map[string]any{"metadata": map[string]any{
		"name": "forged", "uid": "00000000-0000-0000-0000-000000000001",
		"creationTimestamp": "2000-01-01T00:00:00Z", "deletionTimestamp": "2000-01-01T00:00:00Z",
	}}
	f := must(t, do(t, e, "POST", cms, forged), http.StatusCreated)
	if path(f, "metadata.uid") == "00000000-0000-0000-0000-000000000001" || path(f, "metadata.creationTimestamp") == "2000-01-01T00:00:00Z" || path(f, "metadata.deletionTimestamp") != nil {
		t.Errorf("system fields were forged: %v", f["metadata"])
	}
	withRV := configMap("rv", nil)
	withRV["metadata"].(map[string]any)["resourceVersion"] = "5"
	do(t, e, "POST", cms, withRV).status(t, http.StatusBadRequest, "BadRequest")
	other := configMap("x", nil)
	other["metadata"].(map[string]any)["namespace"] = "platform-system"
	do(t, e, "POST", cms, other).status(t, http.StatusBadRequest, "BadRequest")
	do(t, e, "POST", "/api/v1/namespaces/nosuch/configmaps", configMap("x", nil)).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "PUT", cms+"/y", configMap("z", nil)).status(t, http.StatusBadRequest, "BadRequest")
	// Update keeps uid and creationTimestamp whatever the body says.
	upd := configMap(name, map[string]string{"a": "b"})
	upd["metadata"].(map[string]any)["creationTimestamp"] = "2000-01-01T00:00:00Z"
	u := must(t, do(t, e, "PUT", cms+"/"+name, upd), http.StatusOK)
	if path(u, "metadata.creationTimestamp") != path(a, "metadata.creationTimestamp") || path(u, "metadata.uid") != path(a, "metadata.uid") {
		t.Errorf("update changed system fields: %v", u["metadata"])
	}
	// A uid in the body is a precondition.
	upd["metadata"].(map[string]any)["uid"] = "not-the-uid"
	do(t, e, "PUT", cms+"/"+name, upd).status(t, http.StatusConflict, "Conflict")
}

// Spec: the namespaces that exist from the start, and cluster-scoped items.
func TestInitialNamespaces(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	for _, ns := range []string{"default", "platform-system", "platform-public"} {
		got := must(t, do(t, e, "GET", "/api/v1/namespaces/"+ns, nil), http.StatusOK)
		if path(got, "status.phase") != "Active" {
			t.Errorf("namespace %s: %v", ns, got)
		}
		do(t, e, "DELETE", "/api/v1/namespaces/"+ns, nil).status(t, http.StatusForbidden, "Forbidden")
	}
	// And the system priority classes, as upstream's.
	for name, value := range map[string]float64{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
		got := must(t, do(t, e, "GET", "/apis/scheduling.platform.io/v1/priorityclasses/"+name, nil), http.StatusOK)
		if got["value"] != value || path(got, "preemptionPolicy") != "PreemptLowerPriority" {
			t.Errorf("priority class %s: %v", name, got)
		}
	}
}

// Upstream's defaults are applied to stored objects (the spec's v1 migration table lists some:
// Deployment progressDeadlineSeconds 600, revisionHistoryLimit 10, maxSurge/maxUnavailable 25%).
func TestDefaulting(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	s := must(t, do(t, e, "POST", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"s"},"stringData":{"a":"b"}}`), http.StatusCreated)
	if s["type"] != "Opaque" {
		t.Errorf("secret type %v", s["type"])
	}
	d := must(t, do(t, e, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("d")), http.StatusCreated)
	for f, want := range map[string]any{
		"spec.replicas": float64(1), "spec.revisionHistoryLimit": float64(10), "spec.progressDeadlineSeconds": float64(600),
		"spec.strategy.type": "RollingUpdate", "spec.strategy.rollingUpdate.maxSurge": "25%", "spec.strategy.rollingUpdate.maxUnavailable": "25%",
		"spec.template.spec.restartPolicy": "Always", "spec.template.spec.dnsPolicy": "ClusterFirst",
	} {
		if got := path(d, f); got != want {
			t.Errorf("deployment %s = %v, want %v", f, got, want)
		}
	}
	svc := must(t, do(t, e, "POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"svc"},"spec":{"ports":[{"port":80}]}}`), http.StatusCreated)
	port := path(svc, "spec.ports").([]any)[0].(map[string]any)
	if path(svc, "spec.type") != "ClusterIP" || port["protocol"] != "TCP" || port["targetPort"] != float64(80) {
		t.Errorf("service spec %v", svc["spec"])
	}
}
