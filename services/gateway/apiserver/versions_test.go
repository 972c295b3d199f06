package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/libs/naming"
	storageclient "platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/gatewaytest"
)

const (
	hpaV1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
	hpaV2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
)

var hpaAnnotationPrefix = "autoscaling.alpha." + naming.Domain + "/"

// hpaV2Spec is a spec v1 cannot say by itself: five metrics (the CPU utilization target last,
// where upstream's conversion puts it back) and a behavior.
const hpaV2Spec = `{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"minReplicas":2,"maxReplicas":10,
	"metrics":[
		{"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"512Mi"}}},
		{"type":"Pods","pods":{"metric":{"name":"packets"},"target":{"type":"AverageValue","averageValue":"1k"}}},
		{"type":"Object","object":{"describedObject":{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","name":"main"},"metric":{"name":"requests"},"target":{"type":"Value","value":"10k"}}},
		{"type":"External","external":{"metric":{"name":"queue","selector":{"matchLabels":{"q":"jobs"}}},"target":{"type":"AverageValue","averageValue":"30"}}},
		{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":70}}}],
	"behavior":{"scaleDown":{"stabilizationWindowSeconds":120,"selectPolicy":"Min","policies":[{"type":"Percent","value":10,"periodSeconds":60}]},
		"scaleUp":{"stabilizationWindowSeconds":0,"selectPolicy":"Max","policies":[{"type":"Pods","value":4,"periodSeconds":15}]}}}`

const hpaV2Status = `{"currentReplicas":3,"desiredReplicas":4,"lastScaleTime":"2026-01-01T00:00:00Z","observedGeneration":1,
	"currentMetrics":[
		{"type":"Resource","resource":{"name":"cpu","current":{"averageUtilization":55,"averageValue":"275m"}}},
		{"type":"Pods","pods":{"metric":{"name":"packets"},"current":{"averageValue":"900"}}}],
	"conditions":[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"SucceededRescale","message":"scaled"},
		{"type":"ScalingLimited","status":"False","lastTransitionTime":"2026-01-01T00:00:00Z","reason":"DesiredWithinRange","message":"in range"}]}`

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// sameJSON compares two decoded JSON values, reporting the difference.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// roundTripAnnotations returns the annotations upstream's conversion adds, by short name.
func roundTripAnnotations(obj map[string]any) map[string]string {
	out := map[string]string{}
	ann, _ := path(obj, "metadata.annotations").(map[string]any)
	for k, v := range ann {
		if short, ok := strings.CutPrefix(k, hpaAnnotationPrefix); ok {
			out[short] = v.(string)
		}
	}
	return out
}

// Issue 14 "Versions served as upstream, with conversion": HorizontalPodAutoscalers are stored
// once (autoscaling/v2) and served through autoscaling/v1 too, with upstream's conversion; an
// object written in v2 reads in v1 and, written back through v1, reads in v2 without loss (spec
// rule 2), through get, list, watch, update, status, patch, apply and Tables.
func TestHPAVersionsRoundTrip(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})

	// Written in v2, with a status.
	must(t, do(t, e, "POST", hpaV2, `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web","labels":{"app":"web"},"annotations":{"team":"a"}},"spec":`+hpaV2Spec+`}`), http.StatusCreated)
	cur := must(t, do(t, e, "GET", hpaV2+"/web", nil), http.StatusOK)
	cur["status"] = jsonValue(t, hpaV2Status)
	written := must(t, do(t, e, "PUT", hpaV2+"/web/status", cur), http.StatusOK)

	// Read in v1: the CPU target and current utilization in v1's fields, the rest in upstream's
	// annotations.
	v1 := must(t, do(t, e, "GET", hpaV1+"/web", nil), http.StatusOK)
	for p, want := range map[string]any{
		"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
		"metadata.uid": path(written, "metadata.uid"), "metadata.resourceVersion": path(written, "metadata.resourceVersion"),
		"metadata.annotations.team": "a", "metadata.labels.app": "web",
		"spec.targetCPUUtilizationPercentage": float64(70), "spec.minReplicas": float64(2), "spec.maxReplicas": float64(10),
		"spec.scaleTargetRef.name": "web", "status.currentCPUUtilizationPercentage": float64(55),
		"status.currentReplicas": float64(3), "status.desiredReplicas": float64(4),
	} {
		if got := path(v1, p); got != want {
			t.Errorf("v1 view: %s = %v, want %v", p, got, want)
		}
	}
	for _, p := range []string{"spec.metrics", "spec.behavior", "status.conditions", "status.currentMetrics"} {
		if got := path(v1, p); got != nil {
			t.Errorf("v1 view carries the v2 field %s: %v", p, got)
		}
	}
	ann := roundTripAnnotations(v1)
	sameJSON(t, "metrics annotation (v1 metric form, the CPU target left out)", jsonValue(t, ann["metrics"]), jsonValue(t, `[
		{"type":"Resource","resource":{"name":"memory","targetAverageValue":"512Mi"}},
		{"type":"Pods","pods":{"metricName":"packets","targetAverageValue":"1k"}},
		{"type":"Object","object":{"target":{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","name":"main"},"metricName":"requests","targetValue":"10k"}},
		{"type":"External","external":{"metricName":"queue","metricSelector":{"matchLabels":{"q":"jobs"}},"targetAverageValue":"30"}}]`))
	sameJSON(t, "behavior annotation (upstream's internal form)", jsonValue(t, ann["behavior"]), jsonValue(t, `{
		"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":null},
		"ScaleDown":{"StabilizationWindowSeconds":120,"SelectPolicy":"Min","Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":null}}`))
	if ann["current-metrics"] == "" || ann["conditions"] == "" || len(ann) != 4 {
		t.Errorf("round-trip annotations: %v", ann)
	}

	// Written back through v1 (maxReplicas changed): v2 reads the same spec and status, no
	// annotation left.
	v1["spec"].(map[string]any)["maxReplicas"] = 12
	must(t, do(t, e, "PUT", hpaV1+"/web", v1), http.StatusOK)
	v2 := must(t, do(t, e, "GET", hpaV2+"/web", nil), http.StatusOK)
	wantSpec := jsonValue(t, hpaV2Spec).(map[string]any)
	wantSpec["maxReplicas"] = float64(12)
	sameJSON(t, "v2 spec after a v1 round trip", v2["spec"], wantSpec)
	sameJSON(t, "v2 status after a v1 round trip", v2["status"], jsonValue(t, hpaV2Status))
	sameJSON(t, "v2 annotations after a v1 round trip", path(v2, "metadata.annotations"), map[string]any{"team": "a"})
	if stored := storedHPA(t, e, "web"); len(stored.Spec.Metrics) != 5 || stored.Spec.Behavior == nil || len(stored.Status.Conditions) != 2 || len(stored.Annotations) != 1 {
		t.Errorf("stored after a v1 write: %+v, annotations %v", stored.Spec, stored.Annotations)
	}
	if path(v2, "metadata.generation") != float64(2) {
		t.Errorf("generation after one spec change: %v", path(v2, "metadata.generation"))
	}

	// A v1 write of the main resource cannot change the status its annotations carry.
	stale := must(t, do(t, e, "GET", hpaV1+"/web", nil), http.StatusOK)
	annotations := path(stale, "metadata.annotations").(map[string]any)
	delete(annotations, hpaAnnotationPrefix+"conditions")
	annotations[hpaAnnotationPrefix+"current-metrics"] = `[]`
	stale["status"].(map[string]any)["currentReplicas"] = 9
	must(t, do(t, e, "PUT", hpaV1+"/web", stale), http.StatusOK)
	sameJSON(t, "v2 status after a v1 write of the main resource", must(t, do(t, e, "GET", hpaV2+"/web", nil), http.StatusOK)["status"], jsonValue(t, hpaV2Status))

	// A v1 watch sees a v2 update in v1's form; a v1 list holds it.
	rv := path(must(t, do(t, e, "GET", hpaV1, nil), http.StatusOK), "metadata.resourceVersion").(string)
	w := openWatch(t, e.Admin, e, hpaV1+"?watch=1&resourceVersion="+rv)
	must(t, do(t, e, "PATCH", hpaV2+"/web", `{"spec":{"minReplicas":3}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	ev := w.next(t, false)
	if ev.Type != "MODIFIED" || path(ev.Object, "apiVersion") != "autoscaling/v1" || path(ev.Object, "spec.minReplicas") != float64(3) ||
		path(ev.Object, "spec.targetCPUUtilizationPercentage") != float64(70) || roundTripAnnotations(ev.Object)["metrics"] == "" {
		t.Errorf("v1 watch of a v2 update: %s %v", ev.Type, ev.Object)
	}
	list := must(t, do(t, e, "GET", hpaV1, nil), http.StatusOK)
	if items := list["items"].([]any); list["kind"] != "HorizontalPodAutoscalerList" || list["apiVersion"] != "autoscaling/v1" || len(items) != 1 ||
		path(items[0].(map[string]any), "spec.targetCPUUtilizationPercentage") != float64(70) {
		t.Errorf("v1 list: %v", list)
	}

	// A strategic merge patch through v1 changes the CPU target and keeps every other metric.
	must(t, do(t, e, "PATCH", hpaV1+"/web", `{"spec":{"targetCPUUtilizationPercentage":75}}`, "Content-Type", "application/strategic-merge-patch+json"), http.StatusOK)
	v2 = must(t, do(t, e, "GET", hpaV2+"/web", nil), http.StatusOK)
	metrics := v2["spec"].(map[string]any)["metrics"].([]any)
	if len(metrics) != 5 || path(metrics[4].(map[string]any), "resource.target.averageUtilization") != float64(75) || path(metrics[0].(map[string]any), "resource.name") != "memory" {
		t.Errorf("v2 metrics after a v1 strategic merge patch: %v", metrics)
	}

	// Server-side apply through v1: the manager's entry records v1, the object keeps its v2 parts.
	applied := must(t, do(t, e, "PATCH", hpaV1+"/web?fieldManager=v1-applier&force=true",
		`{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":{"maxReplicas":20,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}}}`,
		"Content-Type", "application/apply-patch+yaml"), http.StatusOK)
	found := false
	for _, mf := range path(applied, "metadata.managedFields").([]any) {
		m := mf.(map[string]any)
		found = found || (m["manager"] == "v1-applier" && m["apiVersion"] == "autoscaling/v1" && m["operation"] == "Apply")
	}
	if !found {
		t.Errorf("managedFields after a v1 apply: %v", path(applied, "metadata.managedFields"))
	}
	v2 = must(t, do(t, e, "GET", hpaV2+"/web", nil), http.StatusOK)
	if path(v2, "spec.maxReplicas") != float64(20) || len(v2["spec"].(map[string]any)["metrics"].([]any)) != 5 || path(v2, "spec.behavior.scaleDown.stabilizationWindowSeconds") != float64(120) {
		t.Errorf("v2 after a v1 apply: %v", v2["spec"])
	}
	// ... and an apply through v2 by another manager sees the v1 manager's ownership.
	conflict := do(t, e, "PATCH", hpaV2+"/web?fieldManager=v2-applier",
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":{"maxReplicas":21,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}}}`,
		"Content-Type", "application/apply-patch+yaml")
	if msg := conflict.status(t, http.StatusConflict, "Conflict"); !strings.Contains(msg, "v1-applier") || !strings.Contains(msg, ".spec.maxReplicas") {
		t.Errorf("v2 apply over a v1 manager's field: %s", msg)
	}

	// Tables: the same columns through both versions.
	tables := map[string]map[string]any{}
	for _, p := range []string{hpaV1, hpaV2} {
		tables[p] = must(t, do(t, e, "GET", p, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), http.StatusOK)
	}
	sameJSON(t, "v1 Table columns", tables[hpaV1]["columnDefinitions"], tables[hpaV2]["columnDefinitions"])
	// The Age column is computed when each table is served: the two reads may straddle a second.
	age := -1
	for i, c := range tables[hpaV1]["columnDefinitions"].([]any) {
		if c.(map[string]any)["name"] == "Age" {
			age = i
		}
	}
	if age < 0 {
		t.Fatalf("the table has no Age column: %v", tables[hpaV1]["columnDefinitions"])
	}
	cells := func(tab map[string]any) any {
		rows := tab["rows"].([]any)
		if len(rows) != 1 {
			return rows
		}
		c := append([]any(nil), rows[0].(map[string]any)["cells"].([]any)...)
		if age < len(c) {
			c[age] = "(age)"
		}
		return c
	}
	sameJSON(t, "v1 Table row", cells(tables[hpaV1]), cells(tables[hpaV2]))
	if c, _ := cells(tables[hpaV1]).([]any); len(c) < 6 || c[1] != "Deployment/web" || c[4] != float64(20) {
		t.Errorf("v1 Table row: %v", cells(tables[hpaV1]))
	}

	// Created through v1: the CPU target becomes a v2 metric; without one, upstream's implicit 80%.
	must(t, do(t, e, "POST", hpaV1, `{"metadata":{"name":"cpu"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"web"},"maxReplicas":5,"targetCPUUtilizationPercentage":60}}`), http.StatusCreated)
	must(t, do(t, e, "POST", hpaV1, `{"metadata":{"name":"plain"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"web"},"maxReplicas":5}}`), http.StatusCreated)
	for name, want := range map[string]float64{"cpu": 60, "plain": 80} {
		got := must(t, do(t, e, "GET", hpaV2+"/"+name, nil), http.StatusOK)
		sameJSON(t, name+": v2 metrics of a v1 create", path(got, "spec.metrics"), []any{map[string]any{"type": "Resource",
			"resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": want}}}})
		if path(got, "spec.minReplicas") != float64(1) || path(got, "metadata.annotations") != nil {
			t.Errorf("%s: v2 view of a v1 create: %v", name, got["metadata"])
		}
	}
	// A round-trip annotation that does not decode is the client's error.
	do(t, e, "POST", hpaV1, `{"metadata":{"name":"bad","annotations":{"`+hpaAnnotationPrefix+`metrics":"not json"}},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"web"},"maxReplicas":5}}`).
		status(t, http.StatusBadRequest, "BadRequest")
	// Deleted through v1, gone from v2.
	must(t, do(t, e, "DELETE", hpaV1+"/cpu", nil), http.StatusOK)
	do(t, e, "GET", hpaV2+"/cpu", nil).status(t, http.StatusNotFound, "NotFound")
}

// Discovery and OpenAPI list autoscaling/v1 beside autoscaling/v2, v2 preferred as upstream.
func TestHPAVersionsDiscovery(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	g := must(t, do(t, e, "GET", "/apis/autoscaling", nil), http.StatusOK)
	sameJSON(t, "autoscaling versions", g["versions"], jsonValue(t, `[{"groupVersion":"autoscaling/v2","version":"v2"},{"groupVersion":"autoscaling/v1","version":"v1"}]`))
	if path(g, "preferredVersion.version") != "v2" {
		t.Errorf("preferred version: %v", g["preferredVersion"])
	}
	rl := must(t, do(t, e, "GET", "/apis/autoscaling/v1", nil), http.StatusOK)
	var names []string
	for _, r := range rl["resources"].([]any) {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "horizontalpodautoscalers,horizontalpodautoscalers/status" {
		t.Errorf("autoscaling/v1 resources: %v", names)
	}
	root := must(t, do(t, e, "GET", "/openapi/v3", nil), http.StatusOK)
	if _, ok := path(root, "paths").(map[string]any)["apis/autoscaling/v1"]; !ok {
		t.Errorf("/openapi/v3 does not list apis/autoscaling/v1")
	}
	doc := must(t, do(t, e, "GET", "/openapi/v3/apis/autoscaling/v1", nil), http.StatusOK)
	if _, ok := path(doc, "paths").(map[string]any)["/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers/{name}"]; !ok {
		t.Errorf("autoscaling/v1 OpenAPI document has no HPA item path")
	}
}

// Issue 14 "Deprecation signals": core componentstatuses are served (get, list) with upstream's
// deprecation warning and report the health of the services behind the gateway.
func TestComponentStatuses(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const warning = `299 - "v1 ComponentStatus is deprecated in v1.19+"`
	r := do(t, e, "GET", "/api/v1/componentstatuses", nil)
	list := must(t, r, http.StatusOK)
	if w := r.header.Values("Warning"); len(w) != 1 || w[0] != warning {
		t.Errorf("Warning %q, want %q", w, warning)
	}
	if list["kind"] != "ComponentStatusList" || list["apiVersion"] != "v1" {
		t.Errorf("list: %v", list)
	}
	var names []string
	for _, it := range list["items"].([]any) {
		item := it.(map[string]any)
		names = append(names, path(item, "metadata.name").(string))
		sameJSON(t, "conditions of "+names[len(names)-1], item["conditions"], []any{map[string]any{"type": "Healthy", "status": "True", "message": "ok"}})
	}
	if strings.Join(names, ",") != "storage,authentication,authorization,admission" {
		t.Errorf("components: %v", names)
	}
	one := must(t, do(t, e, "GET", "/api/v1/componentstatuses/storage", nil), http.StatusOK)
	if one["kind"] != "ComponentStatus" || path(one, "metadata.name") != "storage" {
		t.Errorf("get: %v", one)
	}
	sel := must(t, do(t, e, "GET", "/api/v1/componentstatuses?fieldSelector=metadata.name%3Dauthorization", nil), http.StatusOK)
	if items := sel["items"].([]any); len(items) != 1 || path(items[0].(map[string]any), "metadata.name") != "authorization" {
		t.Errorf("field selector: %v", sel["items"])
	}
	do(t, e, "GET", "/api/v1/componentstatuses/etcd-0", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "POST", "/api/v1/componentstatuses", `{"metadata":{"name":"x"}}`).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	do(t, e, "DELETE", "/api/v1/componentstatuses/storage", nil).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	do(t, e, "GET", "/api/v1/componentstatuses?watch=1", nil).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	rl := must(t, do(t, e, "GET", "/api/v1", nil), http.StatusOK)
	for _, res := range rl["resources"].([]any) {
		if m := res.(map[string]any); m["name"] == "componentstatuses" {
			sameJSON(t, "discovery of componentstatuses", []any{m["verbs"], m["shortNames"], m["namespaced"]}, []any{[]any{"get", "list"}, []any{"cs"}, false})
		}
	}

	// A component that stops is reported unhealthy, with the check's error, in the Table too.
	e.Admission.Stop(context.Background())
	tab := must(t, do(t, e, "GET", "/api/v1/componentstatuses", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), http.StatusOK)
	var cols []string
	for _, c := range tab["columnDefinitions"].([]any) {
		cols = append(cols, c.(map[string]any)["name"].(string))
	}
	if strings.Join(cols, ",") != "Name,Status,Message,Error" {
		t.Errorf("Table columns: %v", cols)
	}
	for _, row := range tab["rows"].([]any) {
		cells := row.(map[string]any)["cells"].([]any)
		switch {
		case cells[0] == "admission" && (cells[1] != "Unhealthy" || cells[3] == ""):
			t.Errorf("stopped admission service: %v", cells)
		case cells[0] != "admission" && (cells[1] != "Healthy" || cells[2] != "ok"):
			t.Errorf("running %s: %v", cells[0], cells)
		}
	}
}

// With --runtime-config=autoscaling/v2=false, autoscaling/v1 is still served and its objects are
// still stored as v2: the annotations' metrics survive a create and a read.
func TestHPAVersionsStorageVersionOff(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *gatewayConfig) { c.RuntimeConfig = "autoscaling/v2=false" }})
	do(t, e, "GET", hpaV2, nil).status(t, http.StatusNotFound, "NotFound")
	other := `[{"type":"Pods","pods":{"metricName":"packets","targetAverageValue":"1k"}}]`
	must(t, do(t, e, "POST", hpaV1, map[string]any{"metadata": map[string]any{"name": "web", "annotations": map[string]any{hpaAnnotationPrefix + "metrics": other}},
		"spec": map[string]any{"scaleTargetRef": map[string]any{"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}}), http.StatusCreated)
	got := must(t, do(t, e, "GET", hpaV1+"/web", nil), http.StatusOK)
	if path(got, "spec.targetCPUUtilizationPercentage") != float64(60) {
		t.Errorf("v1 read: %v", got["spec"])
	}
	sameJSON(t, "metrics annotation", jsonValue(t, roundTripAnnotations(got)["metrics"]), jsonValue(t, other))
	stored := storedHPA(t, e, "web")
	if len(stored.Spec.Metrics) != 2 || stored.Spec.Metrics[0].Pods == nil || stored.Spec.Metrics[0].Pods.Metric.Name != "packets" ||
		stored.Spec.Metrics[1].Resource == nil || *stored.Spec.Metrics[1].Resource.Target.AverageUtilization != 60 || len(stored.Annotations) != 0 {
		t.Errorf("stored object: %+v %v", stored.Spec, stored.Annotations)
	}
}

// storedHPA reads an HPA of the default namespace from the storage service, as stored: it must be
// the Protobuf envelope of an autoscaling/v2 object.
func storedHPA(t *testing.T, e *gatewaytest.Env, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	conn, err := grpc.NewClient(e.Storage.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := storageclient.NewClient(conn).Get(ctx, &storagev1.GetRequest{Type: &storagev1.ResourceType{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, Namespace: "default", Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var unk runtime.Unknown
	if v := resp.Object.Value; len(v) < 4 || unk.Unmarshal(v[4:]) != nil {
		t.Fatalf("stored value is not a Protobuf envelope: %q", v)
	}
	if unk.APIVersion != "autoscaling/v2" || unk.Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("stored as %s %s, want autoscaling/v2", unk.APIVersion, unk.Kind)
	}
	out := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := out.Unmarshal(unk.Raw); err != nil {
		t.Fatal(err)
	}
	return out
}

// Lists of one stored collection through two versions, both answered from the gateway's list
// cache, which keeps each item's encoding: each list carries its own version's items, however
// the two alternate.
func TestListCacheKeepsEachVersionsEncoding(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, do(t, e, "POST", hpaV2, `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":`+hpaV2Spec+`}`), http.StatusCreated)
	for round := range 3 {
		for _, v := range []struct{ coll, apiVersion, only, absent string }{
			{hpaV1, "autoscaling/v1", "spec.targetCPUUtilizationPercentage", "spec.metrics"},
			{hpaV2, "autoscaling/v2", "spec.metrics", "spec.targetCPUUtilizationPercentage"},
			{hpaV1, "autoscaling/v1", "spec.targetCPUUtilizationPercentage", "spec.metrics"},
		} {
			list := must(t, do(t, e, "GET", v.coll, nil), http.StatusOK)
			items, _ := list["items"].([]any)
			if len(items) != 1 {
				t.Fatalf("round %d, %s: %d items", round, v.coll, len(items))
			}
			item := items[0].(map[string]any)
			if round > 0 && path(item, "metadata.labels.round") != strconv.Itoa(round-1) {
				t.Errorf("round %d, %s: labels %v, not the last write's", round, v.coll, path(item, "metadata.labels"))
			}
			if path(item, "apiVersion") != v.apiVersion || path(item, v.only) == nil || path(item, v.absent) != nil {
				t.Errorf("round %d, %s: item apiVersion %v, %s = %v, %s = %v", round, v.coll,
					path(item, "apiVersion"), v.only, path(item, v.only), v.absent, path(item, v.absent))
			}
		}
		// A write between rounds: the next lists encode the new version of the object.
		must(t, do(t, e, "PATCH", hpaV2+"/web", map[string]any{"metadata": map[string]any{"labels": map[string]string{"round": strconv.Itoa(round)}}},
			"Content-Type", "application/merge-patch+json"), http.StatusOK)
	}
}
