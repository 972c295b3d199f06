// Package serviceaccount signs and verifies service account tokens: the JWTs the TokenRequest API
// issues (bound tokens, tied to an audience, a lifetime and optionally a Pod, Secret or Node) and
// the non-expiring tokens the token controller stores in Secrets (legacy tokens). Claims, key
// files, algorithms and key ids are upstream's, so tokens and tools carry over; the claim names
// derived from the product name come from the naming package.
package serviceaccount

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.io/libs/naming"
)

// User names and groups of service accounts.
const (
	// UserNamePrefix starts the user name of every service account.
	UserNamePrefix = "system:serviceaccount:"
	// AllServiceAccountsGroup holds every service account.
	AllServiceAccountsGroup = "system:serviceaccounts"
	// NamespaceGroupPrefix starts the group of a namespace's service accounts.
	NamespaceGroupPrefix = AllServiceAccountsGroup + ":"
)

// Leeway is the clock skew tolerated on exp, nbf and iat, and the grace period during which an
// object being deleted still backs its tokens (upstream's, the JWT library's default).
const Leeway = jwt.DefaultLeeway

// UserName is the user name of a service account: system:serviceaccount:<namespace>:<name>.
func UserName(namespace, name string) string {
	return UserNamePrefix + namespace + ":" + name
}

// Groups are the groups of a service account of the namespace: every account's and the
// namespace's accounts'.
func Groups(namespace string) []string {
	return []string{AllServiceAccountsGroup, NamespaceGroupPrefix + namespace}
}

// SplitUserName returns the namespace and name of a service account's user name; ok is false
// when the name is not one (wrong prefix, or a namespace or name that is not a valid object name).
func SplitUserName(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, UserNamePrefix)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, ":")
	if !found || strings.Contains(name, ":") {
		return "", "", false
	}
	if len(validation.IsDNS1123Label(namespace)) != 0 || len(validation.IsDNS1123Subdomain(name)) != 0 {
		return "", "", false
	}
	return namespace, name, true
}

// Ref names an object a token refers to, with the uid that tells a re-created object apart.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// BoundClaims is the private claim of bound tokens (under naming.ServiceAccountClaimsKey): the
// account, and the object the token's validity is tied to. A token bound to a Pod may also name
// the Pod's Node (information only); a token bound to a Node names it in Node.
type BoundClaims struct {
	Namespace      string
	ServiceAccount Ref
	Pod            *Ref
	Secret         *Ref
	Node           *Ref
	// WarnAfter is when a token whose lifetime the issuer extended should be reported as stale
	// (zero when absent).
	WarnAfter time.Time
}

// boundWire is BoundClaims as the JSON of the claim.
type boundWire struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount Ref              `json:"serviceaccount"`
	Pod            *Ref             `json:"pod,omitempty"`
	Secret         *Ref             `json:"secret,omitempty"`
	Node           *Ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

// LegacyClaims are the private claims of Secret-based tokens (under
// naming.LegacyServiceAccountClaimPrefix).
type LegacyClaims struct {
	Namespace          string
	SecretName         string
	ServiceAccountName string
	ServiceAccountUID  string
}

// The names of the legacy private claims.
var (
	legacyNamespaceClaim = naming.LegacyServiceAccountClaimPrefix + "namespace"
	legacySecretClaim    = naming.LegacyServiceAccountClaimPrefix + "secret.name"
	legacyNameClaim      = naming.LegacyServiceAccountClaimPrefix + "service-account.name"
	legacyUIDClaim       = naming.LegacyServiceAccountClaimPrefix + "service-account.uid"
)

func (l *LegacyClaims) wire() map[string]any {
	return map[string]any{
		legacyNamespaceClaim: l.Namespace,
		legacySecretClaim:    l.SecretName,
		legacyNameClaim:      l.ServiceAccountName,
		legacyUIDClaim:       l.ServiceAccountUID,
	}
}

// Claims are a verified token's claims.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	// ID is the jti claim: a random id per bound token, which becomes the user's credential id.
	ID string
	// Expiry, NotBefore and IssuedAt are zero when the token does not carry them.
	Expiry    time.Time
	NotBefore time.Time
	IssuedAt  time.Time
	// ServiceAccount is the private claim of bound tokens (nil when the token has none).
	ServiceAccount *BoundClaims
	// Legacy are the private claims of Secret-based tokens (nil when the token has none).
	Legacy *LegacyClaims

	public jwt.Claims
}

// Errors of Claims.ValidateTime.
var (
	ErrExpired           = errors.New("token has expired")
	ErrNotValidYet       = errors.New("token is not valid yet")
	ErrIssuedInTheFuture = errors.New("token is issued in the future")
)

// ValidateTime checks exp, nbf and iat against now with Leeway: ErrExpired, ErrNotValidYet or
// ErrIssuedInTheFuture. Claims a token does not carry are not checked (legacy tokens never expire).
func (c *Claims) ValidateTime(now time.Time) error {
	err := c.public.ValidateWithLeeway(jwt.Expected{Time: now}, Leeway)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrExpired):
		return ErrExpired
	case errors.Is(err, jwt.ErrNotValidYet):
		return ErrNotValidYet
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return ErrIssuedInTheFuture
	}
	return fmt.Errorf("token claims could not be validated: %w", err)
}

// decodeClaims fills Claims from a verified payload.
func decodeClaims(public jwt.Claims, private map[string]json.RawMessage) (*Claims, error) {
	c := &Claims{
		Issuer:    public.Issuer,
		Subject:   public.Subject,
		Audience:  []string(public.Audience),
		ID:        public.ID,
		Expiry:    timeOf(public.Expiry),
		NotBefore: timeOf(public.NotBefore),
		IssuedAt:  timeOf(public.IssuedAt),
		public:    public,
	}
	if raw, ok := private[naming.ServiceAccountClaimsKey]; ok {
		var w boundWire
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, errors.New("service account claims could not be decoded")
		}
		c.ServiceAccount = &BoundClaims{
			Namespace:      w.Namespace,
			ServiceAccount: w.ServiceAccount,
			Pod:            w.Pod,
			Secret:         w.Secret,
			Node:           w.Node,
			WarnAfter:      timeOf(w.WarnAfter),
		}
	}
	var legacy LegacyClaims
	found := false
	for name, into := range map[string]*string{
		legacyNamespaceClaim: &legacy.Namespace,
		legacySecretClaim:    &legacy.SecretName,
		legacyNameClaim:      &legacy.ServiceAccountName,
		legacyUIDClaim:       &legacy.ServiceAccountUID,
	} {
		raw, ok := private[name]
		if !ok {
			continue
		}
		found = true
		if err := json.Unmarshal(raw, into); err != nil {
			return nil, errors.New("service account claims could not be decoded")
		}
	}
	if found {
		c.Legacy = &legacy
	}
	return c, nil
}

func timeOf(d *jwt.NumericDate) time.Time {
	if d == nil {
		return time.Time{}
	}
	return d.Time()
}
