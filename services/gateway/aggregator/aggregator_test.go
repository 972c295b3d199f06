package aggregator_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

var apiservices = "/apis/" + naming.Group("apiregistration.k8s.io") + "/v1/apiservices"

type response struct {
	code int
	body []byte
}

func (r response) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
	return m
}

func call(t *testing.T, c *http.Client, e *gatewaytest.Env, method, path string, body any, headers ...string) response {
	t.Helper()
	code, _, data := e.Do(t, c, method, path, body, headers...)
	return response{code: code, body: data}
}

func must(t *testing.T, r response, code int) map[string]any {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %d, want %d: %s", r.code, code, r.body)
	}
	return r.obj(t)
}

func field(m map[string]any, p string) any {
	var cur any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// available returns the Available condition of a stored APIService as "<status>/<reason>".
func available(t *testing.T, e *gatewaytest.Env, name string) string {
	t.Helper()
	r := call(t, e.Admin, e, "GET", apiservices+"/"+name, nil)
	if r.code != http.StatusOK {
		return fmt.Sprintf("GET %d", r.code)
	}
	conds, _ := field(r.obj(t), "status.conditions").([]any)
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Available" {
			return fmt.Sprintf("%s/%s", m["status"], m["reason"])
		}
	}
	return "none"
}

func TestLocalAPIServices(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	label := naming.AggregatorAutomanagedLabel
	apps := "v1.apps"
	reg := "v1." + naming.Group("apiregistration.k8s.io")
	for _, name := range []string{"v1.", apps, reg} {
		eventually(t, 20*time.Second, "local APIService "+name, func() error {
			if got := available(t, e, name); got != "True/Local" {
				return fmt.Errorf("Available %s", got)
			}
			return nil
		})
	}
	obj := must(t, call(t, e.Admin, e, "GET", apiservices+"/"+apps, nil), http.StatusOK)
	if field(obj, "metadata.labels").(map[string]any)[label] != "onstart" || field(obj, "spec.groupPriorityMinimum") != 17800.0 ||
		field(obj, "spec.versionPriority") != 15.0 || field(obj, "spec.service") != nil {
		t.Fatalf("local APIService %s: %v", apps, obj)
	}

	// kubectl's columns.
	table := must(t, call(t, e.Admin, e, "GET", apiservices+"/"+apps, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), http.StatusOK)
	if rows := table["rows"].([]any); fmt.Sprint(rows[0].(map[string]any)["cells"]) != fmt.Sprintf("[%s Local True %s]", apps, rows[0].(map[string]any)["cells"].([]any)[3]) {
		t.Fatalf("table row %v", rows[0])
	}

	// A custom resource's group version gets an APIService while its definition is served.
	crd := map[string]any{"apiVersion": naming.Group("apiextensions.k8s.io") + "/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.agg.example.com"},
		"spec": map[string]any{"group": "agg.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}
	must(t, call(t, e.Admin, e, "POST", "/apis/"+naming.Group("apiextensions.k8s.io")+"/v1/customresourcedefinitions", crd), http.StatusCreated)
	eventually(t, 20*time.Second, "the custom resource's APIService", func() error {
		if got := available(t, e, "v1.agg.example.com"); got != "True/Local" {
			return fmt.Errorf("Available %s", got)
		}
		return nil
	})
	obj = must(t, call(t, e.Admin, e, "GET", apiservices+"/v1.agg.example.com", nil), http.StatusOK)
	if field(obj, "metadata.labels").(map[string]any)[label] != "true" || field(obj, "spec.groupPriorityMinimum") != 1000.0 || field(obj, "spec.versionPriority") != 100.0 {
		t.Fatalf("custom APIService: %v", obj)
	}
	must(t, call(t, e.Admin, e, "DELETE", "/apis/"+naming.Group("apiextensions.k8s.io")+"/v1/customresourcedefinitions/gizmos.agg.example.com", nil), http.StatusOK)
	eventually(t, 20*time.Second, "the custom resource's APIService removed", func() error {
		if r := call(t, e.Admin, e, "GET", apiservices+"/v1.agg.example.com", nil); r.code != http.StatusNotFound {
			return fmt.Errorf("GET %d", r.code)
		}
		return nil
	})
}

func TestAPIServiceValidation(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	port := int32(70000)
	for _, c := range []struct {
		name  string
		spec  map[string]any
		cause string
	}{
		{"v1.wrong.example.com", map[string]any{"group": "right.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "service": map[string]any{"namespace": "ns", "name": "svc"}},
			"must be `spec.version+\".\"+spec.group`"},
		{"v1.p.example.com", map[string]any{"group": "p.example.com", "version": "v1", "groupPriorityMinimum": 20001, "versionPriority": 0, "service": map[string]any{"namespace": "ns", "name": "svc"}},
			"must be positive and less than 20000"},
		{"v1.local.example.com", map[string]any{"group": "local.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "caBundle": "eA=="},
			"local APIServices may not have a caBundle"},
		{"v1.both.example.com", map[string]any{"group": "both.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "caBundle": "eA==", "insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "ns", "name": "svc"}},
			"may not be true if caBundle is present"},
		{"v1.port.example.com", map[string]any{"group": "port.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "service": map[string]any{"namespace": "ns", "name": "svc", "port": port}},
			"port is not valid"},
		{"v1.ns.example.com", map[string]any{"group": "ns.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "service": map[string]any{"name": "svc"}},
			"spec.service.namespace: Required value"},
		{"V_1.x.example.com", map[string]any{"group": "x.example.com", "version": "V_1", "groupPriorityMinimum": 100, "versionPriority": 10, "service": map[string]any{"namespace": "ns", "name": "svc"}},
			"spec.version: Invalid value"},
	} {
		body := map[string]any{"apiVersion": naming.Group("apiregistration.k8s.io") + "/v1", "kind": "APIService", "metadata": map[string]any{"name": c.name}, "spec": c.spec}
		r := call(t, e.Admin, e, "POST", apiservices, body)
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(field(r.obj(t), "message")), c.cause) || field(r.obj(t), "reason") != "Invalid" {
			t.Errorf("%s: code %d, want 422 with %q: %s", c.name, r.code, c.cause, r.body)
		}
	}
	// A valid one: the port defaults to 443.
	body := map[string]any{"apiVersion": naming.Group("apiregistration.k8s.io") + "/v1", "kind": "APIService", "metadata": map[string]any{"name": "v1.ok.example.com"},
		"spec": map[string]any{"group": "ok.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10, "insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "ns", "name": "svc"}}}
	obj := must(t, call(t, e.Admin, e, "POST", apiservices, body), http.StatusCreated)
	if field(obj, "spec.service.port") != 443.0 {
		t.Fatalf("port not defaulted: %v", obj)
	}
}

// extServer is a minimal extension API server over real TLS for the gateway's tests (the full
// one, with kubectl, is test/extapiserver in the e2e tests): discovery of its group version, one
// object and a watch that sends one event, and the identity the front proxy stated.
type extServer struct {
	lis   net.Listener
	srv   *http.Server
	mu    sync.Mutex
	seen  []http.Header
	group string
	// aggregated serves aggregated discovery at /apis (with an ETag), as servers built on
	// upstream's 1.26+ libraries do; without it /apis is 404 (an older server).
	aggregated bool
}

func startExt(t *testing.T, group string, serving tls.Certificate, proxyCA *x509.CertPool) *extServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := &extServer{lis: lis, group: group}
	x.serve(serving, proxyCA)
	t.Cleanup(x.stop)
	return x
}

func (x *extServer) serve(serving tls.Certificate, proxyCA *x509.CertPool) {
	x.srv = &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: proxyCA, ClientAuth: tls.RequireAndVerifyClientCert, NextProtos: []string{"h2", "http/1.1"}},
		Handler:   http.HandlerFunc(x.handle),
	}
	go func() { _ = x.srv.ServeTLS(x.lis, "", "") }()
}

func (x *extServer) stop() { _ = x.srv.Close() }

func (x *extServer) restart(t *testing.T, serving tls.Certificate, proxyCA *x509.CertPool) {
	lis, err := net.Listen("tcp", x.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	x.lis = lis
	x.serve(serving, proxyCA)
}

func (x *extServer) port() int32 { return int32(x.lis.Addr().(*net.TCPAddr).Port) }

func (x *extServer) headers() []http.Header {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]http.Header(nil), x.seen...)
}

func (x *extServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Remote-User") == "" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	x.mu.Lock()
	x.seen = append(x.seen, r.Header.Clone())
	x.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	gv := x.group + "/v1"
	switch {
	case r.URL.Path == "/apis" && x.aggregated && strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList"):
		const etag = `"things-1"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		fmt.Fprintf(w, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":%q},"versions":[
		  {"version":"v1","resources":[{"resource":"things","responseKind":{"group":"","version":"","kind":"Thing"},"scope":"Namespaced","singularResource":"thing","verbs":["get","list","watch"],
		    "subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"Thing"},"verbs":["get"]}]}],"freshness":"Current"}]}]}`, x.group)
	case r.URL.Path == "/apis/"+gv:
		fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":%q,"resources":[{"name":"things","singularName":"thing","namespaced":true,"kind":"Thing","verbs":["get","list","watch"]}]}`, gv)
	case r.URL.Path == "/apis/"+gv+"/namespaces/default/things" && r.URL.Query().Get("watch") == "true":
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Thing","apiVersion":%q,"metadata":{"name":"first","namespace":"default","resourceVersion":"1"}}}`+"\n", gv)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
			fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Thing","apiVersion":%q,"metadata":{"name":"second","namespace":"default","resourceVersion":"2"}}}`+"\n", gv)
		}
	case r.URL.Path == "/openapi/v2":
		// Its group version's path and kind, and a path of another group it does not serve here.
		fmt.Fprintf(w, `{"swagger":"2.0","info":{"title":%q,"version":"v1"},"paths":{
		  "/apis/%s/namespaces/{namespace}/things/{name}":{"get":{"operationId":"readThing","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/com.example.things.v1.Thing"}}}}},
		  "/apis/other.example.com/v1/others":{"get":{"operationId":"listOthers","responses":{"200":{"description":"OK"}}}}},
		  "definitions":{"com.example.things.v1.Thing":{"type":"object","properties":{"spec":{"type":"string"}}}}}`, x.group, gv)
	case r.URL.Path == "/openapi/v3/apis/"+gv:
		fmt.Fprintf(w, `{"openapi":"3.0.0","info":{"title":%q,"version":"v1"},"paths":{}}`, x.group)
	case r.URL.Path == "/apis/"+gv+"/namespaces/default/things/first":
		fmt.Fprintf(w, `{"kind":"Thing","apiVersion":%q,"metadata":{"name":"first","namespace":"default","resourceVersion":"1"}}`, gv)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// proxyPKI is the front proxy's CA with the gateway's client certificate (written for the
// flags), and an extension server's CA with its serving certificate for ext.ext-system.svc.
type proxyPKI struct {
	certFile, keyFile string
	proxyCA, extCA    *pki.CA
	proxyPool         *x509.CertPool
	serving           tls.Certificate
}

func newProxyPKI(t *testing.T) *proxyPKI {
	t.Helper()
	p := &proxyPKI{}
	var err error
	if p.proxyCA, err = pki.NewCA("front-proxy-ca", time.Hour); err != nil {
		t.Fatal(err)
	}
	if p.extCA, err = pki.NewCA("extension-ca", time.Hour); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	proxyCert, proxyKey, err := p.proxyCA.IssueClient("front-proxy-client", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.certFile, p.keyFile = filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	if err := pki.WritePair(p.certFile, p.keyFile, proxyCert, proxyKey); err != nil {
		t.Fatal(err)
	}
	servingPEM, servingKey, err := p.extCA.IssueServing("ext", []string{"ext.ext-system.svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.serving, err = tls.X509KeyPair(servingPEM, servingKey); err != nil {
		t.Fatal(err)
	}
	p.proxyPool = x509.NewCertPool()
	p.proxyPool.AppendCertsFromPEM(p.proxyCA.CertPEM)
	return p
}

func TestRemoteAPIService(t *testing.T) {
	p := newProxyPKI(t)
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.ProxyClientCertFile, c.ProxyClientKeyFile = p.certFile, p.keyFile
	}})
	proxyCA, extCA, serving, proxyPool := p.proxyCA, p.extCA, p.serving, p.proxyPool
	group := "things.example.com"
	x := startExt(t, group, serving, proxyPool)
	name := "v1." + group

	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ext-system"}}), http.StatusCreated)
	// An APIService whose Service does not exist yet.
	apiService := map[string]any{"apiVersion": naming.Group("apiregistration.k8s.io") + "/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15, "caBundle": extCA.CertPEM,
			"service": map[string]any{"namespace": "ext-system", "name": "ext", "port": x.port()}}}
	must(t, call(t, e.Admin, e, "POST", apiservices, apiService), http.StatusCreated)
	waitAvailable := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, "Available "+want, func() error {
			if got := available(t, e, name); got != want {
				return fmt.Errorf("Available %s", got)
			}
			return nil
		})
	}
	waitAvailable("False/ServiceNotFound")
	r := call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil)
	if st := r.obj(t); r.code != http.StatusServiceUnavailable || st["kind"] != "Status" || st["reason"] != "ServiceUnavailable" {
		t.Fatalf("unavailable APIService: %d %s", r.code, r.body)
	}

	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/services", map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "ext"}, "spec": map[string]any{"clusterIP": "127.0.0.1", "ports": []any{map[string]any{"name": "https", "port": x.port()}}}}), http.StatusCreated)
	waitAvailable("False/EndpointsNotFound")
	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/endpoints", map[string]any{"apiVersion": "v1", "kind": "Endpoints",
		"metadata": map[string]any{"name": "ext"}, "subsets": []any{map[string]any{"addresses": []any{map[string]any{"ip": "127.0.0.1"}}, "ports": []any{map[string]any{"name": "https", "port": x.port()}}}}}), http.StatusCreated)
	waitAvailable("True/Passed")

	// Discovery lists the group; /apis/<group> is answered from the APIServices.
	groups := must(t, call(t, e.Admin, e, "GET", "/apis", nil), http.StatusOK)
	if !strings.Contains(fmt.Sprint(groups["groups"]), group+"/v1") {
		t.Fatalf("/apis lacks %s: %v", group, groups)
	}
	g := must(t, call(t, e.Admin, e, "GET", "/apis/"+group, nil), http.StatusOK)
	if field(g, "preferredVersion.groupVersion") != group+"/v1" || g["kind"] != "APIGroup" {
		t.Fatalf("/apis/%s: %v", group, g)
	}
	list := must(t, call(t, e.Admin, e, "GET", "/apis/"+group+"/v1", nil), http.StatusOK)
	if !strings.Contains(fmt.Sprint(list["resources"]), "things") {
		t.Fatalf("resource list: %v", list)
	}

	// The OpenAPI root lists the group version; its document is the extension server's.
	root := must(t, call(t, e.Admin, e, "GET", "/openapi/v3", nil), http.StatusOK)
	entry, _ := field(root, "paths").(map[string]any)["apis/"+group+"/v1"].(map[string]any)
	if entry["serverRelativeURL"] != "/openapi/v3/apis/"+group+"/v1" || field(root, "paths").(map[string]any)["apis/apps/v1"] == nil {
		t.Fatalf("OpenAPI root: %v", root)
	}
	if doc := must(t, call(t, e.Admin, e, "GET", "/openapi/v3/apis/"+group+"/v1", nil), http.StatusOK); field(doc, "info.title") != group {
		t.Fatalf("OpenAPI document: %v", doc)
	}

	// /openapi/v2 merges the extension server's document (its group version's paths only).
	v2 := func() (paths, defs map[string]any) {
		doc := must(t, call(t, e.Admin, e, "GET", "/openapi/v2", nil), http.StatusOK)
		paths, _ = doc["paths"].(map[string]any)
		defs, _ = doc["definitions"].(map[string]any)
		return paths, defs
	}
	eventually(t, 30*time.Second, "the extension server's OpenAPI v2 in /openapi/v2", func() error {
		if paths, defs := v2(); paths["/apis/"+group+"/v1/namespaces/{namespace}/things/{name}"] == nil || defs["com.example.things.v1.Thing"] == nil {
			return fmt.Errorf("not merged yet")
		}
		return nil
	})
	if paths, _ := v2(); paths["/apis/other.example.com/v1/others"] != nil || paths["/apis/apps/v1/namespaces/{namespace}/deployments"] == nil {
		t.Error("/openapi/v2 has another group's path of the extension server, or lost its own")
	}

	// A request is proxied with the caller's identity (impersonated here, with extra values) in
	// the front-proxy headers and without its own credentials.
	before := len(x.headers())
	obj := must(t, call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil,
		"Impersonate-User", "jane", "Impersonate-Group", "devs", "Impersonate-Extra-Scopes", "read", "Authorization", "Bearer not-for-you"), http.StatusOK)
	if field(obj, "metadata.name") != "first" {
		t.Fatalf("proxied object: %v", obj)
	}
	h := x.headers()[before]
	if h.Get("X-Remote-User") != "jane" || strings.Join(h.Values("X-Remote-Group"), ",") != "devs,system:authenticated" ||
		h.Get("X-Remote-Extra-Scopes") != "read" || h.Get("Authorization") != "" || h.Get("Impersonate-User") != "" {
		t.Fatalf("front-proxy headers: %v", h)
	}
	// Unauthenticated callers never reach the extension server.
	before = len(x.headers())
	if r := call(t, e.Anonymous(), e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil); r.code != http.StatusUnauthorized || r.obj(t)["kind"] != "Status" {
		t.Fatalf("anonymous: %d %s", r.code, r.body)
	}
	if len(x.headers()) != before {
		t.Fatal("an unauthenticated request reached the extension server")
	}

	// A watch streams: the first event arrives before the server's second.
	req, _ := http.NewRequest("GET", e.URL+"/apis/"+group+"/v1/namespaces/default/things?watch=true", nil)
	resp, err := e.Admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	start := time.Now()
	var names []string
	for sc.Scan() {
		var ev struct {
			Object struct{ Metadata struct{ Name string } }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("watch line %s: %v", sc.Bytes(), err)
		}
		names = append(names, ev.Object.Metadata.Name)
		if len(names) == 1 && time.Since(start) > 250*time.Millisecond {
			t.Fatalf("the first event was held back %v", time.Since(start))
		}
	}
	resp.Body.Close()
	if strings.Join(names, ",") != "first,second" {
		t.Fatalf("watch events %v", names)
	}

	// The extension server stops: the APIService becomes unavailable and requests get 503.
	x.stop()
	call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil)
	waitAvailable("False/FailedDiscoveryCheck")
	if r := call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil); r.code != http.StatusServiceUnavailable || r.obj(t)["kind"] != "Status" {
		t.Fatalf("stopped extension server: %d %s", r.code, r.body)
	}
	if root := must(t, call(t, e.Admin, e, "GET", "/openapi/v3", nil), http.StatusOK); field(root, "paths").(map[string]any)["apis/"+group+"/v1"] != nil {
		t.Fatalf("the OpenAPI root lists an unavailable group version: %v", root)
	}
	eventually(t, 30*time.Second, "/openapi/v2 to drop the unavailable group version", func() error {
		if _, defs := v2(); defs["com.example.things.v1.Thing"] != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	metric := func() string {
		t.Helper()
		r := call(t, e.Admin, e, "GET", "/metrics", nil)
		var lines []string
		for _, l := range strings.Split(string(r.body), "\n") {
			if strings.HasPrefix(l, "aggregator_unavailable_apiservice") && strings.Contains(l, `"`+name+`"`) {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	if m := metric(); !strings.Contains(m, `aggregator_unavailable_apiservice{name="`+name+`"} 1`) ||
		!strings.Contains(m, `aggregator_unavailable_apiservice_total{name="`+name+`",reason="FailedDiscoveryCheck"}`) {
		t.Fatalf("metrics while unavailable:\n%s", m)
	}
	x.restart(t, serving, proxyPool)
	waitAvailable("True/Passed")
	eventually(t, 10*time.Second, "the gauge back at 0", func() error {
		if m := metric(); !strings.Contains(m, `aggregator_unavailable_apiservice{name="`+name+`"} 0`) {
			return fmt.Errorf("%s", m)
		}
		return nil
	})

	// A CA bundle that does not verify the server fails the discovery check; insecureSkipTLSVerify
	// (without a bundle) passes it.
	cur := must(t, call(t, e.Admin, e, "GET", apiservices+"/"+name, nil), http.StatusOK)
	spec := cur["spec"].(map[string]any)
	spec["caBundle"] = proxyCA.CertPEM
	must(t, call(t, e.Admin, e, "PUT", apiservices+"/"+name, cur), http.StatusOK)
	waitAvailable("False/FailedDiscoveryCheck")
	cur = must(t, call(t, e.Admin, e, "GET", apiservices+"/"+name, nil), http.StatusOK)
	spec = cur["spec"].(map[string]any)
	delete(spec, "caBundle")
	spec["insecureSkipTLSVerify"] = true
	must(t, call(t, e.Admin, e, "PUT", apiservices+"/"+name, cur), http.StatusOK)
	waitAvailable("True/Passed")

	// Endpoints without an address for the port, then no Service.
	must(t, call(t, e.Admin, e, "PUT", "/api/v1/namespaces/ext-system/endpoints/ext", map[string]any{"apiVersion": "v1", "kind": "Endpoints",
		"metadata": map[string]any{"name": "ext"}, "subsets": []any{}}), http.StatusOK)
	waitAvailable("False/MissingEndpoints")
	must(t, call(t, e.Admin, e, "DELETE", "/api/v1/namespaces/ext-system/services/ext", nil), http.StatusOK)
	waitAvailable("False/ServiceNotFound")

	// Deleting the APIService takes the group out of discovery and routing.
	must(t, call(t, e.Admin, e, "DELETE", apiservices+"/"+name, nil), http.StatusOK)
	eventually(t, 10*time.Second, "the group gone", func() error {
		if r := call(t, e.Admin, e, "GET", "/apis/"+group, nil); r.code != http.StatusNotFound {
			return fmt.Errorf("/apis/%s: %d", group, r.code)
		}
		if r := call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil); r.code != http.StatusNotFound {
			return fmt.Errorf("GET through the removed APIService: %d", r.code)
		}
		return nil
	})
}

// TestAggregatorRouting: with --enable-aggregator-routing the gateway connects to an endpoint of
// the Service, not to its cluster IP (unroutable here).
func TestAggregatorRouting(t *testing.T) {
	p := newProxyPKI(t)
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.ProxyClientCertFile, c.ProxyClientKeyFile = p.certFile, p.keyFile
		c.EnableAggregatorRouting = true
	}})
	group := "routed.example.com"
	x := startExt(t, group, p.serving, p.proxyPool)
	name := "v1." + group
	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ext-system"}}), http.StatusCreated)
	// The Service port (443) differs from the endpoint's (the server's): endpoints map by name.
	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/services", map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "ext"}, "spec": map[string]any{"clusterIP": "192.0.2.1", "ports": []any{map[string]any{"name": "https", "port": 443}}}}), http.StatusCreated)
	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/endpoints", map[string]any{"apiVersion": "v1", "kind": "Endpoints",
		"metadata": map[string]any{"name": "ext"}, "subsets": []any{map[string]any{"addresses": []any{map[string]any{"ip": "127.0.0.1"}}, "ports": []any{map[string]any{"name": "https", "port": x.port()}}}}}), http.StatusCreated)
	must(t, call(t, e.Admin, e, "POST", apiservices, map[string]any{"apiVersion": naming.Group("apiregistration.k8s.io") + "/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15, "caBundle": p.extCA.CertPEM,
			"service": map[string]any{"namespace": "ext-system", "name": "ext"}}}), http.StatusCreated)
	eventually(t, 30*time.Second, "Available", func() error {
		if got := available(t, e, name); got != "True/Passed" {
			return fmt.Errorf("Available %s", got)
		}
		return nil
	})
	if obj := must(t, call(t, e.Admin, e, "GET", "/apis/"+group+"/v1/namespaces/default/things/first", nil), http.StatusOK); field(obj, "metadata.name") != "first" {
		t.Fatalf("proxied object: %v", obj)
	}
}

// remoteVersion fetches the aggregated /apis and returns a group version's entry (nil if absent).
func remoteVersion(t *testing.T, e *gatewaytest.Env, gv schema.GroupVersion) *apidiscoveryv2.APIVersionDiscovery {
	t.Helper()
	r := call(t, e.Admin, e, "GET", "/apis", nil, "Accept", discovery.AcceptV2)
	if r.code != http.StatusOK {
		t.Fatalf("aggregated /apis: %d %s", r.code, r.body)
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	for _, g := range list.Items {
		for i, v := range g.Versions {
			if g.Name == gv.Group && v.Version == gv.Version {
				return &g.Versions[i]
			}
		}
	}
	return nil
}

// TestRemoteAggregatedDiscovery: the remote group versions join the aggregated /apis with the
// resources their extension servers list (aggregated, or the unaggregated document of an older
// server) and their freshness: Current while fetched, Stale (resources kept) while the server
// cannot be reached, Current again once it can; a removed APIService leaves.
func TestRemoteAggregatedDiscovery(t *testing.T) {
	p := newProxyPKI(t)
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) {
		c.ProxyClientCertFile, c.ProxyClientKeyFile = p.certFile, p.keyFile
	}})
	must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ext-system"}}), http.StatusCreated)
	register := func(x *extServer, svcName string) {
		t.Helper()
		must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/services", map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": svcName}, "spec": map[string]any{"clusterIP": "127.0.0.1", "ports": []any{map[string]any{"name": "https", "port": x.port()}}}}), http.StatusCreated)
		must(t, call(t, e.Admin, e, "POST", "/api/v1/namespaces/ext-system/endpoints", map[string]any{"apiVersion": "v1", "kind": "Endpoints",
			"metadata": map[string]any{"name": svcName}, "subsets": []any{map[string]any{"addresses": []any{map[string]any{"ip": "127.0.0.1"}}, "ports": []any{map[string]any{"name": "https", "port": x.port()}}}}}), http.StatusCreated)
		must(t, call(t, e.Admin, e, "POST", apiservices, map[string]any{"apiVersion": naming.Group("apiregistration.k8s.io") + "/v1", "kind": "APIService", "metadata": map[string]any{"name": "v1." + x.group},
			"spec": map[string]any{"group": x.group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15, "insecureSkipTLSVerify": true,
				"service": map[string]any{"namespace": "ext-system", "name": svcName, "port": x.port()}}}), http.StatusCreated)
	}
	current := func(gv schema.GroupVersion, subresources int) {
		t.Helper()
		eventually(t, 30*time.Second, gv.String()+" Current", func() error {
			v := remoteVersion(t, e, gv)
			if v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(v.Resources) != 1 || v.Resources[0].Resource != "things" ||
				v.Resources[0].ResponseKind.Kind != "Thing" || len(v.Resources[0].Subresources) != subresources {
				return fmt.Errorf("%+v", v)
			}
			return nil
		})
	}

	modern := startExt(t, "modern.example.com", p.serving, p.proxyPool)
	modern.aggregated = true
	older := startExt(t, "older.example.com", p.serving, p.proxyPool)
	register(modern, "modern")
	register(older, "older")
	modernGV, olderGV := schema.GroupVersion{Group: "modern.example.com", Version: "v1"}, schema.GroupVersion{Group: "older.example.com", Version: "v1"}
	current(modernGV, 1)
	current(olderGV, 0)

	// client-go reads every group, remote ones included, from the two documents.
	certPEM, keyPEM := e.ClientCert("admin", "system:masters")
	dc := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: e.URL, TLSClientConfig: rest.TLSClientConfig{CAData: e.CA.CertPEM, CertData: certPEM, KeyData: keyPEM}})
	_, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, list := range resources {
		if list.GroupVersion == modernGV.String() || list.GroupVersion == olderGV.String() {
			found++
		}
	}
	if found != 2 {
		t.Errorf("client-go found %d of the 2 remote group versions", found)
	}

	// Unreachable: Stale, the resources kept; reachable again: Current.
	modern.stop()
	eventually(t, 30*time.Second, "modern Stale", func() error {
		if v := remoteVersion(t, e, modernGV); v == nil || v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale || len(v.Resources) != 1 {
			return fmt.Errorf("%+v", v)
		}
		return nil
	})
	if _, _, err := dc.ServerGroupsAndResources(); err == nil || !discovery.IsGroupDiscoveryFailedError(err) {
		t.Errorf("client-go with a stale group version: %v", err)
	}
	modern.restart(t, p.serving, p.proxyPool)
	current(modernGV, 1)

	// A removed APIService leaves aggregated discovery.
	must(t, call(t, e.Admin, e, "DELETE", apiservices+"/v1."+older.group, nil), http.StatusOK)
	eventually(t, 10*time.Second, "older gone", func() error {
		if v := remoteVersion(t, e, olderGV); v != nil {
			return fmt.Errorf("still listed: %+v", v)
		}
		return nil
	})
}
