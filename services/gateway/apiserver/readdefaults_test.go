package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	storageclient "platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/gatewaytest"
)

// gadgetCRD is a namespaced kind whose schema has no default; gadgetDefaulted is the same
// definition with defaults added (a scalar, an object defaulted to {} whose own property has a
// default, and a default inside list items).
const (
	gadgetCRD = `{"apiVersion":"apiextensions.platform.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"gadgets.example.com"},
  "spec":{"group":"example.com","scope":"Namespaced",
    "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","properties":{
          "size":{"type":"integer"},
          "parts":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}}}}}]}}`
	gadgetDefaults = `{"spec":{"versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","properties":{
          "size":{"type":"integer"},
          "color":{"type":"string","default":"red"},
          "limits":{"type":"object","default":{},"properties":{"cpu":{"type":"string","default":"1"}}},
          "parts":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer","default":1}}}}}}}}}}]}}`
)

// Defaulting from storage (upstream's storage decoder defaults custom objects): a default added
// to a definition after objects were stored shows in gets, lists (from the list cache and paged
// from storage), watches replaying history and the current object of an update, and the stored
// bytes stay as they were until the object is written.
func TestCustomResourceDefaultsOnRead(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	establish(t, e, gadgetCRD, "/apis/example.com/v1", "gadgets")
	const gadgets = "/apis/example.com/v1/namespaces/default/gadgets"
	before := path(must(t, do(t, e, "GET", gadgets, nil), http.StatusOK), "metadata.resourceVersion").(string)
	for _, name := range []string{"g1", "g2"} {
		created := must(t, do(t, e, "POST", gadgets, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"`+name+`"},"spec":{"size":3,"parts":[{"name":"a"},{"name":"b"}]}}`), http.StatusCreated)
		if path(created, "spec.color") != nil {
			t.Fatalf("defaulted before the definition has defaults: %v", created["spec"])
		}
	}
	must(t, do(t, e, "PATCH", crdsPath+"/gadgets.example.com", gadgetDefaults, "Content-Type", "application/merge-patch+json"), http.StatusOK)

	defaulted := func(obj map[string]any) bool {
		parts, _ := path(obj, "spec.parts").([]any)
		return path(obj, "spec.color") == "red" && path(obj, "spec.limits.cpu") == "1" && path(obj, "spec.size") == float64(3) &&
			len(parts) == 2 && path(parts[0].(map[string]any), "count") == float64(1) && path(parts[1].(map[string]any), "count") == float64(1)
	}
	// The definition's new schema is served soon after its write.
	waitFor(t, "the new defaults on a get", func() bool {
		return defaulted(must(t, do(t, e, "GET", gadgets+"/g1", nil), http.StatusOK))
	})
	for _, q := range []string{"", "?limit=1", "?resourceVersion=0"} {
		list := must(t, do(t, e, "GET", gadgets+q, nil), http.StatusOK)
		items, _ := list["items"].([]any)
		if len(items) == 0 {
			t.Fatalf("list%s: no items", q)
		}
		for _, it := range items {
			if !defaulted(it.(map[string]any)) {
				t.Errorf("list%s: item not defaulted: %v", q, it)
			}
		}
	}
	// A watch replaying the creations from history sees them defaulted, as does one with
	// initial events.
	for _, q := range []string{"?watch=1&resourceVersion=" + before, "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"} {
		w := openWatch(t, e.Admin, e, gadgets+q)
		for range 2 {
			ev := w.next(t, false)
			if ev.Type != "ADDED" || !defaulted(ev.Object) {
				t.Errorf("watch%s: %s %v", q, ev.Type, ev.Object)
			}
		}
		w.cancel()
	}
	// Stored data is not rewritten by reads.
	if v := storedValue(t, e, "example.com", "gadgets", "default", "g1"); strings.Contains(v, "color") || strings.Contains(v, "limits") {
		t.Errorf("reads rewrote the stored object: %s", v)
	}
	// An update starts from the defaulted object, so a write stores the defaults.
	must(t, do(t, e, "PATCH", gadgets+"/g2", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json"), http.StatusOK)
	var stored map[string]any
	if err := json.Unmarshal([]byte(storedValue(t, e, "example.com", "gadgets", "default", "g2")), &stored); err != nil {
		t.Fatal(err)
	}
	if !defaulted(stored) {
		t.Errorf("an update did not store the defaults: %v", stored["spec"])
	}
}

// storedValue reads an object's stored bytes from the storage service.
func storedValue(t *testing.T, e *gatewaytest.Env, group, resource, namespace, name string) string {
	t.Helper()
	conn, err := grpc.NewClient(e.Storage.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := storageclient.NewClient(conn).Get(ctx, &storagev1.GetRequest{Type: &storagev1.ResourceType{Group: group, Resource: resource}, Namespace: namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return string(resp.Object.Value)
}
