// Package bootstraptoken reads bootstrap token Secrets (type naming.SecretTypeBootstrapToken in
// naming.SystemNamespace, name bootstrap-token-<token-id>) as upstream's controllers do, and
// computes the detached JWS signatures of the cluster-info ConfigMap.
package bootstraptoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"platform.io/libs/naming"
)

// Data keys and names of bootstrap tokens and of the cluster-info ConfigMap (upstream's
// bootstrapapi constants; none of them carries the product name).
const (
	// SecretPrefix starts the name of every bootstrap token Secret.
	SecretPrefix = "bootstrap-token-"
	// IDKey, SecretKey, ExpirationKey and UsageSigningKey are Secret data keys.
	IDKey           = "token-id"
	SecretKey       = "token-secret"
	ExpirationKey   = "expiration"
	UsageSigningKey = "usage-bootstrap-signing"
	// ConfigMapClusterInfo is the ConfigMap (in naming.PublicNamespace) that bootstrapping
	// clients read; KubeConfigKey holds its kubeconfig, JWSSignaturePrefix starts the key of
	// each token's signature of it.
	ConfigMapClusterInfo = "cluster-info"
	KubeConfigKey        = "kubeconfig"
	JWSSignaturePrefix   = "jws-kubeconfig-"
)

// idPattern is the token id of a Secret's name (6 characters of [a-z0-9]).
var idPattern = regexp.MustCompile(`^[a-z0-9]{6}$`)

// IsBootstrapToken tells whether s is a bootstrap token Secret of the system namespace.
func IsBootstrapToken(s *corev1.Secret) bool {
	return s != nil && s.Namespace == naming.SystemNamespace && s.Type == corev1.SecretType(naming.SecretTypeBootstrapToken)
}

// Data returns one data value of the Secret (empty when absent).
func Data(s *corev1.Secret, key string) string {
	return string(s.Data[key])
}

// ParseName returns the token id a Secret's name carries.
func ParseName(name string) (string, bool) {
	id, ok := strings.CutPrefix(name, SecretPrefix)
	if !ok || !idPattern.MatchString(id) {
		return "", false
	}
	return id, true
}

// Expiration tells how long the token has left (0: no expiration) and whether it has expired at
// now. An expiration that is not RFC 3339 counts as expired, as upstream: a token nobody can
// date is not trusted.
func Expiration(s *corev1.Secret, now time.Time) (ttl time.Duration, expired bool) {
	v := Data(s, ExpirationKey)
	if v == "" {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, true
	}
	ttl = t.Sub(now)
	if ttl <= 0 {
		return 0, true
	}
	return ttl, false
}

// SigningToken returns the id and secret of a token that may sign cluster-info now: a bootstrap
// token Secret whose name matches its token-id, with a token-secret, not expired, and with
// usage-bootstrap-signing "true".
func SigningToken(s *corev1.Secret, now time.Time) (id, secret string, ok bool) {
	if !IsBootstrapToken(s) {
		return "", "", false
	}
	nameID, ok := ParseName(s.Name)
	if !ok {
		return "", "", false
	}
	id = Data(s, IDKey)
	if id == "" || id != nameID {
		return "", "", false
	}
	secret = Data(s, SecretKey)
	if secret == "" {
		return "", "", false
	}
	if _, expired := Expiration(s, now); expired {
		return "", "", false
	}
	if Data(s, UsageSigningKey) != "true" {
		return "", "", false
	}
	return id, secret, true
}

// jwsHeader is the protected header of the signatures: HS256 and the token id as kid. Its JSON
// keys are in the order upstream's JOSE library writes them, so the signatures are identical.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// DetachedSignature is the detached compact JWS of content signed with a bootstrap token: the
// payload part is left out ("<header>..<signature>"); a verifier puts base64url(content) back
// between the dots. As the spec says, the HS256 key is the full token "<id>.<secret>" and the
// protected header carries kid = id.
//
// Upstream's code (cluster-bootstrap's jws.ComputeDetachedSignature, and kubeadm's check) keys
// the HMAC with the token secret alone, although its documentation also says the full token; the
// format is otherwise the same byte for byte (see detachedHS256's tests).
func DetachedSignature(content, tokenID, tokenSecret string) string {
	return detachedHS256(content, tokenID, []byte(tokenID+"."+tokenSecret))
}

// detachedHS256 signs content with key, naming kid in the header.
func detachedHS256(content, kid string, key []byte) string {
	header, _ := json.Marshal(jwsHeader{Alg: "HS256", Kid: kid})
	enc := base64.RawURLEncoding
	h := enc.EncodeToString(header)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h + "." + enc.EncodeToString([]byte(content))))
	return h + ".." + enc.EncodeToString(mac.Sum(nil))
}
