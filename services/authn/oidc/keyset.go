package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"platform.io/libs/service"
)

// maxJWKSBytes bounds a key set document; real ones are a few kilobytes.
const maxJWKSBytes = 1 << 20

// keySet is the issuer's JSON Web Key Set as go-oidc's KeySet: keys are fetched from jwks_uri once
// and then used from memory, and fetched again when a token names a key id none of them has (the
// issuer rotated its keys, as the OpenID spec recommends). Unlike go-oidc's RemoteKeySet, which
// re-fetches on every signature that fails, a fetch happens at most once per minInterval and never
// because of a bad signature under a known key id, so forged tokens cannot make the server contact
// the provider per request.
type keySet struct {
	url         string
	client      *http.Client
	algs        []jose.SignatureAlgorithm
	minInterval time.Duration
	log         *slog.Logger

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	last     time.Time     // start of the last fetch
	inflight chan struct{} // closed when the running fetch ends
	lastErr  error         // outcome of the last fetch

	fetches atomic.Int64
}

func newKeySet(url string, client *http.Client, algs []string, minInterval time.Duration, log *slog.Logger) *keySet {
	ks := &keySet{url: url, client: client, minInterval: minInterval, log: log}
	for _, a := range algs {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	return ks
}

// fetchErrorKey carries a *fetchError slot in the context of one verification, so Authenticate
// can tell "the issuer could not be asked" (no decision possible) from "the signature is bad"
// once go-oidc has flattened the key set's error into a string.
type fetchErrorKey struct{}

type fetchError struct{ err error }

// VerifySignature implements go-oidc's KeySet.
func (ks *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(token, ks.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	payload, known, err := verifyWith(jws, ks.current(), kid)
	if err == nil || known {
		// A signature that does not verify under a key we hold is refused: asking the issuer
		// again would not change its mind, and would let forged tokens drive requests to it.
		return payload, err
	}
	refreshed, ferr := ks.refresh(ctx, false)
	if ferr != nil {
		if slot, ok := ctx.Value(fetchErrorKey{}).(*fetchError); ok {
			slot.err = ferr
		}
		return nil, fmt.Errorf("fetching the issuer's keys: %v", ferr)
	}
	if !refreshed {
		return nil, fmt.Errorf("no key with id %q in the issuer's key set (keys were fetched less than %v ago)", kid, ks.minInterval)
	}
	payload, _, err = verifyWith(jws, ks.current(), kid)
	return payload, err
}

// verifyWith verifies jws with the key named kid (any key when kid is empty). known reports
// whether some key matched kid, so that a failure is a bad signature rather than an unknown key.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, known bool, err error) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if kid != "" {
			known = true
		}
		if p, err := jws.Verify(&keys[i]); err == nil {
			return p, true, nil
		}
	}
	if known {
		return nil, true, errors.New("signature does not verify")
	}
	if kid == "" {
		return nil, false, errors.New("no key of the issuer verifies the signature")
	}
	return nil, false, fmt.Errorf("no key with id %q in the issuer's key set", kid)
}

func (ks *keySet) current() []jose.JSONWebKey {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys
}

// refresh fetches the key set again unless one was fetched less than minInterval ago (force
// ignores that bound). Concurrent callers share one fetch. refreshed reports whether a fetch
// happened (or was joined); err is its failure, or that of the last fetch when none was made.
func (ks *keySet) refresh(ctx context.Context, force bool) (refreshed bool, err error) {
	ks.mu.Lock()
	done := ks.inflight
	if done == nil {
		if !force && !ks.last.IsZero() && time.Since(ks.last) < ks.minInterval {
			// Too soon to ask again; if the last attempt failed, say so (the keys may be stale).
			err := ks.lastErr
			ks.mu.Unlock()
			return false, err
		}
		done = make(chan struct{})
		ks.inflight = done
		ks.last = time.Now()
		// The fetch outlives a caller that gives up: others may be waiting for it, and its
		// result is worth keeping. It keeps the caller's context values (trace) for its log.
		go ks.fetch(context.WithoutCancel(ctx), done)
	}
	ks.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return true, ks.lastErr
}

// fetch gets the key set on a goroutine of its own, where a panic would kill the service: it is
// a failed fetch instead (logged with the stack), and done is closed as for any outcome.
func (ks *keySet) fetch(ctx context.Context, done chan struct{}) {
	var keys []jose.JSONWebKey
	err := service.Recover(ctx, ks.log, func() (err error) {
		keys, err = ks.get()
		return err
	}, "jwksURL", ks.url)
	ks.fetches.Add(1)
	ks.mu.Lock()
	if err == nil {
		ks.keys = keys
	}
	ks.lastErr = err
	ks.inflight = nil
	ks.mu.Unlock()
	close(done)
}

func (ks *keySet) get() ([]jose.JSONWebKey, error) {
	req, err := http.NewRequest(http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %v", ks.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", ks.url, resp.Status)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("%s: key set larger than %d bytes", ks.url, maxJWKSBytes)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%s: not a key set: %v", ks.url, err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		// Keys of types or algorithms we cannot use are skipped, not fatal: a provider may
		// publish encryption keys or newer key types next to its signing keys.
		if err := json.Unmarshal(r, &k); err != nil || !k.Valid() {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no usable signing key", ks.url)
	}
	return keys, nil
}
