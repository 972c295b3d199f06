package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/test/extapiserver"
	"platform.io/test/stack"
)

// Issue 36, aggregated discovery: /api and /apis answer apidiscovery v2 documents listing every
// resource, custom resources and the remote APIService's (fetched from its extension server)
// included; client-go learns the whole API from those two requests, kubectl's `get` with an
// empty cache makes at most 4; the ETag gives 304. On the shared split stack and on the
// all-in-one, where the extension server is also stopped: its group version turns Stale (its
// resources kept), kubectl keeps working, and it is Current again once the server is back.
func TestAggregatedDiscovery(t *testing.T) {
	t.Run("allinone", func(t *testing.T) {
		s := startStack(t, stack.Options{Mode: stack.AllInOne})
		caPEM, err := os.ReadFile(filepath.Join(s.Dir, "allinone", "pki", "front-proxy", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		testAggregatedDiscovery(t, s, pool, true)
	})
	t.Run("shared", func(t *testing.T) {
		s := useShared(t)
		testAggregatedDiscovery(t, s, sharedProxyCA, false)
	})
}

// The custom resource of the test (its own group, so it meets no other test's).
var gadgetsGVR = schema.GroupVersionResource{Group: "aggdisc.example.com", Version: "v1", Resource: "gadgets"}

func gadgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crdsGVR.GroupVersion().String(), "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gadgetsGVR.Resource + "." + gadgetsGVR.Group},
		"spec": map[string]any{"group": gadgetsGVR.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": []any{"gdg"}},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}
}

// aggregatedAPIs fetches the aggregated /apis (with If-None-Match when etag is set).
func aggregatedAPIs(t *testing.T, c *http.Client, s *stack.Stack, etag string) (list apidiscoveryv2.APIGroupDiscoveryList, header http.Header, code int) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+"/apis", nil)
	req.Header.Set("Accept", discovery.AcceptV2)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if ok, _ := discovery.ContentTypeIsGVK(resp.Header.Get("Content-Type"), schema.GroupVersionKind{Group: "apidiscovery.k8s.io", Version: "v2", Kind: "APIGroupDiscoveryList"}); !ok {
			t.Fatalf("/apis Content-Type %q", resp.Header.Get("Content-Type"))
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
	}
	return list, resp.Header, resp.StatusCode
}

// versionOf finds a group version in an aggregated document.
func versionOf(list apidiscoveryv2.APIGroupDiscoveryList, gv schema.GroupVersion) *apidiscoveryv2.APIVersionDiscovery {
	for _, g := range list.Items {
		for i := range g.Versions {
			if g.Name == gv.Group && g.Versions[i].Version == gv.Version {
				return &g.Versions[i]
			}
		}
	}
	return nil
}

// hasResource tells whether a version lists the resource with the kind.
func hasResource(v *apidiscoveryv2.APIVersionDiscovery, resource, kind string) bool {
	if v == nil {
		return false
	}
	for _, r := range v.Resources {
		if r.Resource == resource && r.ResponseKind != nil && r.ResponseKind.Kind == kind {
			return true
		}
	}
	return false
}

// kubectlRequest matches one request in kubectl's -v=6 log (the current and the older format).
var kubectlRequest = regexp.MustCompile(`round_trippers\.go:\d+\].*?(?:verb="([A-Z]+)" url="([^"]+)"|\b([A-Z]+) (https://\S+))`)

// kubectlRequests runs kubectl with -v=6 and an empty discovery cache and returns the requests
// it made.
func kubectlRequests(t *testing.T, s *stack.Stack, ns string, args ...string) []string {
	t.Helper()
	k := newKubectl(t, s, ns)
	out, errOut, code := k.run("", append(args, "-v=6")...)
	if code != 0 {
		t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	var reqs []string
	for _, m := range kubectlRequest.FindAllStringSubmatch(errOut, -1) {
		if m[1] != "" {
			reqs = append(reqs, m[1]+" "+m[2])
		} else {
			reqs = append(reqs, m[3]+" "+m[4])
		}
	}
	return reqs
}

func testAggregatedDiscovery(t *testing.T, s *stack.Stack, proxyCA *x509.CertPool, stopServer bool) {
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-aggdisc-")
	ctx := ctxFor(t, 3*time.Minute)
	httpc, err := s.HTTPClient("e2e-aggdisc", "system:masters")
	if err != nil {
		t.Fatal(err)
	}

	// A custom resource.
	crd := gadgetCRD()
	createEstablished(t, ctx, dyn, crd)
	t.Cleanup(func() { _ = dyn.Resource(crdsGVR).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}) })

	// A remote APIService: the extension server behind a Service of the test's namespace.
	extCA, err := pki.NewCA("extension-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	servingPEM, servingKey, err := extCA.IssueServing("extapi", []string{"extapi." + ns + ".svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(servingPEM, servingKey)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := extapiserver.Start(extapiserver.Config{Serving: serving, RequestHeaderCA: proxyCA, AllowedNames: []string{"front-proxy-client"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ext.Stop)
	port := int64(ext.Port())
	for _, obj := range []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "extapi"},
			"spec": map[string]any{"clusterIP": "127.0.0.1", "ports": []any{map[string]any{"name": "https", "port": port}}}}},
		{Object: map[string]any{"apiVersion": "v1", "kind": "Endpoints", "metadata": map[string]any{"name": "extapi"},
			"subsets": []any{map[string]any{"addresses": []any{map[string]any{"ip": "127.0.0.1"}}, "ports": []any{map[string]any{"name": "https", "port": port}}}}}},
	} {
		res := "services"
		if obj.GetKind() == "Endpoints" {
			res = "endpoints"
		}
		if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: res}).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apiServicesGVR := schema.GroupVersionResource{Group: naming.Group("apiregistration.k8s.io"), Version: "v1", Resource: "apiservices"}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiServicesGVR.GroupVersion().String(), "kind": "APIService", "metadata": map[string]any{"name": extapiserver.Version + "." + extapiserver.Group},
		"spec": map[string]any{"group": extapiserver.Group, "version": extapiserver.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"caBundle": b64(extCA.CertPEM), "service": map[string]any{"namespace": ns, "name": "extapi", "port": port}}}}
	if _, err := dyn.Resource(apiServicesGVR).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(apiServicesGVR).Delete(ctx, apiService.GetName(), metav1.DeleteOptions{}) })
	flundersGV := schema.GroupVersion{Group: extapiserver.Group, Version: extapiserver.Version}

	// Both in the aggregated /apis, with their resources, Current.
	current := func() {
		t.Helper()
		stack.Eventually(t, 60*time.Second, "the custom resource and the remote APIService in aggregated discovery", func() error {
			list, _, code := aggregatedAPIs(t, httpc, s, "")
			if code != http.StatusOK {
				return fmt.Errorf("aggregated /apis: %d", code)
			}
			gadgets, flunders := versionOf(list, gadgetsGVR.GroupVersion()), versionOf(list, flundersGV)
			if !hasResource(gadgets, "gadgets", "Gadget") || gadgets.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
				return fmt.Errorf("gadgets: %+v", gadgets)
			}
			if !hasResource(flunders, extapiserver.Resource, extapiserver.Kind) || flunders.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
				return fmt.Errorf("flunders: %+v", flunders)
			}
			return nil
		})
	}
	current()

	// client-go: the whole API, remote and custom resources included, from /api and /apis.
	var requests atomic.Int32
	cfg := restConfig(t, s, "e2e-aggdisc")
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("client-go's discovery made %d requests, want 2 (/api and /apis)", n)
	}
	found := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			found[l.GroupVersion+"/"+r.Name] = true
		}
	}
	for _, want := range []string{"v1/configmaps", "apps/v1/deployments", gadgetsGVR.GroupVersion().String() + "/gadgets", gadgetsGVR.GroupVersion().String() + "/gadgets/status",
		extapiserver.GroupVersion + "/" + extapiserver.Resource} {
		if !found[want] {
			t.Errorf("client-go's discovery lacks %s", want)
		}
	}

	// The ETag: 304 for a client that has the document.
	_, header, _ := aggregatedAPIs(t, httpc, s, "")
	if _, _, code := aggregatedAPIs(t, httpc, s, header.Get("ETag")); code != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d", code)
	}

	// kubectl with an empty cache: /api, /apis, then the request itself.
	for _, args := range [][]string{{"get", "configmaps"}, {"get", "gadgets"}, {"get", "flunders"}} {
		if reqs := kubectlRequests(t, s, ns, args...); len(reqs) > 4 {
			t.Errorf("kubectl %s made %d requests, at most 4 expected:\n%s", strings.Join(args, " "), len(reqs), strings.Join(reqs, "\n"))
		} else {
			t.Logf("kubectl %s: %d requests: %s", strings.Join(args, " "), len(reqs), strings.Join(reqs, ", "))
		}
	}
	if !stopServer {
		return
	}

	// The extension server stops: its group version turns Stale, its resources kept; kubectl's
	// other commands keep working; it is Current again once the server is back.
	ext.Stop()
	stack.Eventually(t, 60*time.Second, "the remote group version Stale", func() error {
		list, _, _ := aggregatedAPIs(t, httpc, s, "")
		if v := versionOf(list, flundersGV); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale || !hasResource(v, extapiserver.Resource, extapiserver.Kind) {
			return fmt.Errorf("flunders: %+v", v)
		}
		return nil
	})
	if _, _, err := dc.ServerGroupsAndResources(); !discovery.IsGroupDiscoveryFailedError(err) {
		t.Errorf("client-go with a stale group version: %v", err)
	}
	k := newKubectl(t, s, ns)
	k.ok("", "get", "configmaps")
	if err := ext.Restart(); err != nil {
		t.Fatal(err)
	}
	current()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
