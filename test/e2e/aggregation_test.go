package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/test/extapiserver"
	"platform.io/test/stack"
)

// TestAggregatedAPI registers a real extension API server (test/extapiserver) through an
// APIService and uses it through kubectl: discovery and OpenAPI (create with validation, explain)
// show its group, get, patch and watch go through the
// gateway with the user in the front-proxy headers, authorization happens in the gateway, and the
// APIService goes unavailable (503 for requests) while the server is down. Both the split stack
// and the all-in-one.
func TestAggregatedAPI(t *testing.T) {
	for _, mode := range []stack.Mode{stack.Split, stack.AllInOne} {
		t.Run(string(mode), func(t *testing.T) { testAggregatedAPI(t, mode) })
	}
}

func testAggregatedAPI(t *testing.T, mode stack.Mode) {
	var s *stack.Stack
	proxyPool := x509.NewCertPool()
	if mode == stack.AllInOne {
		// The all-in-one creates the front proxy's CA and its proxy client certificate in its data
		// directory and uses them unless told otherwise.
		s = startStack(t, stack.Options{Mode: mode})
		caPEM, err := os.ReadFile(filepath.Join(s.Dir, "allinone", "pki", "front-proxy", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		proxyPool.AppendCertsFromPEM(caPEM)
	} else {
		// The front proxy's CA and the gateway's proxy client certificate (upstream's
		// front-proxy-ca and front-proxy-client), handed to the gateway by flag.
		dir := t.TempDir()
		proxyCA, err := pki.NewCA("front-proxy-ca", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		proxyCert, proxyKey, err := proxyCA.IssueClient("front-proxy-client", nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(dir, "front-proxy-client.crt"), filepath.Join(dir, "front-proxy-client.key")
		if err := pki.WritePair(certFile, keyFile, proxyCert, proxyKey); err != nil {
			t.Fatal(err)
		}
		s = startStack(t, stack.Options{Mode: mode, GatewayArgs: []string{"--proxy-client-cert-file", certFile, "--proxy-client-key-file", keyFile}})
		proxyPool.AppendCertsFromPEM(proxyCA.CertPEM)
	}
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "agg-")

	// The extension server: serving certificate for its Service's DNS name from a CA of its own,
	// requestheader CA = the front proxy's.
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
	ext, err := extapiserver.Start(extapiserver.Config{Serving: serving, RequestHeaderCA: proxyPool, AllowedNames: []string{"front-proxy-client"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ext.Stop)

	ctx := ctxFor(t, 3*time.Minute)
	port := int64(ext.Port())
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "extapi"},
		"spec": map[string]any{"clusterIP": "127.0.0.1", "ports": []any{map[string]any{"name": "https", "port": port}}}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).Namespace(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eps := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Endpoints", "metadata": map[string]any{"name": "extapi"},
		"subsets": []any{map[string]any{"addresses": []any{map[string]any{"ip": "127.0.0.1"}}, "ports": []any{map[string]any{"name": "https", "port": port}}}}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}).Namespace(ns).Create(ctx, eps, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	k := newKubectl(t, s, ns)
	apiService := "v1alpha1." + extapiserver.Group
	k.ok(fmt.Sprintf(`apiVersion: %s/v1
kind: APIService
metadata:
  name: %s
spec:
  group: %s
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: %s
  service:
    namespace: %s
    name: extapi
    port: %d
`, naming.Group("apiregistration.k8s.io"), apiService, extapiserver.Group, b64(extCA.CertPEM), ns, port), "apply", "-f", "-")
	stack.Eventually(t, 60*time.Second, "the APIService available", func() error {
		out, _, _ := k.run("", "get", "apiservice", apiService, "--no-headers")
		if f := strings.Fields(out); len(f) < 3 || f[2] != "True" {
			return fmt.Errorf("kubectl get apiservice: %q", out)
		}
		return nil
	})
	// The local APIServices are listed beside it.
	if out := k.ok("", "get", "apiservices"); !strings.Contains(out, "v1.apps") || !strings.Contains(out, "Local") {
		t.Fatalf("kubectl get apiservices:\n%s", out)
	}

	// Discovery shows the group and its resource.
	if out := k.ok("", "api-versions"); !strings.Contains(out, extapiserver.GroupVersion) {
		t.Fatalf("kubectl api-versions lacks %s:\n%s", extapiserver.GroupVersion, out)
	}
	if out := k.ok("", "api-resources", "--api-group="+extapiserver.Group); !strings.Contains(out, "flunders") || !strings.Contains(out, "fl ") {
		t.Fatalf("kubectl api-resources:\n%s", out)
	}

	// Create, get and watch through the aggregated API.
	flunder := func(name string) string {
		return fmt.Sprintf("apiVersion: %s\nkind: Flunder\nmetadata:\n  name: %s\n", extapiserver.GroupVersion, name)
	}
	// kubectl validates against the extension server's OpenAPI, found through the gateway's root.
	k.ok(flunder("alpha"), "create", "-f", "-")
	if out := k.ok("", "explain", "flunders.spec"); !strings.Contains(out, "reference") {
		t.Fatalf("kubectl explain flunders.spec:\n%s", out)
	}
	// Its OpenAPI v2 document is merged into the gateway's /openapi/v2 (downloaded once the
	// APIService is available).
	stack.Eventually(t, 30*time.Second, "Flunder in /openapi/v2", func() error {
		if out, errs, code := k.run("", "explain", "flunders.spec", "--output=plaintext-openapiv2"); code != 0 || !strings.Contains(out, "reference") {
			return fmt.Errorf("kubectl explain --output=plaintext-openapiv2: exit %d %s %s", code, out, errs)
		}
		return nil
	})
	if out := k.ok("", "get", "flunders"); !strings.Contains(out, "alpha") {
		t.Fatalf("kubectl get flunders:\n%s", out)
	}
	if out := k.ok("", "get", "fl", "alpha", "-o", "jsonpath={.metadata.namespace}/{.metadata.name}"); out != ns+"/alpha" {
		t.Fatalf("kubectl get fl alpha: %q", out)
	}
	w := k.background(90*time.Second, "get", "flunders", "--watch", "--output-watch-events")
	w.waitLine(t, `ADDED\s+alpha`, 30*time.Second)
	k.ok(flunder("beta"), "create", "-f", "-")
	w.waitLine(t, `ADDED\s+beta`, 30*time.Second)
	k.ok("", "patch", "flunder", "beta", "--type=merge", "-p", `{"spec":{"reference":"alpha"}}`)
	w.waitLine(t, `MODIFIED\s+beta`, 30*time.Second)
	if out := k.ok("", "get", "flunder", "beta", "-o", "jsonpath={.spec.reference}"); out != "alpha" {
		t.Fatalf("patched flunder: %q", out)
	}

	// The extension server saw the kubeconfig's user in the front-proxy headers, never its own
	// credentials.
	users := ext.Users()
	found := false
	for _, u := range users {
		if u.Authorization {
			t.Fatalf("a request reached the extension server with an Authorization header: %+v", u)
		}
		if u.Name == "admin" && slices.Contains(u.Groups, "system:masters") && slices.Contains(u.Groups, "system:authenticated") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the extension server never saw user admin: %+v", users)
	}

	// Authorization happens in the gateway: a user without a grant is refused there.
	before := len(ext.Users())
	out, errOut, code := k.run("", "get", "flunders", "--as=nobody")
	if code == 0 || !strings.Contains(errOut, "Forbidden") && !strings.Contains(errOut, "forbidden") {
		t.Fatalf("kubectl get flunders --as=nobody: exit %d\n%s%s", code, out, errOut)
	}
	for _, u := range ext.Users()[before:] {
		if u.Name == "nobody" {
			t.Fatalf("a request the gateway refuses reached the extension server: %+v", u)
		}
	}

	// The extension server stops: the APIService goes unavailable and requests get 503.
	ext.Stop()
	stack.Eventually(t, 60*time.Second, "the APIService unavailable", func() error {
		out, _, _ := k.run("", "get", "apiservice", apiService, "--no-headers")
		if !strings.Contains(out, "False (FailedDiscoveryCheck)") {
			return fmt.Errorf("kubectl get apiservice: %q", out)
		}
		return nil
	})
	out, errOut, code = k.run("", "get", "flunders")
	if code == 0 || !strings.Contains(errOut, "ServiceUnavailable") {
		t.Fatalf("kubectl get flunders while the extension server is down: exit %d\n%s%s", code, out, errOut)
	}
	if err := ext.Restart(); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 60*time.Second, "the APIService available again", func() error {
		out, _, _ := k.run("", "get", "apiservice", apiService, "--no-headers")
		if f := strings.Fields(out); len(f) < 3 || f[2] != "True" {
			return fmt.Errorf("kubectl get apiservice: %q", out)
		}
		return nil
	})
	if out := k.ok("", "get", "flunders"); !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Fatalf("kubectl get flunders after the restart:\n%s", out)
	}
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
