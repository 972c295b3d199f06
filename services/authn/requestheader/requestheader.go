// Package requestheader authenticates requests forwarded by an authenticating proxy (upstream's
// --requestheader-* flags): the proxy proves itself with a client certificate from its own CA
// (and, optionally, one of the allowed common names), and then its headers name the user, the
// UID, the groups and the extra attributes.
//
// Defaults are kube-apiserver's: every header list is empty, so an operator names the headers
// explicitly (kubeadm sets X-Remote-User, X-Remote-Group and X-Remote-Extra-, the names
// aggregated API servers expect).
package requestheader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"platform.io/services/authn/authenticator"
	certauth "platform.io/services/authn/x509"
)

// MethodName is the name of the authenticating proxy method.
const MethodName = "requestheader"

// Config configures the authenticating proxy method. Header names are case-insensitive.
type Config struct {
	// ClientCAFile verifies the proxy's client certificate (--requestheader-client-ca-file); the
	// method is enabled by it.
	ClientCAFile string
	// AllowedNames, when not empty, are the common names a proxy certificate must carry
	// (--requestheader-allowed-names).
	AllowedNames []string
	// UsernameHeaders are tried in order; the first with a value is the user name
	// (--requestheader-username-headers).
	UsernameHeaders []string
	// UIDHeaders are tried in order; the first with a value is the user's UID
	// (--requestheader-uid-headers, 1.33; not honoured unless set).
	UIDHeaders []string
	// GroupHeaders: every value of every one is a group (--requestheader-group-headers).
	GroupHeaders []string
	// ExtraHeaderPrefixes: a header starting with one of them gives an extra attribute, keyed by
	// the rest of its name, lower-cased and percent-decoded (--requestheader-extra-headers-prefix).
	ExtraHeaderPrefixes []string
	// CacheSize bounds the proxy certificate verification cache (0: x509.DefaultCacheSize).
	CacheSize int
}

// Validate reports configuration errors, naming the flag that fixes them.
func (c Config) Validate() error {
	var errs []error
	if c.ClientCAFile == "" {
		errs = append(errs, errors.New("--requestheader-client-ca-file is required for the authenticating proxy"))
	}
	for flag, list := range map[string][]string{
		"--requestheader-allowed-names":        c.AllowedNames,
		"--requestheader-username-headers":     c.UsernameHeaders,
		"--requestheader-uid-headers":          c.UIDHeaders,
		"--requestheader-group-headers":        c.GroupHeaders,
		"--requestheader-extra-headers-prefix": c.ExtraHeaderPrefixes,
	} {
		for _, v := range list {
			if strings.TrimSpace(v) == "" {
				errs = append(errs, fmt.Errorf("%s has an empty entry", flag))
			}
		}
	}
	if len(c.UIDHeaders) > 0 && len(c.UsernameHeaders) == 0 {
		errs = append(errs, errors.New("--requestheader-uid-headers needs --requestheader-username-headers"))
	}
	return errors.Join(errs...)
}

// Authenticator is the authenticating proxy method.
type Authenticator struct {
	verifier     *certauth.Verifier
	allowedNames []string
	username     []string // canonical header names
	uid          []string
	groups       []string
	prefixes     []string // canonical prefixes
}

// New reads the proxy CA bundle and returns the method.
func New(cfg Config, log *slog.Logger) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v, err := certauth.NewVerifier(cfg.ClientCAFile, cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("--requestheader-client-ca-file: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	if len(cfg.UsernameHeaders) == 0 {
		log.Warn("--requestheader-client-ca-file is set without --requestheader-username-headers: no proxied request can be authenticated by its headers")
	}
	a := &Authenticator{
		verifier:     v,
		allowedNames: slices.Clone(cfg.AllowedNames),
		username:     canonical(cfg.UsernameHeaders),
		uid:          canonical(cfg.UIDHeaders),
		groups:       canonical(cfg.GroupHeaders),
		prefixes:     canonical(cfg.ExtraHeaderPrefixes),
	}
	return a, nil
}

func canonical(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, http.CanonicalHeaderKey(strings.TrimSpace(n)))
	}
	return out
}

// Name is the method's name.
func (a *Authenticator) Name() string { return MethodName }

// Names are the canonical names of the headers the method reads (user name, UID and group
// headers): the gateway forwards them to the method and strips them from the request before it
// goes any further, so no handler ever trusts a header a client set.
func (a *Authenticator) Names() []string {
	out := make([]string, 0, len(a.username)+len(a.uid)+len(a.groups))
	for _, list := range [][]string{a.username, a.uid, a.groups} {
		for _, n := range list {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// Prefixes are the canonical prefixes of the extra headers the method reads; like Names, the
// gateway forwards and then strips every header that starts with one (case-insensitively).
func (a *Authenticator) Prefixes() []string { return slices.Clone(a.prefixes) }

// Verifier is the proxy certificate verifier (and cache).
func (a *Authenticator) Verifier() *certauth.Verifier { return a.verifier }

// Authenticate reads the identity from the proxy headers once the proxy's certificate is trusted.
// A request without a certificate, or whose certificate does not verify against the proxy CA, is
// not this method's (its certificate may still authenticate it as a client, through x509); a
// verified proxy that is not one of the allowed names is refused (upstream's message); a trusted
// proxy that names no user leaves the request to the other methods.
func (a *Authenticator) Authenticate(_ context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	if len(req.PeerCertificates) == 0 || req.PeerCertificates[0] == nil {
		return nil, authenticator.ErrNotMine
	}
	if err := a.verifier.Verify(req.PeerCertificates); err != nil {
		return nil, authenticator.ErrNotMine
	}
	if len(a.allowedNames) > 0 {
		cn := req.PeerCertificates[0].Subject.CommonName
		if !slices.Contains(a.allowedNames, cn) {
			return nil, fmt.Errorf("x509: subject with cn=%s is not in the allowed list", cn)
		}
	}
	h := req.Header
	name := firstValue(h, a.username)
	if name == "" {
		return nil, authenticator.ErrNotMine
	}
	user := &authenticator.User{
		Name:   name,
		UID:    firstValue(h, a.uid),
		Groups: allValues(h, a.groups),
		Extra:  extra(h, a.prefixes),
	}
	return &authenticator.Response{User: user}, nil
}

// firstValue is the first value of the first header that has a non-empty one (upstream reads the
// first value of each header in turn).
func firstValue(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// allValues is every non-empty value of every header, in header order.
func allValues(h http.Header, names []string) []string {
	var out []string
	for _, n := range names {
		for _, v := range h.Values(n) {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// extra collects the extra attributes: for each prefix in order, each header starting with it
// (case-insensitively; in sorted name order, so that values from several headers mapping to the
// same key come out the same every time) adds its values under the rest of its name, lower-cased
// then percent-decoded (a malformed escape keeps the name as it is, as upstream does).
func extra(h http.Header, prefixes []string) map[string][]string {
	if len(prefixes) == 0 {
		return nil
	}
	var out map[string][]string
	for _, prefix := range prefixes {
		var names []string
		for name := range h {
			if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			key := strings.ToLower(name[len(prefix):])
			if decoded, err := url.PathUnescape(key); err == nil {
				key = decoded
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[key] = append(out[key], h[name]...)
		}
	}
	return out
}
