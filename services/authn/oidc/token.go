package oidc

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// tokenIssuer reads the "iss" claim of a compact JWT without verifying anything, to decide
// whether the token is this method's at all (upstream's hasCorrectIssuer): only tokens that claim
// our issuer are worth a signature check. ok is false for anything that is not three dot-separated
// parts with a base64url JSON object in the middle whose iss (if any) is a string. It never
// panics, whatever the input (see FuzzTokenIssuer).
func tokenIssuer(token string) (iss string, ok bool) {
	header, rest, found := strings.Cut(token, ".")
	if !found || header == "" {
		return "", false
	}
	payload, signature, found := strings.Cut(rest, ".")
	if !found || strings.Contains(signature, ".") {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return "", false
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return "", false
	}
	return claims.Issuer, true
}
