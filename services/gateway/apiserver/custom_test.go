package apiserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
)

const crdsPath = "/apis/apiextensions.platform.io/v1/customresourcedefinitions"

// widgetCRD is a namespaced kind with two served versions (v1 stores), status and scale
// subresources, printer columns, short names and a category, and a schema exercising pruning,
// defaults, enums, bounds, list types and preserved fields.
const widgetCRD = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"widgets.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced",
    "names":{"plural":"widgets","singular":"widget","kind":"Widget","shortNames":["wd"],"categories":["all"]},
    "versions":[
      {"name":"v1","served":true,"storage":true,
       "subresources":{"status":{},"scale":{"specReplicasPath":".spec.size","statusReplicasPath":".status.replicas"}},
       "selectableFields":[{"jsonPath":".spec.color"}],
       "additionalPrinterColumns":[
         {"name":"Size","type":"integer","jsonPath":".spec.size"},
         {"name":"Color","type":"string","jsonPath":".spec.color","priority":1}],
       "schema":{"openAPIV3Schema":{"type":"object","properties":{
         "spec":{"type":"object","required":["size"],"properties":{
           "size":{"type":"integer","minimum":1,"maximum":10},
           "color":{"type":"string","enum":["red","blue"],"default":"red"},
           "tags":{"type":"array","items":{"type":"string"}},
           "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
             "items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"port":{"type":"integer"}}}},
           "extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
         "status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}},
      {"name":"v2beta1","served":true,"storage":false,
       "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func conditionStatus(crd map[string]any, typ string) string {
	conds, _ := path(crd, "status.conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// establish creates a definition and waits until it is established, which must mean served.
func establish(t *testing.T, e *gatewaytest.Env, body, resourceListPath, plural string) map[string]any {
	t.Helper()
	created := must(t, do(t, e, "POST", crdsPath, body), http.StatusCreated)
	name := path(created, "metadata.name").(string)
	var crd map[string]any
	waitFor(t, name+" to be established", func() bool {
		crd = must(t, do(t, e, "GET", crdsPath+"/"+name, nil), http.StatusOK)
		return conditionStatus(crd, "Established") == "True"
	})
	// Established means served: no wait between the two.
	if r := do(t, e, "GET", resourceListPath, nil); r.code != http.StatusOK || !strings.Contains(string(r.body), `"name":"`+plural+`"`) {
		t.Fatalf("%s is established but %s does not list %s: %d %s", name, resourceListPath, plural, r.code, r.body)
	}
	return crd
}

// Issue 5, steps 1-7 over HTTP: a definition is established and served; objects are pruned,
// defaulted and validated against its schema; versions, subresources, Table, Protobuf and apply
// behave as upstream; deleting the definition removes its objects and stops serving it.
func TestCustomResourceLifecycle(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	crd := establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")

	// Status as upstream: names accepted, established, the storage version recorded.
	if conditionStatus(crd, "NamesAccepted") != "True" || conditionStatus(crd, "Established") != "True" {
		t.Fatalf("conditions: %v", path(crd, "status.conditions"))
	}
	if path(crd, "status.acceptedNames.kind") != "Widget" || path(crd, "status.acceptedNames.listKind") != "WidgetList" {
		t.Errorf("acceptedNames: %v", path(crd, "status.acceptedNames"))
	}
	if sv, _ := path(crd, "status.storedVersions").([]any); len(sv) != 1 || sv[0] != "v1" {
		t.Errorf("storedVersions: %v", sv)
	}

	// Discovery: the group prefers v1 over v2beta1; short names, categories, subresources.
	groups := must(t, do(t, e, "GET", "/apis", nil), http.StatusOK)
	found := false
	for _, g := range groups["groups"].([]any) {
		gm := g.(map[string]any)
		if gm["name"] == "example.com" {
			found = true
			if path(gm, "preferredVersion.version") != "v1" || len(gm["versions"].([]any)) != 2 {
				t.Errorf("group example.com: %v", gm)
			}
		}
	}
	if !found {
		t.Fatalf("/apis does not list example.com: %v", groups)
	}
	list := must(t, do(t, e, "GET", "/apis/example.com/v1", nil), http.StatusOK)
	names := map[string]map[string]any{}
	for _, r := range list["resources"].([]any) {
		names[r.(map[string]any)["name"].(string)] = r.(map[string]any)
	}
	w := names["widgets"]
	if w == nil || w["namespaced"] != true || w["kind"] != "Widget" || names["widgets/status"] == nil || names["widgets/scale"] == nil {
		t.Fatalf("resource list: %s", do(t, e, "GET", "/apis/example.com/v1", nil).body)
	}
	if sn, _ := w["shortNames"].([]any); len(sn) != 1 || sn[0] != "wd" {
		t.Errorf("shortNames: %v", w["shortNames"])
	}
	if cat, _ := w["categories"].([]any); len(cat) != 1 || cat[0] != "all" {
		t.Errorf("categories: %v", w["categories"])
	}

	const widgets = "/apis/example.com/v1/namespaces/default/widgets"
	// Unknown fields are pruned and reported, defaults applied, status dropped on create.
	r := do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","labels":{"app":"a"},"bogusMeta":1},
	  "spec":{"size":2,"bogus":true,"extra":{"anything":{"goes":[1,2]}}},"status":{"replicas":9},"topLevel":"x"}`)
	w1 := must(t, r, http.StatusCreated)
	if path(w1, "spec.color") != "red" || path(w1, "spec.bogus") != nil || w1["topLevel"] != nil || path(w1, "metadata.bogusMeta") != nil {
		t.Errorf("not pruned or defaulted: %s", r.body)
	}
	if path(w1, "spec.extra.anything.goes") == nil {
		t.Errorf("preserved field pruned: %s", r.body)
	}
	if w1["status"] != nil || path(w1, "metadata.generation") != float64(1) || path(w1, "metadata.uid") == nil {
		t.Errorf("create: status %v generation %v", w1["status"], path(w1, "metadata.generation"))
	}
	warnings := strings.Join(r.header.Values("Warning"), "\n")
	for _, want := range []string{`spec.bogus`, `topLevel`, `metadata.bogusMeta`} {
		if !strings.Contains(warnings, want) {
			t.Errorf("no warning for %s: %q", want, warnings)
		}
	}
	// Strict: the unknown field is a 400 and nothing is stored.
	msg := do(t, e, "POST", widgets+"?fieldValidation=Strict", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":2,"bogus":1}}`).
		status(t, http.StatusBadRequest, "BadRequest")
	if !strings.Contains(msg, `unknown field "spec.bogus"`) {
		t.Errorf("strict message: %s", msg)
	}
	// Schema violations: one 422 listing every one, nothing stored.
	msg = do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":20,"color":"green","tags":"x"}}`).
		status(t, http.StatusUnprocessableEntity, "Invalid")
	for _, want := range []string{"spec.size", "spec.color", "spec.tags"} {
		if !strings.Contains(msg, want) {
			t.Errorf("422 does not report %s: %s", want, msg)
		}
	}
	msg = do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{}}`).
		status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "spec.size") {
		t.Errorf("missing required field: %s", msg)
	}
	do(t, e, "GET", widgets+"/w2", nil).status(t, http.StatusNotFound, "NotFound")

	// The other served version reads the same object.
	v2 := must(t, do(t, e, "GET", "/apis/example.com/v2beta1/namespaces/default/widgets/w1", nil), http.StatusOK)
	if v2["apiVersion"] != "example.com/v2beta1" || path(v2, "spec.size") != float64(2) {
		t.Errorf("v2beta1 read: %v", v2)
	}
	// Lists, with selectors, in every version.
	l := must(t, do(t, e, "GET", "/apis/example.com/v1/widgets?labelSelector=app%3Da", nil), http.StatusOK)
	if l["kind"] != "WidgetList" || len(l["items"].([]any)) != 1 {
		t.Errorf("list: %v", l)
	}
	for sel, want := range map[string]int{"spec.color%3Dred": 1, "spec.color%3Dblue": 0, "metadata.name%3Dw1": 1} {
		l := must(t, do(t, e, "GET", widgets+"?fieldSelector="+sel, nil), http.StatusOK)
		if len(l["items"].([]any)) != want {
			t.Errorf("fieldSelector %s: %d items, want %d", sel, len(l["items"].([]any)), want)
		}
	}
	do(t, e, "GET", widgets+"?fieldSelector=spec.size%3D2", nil).status(t, http.StatusBadRequest, "BadRequest")
	yamlList := do(t, e, "GET", widgets, nil, "Accept", "application/yaml")
	if yamlList.code != http.StatusOK || !strings.Contains(string(yamlList.body), "kind: WidgetList") {
		t.Errorf("YAML list: %d %s", yamlList.code, yamlList.body)
	}

	// Table: Name plus the printer columns, wide ones with priority 1.
	table := must(t, do(t, e, "GET", widgets, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), http.StatusOK)
	cols := table["columnDefinitions"].([]any)
	if len(cols) != 3 || cols[0].(map[string]any)["name"] != "Name" || cols[1].(map[string]any)["name"] != "Size" || cols[2].(map[string]any)["priority"] != float64(1) {
		t.Errorf("columns: %v", cols)
	}
	cells := table["rows"].([]any)[0].(map[string]any)["cells"].([]any)
	if cells[0] != "w1" || cells[1] != float64(2) || cells[2] != "red" {
		t.Errorf("cells: %v", cells)
	}
	// No Protobuf for custom resources: 406 unless a fallback is listed.
	do(t, e, "GET", widgets+"/w1", nil, "Accept", "application/vnd.kubernetes.protobuf").status(t, http.StatusNotAcceptable, "NotAcceptable")
	fb := do(t, e, "GET", widgets+"/w1", nil, "Accept", "application/vnd.kubernetes.protobuf, application/json")
	if fb.code != http.StatusOK || fb.header.Get("Content-Type") != "application/json" {
		t.Errorf("fallback: %d %s", fb.code, fb.header.Get("Content-Type"))
	}
	do(t, e, "POST", widgets, []byte{0x6b, 0x38, 0x73, 0x00}, "Content-Type", "application/vnd.kubernetes.protobuf").
		status(t, http.StatusUnsupportedMediaType, "UnsupportedMediaType")

	// Patches: merge bumps generation; strategic merge is not for custom resources.
	p := must(t, do(t, e, "PATCH", widgets+"/w1", `{"spec":{"size":3}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	if path(p, "spec.size") != float64(3) || path(p, "metadata.generation") != float64(2) {
		t.Errorf("merge patch: %v", p)
	}
	do(t, e, "PATCH", widgets+"/w1", `{"spec":{"size":4}}`, "Content-Type", "application/strategic-merge-patch+json").
		status(t, http.StatusUnsupportedMediaType, "UnsupportedMediaType")
	do(t, e, "PATCH", widgets+"/w1", `[{"op":"replace","path":"/spec/size","value":50}]`, "Content-Type", "application/json-patch+json").
		status(t, http.StatusUnprocessableEntity, "Invalid")

	// Status subresource: only status changes through it, and the main resource keeps status.
	st := must(t, do(t, e, "PATCH", widgets+"/w1/status", `{"status":{"replicas":2},"spec":{"size":9}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	if path(st, "status.replicas") != float64(2) || path(st, "spec.size") != float64(3) || path(st, "metadata.generation") != float64(2) {
		t.Errorf("status patch: %v", st)
	}
	up := must(t, do(t, e, "PATCH", widgets+"/w1", `{"status":{"replicas":7}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	if path(up, "status.replicas") != float64(2) {
		t.Errorf("main resource changed status: %v", path(up, "status"))
	}

	// Scale subresource over the definition's paths.
	sc := must(t, do(t, e, "GET", widgets+"/w1/scale", nil), http.StatusOK)
	if sc["kind"] != "Scale" || path(sc, "spec.replicas") != float64(3) || path(sc, "status.replicas") != float64(2) {
		t.Errorf("scale: %v", sc)
	}
	must(t, do(t, e, "PATCH", widgets+"/w1/scale", `{"spec":{"replicas":5}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	if got := must(t, do(t, e, "GET", widgets+"/w1", nil), http.StatusOK); path(got, "spec.size") != float64(5) {
		t.Errorf("scale did not set spec.size: %v", path(got, "spec"))
	}
	do(t, e, "PATCH", widgets+"/w1/scale", `{"spec":{"replicas":50}}`, "Content-Type", "application/merge-patch+json").
		status(t, http.StatusUnprocessableEntity, "Invalid")

	// Server-side apply with the schema's markers: a map list merges per key, other lists are atomic.
	apply := func(manager, body string) response {
		return do(t, e, "PATCH", widgets+"/w3?fieldManager="+manager, body, "Content-Type", "application/apply-patch+yaml")
	}
	must(t, apply("a", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":1,"ports":[{"name":"http","port":80}],"tags":["x"]}}`), http.StatusCreated)
	merged := must(t, apply("b", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"ports":[{"name":"https","port":443}]}}`), http.StatusOK)
	if ports, _ := path(merged, "spec.ports").([]any); len(ports) != 2 {
		t.Errorf("map list not merged per key: %v", path(merged, "spec.ports"))
	}
	msg = apply("b", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"tags":["y"]}}`).status(t, http.StatusConflict, "Conflict")
	if !strings.Contains(msg, ".spec.tags") {
		t.Errorf("atomic list conflict: %s", msg)
	}

	// Watches: through the hub (from a resourceVersion) and straight from storage (a selector).
	rv := path(must(t, do(t, e, "GET", widgets, nil), http.StatusOK), "metadata.resourceVersion").(string)
	hubWatch := openWatch(t, e.Admin, e, widgets+"?watch=1&resourceVersion="+rv)
	directWatch := openWatch(t, e.Admin, e, widgets+"?watch=1&labelSelector=app%3Da&resourceVersion="+rv)
	must(t, do(t, e, "PATCH", widgets+"/w1", `{"spec":{"size":6}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	for name, w := range map[string]*watchStream{"hub": hubWatch, "direct": directWatch} {
		ev := w.next(t, false)
		if ev.Type != "MODIFIED" || path(ev.Object, "metadata.name") != "w1" || path(ev.Object, "spec.size") != float64(6) || ev.Object["apiVersion"] != "example.com/v1" {
			t.Errorf("%s watch: %s %v", name, ev.Type, ev.Object)
		}
	}

	// Deleting the definition deletes its objects and stops serving the kind; its watches end.
	must(t, do(t, e, "DELETE", crdsPath+"/widgets.example.com", nil), http.StatusOK)
	for name, w := range map[string]*watchStream{"hub": hubWatch, "direct": directWatch} {
		ended := false
		for !ended {
			select {
			case _, ok := <-w.events:
				ended = !ok
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s watch did not end after its definition was deleted", name)
			}
		}
	}
	waitFor(t, "the definition to be removed", func() bool {
		return do(t, e, "GET", crdsPath+"/widgets.example.com", nil).code == http.StatusNotFound
	})
	do(t, e, "GET", "/apis/example.com/v1", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "GET", widgets, nil).status(t, http.StatusNotFound, "NotFound")
	// Defined again, the kind starts empty.
	establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")
	if l := must(t, do(t, e, "GET", "/apis/example.com/v1/widgets", nil), http.StatusOK); len(l["items"].([]any)) != 0 {
		t.Errorf("objects survived their definition: %v", l["items"])
	}
}

// A definition whose names another definition of the group uses is not accepted, not
// established and not served; it is once the other goes away.
func TestCRDNamesConflict(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")
	gizmo := strings.NewReplacer(`widgets.example.com`, `gizmos.example.com`, `"plural":"widgets"`, `"plural":"gizmos"`,
		`"singular":"widget"`, `"singular":"gizmo"`).Replace(widgetCRD)
	must(t, do(t, e, "POST", crdsPath, gizmo), http.StatusCreated)
	var crd map[string]any
	waitFor(t, "NamesAccepted=False", func() bool {
		crd = must(t, do(t, e, "GET", crdsPath+"/gizmos.example.com", nil), http.StatusOK)
		return conditionStatus(crd, "NamesAccepted") == "False"
	})
	if conditionStatus(crd, "Established") == "True" || !strings.Contains(string(do(t, e, "GET", crdsPath+"/gizmos.example.com", nil).body), "NameConflict") {
		t.Errorf("conflicting definition: %v", path(crd, "status"))
	}
	if strings.Contains(string(do(t, e, "GET", "/apis/example.com/v1", nil).body), `"gizmos"`) {
		t.Error("a definition with conflicting names is served")
	}
	// A group served by built-in types is not open to definitions.
	rbac := strings.NewReplacer(`widgets.example.com`, `gadgets.rbac.authorization.platform.io`, `"group":"example.com"`, `"group":"rbac.authorization.platform.io"`,
		`"plural":"widgets"`, `"plural":"gadgets"`, `"kind":"Widget"`, `"kind":"Gadget"`, `"singular":"widget"`, `"singular":"gadget"`,
		`"metadata":{"name"`, `"metadata":{"annotations":{"api-approved.kubernetes.io":"unapproved, test"},"name"`).Replace(widgetCRD)
	must(t, do(t, e, "POST", crdsPath, rbac), http.StatusCreated)
	waitFor(t, "NamesAccepted=False for a built-in group", func() bool {
		c := must(t, do(t, e, "GET", crdsPath+"/gadgets.rbac.authorization.platform.io", nil), http.StatusOK)
		return conditionStatus(c, "NamesAccepted") == "False" && conditionStatus(c, "Established") != "True"
	})
	msg := do(t, e, "POST", crdsPath, strings.Replace(rbac, `"annotations":{"api-approved.kubernetes.io":"unapproved, test"},`, "", 1)).
		status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "api-approved.kubernetes.io") {
		t.Errorf("protected group without approval: %s", msg)
	}

	must(t, do(t, e, "DELETE", crdsPath+"/widgets.example.com", nil), http.StatusOK)
	waitFor(t, "gizmos to be served", func() bool {
		return strings.Contains(string(do(t, e, "GET", "/apis/example.com/v1", nil).body), `"gizmos"`)
	})
}

// Issue 5 step 4: versions with conversion None honour served and storage; moving the storage
// version records it in storedVersions, and every served version reads every object; each
// version validates with its own schema.
func TestCRDVersions(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const def = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"gadgets.example.com"},
	  "spec":{"group":"example.com","scope":"Cluster","names":{"plural":"gadgets","kind":"Gadget"},
	    "versions":[
	      {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"}}}}}}},
	      {"name":"v2","served":false,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer","maximum":5}}}}}}}]}}`
	crd := establish(t, e, def, "/apis/example.com/v1", "gadgets")
	do(t, e, "GET", "/apis/example.com/v2/gadgets", nil).status(t, http.StatusNotFound, "NotFound")
	must(t, do(t, e, "POST", "/apis/example.com/v1/gadgets", `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"a":"x","b":9}}`), http.StatusCreated)

	// Serve v2 and store in it.
	vs := path(crd, "spec.versions").([]any)
	vs[0].(map[string]any)["storage"] = false
	vs[1].(map[string]any)["served"] = true
	vs[1].(map[string]any)["storage"] = true
	updated := must(t, do(t, e, "PUT", crdsPath+"/gadgets.example.com", crd), http.StatusOK)
	if sv, _ := path(updated, "status.storedVersions").([]any); len(sv) != 2 || sv[0] != "v1" || sv[1] != "v2" {
		t.Errorf("storedVersions after moving storage: %v", sv)
	}
	waitFor(t, "v2 to be served", func() bool { return do(t, e, "GET", "/apis/example.com/v2/gadgets", nil).code == http.StatusOK })

	// v1's object (b pruned by v1's schema) reads in v2; v2 validates b with its own schema.
	g1 := must(t, do(t, e, "GET", "/apis/example.com/v2/gadgets/g1", nil), http.StatusOK)
	if g1["apiVersion"] != "example.com/v2" || path(g1, "spec.a") != "x" || path(g1, "spec.b") != nil {
		t.Errorf("v1 object read in v2: %v", g1)
	}
	msg := do(t, e, "POST", "/apis/example.com/v2/gadgets", `{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"g2"},"spec":{"b":9}}`).
		status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "spec.b") {
		t.Errorf("v2 schema not applied: %s", msg)
	}
	must(t, do(t, e, "POST", "/apis/example.com/v2/gadgets", `{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"g2"},"spec":{"b":3}}`), http.StatusCreated)
	g2 := must(t, do(t, e, "GET", "/apis/example.com/v1/gadgets/g2", nil), http.StatusOK)
	if g2["apiVersion"] != "example.com/v1" || path(g2, "spec.b") != float64(3) {
		t.Errorf("v2 object read in v1: %v", g2)
	}
	// Dropping v1, in which objects are still stored, would make them unreadable: 422.
	cur := must(t, do(t, e, "GET", crdsPath+"/gadgets.example.com", nil), http.StatusOK)
	versions := path(cur, "spec.versions").([]any)
	cur["spec"].(map[string]any)["versions"] = versions[1:]
	msg = do(t, e, "PUT", crdsPath+"/gadgets.example.com", cur).status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "status.storedVersions") {
		t.Errorf("dropping a stored version: %s", msg)
	}
	// The body's apiVersion must be the URL's.
	do(t, e, "POST", "/apis/example.com/v1/gadgets", `{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"g3"}}`).
		status(t, http.StatusBadRequest, "BadRequest")
}

// Deleting a definition waits for its objects' finalizers: the definition is Terminating, its
// kind takes no new objects, and it goes once the last object is gone.
func TestCRDDeletionWaitsForFinalizers(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")
	const widgets = "/apis/example.com/v1/namespaces/default/widgets"
	must(t, do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"held","finalizers":["example.com/hold"]},"spec":{"size":1}}`), http.StatusCreated)
	must(t, do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"free"},"spec":{"size":1}}`), http.StatusCreated)
	deleted := must(t, do(t, e, "DELETE", crdsPath+"/widgets.example.com", nil), http.StatusOK)
	if path(deleted, "metadata.deletionTimestamp") == nil {
		t.Fatalf("definition not marked for deletion: %v", deleted)
	}
	waitFor(t, "the free widget to go", func() bool { return do(t, e, "GET", widgets+"/free", nil).code == http.StatusNotFound })
	// The cleanup deletes objects one after another: held is marked for deletion eventually (the
	// spec's Finalizing state), and stays while its finalizer does.
	waitFor(t, "the held widget to be marked for deletion", func() bool {
		return path(must(t, do(t, e, "GET", widgets+"/held", nil), http.StatusOK), "metadata.deletionTimestamp") != nil
	})
	crd := must(t, do(t, e, "GET", crdsPath+"/widgets.example.com", nil), http.StatusOK)
	if conditionStatus(crd, "Terminating") != "True" {
		t.Errorf("Terminating: %v", path(crd, "status.conditions"))
	}
	do(t, e, "POST", widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"late"},"spec":{"size":1}}`).
		status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
	must(t, do(t, e, "PATCH", widgets+"/held", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	waitFor(t, "the definition to go", func() bool {
		return do(t, e, "GET", crdsPath+"/widgets.example.com", nil).code == http.StatusNotFound
	})
	waitFor(t, "the kind to stop being served", func() bool { return do(t, e, "GET", widgets, nil).code == http.StatusNotFound })
}

// A schema made stricter after objects were stored does not block updates that leave the now
// invalid values alone (upstream's validation ratcheting); changing them is validated.
func TestCRDSchemaRatcheting(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const def = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"notes.example.com"},
	  "spec":{"group":"example.com","scope":"Cluster","names":{"plural":"notes","kind":"Note"},
	    "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}}}}}}}]}}`
	crd := establish(t, e, def, "/apis/example.com/v1", "notes")
	const notes = "/apis/example.com/v1/notes"
	must(t, do(t, e, "POST", notes, `{"apiVersion":"example.com/v1","kind":"Note","metadata":{"name":"n1"},"spec":{"text":"a long text","n":1}}`), http.StatusCreated)
	v := path(crd, "spec.versions").([]any)[0].(map[string]any)
	text := path(v, "schema.openAPIV3Schema.properties.spec.properties.text").(map[string]any)
	text["maxLength"] = 4
	must(t, do(t, e, "PUT", crdsPath+"/notes.example.com", crd), http.StatusOK)
	waitFor(t, "the stricter schema", func() bool {
		return do(t, e, "POST", notes, `{"apiVersion":"example.com/v1","kind":"Note","metadata":{"name":"n2"},"spec":{"text":"too long"}}`).code == http.StatusUnprocessableEntity
	})
	must(t, do(t, e, "PATCH", notes+"/n1", `{"spec":{"n":2},"metadata":{"labels":{"x":"y"}}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	msg := do(t, e, "PATCH", notes+"/n1", `{"spec":{"text":"still too long"}}`, "Content-Type", "application/merge-patch+json").
		status(t, http.StatusUnprocessableEntity, "Invalid")
	if !strings.Contains(msg, "spec.text") {
		t.Errorf("changed invalid value: %s", msg)
	}
}
