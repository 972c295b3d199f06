package naming

import "testing"

func TestGroup(t *testing.T) {
	for upstream, want := range map[string]string{
		"":                             "",
		"apps":                         "apps",
		"batch":                        "batch",
		"rbac.authorization.k8s.io":    "rbac.authorization.platform.io",
		"flowcontrol.apiserver.k8s.io": "flowcontrol.apiserver.platform.io",
		"example.com":                  "example.com",
		"notk8s.io":                    "notk8s.io",
	} {
		if got := Group(upstream); got != want {
			t.Errorf("Group(%q) = %q, want %q", upstream, got, want)
		}
	}
}
