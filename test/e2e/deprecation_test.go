package e2e

import (
	"strings"
	"testing"

	"platform.io/libs/naming"
)

// kubectl shows upstream's deprecation warning for a deprecated resource (v1 Endpoints), and
// none for others.
func TestKubectlDeprecationWarning(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-deprecated-")
	k := newKubectl(t, s, ns)
	_, stderr, code := k.run("", "get", "endpoints")
	want := "Warning: v1 Endpoints is deprecated in v1.33+; use " + naming.Group("discovery.k8s.io") + "/v1 EndpointSlice"
	if code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("kubectl get endpoints: exit %d, stderr %q, want %q", code, stderr, want)
	}
	if _, stderr, code := k.run("", "get", "configmaps"); code != 0 || strings.Contains(stderr, "Warning") {
		t.Errorf("kubectl get configmaps: exit %d, stderr %q", code, stderr)
	}
}
