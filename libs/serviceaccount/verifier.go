package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Algorithms are the only JWS algorithms a token may be signed with: the asymmetric ones
// upstream accepts (an external signer may use any of them; an Issuer signs with RS256 or ES*).
// Never "none", never a MAC: a verifier that accepted HS256 could be handed a token "signed" with
// its own public key.
var Algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512}

// ErrNotJWT says a string is not a JWT in compact serialization (three base64url parts, the first
// two JSON objects): some other kind of credential, not a bad token.
var ErrNotJWT = errors.New("not a compact JWS")

// UnverifiedIssuer returns the iss claim of a compact JWT without checking anything else: it
// tells which verifier a token is for, and must never be trusted further. ok is false when the
// string is not a compact JWT with a JSON payload.
func UnverifiedIssuer(token string) (issuer string, ok bool) {
	_, payload, _, ok := splitCompact(token)
	if !ok {
		return "", false
	}
	var claims struct {
		// Unverified: used to route the token only.
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", false
	}
	return claims.Issuer, true
}

// splitCompact decodes the header and payload of a compact JWS; ok is false unless there are
// exactly three dot-separated parts whose first two are base64url JSON objects.
func splitCompact(token string) (header, payload []byte, sig string, ok bool) {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		// The JSON serialization, which tokens never use.
		return nil, nil, "", false
	}
	h, rest, found := strings.Cut(token, ".")
	if !found {
		return nil, nil, "", false
	}
	p, sig, found := strings.Cut(rest, ".")
	if !found || strings.Contains(sig, ".") {
		return nil, nil, "", false
	}
	header, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil || !jsonObject(header) {
		return nil, nil, "", false
	}
	payload, err = base64.RawURLEncoding.DecodeString(p)
	if err != nil || !jsonObject(payload) {
		return nil, nil, "", false
	}
	return header, payload, sig, true
}

func jsonObject(b []byte) bool {
	s := strings.TrimLeft(string(b), " \t\r\n")
	return strings.HasPrefix(s, "{")
}

// publicKey is a verification key with its key id.
type publicKey struct {
	id  string
	key crypto.PublicKey
}

// Verifier checks the signatures of service account tokens against a set of public keys. It is
// safe for concurrent use.
type Verifier struct {
	all  []publicKey
	byID map[string][]publicKey
}

// NewVerifier returns a Verifier trusting keys: RSA or ECDSA public keys, or private keys (their
// public halves are used).
func NewVerifier(keys []crypto.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("no public keys to verify service account tokens with")
	}
	v := &Verifier{byID: map[string][]publicKey{}}
	for _, k := range keys {
		if s, ok := k.(crypto.Signer); ok {
			k = s.Public()
		}
		switch k.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
		default:
			return nil, fmt.Errorf("unsupported public key type %T, must be RSA or ECDSA", k)
		}
		id, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		pk := publicKey{id: id, key: k}
		v.all = append(v.all, pk)
		v.byID[id] = append(v.byID[id], pk)
	}
	return v, nil
}

// Verify checks token's signature and returns its claims; nothing else (issuer, times, audiences,
// objects) is checked. A string that is not a compact JWS is ErrNotJWT. A token with a "kid"
// header is checked against the keys with that id only, one without against every key, as
// upstream does.
func (v *Verifier) Verify(token string) (*Claims, error) {
	header, _, _, ok := splitCompact(token)
	if !ok {
		return nil, ErrNotJWT
	}
	var h struct {
		Algorithm string `json:"alg"`
	}
	if err := json.Unmarshal(header, &h); err != nil {
		return nil, errors.New("token header could not be decoded")
	}
	if !allowedAlgorithm(h.Algorithm) {
		return nil, fmt.Errorf("token signature algorithm %s is not accepted", quoteShort(h.Algorithm))
	}
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		return nil, errors.New("token is not a well-formed JWS")
	}
	var kid string
	for _, hdr := range tok.Headers {
		if hdr.KeyID != "" {
			kid = hdr.KeyID
			break
		}
	}
	keys := v.all
	if kid != "" {
		keys = v.byID[kid]
	}
	if len(keys) == 0 {
		return nil, errors.New("invalid signature, no keys found")
	}
	var errs []string
	for _, k := range keys {
		var public jwt.Claims
		private := map[string]json.RawMessage{}
		if err := tok.Claims(k.key, &public, &private); err != nil {
			if claimsUndecodable(err) {
				// The signature held (the library decodes only then): no other key will do better.
				return nil, errors.New("token claims could not be decoded")
			}
			errs = appendUnique(errs, err.Error())
			continue
		}
		return decodeClaims(public, private)
	}
	// As upstream's error aggregate prints: one message alone, several in brackets.
	if len(errs) == 1 {
		return nil, errors.New(errs[0])
	}
	return nil, errors.New("[" + strings.Join(errs, ", ") + "]")
}

// claimsUndecodable tells a payload that does not decode into claims (whose decoder's message
// could quote the token, so it is not shown) from a failed signature check.
func claimsUndecodable(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ) ||
		errors.Is(err, jwt.ErrUnmarshalAudience) || errors.Is(err, jwt.ErrUnmarshalNumericDate)
}

func appendUnique(list []string, s string) []string {
	for _, e := range list {
		if e == s {
			return list
		}
	}
	return append(list, s)
}

func allowedAlgorithm(alg string) bool {
	for _, a := range Algorithms {
		if string(a) == alg {
			return true
		}
	}
	return false
}

// quoteShort quotes an untrusted string for an error message, cut short so that a huge header
// does not become a huge message.
func quoteShort(s string) string {
	const max = 32
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// JWKS is the JSON Web Key Set of the verifier's public keys, as upstream's service account issuer
// discovery serves it (/openid/v1/jwks): each key with its id, "use": "sig" and its algorithm.
func (v *Verifier) JWKS() ([]byte, error) {
	set := jose.JSONWebKeySet{}
	for _, k := range v.all {
		alg := string(jose.RS256)
		if ec, ok := k.key.(*ecdsa.PublicKey); ok {
			a, err := ecAlgorithm(ec.Curve)
			if err != nil {
				return nil, err
			}
			alg = a
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key, KeyID: k.id, Use: "sig", Algorithm: alg})
	}
	return json.Marshal(set)
}
