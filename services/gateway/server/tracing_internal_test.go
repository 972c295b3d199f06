package server

import "testing"

// Span names and http.route keep the group, version, resource and subresource, never names.
func TestRouteOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/configmaps":              "/api/v1/namespaces/{namespace}/configmaps",
		"/api/v1/namespaces/default/configmaps/cm1":          "/api/v1/namespaces/{namespace}/configmaps/{name}",
		"/apis/apps/v1/namespaces/ns/deployments/d/scale":    "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
		"/apis/apps/v1/deployments":                          "/apis/apps/v1/deployments",
		"/api/v1/namespaces":                                 "/api/v1/namespaces",
		"/api/v1/namespaces/ns1":                             "/api/v1/namespaces/{name}",
		"/api/v1/namespaces/ns1/status":                      "/api/v1/namespaces/{name}/status",
		"/api/v1/namespaces/ns1/finalize":                    "/api/v1/namespaces/{name}/finalize",
		"/api/v1/nodes/n1/status":                            "/api/v1/nodes/{name}/status",
		"/api/v1/watch/namespaces/ns/pods":                   "/api/v1/watch/namespaces/{namespace}/pods",
		"/api/v1/watch/namespaces/ns/pods/p":                 "/api/v1/watch/namespaces/{namespace}/pods/{name}",
		"/api/v1":                                            "/api/v1",
		"/api":                                               "/api",
		"/apis":                                              "/apis",
		"/apis/apps":                                         "/apis/apps",
		"/apis/apps/v1":                                      "/apis/apps/v1",
		"/apis/example.com/v1/namespaces/x/widgets/w/status": "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status",
		"/readyz":                  "/readyz",
		"/openapi/v3/apis/apps/v1": "/openapi/v3/apis",
		"/":                        "/",
	} {
		if got := routeOf(path); got != want {
			t.Errorf("routeOf(%q) = %q, want %q", path, got, want)
		}
	}
}
