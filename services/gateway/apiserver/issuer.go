package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Service account issuer discovery, as upstream serves it: an OpenID Connect discovery document
// for the service account issuer and the key set that verifies its tokens, so systems outside the
// cluster (a cloud's identity federation, Vault) can verify service account tokens. The default
// policy lets service accounts read both (system:service-account-issuer-discovery).
const (
	issuerDiscoveryPath = "/.well-known/openid-configuration"
	issuerJWKSPath      = "/openid/v1/jwks"
)

// serveIssuerDiscovery answers /.well-known/openid-configuration.
func (a *API) serveIssuerDiscovery(w http.ResponseWriter, r *http.Request) {
	d, err := a.authn.Describe(r.Context())
	if err != nil {
		a.writeError(w, r, a.dependencyError(r.Context(), err))
		return
	}
	if d.GetServiceAccountIssuer() == "" {
		a.writeError(w, r, notFoundPath())
		return
	}
	doc := map[string]any{
		"issuer":                                d.GetServiceAccountIssuer(),
		"jwks_uri":                              strings.TrimSuffix(d.GetServiceAccountIssuer(), "/") + issuerJWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": signingAlgorithms(d.GetServiceAccountJwks()),
	}
	body, err := json.Marshal(doc)
	if err != nil {
		a.writeError(w, r, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeBody(w, r, http.StatusOK, "application/json", body)
}

// serveIssuerJWKS answers /openid/v1/jwks.
func (a *API) serveIssuerJWKS(w http.ResponseWriter, r *http.Request) {
	d, err := a.authn.Describe(r.Context())
	if err != nil {
		a.writeError(w, r, a.dependencyError(r.Context(), err))
		return
	}
	if len(d.GetServiceAccountJwks()) == 0 {
		a.writeError(w, r, notFoundPath())
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeBody(w, r, http.StatusOK, "application/jwk-set+json", d.GetServiceAccountJwks())
}

// signingAlgorithms lists the algorithms of a key set's keys, RS256 first (upstream's order).
func signingAlgorithms(jwks []byte) []string {
	var set struct {
		Keys []struct {
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	_ = json.Unmarshal(jwks, &set)
	algs := []string{}
	seen := map[string]bool{}
	for _, k := range set.Keys {
		if k.Alg != "" && !seen[k.Alg] {
			seen[k.Alg] = true
			algs = append(algs, k.Alg)
		}
	}
	return algs
}
