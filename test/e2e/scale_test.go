package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The scale subresource with real clients: kubectl scale (a merge patch of autoscaling/v1 Scale)
// and client-go's scale client path through the dynamic client's "scale" subresource.
func TestKubectlScale(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-scale-")
	k := newKubectl(t, s, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dyn.Resource(deploymentsGVR).Namespace(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := k.ok("", "scale", "deployment/web", "--replicas=4"); !strings.Contains(out, "scaled") {
		t.Errorf("kubectl scale: %q", out)
	}
	if got := k.ok("", "get", "deployment/web", "-o", "jsonpath={.spec.replicas}"); got != "4" {
		t.Errorf("replicas after kubectl scale: %q", got)
	}
	// --current-replicas is a precondition: a wrong one fails and changes nothing.
	if _, errs, code := k.run("", "scale", "deployment/web", "--current-replicas=2", "--replicas=9"); code == 0 {
		t.Errorf("kubectl scale with a wrong --current-replicas succeeded: %s", errs)
	}
	scale, err := dyn.Resource(deploymentsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if scale.GetKind() != "Scale" || scale.GetAPIVersion() != "autoscaling/v1" {
		t.Errorf("scale subresource: %s %s", scale.GetAPIVersion(), scale.GetKind())
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); r != 4 {
		t.Errorf("scale spec.replicas %d, want 4", r)
	}
}
