package apiserver_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/discovery"

	"platform.io/libs/naming"
	"platform.io/services/gateway/gatewaytest"
)

const aggregatedV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// aggregated fetches an aggregated discovery document and checks it is one.
func aggregated(t *testing.T, e *gatewaytest.Env, p string, accept string) (apidiscoveryv2.APIGroupDiscoveryList, response) {
	t.Helper()
	r := do(t, e, "GET", p, nil, "Accept", accept)
	if r.code != http.StatusOK {
		t.Fatalf("GET %s (%s): %d %s", p, accept, r.code, r.body)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
	return list, r
}

// Aggregated discovery (apidiscovery v2): /api and /apis in one document each, exactly what the
// unaggregated documents list once client-go has split them; the ETag and 304; the profile's
// group for the type; v2beta1 not served (AggregatedDiscoveryRemoveBetaType, on in 1.33); Protobuf.
func TestAggregatedDiscovery(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	apis, r := aggregated(t, e, "/apis", aggregatedV2+",application/json")
	if ok, _ := discovery.ContentTypeIsGVK(r.header.Get("Content-Type"), schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"}); !ok {
		t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
	}
	if apis.Kind != "APIGroupDiscoveryList" || apis.APIVersion != "apidiscovery.k8s.io/v2" {
		t.Errorf("/apis is %s %s", apis.APIVersion, apis.Kind)
	}
	api, _ := aggregated(t, e, "/api", aggregatedV2)
	if len(api.Items) != 1 || api.Items[0].Name != "" || api.Items[0].Versions[0].Version != "v1" {
		t.Fatalf("/api: %+v", api.Items)
	}

	// What client-go makes of the aggregated documents is what the unaggregated ones say.
	groups, resources, failed := discovery.SplitGroupsAndResources(apis)
	coreGroups, coreResources, _ := discovery.SplitGroupsAndResources(api)
	if len(failed) != 0 {
		t.Errorf("stale group versions: %v", failed)
	}
	var legacy metav1.APIGroupList
	if err := json.Unmarshal(do(t, e, "GET", "/apis", nil).body, &legacy); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(groups.Groups, legacy.Groups) {
		t.Errorf("groups differ:\naggregated %v\nlegacy     %v", groups.Groups, legacy.Groups)
	}
	if coreGroups.Groups[0].PreferredVersion.GroupVersion != "v1" {
		t.Errorf("/api groups: %+v", coreGroups.Groups)
	}
	resources[schema.GroupVersion{Version: "v1"}] = coreResources[schema.GroupVersion{Version: "v1"}]
	for gv, list := range resources {
		p := "/apis/" + gv.String()
		if gv.Group == "" {
			p = "/api/v1"
		}
		var want metav1.APIResourceList
		if err := json.Unmarshal(do(t, e, "GET", p, nil).body, &want); err != nil {
			t.Fatal(err)
		}
		got := list.APIResources
		for i := range got {
			if strings.Contains(got[i].Name, "/") {
				got[i].SingularName = "" // client-go gives subresources their parent's
			}
		}
		if !reflect.DeepEqual(got, want.APIResources) {
			t.Errorf("%s differs:\naggregated %+v\nlegacy     %+v", gv, got, want.APIResources)
		}
	}
	versions := 1
	for _, g := range legacy.Groups {
		versions += len(g.Versions)
	}
	if len(resources) != versions {
		t.Errorf("%d group versions with resources, %d served", len(resources), versions)
	}

	// The ETag: 304 for a client that has the document, in any of its forms.
	etag := r.header.Get("ETag")
	if etag == "" || r.header.Get("Vary") != "Accept" {
		t.Fatalf("ETag %q, Vary %q", etag, r.header.Get("Vary"))
	}
	if nm := do(t, e, "GET", "/apis", nil, "Accept", aggregatedV2, "If-None-Match", etag); nm.code != http.StatusNotModified || len(nm.body) != 0 {
		t.Errorf("If-None-Match: %d %s", nm.code, nm.body)
	}
	if nm := do(t, e, "GET", "/apis", nil, "Accept", aggregatedV2, "If-None-Match", `"other"`); nm.code != http.StatusOK {
		t.Errorf("another ETag: %d", nm.code)
	}
	if _, r := aggregated(t, e, "/api", aggregatedV2); r.header.Get("ETag") == etag {
		t.Error("/api and /apis share an ETag")
	}

	// The profile's group for the type, echoed.
	own := "application/json;g=" + naming.Group("apidiscovery.k8s.io") + ";v=v2;as=APIGroupDiscoveryList"
	list, r := aggregated(t, e, "/apis", own)
	if list.APIVersion != naming.Group("apidiscovery.k8s.io")+"/v2" || !strings.Contains(r.header.Get("Content-Type"), "g="+naming.Group("apidiscovery.k8s.io")) || len(list.Items) != len(apis.Items) {
		t.Errorf("profile's group: %s, %s, %d groups", list.APIVersion, r.header.Get("Content-Type"), len(list.Items))
	}

	// v2beta1 is not served (upstream 1.33's default): the unaggregated fallback, or 406.
	beta := "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
	if fb := must(t, do(t, e, "GET", "/apis", nil, "Accept", beta+",application/json"), http.StatusOK); fb["kind"] != "APIGroupList" {
		t.Errorf("v2beta1 with a fallback: %v", fb["kind"])
	}
	do(t, e, "GET", "/apis", nil, "Accept", beta).status(t, http.StatusNotAcceptable, "NotAcceptable")

	// Protobuf, in either media type name.
	for _, media := range []string{"application/vnd.kubernetes.protobuf", naming.ProtobufMediaType} {
		pb := do(t, e, "GET", "/apis", nil, "Accept", media+";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		if pb.code != http.StatusOK || !strings.HasPrefix(pb.header.Get("Content-Type"), media+";") {
			t.Fatalf("Protobuf: %d %s", pb.code, pb.header.Get("Content-Type"))
		}
		scheme := runtime.NewScheme()
		if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		obj, _, err := protobuf.NewSerializer(scheme, scheme).Decode(pb.body, nil, nil)
		if err != nil {
			t.Fatalf("Protobuf: %v", err)
		}
		if got := obj.(*apidiscoveryv2.APIGroupDiscoveryList); !reflect.DeepEqual(got.Items, apis.Items) {
			t.Errorf("Protobuf differs from JSON")
		}
	}

	// A custom resource joins, with a new ETag.
	establish(t, e, widgetCRD, "/apis/example.com/v1", "widgets")
	after, r2 := aggregated(t, e, "/apis", aggregatedV2)
	if r2.header.Get("ETag") == etag {
		t.Error("the ETag did not change with a new group")
	}
	var widgets *apidiscoveryv2.APIResourceDiscovery
	for _, g := range after.Items {
		if g.Name != "example.com" {
			continue
		}
		if len(g.Versions) != 2 || g.Versions[0].Version != "v1" || g.Versions[1].Version != "v2beta1" {
			t.Errorf("example.com versions: %+v", g.Versions)
		}
		for i, res := range g.Versions[0].Resources {
			if res.Resource == "widgets" {
				widgets = &g.Versions[0].Resources[i]
			}
		}
	}
	if widgets == nil || widgets.Scope != apidiscoveryv2.ScopeNamespace || widgets.ResponseKind.Kind != "Widget" || widgets.SingularResource != "widget" ||
		!reflect.DeepEqual(widgets.ShortNames, []string{"wd"}) || !reflect.DeepEqual(widgets.Categories, []string{"all"}) || len(widgets.Subresources) != 2 {
		t.Errorf("widgets: %+v", widgets)
	}
	if nm := do(t, e, "GET", "/apis", nil, "Accept", aggregatedV2, "If-None-Match", etag); nm.code != http.StatusOK {
		t.Errorf("the old ETag after a change: %d", nm.code)
	}
}
