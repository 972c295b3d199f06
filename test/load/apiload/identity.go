package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Identities the scenarios' requests are made as (--identity). Setup and cleanup are always made
// as the kubeconfig's administrator.
const (
	// identityAdmin: the kubeconfig's client certificate (system:masters: authorized without
	// asking the authorization service).
	identityAdmin = "admin"
	// identityServiceAccount: a service account's bearer token (TokenRequest), allowed by a
	// RoleBinding in each scenario namespace, so every request is authenticated by token and
	// authorized by RBAC.
	identityServiceAccount = "serviceaccount"
	// identityUser: a client certificate of a user outside system:masters (issued by the stack's
	// CA; --start only), allowed by the same RoleBinding.
	identityUser = "user"
)

// loadUser is the user name of --identity=user.
const loadUser = "apiload-user"

// loadRole is the Role (and RoleBinding) that lets the non-admin identities do everything the
// scenarios do to the measured kind in a namespace.
const loadRole = "apiload"

// setupIdentity prepares the identity the scenarios run as: for a service account its namespace,
// the account and a token. The load client is r.load.
func (r *runner) setupIdentity(ctx context.Context, tr *http.Transport) error {
	switch r.o.identity {
	case identityAdmin:
		r.load = r.api
		return nil
	case identityUser:
		r.load = &apiClient{base: r.api.base, hc: &http.Client{Transport: tr}}
		r.subject = map[string]any{"kind": "User", "apiGroup": groups.rbac, "name": loadUser}
		return nil
	}
	ns := r.nsPrefix + "-identity"
	if err := r.api.createNamespace(ctx, ns); err != nil {
		return err
	}
	r.created = append(r.created, ns)
	var buf bytes.Buffer
	sa := []byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"apiload"}}`)
	if err := r.api.do(ctx, http.MethodPost, namespacePath(ns)+"/serviceaccounts", sa, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("creating the service account: %w", err)
	}
	tr2 := []byte(`{"apiVersion":"` + groups.authentication + `/v1","kind":"TokenRequest","spec":{"expirationSeconds":7200}}`)
	if err := r.api.do(ctx, http.MethodPost, namespacePath(ns)+"/serviceaccounts/apiload/token", tr2, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("requesting a token: %w", err)
	}
	var resp struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(buf.Bytes(), &resp); err != nil || resp.Status.Token == "" {
		return fmt.Errorf("the TokenRequest answer has no token (%v)", err)
	}
	r.load = &apiClient{base: r.api.base, hc: &http.Client{Transport: bearer{token: resp.Status.Token, next: tr}}}
	r.subject = map[string]any{"kind": "ServiceAccount", "name": "apiload", "namespace": ns}
	return nil
}

// grant lets the non-admin identity work in ns (a Role on the measured kind and a RoleBinding),
// and waits until the authorization service enforces it.
func (r *runner) grant(ctx context.Context, ns string) error {
	if r.subject == nil {
		return nil
	}
	group, resource := "", r.o.kind.resource
	if r.o.kind != configMapKind {
		group = customGroup
	}
	role, _ := json.Marshal(map[string]any{"apiVersion": groups.rbac + "/v1", "kind": "Role", "metadata": map[string]any{"name": loadRole},
		"rules": []any{map[string]any{"apiGroups": []string{group}, "resources": []string{resource}, "verbs": []string{"*"}}}})
	binding, _ := json.Marshal(map[string]any{"apiVersion": groups.rbac + "/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": loadRole},
		"roleRef": map[string]any{"apiGroup": groups.rbac, "kind": "Role", "name": loadRole}, "subjects": []any{r.subject}})
	var buf bytes.Buffer
	base := "/apis/" + groups.rbac + "/v1/namespaces/" + ns
	if err := r.api.do(ctx, http.MethodPost, base+"/roles", role, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("granting the %s identity: %w", r.o.identity, err)
	}
	if err := r.api.do(ctx, http.MethodPost, base+"/rolebindings", binding, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("granting the %s identity: %w", r.o.identity, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := r.load.do(ctx, http.MethodGet, r.o.kind.collectionPath(ns)+"?limit=1", nil, http.StatusOK, &buf)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "403") {
			return fmt.Errorf("the %s identity cannot work in %s: %w", r.o.identity, ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}
