package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"

	"platform.io/libs/naming"
)

// Kinds of objects a bound token can be tied to.
const (
	KindPod    = "Pod"
	KindSecret = "Secret"
	KindNode   = "Node"
)

// Issuer signs service account tokens with one private key for one issuer URL (the first
// --service-account-issuer). It is safe for concurrent use.
type Issuer struct {
	issuer    string
	signer    jose.Signer
	keyID     string
	algorithm string
	public    crypto.PublicKey
}

// NewIssuer returns an Issuer that signs as issuer with key: RS256 for an RSA key, ES256, ES384
// or ES512 for an EC key on P-256, P-384 or P-521, the kid header being KeyID of its public key.
func NewIssuer(issuer string, key crypto.Signer) (*Issuer, error) {
	if issuer == "" {
		return nil, errors.New("the issuer must not be empty")
	}
	var alg string
	switch k := key.(type) {
	case *rsa.PrivateKey:
		alg = string(jose.RS256)
	case *ecdsa.PrivateKey:
		a, err := ecAlgorithm(k.Curve)
		if err != nil {
			return nil, err
		}
		alg = a
	default:
		return nil, fmt.Errorf("unknown private key type %T, must be *rsa.PrivateKey or *ecdsa.PrivateKey", key)
	}
	kid, err := KeyID(key.Public())
	if err != nil {
		return nil, fmt.Errorf("failed to derive keyID: %w", err)
	}
	// Like upstream: no "typ" header, the key id in "kid".
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: jose.SignatureAlgorithm(alg),
		Key:       &jose.JSONWebKey{Algorithm: alg, Key: key, KeyID: kid, Use: "sig"},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to create signer: %w", err)
	}
	return &Issuer{issuer: issuer, signer: signer, keyID: kid, algorithm: alg, public: key.Public()}, nil
}

// URL is the issuer the tokens name in "iss" (legacy tokens name naming.LegacyServiceAccountIssuer).
func (i *Issuer) URL() string { return i.issuer }

// KeyID is the "kid" header of the tokens.
func (i *Issuer) KeyID() string { return i.keyID }

// Algorithm is the JWS algorithm of the tokens (RS256, ES256, ES384 or ES512).
func (i *Issuer) Algorithm() string { return i.algorithm }

// PublicKey is the key that verifies the tokens.
func (i *Issuer) PublicKey() crypto.PublicKey { return i.public }

// BoundObject is the object a bound token's validity is tied to.
type BoundObject struct {
	// Kind is KindPod, KindSecret or KindNode.
	Kind string
	Name string
	UID  string
}

// BoundRequest describes a bound token (the TokenRequest API).
type BoundRequest struct {
	// Namespace, Name and UID identify the service account.
	Namespace string
	Name      string
	UID       string
	// Audiences are the token's aud claim.
	Audiences []string
	// Expiration is the token's lifetime (exp - iat), whole seconds.
	Expiration time.Duration
	// BoundObject ties the token to a Pod, Secret or Node (optional).
	BoundObject *BoundObject
	// Node is the node of the Pod the token is bound to (optional, only with a Pod; the UID may
	// be empty when the node object was not found).
	Node *Ref
	// WarnAfter, when positive, adds the warnafter claim at IssuedAt + WarnAfter: the time after
	// which a token whose lifetime was extended is reported as stale.
	WarnAfter time.Duration
	// IssuedAt is the token's iat and nbf; zero means now.
	IssuedAt time.Time
}

// IssueBound signs a bound token; exp is its expiry (the exp claim).
func (i *Issuer) IssueBound(req BoundRequest) (token string, exp time.Time, err error) {
	if req.Namespace == "" || req.Name == "" || req.UID == "" {
		return "", time.Time{}, errors.New("the service account's namespace, name and uid are required")
	}
	if req.Expiration < time.Second {
		return "", time.Time{}, errors.New("the expiration must be at least one second")
	}
	now := req.IssuedAt
	if now.IsZero() {
		now = time.Now()
	}
	jti, err := newUUID()
	if err != nil {
		return "", time.Time{}, err
	}
	public := jwt.Claims{
		Issuer:    i.issuer,
		Subject:   UserName(req.Namespace, req.Name),
		Audience:  jwt.Audience(req.Audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(req.Expiration)),
		ID:        jti,
	}
	private := boundWire{
		Namespace:      req.Namespace,
		ServiceAccount: Ref{Name: req.Name, UID: req.UID},
	}
	if req.Node != nil && (req.BoundObject == nil || req.BoundObject.Kind != KindPod) {
		return "", time.Time{}, errors.New("a node can only be named with a token bound to a Pod")
	}
	if b := req.BoundObject; b != nil {
		if b.Name == "" || b.UID == "" {
			return "", time.Time{}, errors.New("the bound object's name and uid are required")
		}
		ref := &Ref{Name: b.Name, UID: b.UID}
		switch b.Kind {
		case KindPod:
			private.Pod = ref
			if req.Node != nil {
				if req.Node.Name == "" {
					return "", time.Time{}, errors.New("the pod's node needs a name")
				}
				private.Node = &Ref{Name: req.Node.Name, UID: req.Node.UID}
			}
		case KindSecret:
			private.Secret = ref
		case KindNode:
			private.Node = ref
		default:
			return "", time.Time{}, fmt.Errorf("cannot bind token to object of kind %q", b.Kind)
		}
	}
	if req.WarnAfter > 0 {
		private.WarnAfter = jwt.NewNumericDate(now.Add(req.WarnAfter))
	}
	token, err = jwt.Signed(i.signer).
		Claims(map[string]any{naming.ServiceAccountClaimsKey: private}).
		Claims(public).
		Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("failed to generate token: %w", err)
	}
	return token, public.Expiry.Time(), nil
}

// IssueLegacy signs the non-expiring token the token controller stores in secret for sa: issuer
// naming.LegacyServiceAccountIssuer, the account's user name as subject, the legacy private claims,
// no audience and no expiry. It stays valid while the Secret holds it (the authenticator checks).
func (i *Issuer) IssueLegacy(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	if sa == nil || secret == nil {
		return "", errors.New("a service account and a secret are required")
	}
	if sa.Namespace == "" || sa.Name == "" || sa.UID == "" {
		return "", errors.New("the service account's namespace, name and uid are required")
	}
	if secret.Name == "" {
		return "", errors.New("the secret's name is required")
	}
	if secret.Namespace != "" && secret.Namespace != sa.Namespace {
		return "", fmt.Errorf("the secret's namespace %q is not the service account's %q", secret.Namespace, sa.Namespace)
	}
	legacy := LegacyClaims{
		Namespace:          sa.Namespace,
		SecretName:         secret.Name,
		ServiceAccountName: sa.Name,
		ServiceAccountUID:  string(sa.UID),
	}
	token, err := jwt.Signed(i.signer).
		Claims(legacy.wire()).
		Claims(jwt.Claims{Issuer: naming.LegacyServiceAccountIssuer, Subject: UserName(sa.Namespace, sa.Name)}).
		Serialize()
	if err != nil {
		return "", fmt.Errorf("failed to generate token: %w", err)
	}
	return token, nil
}

// newUUID returns a random (version 4) UUID, upstream's form of the jti claim.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("failed to generate a token id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
