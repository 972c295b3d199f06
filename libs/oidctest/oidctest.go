// Package oidctest runs a real OpenID Connect issuer for tests and benchmarks: an HTTPS server on a
// free loopback port, with its own CA from libs/pki, serving the discovery document
// (/.well-known/openid-configuration) and a JSON Web Key Set, and signing ID tokens with its
// current key. It is test tooling: keys are generated per issuer and never persisted, and nothing
// here is meant to run in production.
//
// Like libs/redistest for Redis, it lets the OIDC authenticator be tested against a provider it
// really talks to (TLS, discovery, key fetches, key rotation, an issuer that starts late) rather
// than against a fake key set.
package oidctest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"platform.io/libs/pki"
)

// Supported signing algorithms of the issuer's keys.
const (
	// RS256 is RSASSA-PKCS1-v1_5 with SHA-256 and a 2048-bit key, the algorithm every OpenID
	// provider must support and the authenticator's default.
	RS256 = "RS256"
	// ES256 is ECDSA with P-256 and SHA-256.
	ES256 = "ES256"
)

// DiscoveryPath is where the discovery document is served, relative to the issuer URL.
const DiscoveryPath = "/.well-known/openid-configuration"

// JWKSPath is where the key set is served, relative to the issuer URL.
const JWKSPath = "/keys"

// Options configure an issuer.
type Options struct {
	// Algorithm is the signing algorithm of the issuer's keys: RS256 (the default) or ES256.
	Algorithm string
	// KeepOldKeys keeps rotated-out keys in the published key set (a provider's overlap window);
	// by default RotateKey drops the old key, so tokens it signed no longer verify.
	KeepOldKeys bool
	// Deferred reserves the address (the URL and CA are known at once) but serves nothing until
	// Serve is called: the issuer "starts after" whoever was given its URL, and until then
	// connections to it are refused.
	Deferred bool
	// AdvertisedIssuer, when set, is the issuer the discovery document claims instead of the
	// real URL (a misconfigured provider, which discovery must refuse).
	AdvertisedIssuer string
	// CertificateHosts are the names and addresses the serving certificate is valid for
	// (default 127.0.0.1 and localhost); others make clients refuse the issuer's certificate.
	CertificateHosts []string
}

// Key is a signing key: either one the issuer publishes, or one made with NewKey that it does not
// (tokens signed with it have a valid structure but a signature no published key verifies).
type Key struct {
	// ID is the key id ("kid") put in the header of tokens it signs.
	ID string
	// Algorithm is the key's signing algorithm.
	Algorithm string
	signer    crypto.Signer
}

// NewKey makes a key the issuer does not publish. id may be that of a published key (a forged
// token claiming the issuer's key id) or empty for a fresh random id.
func NewKey(alg, id string) (*Key, error) {
	if alg == "" {
		alg = RS256
	}
	var signer crypto.Signer
	var err error
	switch alg {
	case RS256:
		signer, err = rsa.GenerateKey(rand.Reader, 2048)
	case ES256:
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, fmt.Errorf("oidctest: unsupported algorithm %q (RS256 or ES256)", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("oidctest: generate key: %w", err)
	}
	if id == "" {
		id = randomID()
	}
	return &Key{ID: id, Algorithm: alg, signer: signer}, nil
}

// Issuer is a running (or deferred, or stopped) OpenID Connect provider.
type Issuer struct {
	opts   Options
	addr   string
	url    string
	dir    string
	caPEM  []byte
	cert   tls.Certificate
	server *http.Server

	mu        sync.Mutex
	current   *Key
	published []*Key
	serving   bool
	stopped   bool

	discoveryFetches atomic.Int64
	jwksFetches      atomic.Int64
}

// Start creates an issuer on a free loopback port with its own CA and first key, and serves it
// unless opts.Deferred is set. The caller stops it with Stop.
func Start(opts Options) (*Issuer, error) {
	if opts.Algorithm == "" {
		opts.Algorithm = RS256
	}
	key, err := NewKey(opts.Algorithm, "")
	if err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("oidctest issuer CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	hosts := opts.CertificateHosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	certPEM, keyPEM, err := ca.IssueServing(hosts[0], hosts, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("oidctest: serving certificate: %w", err)
	}
	dir, err := os.MkdirTemp("", "oidctest-")
	if err != nil {
		return nil, fmt.Errorf("oidctest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("oidctest: %w", err)
	}
	// Reserve a port: take a free one and release it; Serve listens on it again. Holding the
	// listener without accepting would let clients connect and hang in the TLS handshake instead
	// of being refused, which is not what "the issuer is not up yet" looks like.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("oidctest: %w", err)
	}
	addr := l.Addr().String()
	iss := &Issuer{
		opts:      opts,
		addr:      addr,
		url:       "https://" + addr,
		dir:       dir,
		caPEM:     ca.CertPEM,
		cert:      cert,
		current:   key,
		published: []*Key{key},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, iss.serveDiscovery)
	mux.HandleFunc("GET "+JWKSPath, iss.serveJWKS)
	// Handshake failures are what some tests provoke (clients that do not trust the CA): not
	// worth a log line each.
	iss.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	if opts.Deferred {
		l.Close()
		return iss, nil
	}
	if err := iss.serveOn(l); err != nil {
		iss.Stop()
		return nil, err
	}
	return iss, nil
}

// Serve starts serving a deferred issuer on its reserved address. It is an error to call it twice
// or after Stop.
func (i *Issuer) Serve() error {
	l, err := net.Listen("tcp", i.addr)
	if err != nil {
		return fmt.Errorf("oidctest: listen on reserved address %s: %w", i.addr, err)
	}
	return i.serveOn(l)
}

func (i *Issuer) serveOn(l net.Listener) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.serving || i.stopped {
		l.Close()
		return errors.New("oidctest: issuer already served or stopped")
	}
	i.serving = true
	tl := tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{i.cert}})
	go func() { _ = i.server.Serve(tl) }()
	return nil
}

// Stop shuts the server down and removes its CA file. It is safe to call more than once.
func (i *Issuer) Stop() {
	i.mu.Lock()
	if i.stopped {
		i.mu.Unlock()
		return
	}
	i.stopped = true
	i.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = i.server.Shutdown(ctx)
	os.RemoveAll(i.dir)
}

// URL is the issuer URL: the tokens' "iss" and the base of discovery.
func (i *Issuer) URL() string { return i.url }

// CAFile is a PEM file holding the CA that signed the issuer's serving certificate (what
// --oidc-ca-file names).
func (i *Issuer) CAFile() string { return filepath.Join(i.dir, "ca.crt") }

// CAPEM is the content of CAFile.
func (i *Issuer) CAPEM() []byte { return append([]byte(nil), i.caPEM...) }

// CurrentKey is the key tokens are signed with now.
func (i *Issuer) CurrentKey() *Key {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.current
}

// RotateKey makes a new current key and publishes it; the previous key stays published only if
// Options.KeepOldKeys is set.
func (i *Issuer) RotateKey() error {
	key, err := NewKey(i.opts.Algorithm, "")
	if err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.opts.KeepOldKeys {
		i.published = append(i.published, key)
	} else {
		i.published = []*Key{key}
	}
	i.current = key
	return nil
}

// Claims returns the usual claims of an ID token from this issuer: iss, aud, sub, iat and an exp
// ttl from now. Tests add or remove claims before signing.
func (i *Issuer) Claims(audience, subject string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.url,
		"aud": audience,
		"sub": subject,
		"iat": now.Unix(),
		"exp": now.Add(ttl).Unix(),
	}
}

// Token signs claims exactly as given with the current key. It panics if claims cannot be encoded
// as JSON or signing fails: both are mistakes in the test, not conditions to handle.
func (i *Issuer) Token(claims map[string]any) string {
	return i.TokenWithKey(i.CurrentKey(), claims)
}

// TokenWithKey signs claims with key, which may be one the issuer does not publish (see NewKey).
// It panics like Token.
func (i *Issuer) TokenWithKey(key *Key, claims map[string]any) string {
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("oidctest: claims are not JSON: %v", err))
	}
	return Sign(key, payload)
}

// Sign signs an arbitrary payload (it need not be a JSON object) as a compact JWS of type JWT
// with key. It panics if signing fails.
func Sign(key *Key, payload []byte) string {
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: jose.SignatureAlgorithm(key.Algorithm),
		Key:       jose.JSONWebKey{Key: key.signer, KeyID: key.ID, Algorithm: key.Algorithm},
	}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(fmt.Sprintf("oidctest: signer: %v", err))
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(fmt.Sprintf("oidctest: sign: %v", err))
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		panic(fmt.Sprintf("oidctest: serialize: %v", err))
	}
	return out
}

// DiscoveryFetches counts requests for the discovery document.
func (i *Issuer) DiscoveryFetches() int64 { return i.discoveryFetches.Load() }

// JWKSFetches counts requests for the key set.
func (i *Issuer) JWKSFetches() int64 { return i.jwksFetches.Load() }

func (i *Issuer) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	i.discoveryFetches.Add(1)
	issuer := i.url
	if i.opts.AdvertisedIssuer != "" {
		issuer = i.opts.AdvertisedIssuer
	}
	writeJSON(w, map[string]any{
		"issuer":                                issuer,
		"jwks_uri":                              i.url + JWKSPath,
		"authorization_endpoint":                i.url + "/auth",
		"token_endpoint":                        i.url + "/token",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{i.opts.Algorithm},
	})
}

func (i *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	i.jwksFetches.Add(1)
	i.mu.Lock()
	set := jose.JSONWebKeySet{}
	for _, k := range i.published {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.signer.Public(), KeyID: k.ID, Algorithm: k.Algorithm, Use: "sig"})
	}
	i.mu.Unlock()
	writeJSON(w, set)
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func randomID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("oidctest: random key id: %v", err))
	}
	return hex.EncodeToString(b[:])
}
