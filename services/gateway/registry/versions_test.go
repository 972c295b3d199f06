package registry

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

var hpaV1GVR = schema.GroupVersionResource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"}

// autoscaling/v1 HorizontalPodAutoscalers are served beside v2 (preferred), stored as v2.
func TestSecondVersion(t *testing.T) {
	r := mustNew(t, "")
	g, ok := r.Group("autoscaling")
	if !ok || len(g.Versions) != 2 || g.Versions[0].Version != "v2" || g.Versions[1].Version != "v1" {
		t.Fatalf("autoscaling versions: %+v", g)
	}
	v1, ok := r.Resource(hpaV1GVR)
	if !ok || v1.StorageVersion != "v2" || !v1.HasStatus || strings.Join(v1.ShortNames, ",") != "hpa" {
		t.Errorf("autoscaling/v1 HPAs: %+v", v1)
	}
	if v2, ok := r.StorageResource(hpaV1GVR); !ok || v2.Version != "v1" {
		t.Errorf("StorageResource of a served resource: %v", v2)
	}
	// With its storage version turned off, v1 is still served and converts to an unserved v2.
	r = mustNew(t, "autoscaling/v2=false")
	if _, ok := r.Resource(schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}); ok {
		t.Error("autoscaling/v2=false still serves v2")
	}
	if _, ok := r.Resource(hpaV1GVR); !ok {
		t.Error("autoscaling/v2=false stopped v1")
	}
	stored, ok := r.StorageResource(schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"})
	if !ok || !r.Scheme.Recognizes(stored.GroupVersionKind()) {
		t.Errorf("unserved storage resource: %v %v", stored, ok)
	}
}

// Deprecations come from the types' API lifecycle, as upstream's: deprecated at or before the
// served release, with the removal release and the replacement under Platform's group names.
func TestLifecycleDeprecation(t *testing.T) {
	r := mustNew(t, "authentication."+naming.GroupSuffix+"/v1beta1")
	auth := naming.Group("authentication.k8s.io")
	for gvr, want := range map[schema.GroupVersionResource]*Deprecation{
		{Version: "v1", Resource: "componentstatuses"}:                              {In: "1.19"},
		{Version: "v1", Resource: "endpoints"}:                                      {In: "1.33", Replacement: naming.Group("discovery.k8s.io") + "/v1 EndpointSlice"},
		{Group: auth, Version: "v1beta1", Resource: "selfsubjectreviews"}:           {In: "1.30", RemovedIn: "1.33"},
		{Version: "v1", Resource: "configmaps"}:                                     nil,
		hpaV1GVR:                                                                    nil,
		{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}: nil,
	} {
		res, ok := r.Resource(gvr)
		if !ok {
			t.Errorf("%s not served", gvr)
			continue
		}
		if (res.Deprecation == nil) != (want == nil) || (want != nil && *res.Deprecation != *want) {
			t.Errorf("%s: deprecation %+v, want %+v", gvr, res.Deprecation, want)
		}
	}
	cs, _ := r.Resource(schema.GroupVersionResource{Version: "v1", Resource: "componentstatuses"})
	if !cs.Computed || strings.Join(cs.Verbs, ",") != "get,list" || cs.Namespaced || strings.Join(cs.ShortNames, ",") != "cs" {
		t.Errorf("componentstatuses: %+v", cs)
	}
}
