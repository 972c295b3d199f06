package oidctest_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"platform.io/libs/oidctest"
)

func client(t *testing.T, iss *oidctest.Issuer) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(iss.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func jwks(t *testing.T, c *http.Client, iss *oidctest.Issuer) jose.JSONWebKeySet {
	var set jose.JSONWebKeySet
	getJSON(t, c, iss.URL()+oidctest.JWKSPath, &set)
	return set
}

// The issuer serves discovery and keys over TLS verified by its CA file, and its tokens verify
// with the published key (and only it).
func TestIssuer(t *testing.T) {
	for _, alg := range []string{oidctest.RS256, oidctest.ES256} {
		t.Run(alg, func(t *testing.T) {
			iss, err := oidctest.Start(oidctest.Options{Algorithm: alg})
			if err != nil {
				t.Fatal(err)
			}
			defer iss.Stop()
			c := client(t, iss)
			var doc struct {
				Issuer  string   `json:"issuer"`
				JWKSURI string   `json:"jwks_uri"`
				Algs    []string `json:"id_token_signing_alg_values_supported"`
			}
			getJSON(t, c, iss.URL()+oidctest.DiscoveryPath, &doc)
			if doc.Issuer != iss.URL() || doc.JWKSURI != iss.URL()+oidctest.JWKSPath || len(doc.Algs) != 1 || doc.Algs[0] != alg {
				t.Errorf("discovery %+v", doc)
			}
			set := jwks(t, c, iss)
			if len(set.Keys) != 1 || set.Keys[0].KeyID != iss.CurrentKey().ID || !set.Keys[0].IsPublic() {
				t.Fatalf("key set %+v: want the current public key only", set)
			}
			tok := iss.Token(iss.Claims("aud", "sub", time.Hour))
			jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
			if err != nil {
				t.Fatal(err)
			}
			payload, err := jws.Verify(&set.Keys[0])
			if err != nil || !strings.Contains(string(payload), `"iss":"`+iss.URL()+`"`) {
				t.Errorf("token does not verify with the published key: %v %s", err, payload)
			}
			if iss.DiscoveryFetches() != 1 || iss.JWKSFetches() != 1 {
				t.Errorf("counters: discovery %d, jwks %d", iss.DiscoveryFetches(), iss.JWKSFetches())
			}
			other, err := oidctest.NewKey(alg, iss.CurrentKey().ID)
			if err != nil {
				t.Fatal(err)
			}
			forged, _ := jose.ParseSignedCompact(iss.TokenWithKey(other, map[string]any{"sub": "x"}), []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
			if _, err := forged.Verify(&set.Keys[0]); err == nil {
				t.Error("a token signed with an unpublished key verified")
			}
		})
	}
}

func TestRotateKey(t *testing.T) {
	for _, keep := range []bool{false, true} {
		iss, err := oidctest.Start(oidctest.Options{KeepOldKeys: keep})
		if err != nil {
			t.Fatal(err)
		}
		c := client(t, iss)
		old := iss.CurrentKey().ID
		if err := iss.RotateKey(); err != nil {
			t.Fatal(err)
		}
		set := jwks(t, c, iss)
		var ids []string
		for _, k := range set.Keys {
			ids = append(ids, k.KeyID)
		}
		want := []string{iss.CurrentKey().ID}
		if keep {
			want = []string{old, iss.CurrentKey().ID}
		}
		if strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("keep=%v: published %v, want %v", keep, ids, want)
		}
		iss.Stop()
	}
}

// A deferred issuer refuses connections until Serve, then serves on the same URL.
func TestDeferred(t *testing.T) {
	iss, err := oidctest.Start(oidctest.Options{Deferred: true})
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Stop()
	c := client(t, iss)
	if _, err := c.Get(iss.URL() + oidctest.DiscoveryPath); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("before Serve: err %v, want connection refused", err)
	}
	if err := iss.Serve(); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	getJSON(t, c, iss.URL()+oidctest.DiscoveryPath, &doc)
	if doc["issuer"] != iss.URL() {
		t.Errorf("discovery after Serve: %v", doc)
	}
	if err := iss.Serve(); err == nil {
		t.Error("second Serve succeeded")
	}
	iss.Stop()
	if _, err := os.Stat(iss.CAFile()); !os.IsNotExist(err) {
		t.Errorf("CA file left after Stop: %v", err)
	}
}
