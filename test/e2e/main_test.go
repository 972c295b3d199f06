// Package e2e checks Platform end to end with real clients (client-go, kubectl, plain net/http
// over HTTP/1.1 and HTTP/2) against real processes started by test/stack. The in-process tests of
// services/gateway/apiserver cover the HTTP rules request by request; these tests cover what only
// real clients and real processes show: client-go's paging, informers, 410 recovery, Protobuf
// negotiation, kubectl's discovery and printing, and restarts of the services.
//
// One split stack (redis-server, storage, gateway) is shared by the tests that need no special
// flags or restarts; each of them works in namespaces of its own, so they run in parallel. Tests
// that restart services or need other flags start a stack of their own.
package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/test/stack"
)

// shared is the split stack most tests use. Its gateway sends bookmarks every second.
var shared *stack.Stack

// sharedGatewayArgs are the shared stack's gateway flags (runMain adds the front proxy's client
// certificate).
var sharedGatewayArgs = []string{"--watch-bookmark-interval=1s"}

// sharedProxyCA is the CA of the shared gateway's front-proxy client certificate (what extension
// API servers verify the aggregation layer with).
var sharedProxyCA *x509.CertPool

// sharedControllersArgs are the stack's selection of controllers (which a --controllers given
// replaces) without the root CA publisher: the shared stack's tests count the config maps of
// namespaces of their own, where the publisher would add naming.RootCAConfigMap (it is checked
// in its package and by the stacks of TestAllInOneAccessControl).
var sharedControllersArgs = []string{"--controllers", "*,tokencleaner,bootstrapsigner,-root-ca-cert-publisher"}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "platform-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	proxyArgs, err := frontProxy(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := stack.Start(stack.Options{Mode: stack.Split, Dir: dir, GatewayArgs: append(sharedGatewayArgs, proxyArgs...), ControllersArgs: sharedControllersArgs})
	// At the end every stack of this process has stopped: drop the binaries stack.Build compiled.
	defer stack.CleanupBuild()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the shared stack: %v\n", err)
		for _, name := range []string{"storage", "gateway"} {
			fmt.Fprintf(os.Stderr, "--- %s log (last lines) ---\n%s\n", name, tail(readLog(dir, name), 60))
		}
		return 1
	}
	shared = s
	code := m.Run()
	s.Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "the shared stack's logs are kept in %s\n", dir)
	}
	return code
}

// frontProxy creates the shared stack's front-proxy CA and the gateway's proxy client certificate
// (upstream's front-proxy-ca and front-proxy-client) and returns the gateway's flags for them.
func frontProxy(dir string) ([]string, error) {
	ca, err := pki.NewCA("front-proxy-ca", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.IssueClient("front-proxy-client", nil, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "front-proxy-client.crt"), filepath.Join(dir, "front-proxy-client.key")
	if err := pki.WritePair(certFile, keyFile, cert, key); err != nil {
		return nil, err
	}
	sharedProxyCA = x509.NewCertPool()
	sharedProxyCA.AppendCertsFromPEM(ca.CertPEM)
	return []string{"--proxy-client-cert-file", certFile, "--proxy-client-key-file", keyFile}, nil
}

func readLog(dir, name string) string {
	data, err := os.ReadFile(dir + "/" + name + ".log")
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logsOnFailure prints the tail of the named services' logs when t has failed.
func logsOnFailure(t *testing.T, s *stack.Stack, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range names {
			t.Logf("--- %s log (last lines, all of it in %s) ---\n%s", name, s.Dir, tail(s.Logs(name), 40))
		}
	})
}

// startStack starts a stack of the test's own, stopped at the end of the test; its logs are
// printed when the test fails.
func startStack(t *testing.T, opts stack.Options) *stack.Stack {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := stack.Start(opts)
	if err != nil {
		for _, name := range []string{"storage", "gateway", "allinone"} {
			t.Logf("--- %s log ---\n%s", name, tail(readLog(opts.Dir, name), 40))
		}
		t.Fatalf("starting the stack: %v", err)
	}
	t.Cleanup(s.Stop)
	if opts.Mode == stack.AllInOne {
		logsOnFailure(t, s, "allinone")
	} else {
		logsOnFailure(t, s, "storage", "gateway")
	}
	return s
}

// useShared marks t as a parallel user of the shared stack.
func useShared(t *testing.T) *stack.Stack {
	t.Helper()
	t.Parallel()
	logsOnFailure(t, shared, "storage", "gateway")
	return shared
}

// restConfig is a client-go configuration for the stack: the cluster CA, and a client certificate
// for user in groups (system:masters when none is named). Client-side rate limiting is off.
func restConfig(t *testing.T, s *stack.Stack, user string, groups ...string) *rest.Config {
	t.Helper()
	if len(groups) == 0 {
		groups = []string{"system:masters"}
	}
	cert, key, err := s.ClientCert(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAPEM, CertData: cert, KeyData: key},
		QPS:             -1,
		UserAgent:       "platform-e2e/" + t.Name(),
	}
}

func dynamicClient(t *testing.T, s *stack.Stack) *dynamic.DynamicClient {
	t.Helper()
	c, err := dynamic.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The resources the tests use. Upstream *.k8s.io groups are served under naming.Group's names
// (*.platform.io in the platform profile, unchanged in the kubernetes profile).
var (
	namespacesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMapsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploymentsGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	clusterRolesGVR = schema.GroupVersionResource{Group: naming.Group("rbac.authorization.k8s.io"), Version: "v1", Resource: "clusterroles"}
)

// ctxFor is a context that ends with the test (or after d).
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createNamespace creates a namespace named prefix + a generated suffix and deletes it at the
// end of the test.
func createNamespace(t *testing.T, dyn dynamic.Interface, prefix string) string {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": prefix},
	}}
	got, err := dyn.Resource(namespacesGVR).Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	name := got.GetName()
	if !strings.HasPrefix(name, prefix) || len(name) <= len(prefix) {
		t.Fatalf("generateName %q gave the name %q", prefix, name)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(namespacesGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// configMap is a ConfigMap object.
func configMap(name string, labels, data map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName(name)
	if labels != nil {
		u.SetLabels(labels)
	}
	if data != nil {
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		u.Object["data"] = d
	}
	return u
}
