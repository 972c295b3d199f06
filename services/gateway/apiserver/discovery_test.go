package apiserver_test

import (
	"net/http"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

func find(list []any, key, value string) map[string]any {
	for _, x := range list {
		if m := x.(map[string]any); m[key] == value {
			return m
		}
	}
	return nil
}

// Spec "API groups": discovery documents kubectl reads, and /version.
func TestDiscovery(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	api := must(t, do(t, e, "GET", "/api", nil), http.StatusOK)
	if api["kind"] != "APIVersions" || api["versions"].([]any)[0] != "v1" {
		t.Errorf("/api = %v", api)
	}
	groups := must(t, do(t, e, "GET", "/apis", nil), http.StatusOK)
	for _, g := range []string{"apps", "batch", "rbac.authorization.platform.io", "apiextensions.platform.io", "events.platform.io", "flowcontrol.apiserver.platform.io"} {
		if find(groups["groups"].([]any), "name", g) == nil {
			t.Errorf("/apis lacks %s", g)
		}
	}
	if find(groups["groups"].([]any), "name", "rbac.authorization.k8s.io") != nil {
		t.Error("/apis serves an upstream group name")
	}
	apps := must(t, do(t, e, "GET", "/apis/apps", nil), http.StatusOK)
	if path(apps, "preferredVersion.groupVersion") != "apps/v1" {
		t.Errorf("/apis/apps = %v", apps)
	}
	core := must(t, do(t, e, "GET", "/api/v1", nil), http.StatusOK)
	pods := find(core["resources"].([]any), "name", "pods")
	if pods == nil || pods["kind"] != "Pod" || pods["namespaced"] != true || pods["shortNames"].([]any)[0] != "po" || find(core["resources"].([]any), "name", "pods/status") == nil {
		t.Errorf("/api/v1 pods: %v", pods)
	}
	if ns := find(core["resources"].([]any), "name", "namespaces"); ns == nil || ns["namespaced"] != false {
		t.Errorf("/api/v1 namespaces: %v", ns)
	}
	deps := must(t, do(t, e, "GET", "/apis/apps/v1", nil), http.StatusOK)
	if d := find(deps["resources"].([]any), "name", "deployments"); d == nil || len(d["categories"].([]any)) == 0 {
		t.Errorf("deployments: %v", d)
	}
	v := must(t, do(t, e, "GET", "/version", nil), http.StatusOK)
	if v["major"] != "1" || v["gitVersion"] == "" {
		t.Errorf("/version = %v", v)
	}
	do(t, e, "GET", "/apis/nosuch.io", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "GET", "/apis/apps/v2", nil).status(t, http.StatusNotFound, "NotFound")
	do(t, e, "GET", "/nothing/here", nil).status(t, http.StatusNotFound, "NotFound")
}

// Identity: client certificates signed by the cluster CA; no certificate is 401 (anonymous
// requests off); impersonation.
func TestIdentity(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	call(t, e.Anonymous(), e, "GET", cms, nil).status(t, http.StatusUnauthorized, "Unauthorized")
	call(t, e.Anonymous(), e, "GET", "/api", nil).status(t, http.StatusUnauthorized, "Unauthorized")
	// With anonymous requests off, health is no exception (upstream authenticates every path;
	// with them on, system:public-info-viewer opens it: services/gateway/server TestHealthEndpoints).
	call(t, e.Anonymous(), e, "GET", "/livez", nil).status(t, http.StatusUnauthorized, "Unauthorized")
	if r := call(t, e.Client("jane"), e, "GET", "/livez", nil); r.code != http.StatusOK {
		t.Errorf("authenticated /livez: %d", r.code)
	}
	const ssr = "/apis/authentication.platform.io/v1/selfsubjectreviews"
	who := must(t, call(t, e.Client("jane", "dev", "ops"), e, "POST", ssr, `{}`), http.StatusCreated)
	if path(who, "status.userInfo.username") != "jane" {
		t.Errorf("whoami: %v", who["status"])
	}
	groups := path(who, "status.userInfo.groups").([]any)
	if len(groups) != 3 || groups[0] != "dev" || groups[1] != "ops" || groups[2] != "system:authenticated" {
		t.Errorf("groups %v", groups)
	}
	as := must(t, do(t, e, "POST", ssr, `{}`, "Impersonate-User", "bob", "Impersonate-Group", "qa"), http.StatusCreated)
	if path(as, "status.userInfo.username") != "bob" || path(as, "status.userInfo.groups").([]any)[0] != "qa" {
		t.Errorf("impersonated whoami: %v", as["status"])
	}
	do(t, e, "POST", ssr, `{}`, "Impersonate-Group", "qa").status(t, http.StatusBadRequest, "BadRequest")
	sar := must(t, do(t, e, "POST", "/apis/authorization.platform.io/v1/selfsubjectaccessreviews",
		`{"spec":{"resourceAttributes":{"verb":"get","resource":"pods","namespace":"default"}}}`), http.StatusCreated)
	if path(sar, "status.allowed") != true {
		t.Errorf("access review: %v", sar["status"])
	}
	do(t, e, "GET", "/apis/authentication.platform.io/v1/selfsubjectreviews", nil).status(t, http.StatusMethodNotAllowed, "MethodNotAllowed")
}
