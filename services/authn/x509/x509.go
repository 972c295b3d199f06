// Package x509 authenticates requests by their TLS client certificate (upstream's
// --client-ca-file): a chain that verifies for client authentication against the CA bundle names
// the user in the leaf's subject common name and the groups in its organizations.
//
// The package also verifies the certificates of authenticating proxies (see Verifier), which the
// requestheader method checks against its own CA bundle.
package x509

import (
	"context"
	"crypto/sha256"
	stdx509 "crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"platform.io/libs/naming"
	"platform.io/services/authn/authenticator"
)

// MethodName is the name of the client certificate method.
const MethodName = "x509"

// uidOID is the subject attribute upstream reads a user's UID from (1.33's
// AllowParsingUserUIDFromCertAuth, beta and on by default).
var uidOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}

// credentialIDPrefix starts the credential id of a certificate (the SHA-256 of its DER), which
// upstream puts in the user's extra so audit logs can tell two certificates of a user apart.
const credentialIDPrefix = "X509SHA256="

// Config configures the client certificate method.
type Config struct {
	// ClientCAFile is the PEM bundle client certificates must chain to (--client-ca-file). It is
	// re-read when it changes.
	ClientCAFile string
	// CacheSize bounds the verification cache (0: DefaultCacheSize).
	CacheSize int
}

// Validate reports configuration errors, naming the flag that fixes them.
func (c Config) Validate() error {
	if c.ClientCAFile == "" {
		return errors.New("--client-ca-file is required for client certificate authentication")
	}
	if c.CacheSize < 0 {
		return errors.New("x509: cache size must not be negative")
	}
	return nil
}

// Authenticator is the client certificate method.
type Authenticator struct {
	verifier *Verifier
}

// New reads the CA bundle and returns the method. The logger is accepted for symmetry with the
// other methods; refusals are returned, and logged by the service, not here.
func New(cfg Config, _ *slog.Logger) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v, err := NewVerifier(cfg.ClientCAFile, cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	return &Authenticator{verifier: v}, nil
}

// Name is the method's name.
func (a *Authenticator) Name() string { return MethodName }

// Verifier is the chain verifier (and cache) the method uses.
func (a *Authenticator) Verifier() *Verifier { return a.verifier }

// Authenticate identifies the request by its client certificate chain. Without a certificate, or
// with one whose subject has no common name, the request is not this method's; a certificate that
// does not verify is refused with upstream's message (which names the certificate by serial
// number and key ids, never by its content).
func (a *Authenticator) Authenticate(_ context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	if len(req.PeerCertificates) == 0 || req.PeerCertificates[0] == nil {
		return nil, authenticator.ErrNotMine
	}
	leaf := req.PeerCertificates[0]
	if err := a.verifier.Verify(req.PeerCertificates); err != nil {
		return nil, fmt.Errorf("verifying certificate %s failed: %w", CertificateIdentifier(leaf), err)
	}
	user, err := UserFromCertificate(leaf)
	if err != nil {
		return nil, err
	}
	if user == nil {
		return nil, authenticator.ErrNotMine
	}
	return &authenticator.Response{User: user}, nil
}

// UserFromCertificate is the identity a verified client certificate carries, as upstream reads
// it: the subject common name is the user (nil when it is empty), the organizations are the
// groups, the UID is the subject attribute 1.3.6.1.4.1.57683.2 when present (once, a non-empty
// string), and the credential id is the certificate's SHA-256.
func UserFromCertificate(c *stdx509.Certificate) (*authenticator.User, error) {
	if c.Subject.CommonName == "" {
		return nil, nil
	}
	uid, err := uidFromCertificate(c)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c.Raw)
	var groups []string
	if len(c.Subject.Organization) > 0 {
		groups = append(groups, c.Subject.Organization...)
	}
	return &authenticator.User{
		Name:   c.Subject.CommonName,
		UID:    uid,
		Groups: groups,
		Extra: map[string][]string{
			naming.UserExtraKey("credential-id"): {credentialIDPrefix + hex.EncodeToString(sum[:])},
		},
	}, nil
}

func uidFromCertificate(c *stdx509.Certificate) (string, error) {
	var uids []string
	for _, name := range c.Subject.Names {
		if !name.Type.Equal(uidOID) {
			continue
		}
		uid, ok := name.Value.(string)
		if !ok {
			return "", errors.New("unable to parse UID into a string")
		}
		uids = append(uids, uid)
	}
	switch {
	case len(uids) == 0:
		return "", nil
	case len(uids) > 1:
		return "", fmt.Errorf("expected 1 UID, but found multiple: %v", uids)
	case uids[0] == "":
		return "", errors.New("UID cannot be an empty string")
	}
	return uids[0], nil
}
