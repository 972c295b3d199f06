package oidc_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"platform.io/libs/oidctest"
	"platform.io/libs/pki"
	"platform.io/services/authn/authenticator"
	"platform.io/services/authn/oidc"
)

const clientID = "platform"

func startIssuer(t testing.TB, opts oidctest.Options) *oidctest.Issuer {
	t.Helper()
	iss, err := oidctest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iss.Stop)
	return iss
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// newAuthenticator starts the method against iss and, unless the issuer is deferred, waits until
// it has discovered the issuer.
func newAuthenticator(t testing.TB, iss *oidctest.Issuer, cfg oidc.Config, wait bool) *oidc.Authenticator {
	t.Helper()
	if cfg.IssuerURL == "" {
		cfg.IssuerURL = iss.URL()
	}
	if cfg.ClientID == "" {
		cfg.ClientID = clientID
	}
	if cfg.CAFile == "" {
		cfg.CAFile = iss.CAFile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := oidc.New(ctx, cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if wait {
		waitReady(t, a)
	}
	return a
}

func waitReady(t testing.TB, a *oidc.Authenticator) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !a.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("the authenticator did not discover the issuer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func authn(a *oidc.Authenticator, token string, audiences ...string) (*authenticator.Response, error) {
	return a.Authenticate(context.Background(), &authenticator.Request{Token: token, Audiences: audiences})
}

// with returns claims plus the changes (a nil value deletes the claim).
func with(claims map[string]any, changes map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func TestClaims(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{})
	base := iss.Claims(clientID, "alice", time.Hour)
	type want struct {
		name   string
		groups []string
		errHas string
	}
	tests := []struct {
		name   string
		rule   string
		cfg    oidc.Config
		claims map[string]any
		want   want
	}{
		{name: "good token", rule: "--oidc-username-claim defaults to sub, prefixed with <issuer>#",
			claims: base, want: want{name: iss.URL() + "#alice"}},
		{name: "no prefix", rule: "--oidc-username-prefix=- disables prefixing",
			cfg: oidc.Config{UsernamePrefix: "-"}, claims: base, want: want{name: "alice"}},
		{name: "custom prefix", rule: "--oidc-username-prefix is prepended",
			cfg: oidc.Config{UsernamePrefix: "oidc:"}, claims: base, want: want{name: "oidc:alice"}},
		{name: "email claim", rule: "the email claim is not prefixed by default",
			cfg: oidc.Config{UsernameClaim: "email"}, claims: with(base, map[string]any{"email": "a@example.com"}), want: want{name: "a@example.com"}},
		{name: "email verified", rule: "email_verified true is accepted",
			cfg: oidc.Config{UsernameClaim: "email"}, claims: with(base, map[string]any{"email": "a@example.com", "email_verified": true}), want: want{name: "a@example.com"}},
		{name: "email not verified", rule: "email_verified false refuses an email username",
			cfg: oidc.Config{UsernameClaim: "email"}, claims: with(base, map[string]any{"email": "a@example.com", "email_verified": false}), want: want{errHas: "oidc: email not verified"}},
		{name: "email_verified not a bool", rule: "email_verified must be a boolean",
			cfg: oidc.Config{UsernameClaim: "email"}, claims: with(base, map[string]any{"email": "a@example.com", "email_verified": "yes"}), want: want{errHas: "oidc: parse 'email_verified' claim"}},
		{name: "email_verified ignored for sub", rule: "email_verified only matters when the username claim is email",
			cfg: oidc.Config{UsernamePrefix: "-"}, claims: with(base, map[string]any{"email_verified": false}), want: want{name: "alice"}},
		{name: "email claim with prefix", rule: "an explicit prefix applies to email too",
			cfg: oidc.Config{UsernameClaim: "email", UsernamePrefix: "corp:"}, claims: with(base, map[string]any{"email": "a@example.com"}), want: want{name: "corp:a@example.com"}},
		{name: "username claim missing", rule: "the username claim must be present",
			cfg: oidc.Config{UsernameClaim: "preferred_username"}, claims: base, want: want{errHas: `oidc: parse username claims "preferred_username": claim not present`}},
		{name: "username claim not a string", rule: "the username claim must be a string",
			cfg: oidc.Config{UsernameClaim: "uid"}, claims: with(base, map[string]any{"uid": 42}), want: want{errHas: `oidc: parse username claims "uid"`}},
		{name: "username claim empty", rule: "an empty user name is refused",
			claims: with(base, map[string]any{"sub": ""}), want: want{errHas: "the claim is empty"}},
		{name: "groups array", rule: "--oidc-groups-claim: an array of strings",
			cfg: oidc.Config{UsernamePrefix: "-", GroupsClaim: "groups"}, claims: with(base, map[string]any{"groups": []string{"dev", "ops"}}), want: want{name: "alice", groups: []string{"dev", "ops"}}},
		{name: "groups single string", rule: "--oidc-groups-claim: a single string is one group (as upstream accepts)",
			cfg: oidc.Config{UsernamePrefix: "-", GroupsClaim: "groups"}, claims: with(base, map[string]any{"groups": "dev"}), want: want{name: "alice", groups: []string{"dev"}}},
		{name: "groups prefix", rule: "--oidc-groups-prefix is prepended to each group",
			cfg: oidc.Config{UsernamePrefix: "-", GroupsClaim: "groups", GroupsPrefix: "oidc:"}, claims: with(base, map[string]any{"groups": []string{"dev", "ops"}}), want: want{name: "alice", groups: []string{"oidc:dev", "oidc:ops"}}},
		{name: "groups missing", rule: "an absent groups claim means no groups",
			cfg: oidc.Config{UsernamePrefix: "-", GroupsClaim: "groups"}, claims: base, want: want{name: "alice"}},
		{name: "groups null", rule: "a null groups claim means no groups",
			cfg: oidc.Config{UsernamePrefix: "-", GroupsClaim: "groups"}, claims: with(base, map[string]any{"groups": json.RawMessage("null")}), want: want{name: "alice"}},
		{name: "groups wrong type", rule: "a groups claim that is neither a string nor strings is an error",
			cfg: oidc.Config{GroupsClaim: "groups"}, claims: with(base, map[string]any{"groups": []int{1, 2}}), want: want{errHas: `oidc: parse groups claim "groups"`}},
		{name: "required claim present", rule: "--oidc-required-claim key=value must match",
			cfg: oidc.Config{UsernamePrefix: "-", RequiredClaims: map[string]string{"hd": "example.com"}}, claims: with(base, map[string]any{"hd": "example.com"}), want: want{name: "alice"}},
		{name: "required claim missing", rule: "--oidc-required-claim: the claim must be present",
			cfg: oidc.Config{RequiredClaims: map[string]string{"hd": "example.com"}}, claims: base, want: want{errHas: "oidc: required claim hd not present in ID token"}},
		{name: "required claim differs", rule: "--oidc-required-claim: the value must be equal",
			cfg: oidc.Config{RequiredClaims: map[string]string{"hd": "example.com"}}, claims: with(base, map[string]any{"hd": "evil.com"}), want: want{errHas: "oidc: required claim hd value does not match. Got = evil.com, want = example.com"}},
		{name: "required claim not a string", rule: "--oidc-required-claim: only string values match",
			cfg: oidc.Config{RequiredClaims: map[string]string{"level": "3"}}, claims: with(base, map[string]any{"level": 3}), want: want{errHas: "oidc: parse claim level"}},
		{name: "wrong audience", rule: "the audience must contain the client id",
			claims: with(base, map[string]any{"aud": "someone-else"}), want: want{errHas: `oidc: verify token: oidc: expected audience "platform"`}},
		{name: "audience list", rule: "an audience list containing the client id is accepted",
			cfg: oidc.Config{UsernamePrefix: "-"}, claims: with(base, map[string]any{"aud": []string{"other", clientID}}), want: want{name: "alice"}},
		{name: "expired", rule: "expired tokens are refused",
			claims: with(base, map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}), want: want{errHas: "oidc: token is expired"}},
		{name: "no expiry", rule: "a token without exp is refused",
			claims: with(base, map[string]any{"exp": nil}), want: want{errHas: "oidc: token is expired"}},
		{name: "not yet valid", rule: "nbf beyond the 5 minute leeway is refused",
			claims: with(base, map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}), want: want{errHas: "before the nbf"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuthenticator(t, iss, tc.cfg, true)
			resp, err := authn(a, iss.Token(tc.claims))
			if tc.want.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.errHas) {
					t.Fatalf("%s: resp %+v err %v, want an error containing %q", tc.rule, resp, err, tc.want.errHas)
				}
				if errors.Is(err, authenticator.ErrNotMine) || authenticator.IsUnavailable(err) {
					t.Errorf("%s: a token of our issuer is refused, not passed on or unavailable: %v", tc.rule, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.rule, err)
			}
			if resp.User.Name != tc.want.name || !slices.Equal(resp.User.Groups, tc.want.groups) {
				t.Errorf("%s: user %+v, want name %q groups %q", tc.rule, resp.User, tc.want.name, tc.want.groups)
			}
		})
	}
}

func TestNotMine(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{})
	other := startIssuer(t, oidctest.Options{})
	a := newAuthenticator(t, iss, oidc.Config{APIAudiences: []string{"api"}}, true)
	good := iss.Token(iss.Claims(clientID, "alice", time.Hour))
	for name, tok := range map[string]string{
		"empty":            "",
		"another issuer":   other.Token(other.Claims(clientID, "alice", time.Hour)),
		"not a JWT":        "abcdef.0123456789abcdef",
		"opaque":           "31ada4fd-adec-460c-809a-9e56ceb75269",
		"four parts":       good + ".x",
		"payload not JSON": "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte("not json")) + ".sig",
		"iss not a string": "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":1}`)) + ".sig",
	} {
		if _, err := authn(a, tok); !errors.Is(err, authenticator.ErrNotMine) {
			t.Errorf("%s: err %v, want ErrNotMine", name, err)
		}
	}
	// Audiences: an OIDC token is good for the API server only.
	if _, err := authn(a, good, "vault"); !errors.Is(err, authenticator.ErrNotMine) {
		t.Errorf("audience not the API server's: err %v, want ErrNotMine", err)
	}
	resp, err := authn(a, good, "vault", "api")
	if err != nil || !slices.Equal(resp.Audiences, []string{"api"}) {
		t.Errorf("audiences [vault api]: resp %+v err %v, want audiences [api]", resp, err)
	}
	resp, err = authn(a, good)
	if err != nil || !slices.Equal(resp.Audiences, []string{"api"}) {
		t.Errorf("no audiences asked: resp %+v err %v, want the API audiences", resp, err)
	}
}

// The issuer may start after us: its tokens are refused (as unavailable, never accepted or
// anonymous) until discovery, retried in the background, succeeds.
func TestIssuerStartsLater(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{Deferred: true})
	a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-"}, false)
	tok := iss.Token(iss.Claims(clientID, "alice", time.Hour))
	resp, err := authn(a, tok)
	if resp != nil || !authenticator.IsUnavailable(err) || !strings.Contains(err.Error(), "oidc: authenticator not initialized") {
		t.Fatalf("before the issuer serves: resp %+v err %v, want unavailable 'oidc: authenticator not initialized'", resp, err)
	}
	time.Sleep(600 * time.Millisecond) // a few failed attempts
	if a.Ready() {
		t.Fatal("ready before the issuer serves")
	}
	if err := iss.Serve(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, a)
	resp, err = authn(a, tok)
	if err != nil || resp.User.Name != "alice" {
		t.Fatalf("after the issuer started: resp %+v err %v", resp, err)
	}
	if iss.DiscoveryFetches() != 1 || iss.JWKSFetches() != 1 {
		t.Errorf("discovery %d and JWKS %d fetches, want 1 and 1", iss.DiscoveryFetches(), iss.JWKSFetches())
	}
}

func TestDiscoveryFailures(t *testing.T) {
	t.Run("issuer mismatch", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{AdvertisedIssuer: "https://elsewhere.example"})
		a := newAuthenticator(t, iss, oidc.Config{}, false)
		for deadline := time.Now().Add(10 * time.Second); iss.DiscoveryFetches() < 3; {
			if time.Now().After(deadline) {
				t.Fatalf("discovery fetched %d times, want retries", iss.DiscoveryFetches())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if a.Ready() {
			t.Fatal("a discovery document naming another issuer was accepted")
		}
		if _, err := authn(a, iss.Token(iss.Claims(clientID, "a", time.Hour))); !authenticator.IsUnavailable(err) {
			t.Errorf("err %v, want unavailable", err)
		}
	})
	t.Run("certificate for another host", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{CertificateHosts: []string{"issuer.example"}})
		a := newAuthenticator(t, iss, oidc.Config{}, false)
		time.Sleep(500 * time.Millisecond)
		if a.Ready() || iss.DiscoveryFetches() != 0 {
			t.Fatalf("ready %v after %d discovery fetches from a certificate not valid for %s", a.Ready(), iss.DiscoveryFetches(), iss.URL())
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{})
		other, err := pki.NewCA("other", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		caFile := filepath.Join(t.TempDir(), "ca.crt")
		if err := os.WriteFile(caFile, other.CertPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		a := newAuthenticator(t, iss, oidc.Config{CAFile: caFile}, false)
		time.Sleep(500 * time.Millisecond)
		if a.Ready() || iss.DiscoveryFetches() != 0 {
			t.Fatalf("ready %v after %d discovery fetches through an untrusted certificate", a.Ready(), iss.DiscoveryFetches())
		}
	})
}

// Once the keys are known, verifying tokens never contacts the provider: not for good tokens, not
// for forged signatures under a known key id, and for unknown key ids at most once per refresh
// interval.
func TestNoPerRequestContact(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{})
	a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-", KeysRefreshInterval: time.Hour}, true)
	d0, j0 := iss.DiscoveryFetches(), iss.JWKSFetches()
	for i := range 50 {
		if _, err := authn(a, iss.Token(iss.Claims(clientID, fmt.Sprint("user", i), time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	forger, err := oidctest.NewKey(oidctest.RS256, iss.CurrentKey().ID)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := oidctest.NewKey(oidctest.RS256, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, err := authn(a, iss.TokenWithKey(forger, iss.Claims(clientID, "mallory", time.Hour)))
		if err == nil || !strings.Contains(err.Error(), "signature does not verify") {
			t.Fatalf("forged signature under the issuer's key id: err %v", err)
		}
		_, err = authn(a, iss.TokenWithKey(stranger, iss.Claims(clientID, "mallory", time.Hour)))
		if err == nil || !strings.Contains(err.Error(), "no key with id") {
			t.Fatalf("unknown key id: err %v", err)
		}
	}
	if d, j := iss.DiscoveryFetches()-d0, iss.JWKSFetches()-j0; d != 0 || j != 0 {
		t.Errorf("verification contacted the provider: %d discovery and %d JWKS fetches", d, j)
	}
	if a.KeyFetches() != 1 {
		t.Errorf("the authenticator counts %d key fetches, want 1 (at discovery)", a.KeyFetches())
	}
}

// Rotation: a token naming a key id the cached set lacks makes the set be fetched again (at most
// once per interval), after which the new key verifies and a dropped one no longer does.
func TestKeyRotation(t *testing.T) {
	const interval = time.Second
	iss := startIssuer(t, oidctest.Options{})
	a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-", KeysRefreshInterval: interval}, true)
	readyAt := time.Now() // the last key fetch happened before this
	oldKey := iss.CurrentKey()
	oldToken := iss.Token(iss.Claims(clientID, "old", time.Hour))
	if _, err := authn(a, oldToken); err != nil {
		t.Fatal(err)
	}
	if err := iss.RotateKey(); err != nil {
		t.Fatal(err)
	}
	newToken := iss.Token(iss.Claims(clientID, "new", time.Hour))
	j0 := iss.JWKSFetches()
	// Within the interval of the last fetch: refused without asking (checked only if this
	// machine got here well within the interval).
	if time.Since(readyAt) < interval*8/10 {
		if _, err := authn(a, newToken); err == nil || !strings.Contains(err.Error(), "no key with id") {
			t.Fatalf("new key within the refresh interval: err %v", err)
		}
		if iss.JWKSFetches() != j0 {
			t.Fatal("fetched keys within the refresh interval")
		}
	} else {
		t.Logf("slow machine: %v since the last fetch, not checking the refresh bound", time.Since(readyAt))
	}
	time.Sleep(time.Until(readyAt.Add(interval + 50*time.Millisecond)))
	resp, err := authn(a, newToken)
	if err != nil || resp.User.Name != "new" {
		t.Fatalf("after rotation: resp %+v err %v", resp, err)
	}
	if iss.JWKSFetches() != j0+1 {
		t.Errorf("JWKS fetches %d, want %d (one refresh for the unknown key id)", iss.JWKSFetches(), j0+1)
	}
	// The old key was dropped by the issuer: its tokens no longer verify, and asking again about
	// its id is bounded too.
	if _, err := authn(a, oldToken); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no key with id %q", oldKey.ID)) {
		t.Errorf("token of the dropped key: err %v", err)
	}
	for range 10 {
		_, _ = authn(a, oldToken)
	}
	if iss.JWKSFetches() > j0+2 {
		t.Errorf("JWKS fetches %d: unknown key ids drove more than one fetch per interval", iss.JWKSFetches()-j0)
	}

	t.Run("old keys kept", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{KeepOldKeys: true})
		a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-", KeysRefreshInterval: time.Millisecond}, true)
		oldToken := iss.Token(iss.Claims(clientID, "old", time.Hour))
		if err := iss.RotateKey(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		for _, tok := range []string{iss.Token(iss.Claims(clientID, "new", time.Hour)), oldToken} {
			if _, err := authn(a, tok); err != nil {
				t.Errorf("with the old key kept: %v", err)
			}
		}
	})
	t.Run("issuer down at refresh", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{})
		a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-", KeysRefreshInterval: time.Millisecond}, true)
		good := iss.Token(iss.Claims(clientID, "alice", time.Hour))
		if err := iss.RotateKey(); err != nil {
			t.Fatal(err)
		}
		rotated := iss.Token(iss.Claims(clientID, "bob", time.Hour))
		iss.Stop()
		time.Sleep(5 * time.Millisecond)
		// Known keys keep working without the issuer.
		if _, err := authn(a, good); err != nil {
			t.Errorf("cached key with the issuer down: %v", err)
		}
		// A key that cannot be fetched: no decision is possible.
		if _, err := authn(a, rotated); !authenticator.IsUnavailable(err) {
			t.Errorf("unknown key with the issuer down: err %v, want unavailable", err)
		}
	})
}

func TestAlgorithms(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{})
	a := newAuthenticator(t, iss, oidc.Config{}, true)
	claims := iss.Claims(clientID, "mallory", time.Hour)
	payload, _ := json.Marshal(claims)
	b64 := base64.RawURLEncoding.EncodeToString

	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64(payload) + "."
	hmacSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("a shared secret that anyone could know")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hsJWS, err := hmacSigner.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	hs256, _ := hsJWS.CompactSerialize()
	es, err := oidctest.NewKey(oidctest.ES256, iss.CurrentKey().ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"alg none":                          none,
		"HS256":                             hs256,
		"ES256 when only RS256 is accepted": iss.TokenWithKey(es, claims),
	} {
		resp, err := authn(a, tok)
		if resp != nil || err == nil || !strings.Contains(err.Error(), "unexpected signature algorithm") {
			t.Errorf("%s: resp %+v err %v, want refused for its algorithm", name, resp, err)
		}
	}

	t.Run("ES256 issuer", func(t *testing.T) {
		iss := startIssuer(t, oidctest.Options{Algorithm: oidctest.ES256})
		a := newAuthenticator(t, iss, oidc.Config{UsernamePrefix: "-", SigningAlgs: []string{"ES256"}}, true)
		resp, err := authn(a, iss.Token(iss.Claims(clientID, "eve", time.Hour)))
		if err != nil || resp.User.Name != "eve" {
			t.Errorf("resp %+v err %v", resp, err)
		}
	})
}

// Malformed, truncated and oversized tokens are refused or not this method's, never a panic.
func TestBadTokens(t *testing.T) {
	iss := startIssuer(t, oidctest.Options{})
	a := newAuthenticator(t, iss, oidc.Config{}, true)
	good := iss.Token(iss.Claims(clientID, "alice", time.Hour))
	parts := strings.Split(good, ".")
	big := iss.Token(with(iss.Claims(clientID, "alice", time.Hour), map[string]any{"pad": strings.Repeat("x", 1<<20)}))
	tests := map[string]string{
		"truncated signature":  good[:len(good)-10],
		"no signature":         parts[0] + "." + parts[1] + ".",
		"tampered payload":     parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+iss.URL()+`","sub":"root","aud":"platform","exp":9999999999}`)) + "." + parts[2],
		"header not JSON":      base64.RawURLEncoding.EncodeToString([]byte("{")) + "." + parts[1] + "." + parts[2],
		"signature not base64": parts[0] + "." + parts[1] + ".!!!",
		"whitespace":           parts[0] + ". " + parts[1] + "." + parts[2],
	}
	for name, tok := range tests {
		resp, err := authn(a, tok)
		if resp != nil || err == nil {
			t.Errorf("%s: resp %+v err %v, want a refusal", name, resp, err)
		}
	}
	// Oversized but genuine: verifies (the size is the transport's business).
	if resp, err := authn(a, big); err != nil || resp == nil {
		t.Errorf("1 MiB token: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg    oidc.Config
		errHas string
	}{
		{oidc.Config{ClientID: "x"}, "--oidc-issuer-url is required"},
		{oidc.Config{IssuerURL: "http://issuer", ClientID: "x"}, "must be an https URL"},
		{oidc.Config{IssuerURL: "https://issuer?x=1", ClientID: "x"}, "must not contain a query"},
		{oidc.Config{IssuerURL: "https://issuer#frag", ClientID: "x"}, "must not contain a fragment"},
		{oidc.Config{IssuerURL: "https://u:p@issuer", ClientID: "x"}, "must not contain a username or password"},
		{oidc.Config{IssuerURL: "https://issuer"}, "--oidc-client-id is required"},
		{oidc.Config{IssuerURL: "https://issuer", ClientID: "x", SigningAlgs: []string{"HS256"}}, `unsupported signing alg "HS256"`},
		{oidc.Config{IssuerURL: "https://issuer", ClientID: "x", SigningAlgs: []string{"none"}}, `unsupported signing alg "none"`},
	}
	for _, tc := range tests {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.errHas)
		}
	}
	if err := (oidc.Config{IssuerURL: "https://issuer/path", ClientID: "x", SigningAlgs: []string{"RS256", "ES256"}}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	claims, err := oidc.ParseRequiredClaims([]string{"hd=example.com", "expr=a=b"})
	if err != nil || claims["hd"] != "example.com" || claims["expr"] != "a=b" {
		t.Errorf("ParseRequiredClaims: %v %v", claims, err)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := oidc.ParseRequiredClaims([]string{bad}); err == nil {
			t.Errorf("ParseRequiredClaims(%q) accepted", bad)
		}
	}
}
