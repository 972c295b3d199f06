package apiserver

import (
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

// ResourcesFirst's shortcut takes only requests that the router would hand to the resource
// handler without redirecting them (for each path, the router's own match of Install's routes,
// with the escaped-path matching the gateway uses, is the reference), and it takes every
// resource URL with something after the group version.
func TestResourcesFirstMatchesRouter(t *testing.T) {
	router := mux.NewRouter()
	router.UseEncodedPath()
	(&API{}).Install(router)
	// The resource routes are the two path prefixes (their regexps are not anchored at the end).
	resourceRoute := func(r *mux.Route) bool {
		re, _ := r.GetPathRegexp()
		return !strings.HasSuffix(re, "$") && (strings.HasPrefix(re, "^/api/v1/") || strings.HasPrefix(re, "^/apis/"))
	}
	fast := map[string]bool{}
	for _, p := range []string{
		"/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/configmaps/cm1",
		"/api/v1/configmaps", "/api/v1/namespaces", "/api/v1/x/", "/api/v1/a%2Fb",
		"/apis/apps/v1/deployments", "/apis/apps/v1/namespaces/ns/deployments/d/scale",
		"/apis/example.com/v1beta1/widgets", "/apis/apps/v1/x/",
	} {
		fast[p] = true
	}
	paths := []string{
		"/api", "/api/", "/api/v1", "/api/v1/", "/apis", "/apis/", "/apis/apps", "/apis/apps/",
		"/apis/apps/v1", "/apis/apps/v1/", "/version", "/healthz", "/openapi/v3", "/",
		"/api/v1//configmaps", "/api/v1/./configmaps", "/api/v1/namespaces/../configmaps",
		"/apis//v1/x", "/apis/apps//x", "/apis/apps/v1//x", "/api/v1/x/.", "/api/v1/x/..",
		"/api/v2/configmaps", "/apiv1/configmaps", "/apisx/apps/v1/deployments",
	}
	for p := range fast {
		paths = append(paths, p)
	}
	for _, p := range paths {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			req := httptest.NewRequest(method, "https://gw"+p, nil)
			var m mux.RouteMatch
			want := false
			if router.Match(req, &m) && m.MatchErr == nil {
				want = resourceRoute(m.Route) && routerClean(req.URL.EscapedPath()) == req.URL.EscapedPath()
			}
			got := isResourcePath(req.URL.EscapedPath())
			if got && !want {
				t.Errorf("%s %s: shortcut taken, but the router would not send it to the resource handler", method, p)
			}
			if fast[p] && !got {
				t.Errorf("%s %s: a resource URL not taken by the shortcut", method, p)
			}
		}
	}
}

// routerClean is gorilla/mux's cleanPath, which the router redirects to when it differs.
func routerClean(p string) string {
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// The shortcut serves what it takes and passes everything else to the router.
func TestResourcesFirstPassesOthers(t *testing.T) {
	var routed []string
	router := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { routed = append(routed, r.URL.Path) })
	h := (&API{}).ResourcesFirst(router)
	for _, p := range []string{"/version", "/api/v1", "/apis/apps/v1/", "/api/v1//x"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "https://gw"+p, nil))
	}
	if len(routed) != 4 {
		t.Errorf("router saw %v, want all four", routed)
	}
}
