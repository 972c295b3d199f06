package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

const applyType = "application/apply-patch+yaml"

// applyCM applies a ConfigMap with the given data as manager.
func applyCM(t *testing.T, e *gatewaytest.Env, name, manager string, data map[string]string, force bool) response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data})
	q := "?fieldManager=" + manager
	if force {
		q += "&force=true"
	}
	return do(t, e, "PATCH", cms+"/"+name+q, body, "Content-Type", applyType)
}

// owners returns, per manager, the data keys its managedFields entry owns, and the operation.
func owners(t *testing.T, obj map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	mfs, _ := path(obj, "metadata.managedFields").([]any)
	for _, x := range mfs {
		e := x.(map[string]any)
		// time is set when the manager's operation changed the object (upstream's rule), so an
		// entry that only shares a value may lack it.
		if e["fieldsType"] != "FieldsV1" || e["apiVersion"] == nil {
			t.Errorf("managedFields entry lacks fieldsType/apiVersion: %v", e)
		}
		key := e["manager"].(string) + "/" + e["operation"].(string)
		out[key] = []string{}
		if d, ok := e["fieldsV1"].(map[string]any)["f:data"].(map[string]any); ok {
			for k := range d {
				out[key] = append(out[key], strings.TrimPrefix(k, "f:"))
			}
		}
	}
	return out
}

func owns(o map[string][]string, manager, field string) bool {
	for _, f := range o[manager] {
		if f == field {
			return true
		}
	}
	return false
}

// Spec "Field ownership (server-side apply)": every row of the transition table, one subtest each.
func TestFieldOwnershipTable(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})

	t.Run("apply by B with a different value conflicts; ownership unchanged", func(t *testing.T) {
		must(t, applyCM(t, e, "r1", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		r := applyCM(t, e, "r1", "b", map[string]string{"x": "2"}, false)
		r.status(t, http.StatusConflict, "Conflict")
		causes := path(r.obj(t), "details.causes").([]any)
		c := causes[0].(map[string]any)
		if len(causes) != 1 || c["field"] != ".data.x" || !strings.Contains(c["message"].(string), `"a"`) || c["reason"] != "FieldManagerConflict" {
			t.Errorf("conflict causes %v", causes)
		}
		cur := must(t, do(t, e, "GET", cms+"/r1", nil), http.StatusOK)
		if path(cur, "data.x") != "1" || !owns(owners(t, cur), "a/Apply", "x") || len(owners(t, cur)) != 1 {
			t.Errorf("after the conflict: %v %v", cur["data"], owners(t, cur))
		}
	})
	t.Run("force makes B the only owner and removes the field from other managers", func(t *testing.T) {
		must(t, applyCM(t, e, "r2", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		cur := must(t, applyCM(t, e, "r2", "b", map[string]string{"x": "2"}, true), http.StatusOK)
		o := owners(t, cur)
		if path(cur, "data.x") != "2" || !owns(o, "b/Apply", "x") || owns(o, "a/Apply", "x") {
			t.Errorf("after force: %v %v", cur["data"], o)
		}
		if _, ok := o["a/Apply"]; ok {
			t.Errorf("a manager that owns nothing must disappear: %v", o)
		}
	})
	t.Run("the same value gives shared ownership", func(t *testing.T) {
		must(t, applyCM(t, e, "r3", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		cur := must(t, applyCM(t, e, "r3", "b", map[string]string{"x": "1"}, false), http.StatusOK)
		if o := owners(t, cur); !owns(o, "a/Apply", "x") || !owns(o, "b/Apply", "x") {
			t.Errorf("shared: %v", o)
		}
	})
	t.Run("a shared field changed by one owner conflicts", func(t *testing.T) {
		must(t, applyCM(t, e, "r4", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		must(t, applyCM(t, e, "r4", "b", map[string]string{"x": "1"}, false), http.StatusOK)
		applyCM(t, e, "r4", "a", map[string]string{"x": "3"}, false).status(t, http.StatusConflict, "Conflict")
	})
	t.Run("omitting a field the applier alone owned removes it", func(t *testing.T) {
		must(t, applyCM(t, e, "r5", "a", map[string]string{"x": "1", "y": "1"}, false), http.StatusCreated)
		cur := must(t, applyCM(t, e, "r5", "a", map[string]string{"y": "1"}, false), http.StatusOK)
		if _, ok := cur["data"].(map[string]any)["x"]; ok || owns(owners(t, cur), "a/Apply", "x") {
			t.Errorf("x not removed: %v %v", cur["data"], owners(t, cur))
		}
	})
	t.Run("omitting a field with a default resets it to the default", func(t *testing.T) {
		const deps = "/apis/apps/v1/namespaces/default/deployments/dd?fieldManager=a"
		d := deployment("dd")
		d["spec"].(map[string]any)["revisionHistoryLimit"] = 5
		body, _ := json.Marshal(d)
		if got := must(t, do(t, e, "PATCH", deps, body, "Content-Type", applyType), http.StatusCreated); path(got, "spec.revisionHistoryLimit") != float64(5) {
			t.Fatalf("applied revisionHistoryLimit %v", path(got, "spec.revisionHistoryLimit"))
		}
		body, _ = json.Marshal(deployment("dd"))
		if got := must(t, do(t, e, "PATCH", deps, body, "Content-Type", applyType), http.StatusOK); path(got, "spec.revisionHistoryLimit") != float64(10) {
			t.Errorf("revisionHistoryLimit after omitting it: %v, want the default 10", path(got, "spec.revisionHistoryLimit"))
		}
	})
	t.Run("omitting a co-owned field only releases ownership", func(t *testing.T) {
		must(t, applyCM(t, e, "r6", "a", map[string]string{"x": "1", "y": "1"}, false), http.StatusCreated)
		must(t, applyCM(t, e, "r6", "b", map[string]string{"x": "1"}, false), http.StatusOK)
		cur := must(t, applyCM(t, e, "r6", "a", map[string]string{"y": "1"}, false), http.StatusOK)
		o := owners(t, cur)
		if path(cur, "data.x") != "1" || owns(o, "a/Apply", "x") || !owns(o, "b/Apply", "x") {
			t.Errorf("after A dropped x: %v %v", cur["data"], o)
		}
	})
	t.Run("B dropping the field from its config after a conflict leaves the value", func(t *testing.T) {
		must(t, applyCM(t, e, "r7", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		applyCM(t, e, "r7", "b", map[string]string{"x": "2", "z": "9"}, false).status(t, http.StatusConflict, "Conflict")
		cur := must(t, applyCM(t, e, "r7", "b", map[string]string{"z": "9"}, false), http.StatusOK)
		o := owners(t, cur)
		if path(cur, "data.x") != "1" || owns(o, "b/Apply", "x") || !owns(o, "a/Apply", "x") || !owns(o, "b/Apply", "z") {
			t.Errorf("after B resolved by dropping x: %v %v", cur["data"], o)
		}
	})
	t.Run("updates never conflict and take ownership", func(t *testing.T) {
		created := must(t, applyCM(t, e, "r8", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
		// PUT by a user agent with no fieldManager: the manager is the agent's name.
		created["data"] = map[string]any{"x": "2"}
		cur := must(t, do(t, e, "PUT", cms+"/r8", created, "User-Agent", "mytool/1.2 (linux)"), http.StatusOK)
		o := owners(t, cur)
		if path(cur, "data.x") != "2" || !owns(o, "mytool/Update", "x") || owns(o, "a/Apply", "x") {
			t.Errorf("after PUT: %v %v", cur["data"], o)
		}
		cur = must(t, do(t, e, "PATCH", cms+"/r8?fieldManager=patcher", `{"data":{"x":"3"}}`, "Content-Type", mergePatch), http.StatusOK)
		if o := owners(t, cur); !owns(o, "patcher/Update", "x") || owns(o, "mytool/Update", "x") {
			t.Errorf("after merge patch: %v", o)
		}
	})
}

// Spec "Clearing managedFields": [{}] in a non-apply write removes all entries (first); [] does nothing.
func TestManagedFieldsReset(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	must(t, applyCM(t, e, "m", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
	cur := must(t, do(t, e, "PATCH", cms+"/m?fieldManager=p", `{"metadata":{"managedFields":[]}}`, "Content-Type", mergePatch), http.StatusOK)
	if o := owners(t, cur); !owns(o, "a/Apply", "x") {
		t.Errorf("[] changed managedFields: %v", o)
	}
	cur = must(t, do(t, e, "PATCH", cms+"/m?fieldManager=p", `{"metadata":{"managedFields":[{}]}}`, "Content-Type", mergePatch), http.StatusOK)
	if o := owners(t, cur); len(o) != 0 {
		t.Errorf("[{}] left managedFields: %v", o)
	}
	// Combined with a change, the reset happens first: the change is made and, as upstream, an
	// update of an object without managedFields starts no tracking.
	must(t, applyCM(t, e, "m2", "a", map[string]string{"x": "1"}, false), http.StatusCreated)
	cur = must(t, do(t, e, "PATCH", cms+"/m2?fieldManager=p", `{"metadata":{"managedFields":[{}]},"data":{"z":"2"}}`, "Content-Type", mergePatch), http.StatusOK)
	if o := owners(t, cur); len(o) != 0 || path(cur, "data.z") != "2" {
		t.Errorf("reset plus change: %v %v", o, cur["data"])
	}
	// The next apply takes ownership again, the fields that were already there recorded under
	// upstream's "before-first-apply" manager.
	cur = must(t, applyCM(t, e, "m2", "a", map[string]string{"x": "1"}, false), http.StatusOK)
	if o := owners(t, cur); !owns(o, "a/Apply", "x") || !owns(o, "before-first-apply/Update", "z") {
		t.Errorf("apply after reset: %v", o)
	}
}

// Apply: fieldManager required, no managedFields in the body, the resource's kind and name;
// creates; dry-run; the status subresource on its own; YAML bodies; bad bodies leave the object.
func TestApplyRules(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	yml := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  k: v\n"
	do(t, e, "PATCH", cms+"/cfg", yml, "Content-Type", applyType).status(t, http.StatusBadRequest, "BadRequest")
	created := must(t, do(t, e, "PATCH", cms+"/cfg?fieldManager=tool", yml, "Content-Type", applyType), http.StatusCreated)
	if path(created, "data.k") != "v" || path(created, "metadata.uid") == nil || !owns(owners(t, created), "tool/Apply", "k") {
		t.Errorf("apply create: %v", created)
	}
	for name, body := range map[string]string{
		"managedFields": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  managedFields: [{manager: x}]\n",
		"wrong kind":    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cfg\n",
		"wrong name":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
		"not YAML":      "apiVersion: [v1\n",
		"wrong type":    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata: 5\n",
		"yaml bomb":     "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n",
	} {
		r := do(t, e, "PATCH", cms+"/cfg?fieldManager=tool", body, "Content-Type", applyType)
		if r.code < 400 || r.code >= 500 {
			t.Errorf("%s: %d %s", name, r.code, r.body)
		}
	}
	if cur := must(t, do(t, e, "GET", cms+"/cfg", nil), http.StatusOK); path(cur, "metadata.resourceVersion") != path(created, "metadata.resourceVersion") {
		t.Error("a refused apply changed the object")
	}
	dry := must(t, do(t, e, "PATCH", cms+"/cfg?fieldManager=tool&dryRun=All", strings.Replace(yml, "k: v", "k: w", 1), "Content-Type", applyType), http.StatusOK)
	if path(dry, "data.k") != "w" {
		t.Errorf("dry-run apply answer %v", dry["data"])
	}
	if cur := must(t, do(t, e, "GET", cms+"/cfg", nil), http.StatusOK); path(cur, "data.k") != "v" {
		t.Error("dry-run apply was stored")
	}
	// Every write runs the store's preconditions: an applied resourceVersion that is not the
	// current one is 409 (as upstream), the current one applies.
	cur := must(t, do(t, e, "GET", cms+"/cfg", nil), http.StatusOK)
	rv := path(cur, "metadata.resourceVersion").(string)
	stale := strings.Replace(yml, "  name: cfg\n", "  name: cfg\n  resourceVersion: \"999999\"\n", 1)
	do(t, e, "PATCH", cms+"/cfg?fieldManager=tool", stale, "Content-Type", applyType).status(t, http.StatusConflict, "Conflict")
	pinned := strings.Replace(yml, "  name: cfg\n", "  name: cfg\n  resourceVersion: \""+rv+"\"\n", 1)
	must(t, do(t, e, "PATCH", cms+"/cfg?fieldManager=tool", strings.Replace(pinned, "k: v", "k: u", 1), "Content-Type", applyType), http.StatusOK)
	must(t, do(t, e, "PATCH", cms+"/cfg?fieldManager=tool", yml, "Content-Type", applyType), http.StatusOK)
	// The status subresource applies status only.
	must(t, do(t, e, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment("d")), http.StatusCreated)
	st := must(t, do(t, e, "PATCH", "/apis/apps/v1/namespaces/default/deployments/d/status?fieldManager=ctrl",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"status":{"replicas":4},"spec":{"replicas":7}}`, "Content-Type", applyType), http.StatusOK)
	if path(st, "status.replicas") != float64(4) || path(st, "spec.replicas") == float64(7) {
		t.Errorf("status apply: status %v spec.replicas %v", st["status"], path(st, "spec.replicas"))
	}
}

// Issue 4 "Merge behaviour from the schema markers": built-in kinds merge by their real schemas:
// containers are a map list keyed by name (two appliers keep each other's entries), a
// container's args are an atomic list (the last applier replaces it whole and owns it alone),
// and a granular map (labels) is owned key by key.
func TestApplySchemaMarkers(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const url = "/apis/apps/v1/namespaces/default/deployments/m"
	dep := func(containers ...map[string]any) []byte {
		d := deployment("m")
		d["spec"].(map[string]any)["template"].(map[string]any)["spec"] = map[string]any{"containers": containers}
		b, _ := json.Marshal(d)
		return b
	}
	c := func(name string, args ...string) map[string]any {
		return map[string]any{"name": name, "image": "busybox", "args": args}
	}
	must(t, do(t, e, "PATCH", url+"?fieldManager=a", dep(c("main", "x", "y")), "Content-Type", applyType), http.StatusCreated)
	got := must(t, do(t, e, "PATCH", url+"?fieldManager=b", dep(c("sidecar")), "Content-Type", applyType), http.StatusOK)
	if n := len(path(got, "spec.template.spec.containers").([]any)); n != 2 {
		t.Fatalf("map list keyed by name: %d containers after two appliers, want 2", n)
	}
	// b changing main's atomic args conflicts with a (the whole list is one field)...
	do(t, e, "PATCH", url+"?fieldManager=b", dep(c("sidecar"), c("main", "z")), "Content-Type", applyType).status(t, http.StatusConflict, "Conflict")
	// ...and with force b replaces the list whole.
	got = must(t, do(t, e, "PATCH", url+"?fieldManager=b&force=true", dep(c("sidecar"), c("main", "z")), "Content-Type", applyType), http.StatusOK)
	for _, x := range path(got, "spec.template.spec.containers").([]any) {
		if m := x.(map[string]any); m["name"] == "main" {
			if args := m["args"].([]any); len(args) != 1 || args[0] != "z" {
				t.Errorf("atomic list after forced apply: %v", args)
			}
		}
	}
	// Labels are granular: two managers own different keys of one map.
	must(t, do(t, e, "PATCH", cms+"/lbl?fieldManager=a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lbl","labels":{"a":"1"}}}`, "Content-Type", applyType), http.StatusCreated)
	got = must(t, do(t, e, "PATCH", cms+"/lbl?fieldManager=b", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"lbl","labels":{"b":"2"}}}`, "Content-Type", applyType), http.StatusOK)
	if path(got, "metadata.labels.a") != "1" || path(got, "metadata.labels.b") != "2" {
		t.Errorf("granular map: %v", path(got, "metadata.labels"))
	}
}

// Dry-run works with every patch type: the answer shows the result, nothing is stored.
func TestDryRunEveryPatchType(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	before := must(t, do(t, e, "POST", cms, configMap("d", map[string]string{"a": "1"})), http.StatusCreated)
	for ct, body := range map[string]string{
		jsonPatch:      `[{"op":"replace","path":"/data/a","value":"2"}]`,
		mergePatch:     `{"data":{"a":"2"}}`,
		strategicPatch: `{"data":{"a":"2"}}`,
		applyType:      `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"a":"2"}}`,
	} {
		q := "?dryRun=All&fieldManager=dry"
		if ct == applyType {
			q += "&force=true"
		}
		r := must(t, do(t, e, "PATCH", cms+"/d"+q, body, "Content-Type", ct), http.StatusOK)
		if path(r, "data.a") != "2" {
			t.Errorf("%s dry-run answer: %v", ct, r["data"])
		}
	}
	after := must(t, do(t, e, "GET", cms+"/d", nil), http.StatusOK)
	if path(after, "metadata.resourceVersion") != path(before, "metadata.resourceVersion") || path(after, "data.a") != "1" {
		t.Errorf("a dry-run patch was stored: %v", after)
	}
	// force is for apply only.
	do(t, e, "PATCH", cms+"/d?force=true", `{"data":{"a":"3"}}`, "Content-Type", mergePatch).status(t, http.StatusUnprocessableEntity, "Invalid")
	// A dry-run apply of a new object creates nothing.
	must(t, do(t, e, "PATCH", cms+"/new?dryRun=All&fieldManager=dry", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"}}`, "Content-Type", applyType), http.StatusCreated)
	do(t, e, "GET", cms+"/new", nil).status(t, http.StatusNotFound, "NotFound")
}
