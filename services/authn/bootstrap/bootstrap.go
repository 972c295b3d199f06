// Package bootstrap is the bootstrap token method of the authentication service (method
// "bootstrap-token", --enable-bootstrap-token-auth): a token "<id>.<secret>" authenticates as
// system:bootstrap:<id> while the Secret bootstrap-token-<id> in the system namespace holds it,
// allows authentication and has not expired, as upstream's authenticator does. A refusal says no
// more than upstream's generic message; the reason goes to the debug log (never the secret).
package bootstrap

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"platform.io/libs/naming"
	"platform.io/services/authn/authenticator"
)

// MethodName is the method's name in responses, logs and metrics.
const MethodName = "bootstrap-token"

// Names upstream gives bootstrap tokens, their Secrets and their users.
const (
	// SecretNamePrefix starts the name of the Secret of token <id>.
	SecretNamePrefix = "bootstrap-token-"
	// UserPrefix starts the user name of token <id>.
	UserPrefix = "system:bootstrap:"
	// DefaultGroup is every bootstrap token user's group.
	DefaultGroup = "system:bootstrappers"
	// ExtraGroupPrefix starts every group auth-extra-groups may add.
	ExtraGroupPrefix = DefaultGroup + ":"

	// Data keys of a bootstrap token Secret.
	KeyTokenID             = "token-id"
	KeyTokenSecret         = "token-secret"
	KeyExpiration          = "expiration"
	KeyUsageAuthentication = "usage-bootstrap-authentication"
	KeyExtraGroups         = "auth-extra-groups"
)

// Token format: <id>.<secret>, 6 and 16 characters of [a-z0-9].
const (
	idLength     = 6
	secretLength = 16
)

// ErrInvalidToken is the refusal of a bootstrap token: upstream's generic answer for a bearer
// token no method accepts, so the client learns nothing about which check failed.
var ErrInvalidToken = errors.New("invalid bearer token")

// Config is the method's configuration.
type Config struct {
	// Objects reads the bootstrap token Secrets.
	Objects authenticator.Objects
	// Logger receives debug lines about refused tokens (the token id, never the secret); nil is
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
}

// Authenticator is the bootstrap token method. It is safe for concurrent use.
type Authenticator struct {
	objects authenticator.Objects
	log     *slog.Logger
	now     func() time.Time
}

var _ authenticator.Method = (*Authenticator)(nil)

// New returns the method.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Objects == nil {
		return nil, errors.New("bootstrap tokens need an object reader")
	}
	a := &Authenticator{objects: cfg.Objects, log: cfg.Logger, now: cfg.Now}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// Name is MethodName.
func (a *Authenticator) Name() string { return MethodName }

// ParseToken splits a bootstrap token into its id and secret; ok is false unless the token matches
// [a-z0-9]{6}\.[a-z0-9]{16} exactly.
func ParseToken(token string) (id, secret string, ok bool) {
	if len(token) != idLength+1+secretLength || token[idLength] != '.' {
		return "", "", false
	}
	id, secret = token[:idLength], token[idLength+1:]
	if !tokenChars(id) || !tokenChars(secret) {
		return "", "", false
	}
	return id, secret, true
}

func tokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Authenticate accepts a bootstrap token. Anything not of the token's form is ErrNotMine; a token
// of that form whose Secret is missing, of another type, being deleted, holding another secret,
// expired, not for authentication or naming an invalid extra group is refused with
// ErrInvalidToken; a store that cannot be read is an UnavailableError.
func (a *Authenticator) Authenticate(ctx context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	id, secret, ok := ParseToken(req.Token)
	if !ok {
		return nil, authenticator.ErrNotMine
	}
	name := SecretNamePrefix + id
	s, err := a.objects.Secret(ctx, naming.SystemNamespace, name)
	if err != nil {
		if errors.Is(err, authenticator.ErrNotFound) {
			// Not a bootstrap token after all, as upstream decides: another method may know it (the
			// request still ends as "invalid bearer token" if none does).
			a.refused(ctx, name, "no secret matches the bootstrap token")
			return nil, authenticator.ErrNotMine
		}
		if authenticator.IsUnavailable(err) {
			return nil, err
		}
		return nil, &authenticator.UnavailableError{Err: err}
	}
	if s.DeletionTimestamp != nil {
		a.refused(ctx, name, "the secret is deleted and awaiting removal")
		return nil, ErrInvalidToken
	}
	if s.Type != corev1.SecretType(naming.SecretTypeBootstrapToken) || s.Data == nil {
		a.refused(ctx, name, "the secret has an invalid type, expected "+naming.SecretTypeBootstrapToken)
		return nil, ErrInvalidToken
	}
	if subtle.ConstantTimeCompare(s.Data[KeyTokenSecret], []byte(secret)) != 1 {
		a.refused(ctx, name, "the secret has an invalid value for key "+KeyTokenSecret)
		return nil, ErrInvalidToken
	}
	if subtle.ConstantTimeCompare(s.Data[KeyTokenID], []byte(id)) != 1 {
		a.refused(ctx, name, "the secret has an invalid value for key "+KeyTokenID)
		return nil, ErrInvalidToken
	}
	if expired, why := a.expired(s); expired {
		a.refused(ctx, name, why)
		return nil, ErrInvalidToken
	}
	if string(s.Data[KeyUsageAuthentication]) != "true" {
		a.refused(ctx, name, "the secret is not marked "+KeyUsageAuthentication+"=true")
		return nil, ErrInvalidToken
	}
	groups, ok := Groups(string(s.Data[KeyExtraGroups]))
	if !ok {
		a.refused(ctx, name, "the secret has an invalid value for key "+KeyExtraGroups)
		return nil, ErrInvalidToken
	}
	return &authenticator.Response{User: &authenticator.User{Name: UserPrefix + id, Groups: groups}}, nil
}

// expired tells whether the Secret's expiration has passed; an expiration that is not RFC 3339 counts
// as passed, as upstream treats it.
func (a *Authenticator) expired(s *corev1.Secret) (bool, string) {
	v := string(s.Data[KeyExpiration])
	if v == "" {
		return false, ""
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return true, "the secret's expiration is not an RFC 3339 time; treating it as expired"
	}
	if !a.now().Before(t) {
		return true, "the bootstrap token has expired"
	}
	return false, ""
}

func (a *Authenticator) refused(ctx context.Context, secret, why string) {
	a.log.DebugContext(ctx, "bootstrap token refused", "namespace", naming.SystemNamespace, "secret", secret, "reason", why)
}

// Groups are the groups of a bootstrap token user whose Secret's auth-extra-groups is extra:
// system:bootstrappers and each comma-separated extra group, sorted and without duplicates, as
// upstream lists them; ok is false when an extra group is not a valid system:bootstrappers:<name>.
func Groups(extra string) (groups []string, ok bool) {
	groups = []string{DefaultGroup}
	if extra == "" {
		return groups, true
	}
	for _, g := range strings.Split(extra, ",") {
		if !validExtraGroup(g) {
			return nil, false
		}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	return groups, true
}

// validExtraGroup matches upstream's \Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z.
func validExtraGroup(g string) bool {
	rest, ok := strings.CutPrefix(g, ExtraGroupPrefix)
	if !ok || rest == "" || len(rest) > 256 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if i == len(rest)-1 {
			if !alnum {
				return false
			}
		} else if !alnum && c != ':' && c != '-' {
			return false
		}
	}
	return true
}
