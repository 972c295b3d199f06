package cache

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// Continue tokens are opaque to clients and tamper-safe: "<payload>.<mac>", both base64url, where
// the payload holds a format byte, the list's revision and the last key returned, and the mac is
// an HMAC-SHA256 (truncated to 128 bits) over the resource type, the namespace and the payload,
// keyed with the backend's shared secret. A token from another type or namespace, or an altered
// one, does not verify.
//
// Revision 0 in a token means "the most recent revision": the token the EXPIRED answer to a
// compacted continue token carries (upstream's "inconsistent continue", revision -1 in its
// tokens), which continues the list after the same key at whatever revision is current.

const tokenFormat = 1

type continueToken struct {
	rev     int64
	lastKey string
}

func tokenMAC(secret []byte, typeName, namespace string, payload []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(typeName))
	m.Write([]byte{0})
	m.Write([]byte(namespace))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:16]
}

func encodeToken(secret []byte, typeName, namespace string, t continueToken) string {
	payload := make([]byte, 0, 1+binary.MaxVarintLen64+len(t.lastKey))
	payload = append(payload, tokenFormat)
	payload = binary.AppendUvarint(payload, uint64(t.rev))
	payload = append(payload, t.lastKey...)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(tokenMAC(secret, typeName, namespace, payload))
}

func decodeToken(secret []byte, typeName, namespace, s string) (continueToken, bool) {
	p, m, ok := strings.Cut(s, ".")
	if !ok {
		return continueToken{}, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	// One spelling per token: the decoder tolerates stray padding bits and newlines, so only the
	// canonical encoding is accepted.
	if err1 != nil || err2 != nil || enc.EncodeToString(payload) != p || enc.EncodeToString(mac) != m ||
		!hmac.Equal(mac, tokenMAC(secret, typeName, namespace, payload)) {
		return continueToken{}, false
	}
	if len(payload) < 2 || payload[0] != tokenFormat {
		return continueToken{}, false
	}
	rev, n := binary.Uvarint(payload[1:])
	if n <= 0 || rev > 1<<62 {
		return continueToken{}, false
	}
	return continueToken{rev: int64(rev), lastKey: string(payload[1+n:])}, true
}
