// Package serviceaccount is the service account token method of the authentication service
// (method "serviceaccount") and the signing side of the TokenRequest API. It accepts upstream's
// two kinds of tokens: bound tokens (issued by the TokenRequest API for one of the configured
// issuers: signature, lifetime, audiences, and the account and bound Pod, Secret or Node must still
// exist with the token's uids) and legacy tokens (stored in Secrets by the token controller: valid
// while the Secret holds them). Messages are upstream's, so TokenReview answers and logs read the
// same.
package serviceaccount

import (
	"context"
	"crypto"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	sa "platform.io/libs/serviceaccount"
	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/authn/authenticator"
)

// MethodName is the method's name in responses, logs and metrics.
const MethodName = "serviceaccount"

// TokenRequest bounds (upstream's validation and defaulting of TokenRequest).
const (
	// DefaultExpirationSeconds is the lifetime of a token whose request names none.
	DefaultExpirationSeconds = 60 * 60
	// MinExpirationSeconds is the shortest lifetime that may be requested.
	MinExpirationSeconds = 10 * 60
	// MaxExpirationSeconds is the longest lifetime that may be requested (2^32 seconds).
	MaxExpirationSeconds = 1 << 32
)

// Config is the method's configuration; each field is what the kube-apiserver flag in its comment
// means there.
type Config struct {
	// Issuers (--service-account-issuer, repeatable): tokens of every one are accepted; the first
	// signs new tokens.
	Issuers []string
	// KeyFiles (--service-account-key-file, repeatable) hold the public (or private) keys that
	// verify tokens. Empty: the signing key's public key.
	KeyFiles []string
	// SigningKeyFile (--service-account-signing-key-file) holds the private key that signs tokens
	// (empty: the method verifies but cannot issue).
	SigningKeyFile string
	// APIAudiences (--api-audiences) are the API server's audiences: a token presented without
	// explicit audiences must be for one of them. Empty: the first issuer.
	APIAudiences []string
	// MaxTokenExpiration (--service-account-max-token-expiration) caps the lifetime of issued
	// tokens; 0 is no cap, otherwise between 1 hour and 2^32 seconds.
	MaxTokenExpiration time.Duration
	// Lookup (--service-account-lookup, upstream default true) checks that a legacy token's Secret
	// still holds it and its account still exists. Bound tokens are always looked up.
	Lookup bool
	// Objects reads the service accounts and the objects tokens are bound to.
	Objects authenticator.Objects
	// Logger receives debug lines about refused tokens (never the token); nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
}

// Validate reports every configuration error, each naming the flag that fixes it.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Issuers) == 0 {
		errs = append(errs, errors.New("--service-account-issuer is required"))
	}
	seen := map[string]bool{}
	for _, iss := range c.Issuers {
		switch {
		case iss == "":
			errs = append(errs, errors.New("--service-account-issuer should not be an empty string"))
			continue
		case strings.Contains(iss, ":"):
			if _, err := url.Parse(iss); err != nil {
				errs = append(errs, fmt.Errorf("--service-account-issuer %q contained a ':' but was not a valid URL: %v", iss, err))
				continue
			}
		}
		if seen[iss] {
			errs = append(errs, fmt.Errorf("--service-account-issuer %q is already specified", iss))
		}
		seen[iss] = true
	}
	if len(c.KeyFiles) == 0 && c.SigningKeyFile == "" {
		errs = append(errs, errors.New("--service-account-key-file or --service-account-signing-key-file is required"))
	}
	if c.MaxTokenExpiration != 0 && (c.MaxTokenExpiration < time.Hour || c.MaxTokenExpiration > MaxExpirationSeconds*time.Second) {
		errs = append(errs, errors.New("--service-account-max-token-expiration must be between 1 hour and 2^32 seconds"))
	}
	for _, a := range c.APIAudiences {
		if a == "" {
			errs = append(errs, errors.New("--api-audiences must not contain an empty audience"))
		}
	}
	if c.Objects == nil {
		errs = append(errs, errors.New("service account tokens need an object reader"))
	}
	return errors.Join(errs...)
}

// Authenticator is the service account token method; it also signs bound tokens. It is safe for
// concurrent use.
type Authenticator struct {
	issuers      map[string]bool
	firstIssuer  string
	apiAudiences []string
	verifier     *sa.Verifier
	issuer       *sa.Issuer
	maxSeconds   int64
	lookup       bool
	objects      authenticator.Objects
	log          *slog.Logger
	now          func() time.Time
}

var _ authenticator.Method = (*Authenticator)(nil)

// New loads the keys and returns the method.
func New(cfg Config) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Authenticator{
		issuers:      map[string]bool{},
		apiAudiences: slices.Clone(cfg.APIAudiences),
		maxSeconds:   int64(cfg.MaxTokenExpiration / time.Second),
		lookup:       cfg.Lookup,
		objects:      cfg.Objects,
		log:          cfg.Logger,
		now:          cfg.Now,
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	for _, iss := range cfg.Issuers {
		a.issuers[iss] = true
	}
	a.firstIssuer = cfg.Issuers[0]
	if len(a.apiAudiences) == 0 {
		a.apiAudiences = []string{cfg.Issuers[0]}
	}
	keyFiles := cfg.KeyFiles
	if cfg.SigningKeyFile != "" {
		key, err := sa.LoadSigningKey(cfg.SigningKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--service-account-signing-key-file: %w", err)
		}
		if a.issuer, err = sa.NewIssuer(cfg.Issuers[0], key); err != nil {
			return nil, fmt.Errorf("--service-account-signing-key-file: %w", err)
		}
		if len(keyFiles) == 0 {
			// Upstream's default: the signing key verifies what it signs.
			keyFiles = []string{cfg.SigningKeyFile}
		}
	}
	keys, err := sa.LoadPublicKeys(keyFiles...)
	if err != nil {
		return nil, fmt.Errorf("--service-account-key-file: %w", err)
	}
	if a.verifier, err = sa.NewVerifier(keys); err != nil {
		return nil, fmt.Errorf("--service-account-key-file: %w", err)
	}
	if a.issuer != nil && !verifiesIssuer(keys, a.issuer) {
		a.log.Warn("the service account signing key is not among the verification keys: the tokens it signs will be refused",
			"signingKeyFile", cfg.SigningKeyFile, "keyFiles", keyFiles)
	}
	return a, nil
}

func verifiesIssuer(keys []crypto.PublicKey, iss *sa.Issuer) bool {
	for _, k := range keys {
		if id, err := sa.KeyID(k); err == nil && id == iss.KeyID() {
			return true
		}
	}
	return false
}

// Name is MethodName.
func (a *Authenticator) Name() string { return MethodName }

// Discovery is what service account issuer discovery publishes: the issuer of new tokens (the
// first --service-account-issuer) and the key set that verifies them.
func (a *Authenticator) Discovery() (issuer string, jwks []byte, err error) {
	jwks, err = a.verifier.JWKS()
	return a.firstIssuer, jwks, err
}

// APIAudiences are the audiences a token is checked against when the request names none
// (--api-audiences, else the first issuer).
func (a *Authenticator) APIAudiences() []string { return slices.Clone(a.apiAudiences) }

// Authenticate accepts a service account token. A token that is not a JWT, or a JWT of an issuer
// that is neither configured nor the legacy one, is ErrNotMine; one that is ours and fails a check
// is refused with upstream's message; a store that cannot be read is an UnavailableError.
func (a *Authenticator) Authenticate(ctx context.Context, req *authenticator.Request) (*authenticator.Response, error) {
	iss, ok := sa.UnverifiedIssuer(req.Token)
	if !ok {
		return nil, authenticator.ErrNotMine
	}
	bound := a.issuers[iss]
	if !bound && iss != naming.LegacyServiceAccountIssuer {
		return nil, authenticator.ErrNotMine
	}
	claims, err := a.verifier.Verify(req.Token)
	if errors.Is(err, sa.ErrNotJWT) {
		return nil, authenticator.ErrNotMine
	}
	if err != nil {
		return nil, err
	}
	if claims.Issuer != iss {
		// Cannot happen (the issuer was read from the payload just verified); kept as upstream's
		// sanity check.
		return nil, fmt.Errorf("token issuer %q is invalid", claims.Issuer)
	}

	tokenAudiences := claims.Audience
	if len(tokenAudiences) == 0 || !bound {
		// Legacy tokens (and bound ones without aud) are for the API server only.
		tokenAudiences = a.apiAudiences
	}
	requested := req.Audiences
	if len(requested) == 0 {
		requested = a.apiAudiences
	}
	auds := intersect(tokenAudiences, requested)
	if len(auds) == 0 {
		return nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAudiences, requested)
	}

	var info *accountInfo
	if bound {
		info, err = a.validateBound(ctx, claims)
	} else {
		info, err = a.validateLegacy(ctx, req.Token, claims)
	}
	if err != nil {
		return nil, err
	}
	return &authenticator.Response{User: info.user(), Audiences: auds}, nil
}

// accountInfo is what a valid token says about its bearer.
type accountInfo struct {
	namespace, name, uid string
	podName, podUID      string
	nodeName, nodeUID    string
	credentialID         string
}

// user is the authenticated identity, with upstream's extras (pod name and uid together, node uid
// only with the node name, the credential id of tokens with a jti).
func (i *accountInfo) user() *authenticator.User {
	u := &authenticator.User{
		Name:   sa.UserName(i.namespace, i.name),
		UID:    i.uid,
		Groups: sa.Groups(i.namespace),
	}
	extra := map[string][]string{}
	if i.podName != "" && i.podUID != "" {
		extra[naming.UserExtraKey("pod-name")] = []string{i.podName}
		extra[naming.UserExtraKey("pod-uid")] = []string{i.podUID}
	}
	if i.credentialID != "" {
		extra[naming.UserExtraKey("credential-id")] = []string{i.credentialID}
	}
	if i.nodeName != "" {
		extra[naming.UserExtraKey("node-name")] = []string{i.nodeName}
		if i.nodeUID != "" {
			extra[naming.UserExtraKey("node-uid")] = []string{i.nodeUID}
		}
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return u
}

// Upstream's answers for a token whose bound object, or whose Secret (legacy tokens), is gone or
// going.
var (
	errInvalidated      = errors.New("service account token has been invalidated")
	errTokenInvalidated = errors.New("Token has been invalidated")
)

// validateBound checks a bound token's lifetime and that its account and bound object still
// exist with the token's uids (objects deleted more than Leeway ago no longer back tokens).
func (a *Authenticator) validateBound(ctx context.Context, c *sa.Claims) (*accountInfo, error) {
	now := a.now()
	switch err := c.ValidateTime(now); {
	case err == nil:
	case errors.Is(err, sa.ErrExpired):
		return nil, errors.New("service account token has expired")
	case errors.Is(err, sa.ErrNotValidYet):
		return nil, errors.New("service account token is not valid yet")
	case errors.Is(err, sa.ErrIssuedInTheFuture):
		return nil, errors.New("service account token is issued in the future")
	default:
		return nil, errors.New("service account token claims could not be validated due to unexpected validation error")
	}
	p := c.ServiceAccount
	if p == nil {
		p = &sa.BoundClaims{}
	}
	deletedBefore := now.Add(-sa.Leeway)
	gone := func(ts *metav1.Time) bool { return ts != nil && ts.Time.Before(deletedBefore) }
	ns, saName := p.Namespace, p.ServiceAccount.Name
	if ns == "" || saName == "" {
		// Not worth a read: no such account can exist.
		return nil, notFoundMessage("serviceaccounts", saName)
	}

	account, err := a.objects.ServiceAccount(ctx, ns, saName)
	if err != nil {
		a.log.DebugContext(ctx, "could not retrieve service account", "namespace", ns, "name", saName, "err", err)
		return nil, lookupError(err, notFoundMessage("serviceaccounts", saName))
	}
	if string(account.UID) != p.ServiceAccount.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", account.UID, p.ServiceAccount.UID)
	}
	if gone(account.DeletionTimestamp) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, saName)
	}

	if ref := p.Secret; ref != nil {
		if ref.Name == "" {
			return nil, errInvalidated
		}
		secret, err := a.objects.Secret(ctx, ns, ref.Name)
		if err != nil {
			a.log.DebugContext(ctx, "could not retrieve bound secret", "namespace", ns, "name", ref.Name, "err", err)
			return nil, lookupError(err, errInvalidated)
		}
		if string(secret.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", secret.UID, ref.UID)
		}
		if gone(secret.DeletionTimestamp) {
			return nil, errInvalidated
		}
	}

	info := &accountInfo{namespace: ns, name: saName, uid: p.ServiceAccount.UID}
	if ref := p.Pod; ref != nil {
		if ref.Name == "" {
			return nil, errInvalidated
		}
		pod, err := a.objects.Pod(ctx, ns, ref.Name)
		if err != nil {
			a.log.DebugContext(ctx, "could not retrieve bound pod", "namespace", ns, "name", ref.Name, "err", err)
			return nil, lookupError(err, errInvalidated)
		}
		if string(pod.UID) != ref.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", pod.UID, ref.UID)
		}
		if gone(pod.DeletionTimestamp) {
			return nil, errInvalidated
		}
		info.podName, info.podUID = ref.Name, ref.UID
	}

	if ref := p.Node; ref != nil {
		if p.Pod != nil {
			// The node of a pod-bound token is information only: the pod is what binds it.
			info.nodeName, info.nodeUID = ref.Name, ref.UID
		} else {
			if ref.Name == "" {
				return nil, errInvalidated
			}
			node, err := a.objects.Node(ctx, ref.Name)
			if err != nil {
				a.log.DebugContext(ctx, "could not retrieve bound node", "name", ref.Name, "err", err)
				return nil, lookupError(err, errInvalidated)
			}
			if string(node.UID) != ref.UID {
				return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", node.UID, ref.UID)
			}
			if gone(node.DeletionTimestamp) {
				return nil, errInvalidated
			}
			info.nodeName, info.nodeUID = ref.Name, ref.UID
		}
	}
	if c.ID != "" {
		info.credentialID = "JTI=" + c.ID
	}
	return info, nil
}

// validateLegacy checks a Secret-based token's claims and, with lookup, that its Secret still
// holds exactly this token and is neither going nor marked invalid, and that its account exists
// with the token's uid.
func (a *Authenticator) validateLegacy(ctx context.Context, token string, c *sa.Claims) (*accountInfo, error) {
	l := c.Legacy
	if l == nil {
		l = &sa.LegacyClaims{}
	}
	switch {
	case c.Subject == "":
		return nil, errors.New("sub claim is missing")
	case l.Namespace == "":
		return nil, errors.New("namespace claim is missing")
	case l.SecretName == "":
		return nil, errors.New("secretName claim is missing")
	case l.ServiceAccountName == "":
		return nil, errors.New("serviceAccountName claim is missing")
	case l.ServiceAccountUID == "":
		return nil, errors.New("serviceAccountUID claim is missing")
	}
	if ns, name, ok := sa.SplitUserName(c.Subject); !ok || ns != l.Namespace || name != l.ServiceAccountName {
		return nil, errors.New("sub claim is invalid")
	}
	info := &accountInfo{namespace: l.Namespace, name: l.ServiceAccountName, uid: l.ServiceAccountUID}
	if !a.lookup {
		return info, nil
	}

	secret, err := a.objects.Secret(ctx, l.Namespace, l.SecretName)
	if err != nil {
		a.log.DebugContext(ctx, "could not retrieve the secret of a legacy token", "namespace", l.Namespace, "name", l.SecretName, "err", err)
		return nil, lookupError(err, errTokenInvalidated)
	}
	if secret.DeletionTimestamp != nil {
		a.log.DebugContext(ctx, "the secret of a legacy token is being deleted", "namespace", l.Namespace, "name", l.SecretName)
		return nil, errTokenInvalidated
	}
	if secret.Type != corev1.SecretType(naming.SecretTypeServiceAccountToken) {
		a.log.DebugContext(ctx, "the secret of a legacy token is not a service account token secret", "namespace", l.Namespace, "name", l.SecretName, "type", secret.Type)
		return nil, errTokenInvalidated
	}
	if !constantTimeEqual(secret.Data[corev1.ServiceAccountTokenKey], token) {
		a.log.DebugContext(ctx, "the secret of a legacy token holds another token", "namespace", l.Namespace, "name", l.SecretName)
		return nil, errors.New("Token does not match server's copy")
	}

	account, err := a.objects.ServiceAccount(ctx, l.Namespace, l.ServiceAccountName)
	if err != nil {
		a.log.DebugContext(ctx, "could not retrieve service account", "namespace", l.Namespace, "name", l.ServiceAccountName, "err", err)
		return nil, lookupError(err, notFoundMessage("serviceaccounts", l.ServiceAccountName))
	}
	if account.DeletionTimestamp != nil {
		return nil, fmt.Errorf("ServiceAccount %s/%s has been deleted", l.Namespace, l.ServiceAccountName)
	}
	if string(account.UID) != l.ServiceAccountUID {
		return nil, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", account.UID, l.ServiceAccountUID)
	}
	if secret.Labels[naming.LegacyTokenInvalidSinceLabel] != "" {
		return nil, fmt.Errorf("the token in secret %s/%s for service account %s/%s has been marked invalid. "+
			"Use tokens from the TokenRequest API or manually created secret-based tokens, or remove the '%s' label from the secret to temporarily allow use of this token",
			l.Namespace, l.SecretName, l.Namespace, l.ServiceAccountName, naming.LegacyTokenInvalidSinceLabel)
	}
	return info, nil
}

// lookupError is the answer for a failed read: refused with notFound when the object does not
// exist, undecided (an UnavailableError) when the store could not say.
func lookupError(err, notFound error) error {
	if errors.Is(err, authenticator.ErrNotFound) {
		return notFound
	}
	if authenticator.IsUnavailable(err) {
		return err
	}
	return &authenticator.UnavailableError{Err: err}
}

// notFoundMessage is the API's message for a missing object, which upstream passes on.
func notFoundMessage(resource, name string) error {
	return fmt.Errorf("%s %q not found", resource, name)
}

func intersect(have, want []string) []string {
	var out []string
	for _, w := range want {
		if slices.Contains(have, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// IssueBound signs a bound token for the TokenRequest API (the caller checked that the account and
// the bound object exist): the audiences default to the API audiences, the lifetime to one hour,
// capped at --service-account-max-token-expiration as upstream does; exp is the token's expiry.
func (a *Authenticator) IssueBound(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (token string, exp time.Time, err error) {
	if a.issuer == nil {
		return "", time.Time{}, errors.New("service account tokens cannot be issued: --service-account-signing-key-file is not set")
	}
	seconds := req.GetExpirationSeconds()
	switch {
	case seconds == 0:
		seconds = DefaultExpirationSeconds
	case seconds < MinExpirationSeconds:
		return "", time.Time{}, errors.New("spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes")
	case seconds > MaxExpirationSeconds:
		return "", time.Time{}, errors.New("spec.expirationSeconds: Invalid value: may not specify a duration larger than 2^32 seconds")
	}
	if a.maxSeconds > 0 && seconds > a.maxSeconds {
		a.log.InfoContext(ctx, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", seconds, a.maxSeconds),
			"namespace", req.GetNamespace(), "serviceAccount", req.GetName())
		seconds = a.maxSeconds
	}
	auds := req.GetAudiences()
	if len(auds) == 0 {
		auds = a.apiAudiences
	}
	br := sa.BoundRequest{
		Namespace:  req.GetNamespace(),
		Name:       req.GetName(),
		UID:        req.GetUid(),
		Audiences:  auds,
		Expiration: time.Duration(seconds) * time.Second,
		IssuedAt:   a.now(),
	}
	if ref := req.GetBoundObject(); ref != nil && (ref.GetKind() != "" || ref.GetName() != "" || ref.GetUid() != "") {
		if err := coreKind(ref); err != nil {
			return "", time.Time{}, err
		}
		br.BoundObject = &sa.BoundObject{Kind: ref.GetKind(), Name: ref.GetName(), UID: ref.GetUid()}
	}
	if n := req.GetNode(); n != nil && n.GetName() != "" {
		br.Node = &sa.Ref{Name: n.GetName(), UID: n.GetUid()}
	}
	return a.issuer.IssueBound(br)
}

// coreKind accepts the kinds a token can be bound to: Pods, Secrets and Nodes of the core group.
func coreKind(ref *authnv1.ObjectReference) error {
	gvk := schema.FromAPIVersionAndKind(ref.GetApiVersion(), ref.GetKind())
	switch gvk.Kind {
	case sa.KindPod, sa.KindSecret, sa.KindNode:
		if gvk.Group == "" {
			return nil
		}
	}
	return fmt.Errorf("cannot bind token to object of type %s", gvk.String())
}

// constantTimeEqual compares a stored token with a presented one without leaking, through timing,
// how much of it matched.
func constantTimeEqual(stored []byte, presented string) bool {
	return subtle.ConstantTimeCompare(stored, []byte(presented)) == 1
}
