package oidc

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func jwt(header, payload, sig string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	return b64([]byte(header)) + "." + b64([]byte(payload)) + "." + sig
}

func TestTokenIssuer(t *testing.T) {
	tests := []struct {
		name   string
		token  string
		iss    string
		wantOK bool
	}{
		{"compact JWT", jwt(`{"alg":"RS256"}`, `{"iss":"https://issuer","sub":"a"}`, "c2ln"), "https://issuer", true},
		{"no iss", jwt(`{}`, `{"sub":"a"}`, ""), "", true},
		{"iss not a string", jwt(`{}`, `{"iss":42}`, ""), "", false},
		{"payload an array", jwt(`{}`, `[1]`, ""), "", false},
		{"payload not JSON", jwt(`{}`, `iss`, ""), "", false},
		{"padded base64", "e30.eyJpc3MiOiJ4In0=.", "", false},
		{"two parts (bootstrap token shape)", "abcdef.0123456789abcdef", "", false},
		{"four parts (JWE has five)", "a.b.c.d", "", false},
		{"empty header", "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"x"}`)) + ".", "", false},
		{"empty", "", "", false},
		{"dots only", "..", "", false},
	}
	for _, tc := range tests {
		iss, ok := tokenIssuer(tc.token)
		if ok != tc.wantOK || iss != tc.iss {
			t.Errorf("%s: tokenIssuer = %q, %v; want %q, %v", tc.name, iss, ok, tc.iss, tc.wantOK)
		}
	}
}

// FuzzTokenIssuer: issuer sniffing faces every bearer token any client sends. It must never panic,
// must only accept three-part tokens, and must read back the issuer of any well-formed token.
func FuzzTokenIssuer(f *testing.F) {
	f.Add("https://issuer", "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.sig")
	f.Add("", "abcdef.0123456789abcdef")
	f.Add("x\x00y", "..")
	f.Add("é", "a.b.c.d.e")
	f.Fuzz(func(t *testing.T, iss, raw string) {
		if got, ok := tokenIssuer(raw); ok {
			if strings.Count(raw, ".") != 2 {
				t.Fatalf("accepted %q with %d dots", raw, strings.Count(raw, "."))
			}
			_ = got
		}
		payload, err := json.Marshal(map[string]string{"iss": iss})
		if err != nil {
			t.Skip()
		}
		var want struct {
			Issuer string `json:"iss"`
		}
		_ = json.Unmarshal(payload, &want) // invalid UTF-8 is replaced on the way through JSON
		tok := jwt(`{"alg":"RS256"}`, string(payload), "sig")
		got, ok := tokenIssuer(tok)
		if !ok || got != want.Issuer {
			t.Fatalf("tokenIssuer(jwt with iss %q) = %q, %v", want.Issuer, got, ok)
		}
	})
}
