package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
)

// WriteSigningKey writes a new 2048-bit RSA private key (PKCS#8 PEM, mode 0600) to path: the key
// that signs service account tokens (RS256, the algorithm every client of upstream's tokens
// accepts).
func WriteSigningKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("pki: generate signing key: %w", err)
	}
	pemBytes, err := encodeKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, pemBytes, 0o600)
}

// EnsureSigningKey creates the signing key at path unless a file is there already.
func EnsureSigningKey(path string) error {
	exists, err := fileExists(path)
	if err != nil || exists {
		return err
	}
	return WriteSigningKey(path)
}
