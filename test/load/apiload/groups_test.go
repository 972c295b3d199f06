package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// groupList is an APIGroupList naming the given groups (one version each, as discovery lists them).
func groupList(names ...string) []byte {
	var gs []any
	for _, n := range names {
		v := map[string]any{"groupVersion": n + "/v1", "version": "v1"}
		gs = append(gs, map[string]any{"name": n, "versions": []any{v}, "preferredVersion": v})
	}
	b, _ := json.Marshal(map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
	return b
}

var (
	// upstreamList is what kube-apiserver v1.32 lists; platformList what Platform lists in its
	// platform naming profile (the kubernetes profile lists upstream's names).
	upstreamList = groupList("apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling",
		"batch", "certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
		"apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "flowcontrol.apiserver.k8s.io")
	platformList = groupList("apiregistration.platform.io", "apps", "authentication.platform.io", "authorization.platform.io", "batch",
		"rbac.authorization.platform.io", "admissionregistration.platform.io", "apiextensions.platform.io", "apiload.example.com")
	upstreamGroups = apiGroups{authentication: "authentication.k8s.io", rbac: "rbac.authorization.k8s.io",
		apiextensions: "apiextensions.k8s.io", admissionregistration: "admissionregistration.k8s.io"}
	platformGroups = apiGroups{authentication: "authentication.platform.io", rbac: "rbac.authorization.platform.io",
		apiextensions: "apiextensions.platform.io", admissionregistration: "admissionregistration.platform.io"}
)

// The setup's groups are named as the server's discovery lists them: upstream's names, or
// Platform's; a group listed under neither keeps upstream's name; an answer that is no group list
// is an error.
func TestResolveGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		list []byte
		want apiGroups
	}{
		{"upstream", upstreamList, upstreamGroups},
		{"platform profile", platformList, platformGroups},
		{"mixed", groupList("authentication.platform.io", "rbac.authorization.k8s.io"),
			apiGroups{authentication: "authentication.platform.io", rbac: "rbac.authorization.k8s.io",
				apiextensions: "apiextensions.k8s.io", admissionregistration: "admissionregistration.k8s.io"}},
		{"both", groupList("authentication.platform.io", "authentication.k8s.io"), upstreamGroups},
		{"neither", groupList("apps", "batch"), upstreamGroups},
	} {
		got, err := resolveGroups(tc.list)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"kind":"Status","code":404}`, `{"kind":"APIGroupList","groups":[]}`} {
		if g, err := resolveGroups([]byte(bad)); err == nil {
			t.Errorf("resolveGroups(%q): %+v, want an error", bad, g)
		}
	}
	// The paths follow the groups.
	saved := groups
	t.Cleanup(func() { useGroups(saved) })
	useGroups(upstreamGroups)
	if crdsPath != "/apis/apiextensions.k8s.io/v1/customresourcedefinitions" ||
		webhookConfigurations != "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations" {
		t.Errorf("paths %s, %s", crdsPath, webhookConfigurations)
	}
}

// fakeServer answers what the service account identity's setup asks, listing the given groups,
// except the TokenRequest, which it refuses; it records the TokenRequests' apiVersions and the
// namespaces created and deleted.
type fakeServer struct {
	list                      []byte
	mu                        sync.Mutex
	tokenVersions             []string
	createdNamespaces, delete []string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &obj)
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch p := r.URL.Path; {
	case r.Method == http.MethodGet && p == "/api/v1/namespaces/default":
		fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"default"}}`)
	case r.Method == http.MethodGet && p == "/apis":
		_, _ = w.Write(f.list)
	case r.Method == http.MethodPost && p == "/api/v1/namespaces":
		f.createdNamespaces = append(f.createdNamespaces, obj.Metadata.Name)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/serviceaccounts"):
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/token"):
		f.tokenVersions = append(f.tokenVersions, obj.APIVersion)
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/api/v1/namespaces/"):
		f.delete = append(f.delete, strings.TrimPrefix(p, "/api/v1/namespaces/"))
		fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1"}`)
	default:
		http.NotFound(w, r)
	}
}

// A setup that fails (the TokenRequest is refused) is a setup error, and the namespace it created
// is deleted; the TokenRequest is in the authentication group the server's discovery lists.
func TestFailedSetupCleansUp(t *testing.T) {
	_, cert, key := testAdmin(t)
	for _, tc := range []struct {
		list        []byte
		wantVersion string
	}{{upstreamList, "authentication.k8s.io/v1"}, {platformList, "authentication.platform.io/v1"}} {
		f := &fakeServer{list: tc.list}
		srv := httptest.NewTLSServer(f)
		dir := t.TempDir()
		files := map[string][]byte{"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), "client.crt": cert, "client.key": key}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		code, _ := runTool(t, "--server="+srv.URL, "--ca-file="+filepath.Join(dir, "ca.crt"), "--cert-file="+filepath.Join(dir, "client.crt"),
			"--key-file="+filepath.Join(dir, "client.key"), "--identity=serviceaccount", "--namespace=failed", "--scenario=create", "--duration=100ms")
		srv.Close()
		if code != exitUsage {
			t.Errorf("exit %d, want %d", code, exitUsage)
		}
		if want := []string{"failed-identity"}; !slices.Equal(f.createdNamespaces, want) || !slices.Equal(f.delete, want) {
			t.Errorf("namespaces created %q, deleted %q; want %q deleted", f.createdNamespaces, f.delete, want)
		}
		if want := []string{tc.wantVersion}; !slices.Equal(f.tokenVersions, want) {
			t.Errorf("TokenRequests of %q, want %q", f.tokenVersions, want)
		}
	}
}

// discoverOn resolves the groups of the server s lists and makes the tool use them.
func discoverOn(t *testing.T, s *stack.Stack) apiGroups {
	t.Helper()
	hc, err := s.HTTPClient("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	g, err := (&apiClient{base: s.URL, hc: hc}).discoverGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	useGroups(g)
	return g
}

// Platform in its kubernetes naming profile serves upstream's group names: the tool finds them,
// and every setup request uses them (TokenRequest, Role and RoleBinding, CustomResourceDefinition,
// ValidatingWebhookConfiguration). TestIdentities covers the default profile.
func TestKubernetesNamingProfile(t *testing.T) {
	s, err := stack.Start(stack.Options{Mode: stack.AllInOne, Dir: t.TempDir(), GatewayArgs: []string{"--" + naming.ProfileFlag + "=" + naming.KubernetesProfile}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if g := discoverOn(t, s); g != upstreamGroups {
		t.Fatalf("groups %+v, want %+v", g, upstreamGroups)
	}
	code, out := runTool(t, "--kubeconfig="+s.Kubeconfig, "--identity=serviceaccount", "--kind=custom", "--webhook=noop", "--namespace=kube-profile",
		"--scenario=create,get", "--clients=2", "--duration=500ms", "--warmup=100ms")
	wantRows(t, code, out, map[string][]int{"create": {2}, "get": {2}})
}
