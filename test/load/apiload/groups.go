package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// The built-in API groups the setup uses have two spellings (libs/naming): upstream's
// (authentication.k8s.io, ...), which upstream and Platform in its kubernetes naming profile
// serve, and Platform's (authentication.platform.io, ...), which its platform profile serves.
// The tool asks the server which it serves (GET /apis) rather than being told, so that it loads
// any of them as it is.
const (
	upstreamGroupSuffix = ".k8s.io"
	platformGroupSuffix = ".platform.io"
)

// apiGroups are the names the server serves the setup's built-in groups under.
type apiGroups struct {
	authentication        string // TokenRequest (--identity=serviceaccount)
	rbac                  string // Role and RoleBinding (non-admin identities)
	apiextensions         string // CustomResourceDefinition (--kind=custom)
	admissionregistration string // ValidatingWebhookConfiguration (--webhook=noop)
}

// The names the setup requests use: measure sets them from the server's discovery (useGroups)
// before the first setup request. They are package variables, not runner fields, because the
// runner's cleanup (scenarios.go) names crdsPath.
var (
	groups apiGroups
	// crdsPath is where CustomResourceDefinitions are served.
	crdsPath string
	// webhookConfigurations is where apiload registers its webhook.
	webhookConfigurations string
)

// useGroups makes the setup requests name the groups g.
func useGroups(g apiGroups) {
	groups = g
	crdsPath = "/apis/" + g.apiextensions + "/v1/customresourcedefinitions"
	webhookConfigurations = "/apis/" + g.admissionregistration + "/v1/validatingwebhookconfigurations"
}

// discoverGroups reads the server's group list and resolves the setup's groups in it.
func (a *apiClient) discoverGroups(ctx context.Context) (apiGroups, error) {
	var buf bytes.Buffer
	if err := a.do(ctx, http.MethodGet, "/apis", nil, http.StatusOK, &buf); err != nil {
		return apiGroups{}, fmt.Errorf("discovering the server's API groups: %w", err)
	}
	g, err := resolveGroups(buf.Bytes())
	if err != nil {
		return apiGroups{}, fmt.Errorf("discovering the server's API groups: GET /apis: %w", err)
	}
	return g, nil
}

// resolveGroups names each of the setup's groups as the APIGroupList list serves it: upstream's
// name if it is listed, else Platform's if that is. A group listed under neither keeps upstream's
// name (the server may not serve it; only the runs that need it fail, with a 404 naming it).
func resolveGroups(list []byte) (apiGroups, error) {
	var l struct {
		Kind   string `json:"kind"`
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(list, &l); err != nil {
		return apiGroups{}, err
	}
	if l.Kind != "APIGroupList" {
		return apiGroups{}, fmt.Errorf("an answer of kind %q, not APIGroupList", l.Kind)
	}
	if len(l.Groups) == 0 {
		return apiGroups{}, errors.New("the server lists no API group")
	}
	served := map[string]bool{}
	for _, g := range l.Groups {
		served[g.Name] = true
	}
	name := func(base string) string {
		if !served[base+upstreamGroupSuffix] && served[base+platformGroupSuffix] {
			return base + platformGroupSuffix
		}
		return base + upstreamGroupSuffix
	}
	return apiGroups{
		authentication:        name("authentication"),
		rbac:                  name("rbac.authorization"),
		apiextensions:         name("apiextensions"),
		admissionregistration: name("admissionregistration"),
	}, nil
}
