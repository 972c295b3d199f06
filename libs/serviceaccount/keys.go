package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// PEM block types of the key files operators hand to --service-account-key-file and
// --service-account-signing-key-file.
const (
	blockRSAPrivateKey = "RSA PRIVATE KEY"
	blockECPrivateKey  = "EC PRIVATE KEY"
	blockPrivateKey    = "PRIVATE KEY"
)

// LoadPublicKeys reads the keys that verify service account tokens from PEM files, as upstream's
// --service-account-key-file does: each file may hold several blocks, each a public key (PKIX or
// PKCS#1 RSA), a certificate (its public key counts) or an RSA or EC private key (PKCS#1, SEC1 or
// PKCS#8; its public half counts). Blocks of other kinds ("EC PARAMETERS") are skipped, but a file
// without any usable key is an error naming the file.
func LoadPublicKeys(files ...string) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		k, err := ParsePublicKeysPEM(data)
		if err != nil {
			return nil, fmt.Errorf("error reading public key file %s: %w", f, err)
		}
		keys = append(keys, k...)
	}
	return keys, nil
}

// LoadSigningKey reads the private key that signs service account tokens
// (--service-account-signing-key-file): the first RSA or EC private key of the file.
func LoadSigningKey(file string) (crypto.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("error reading private key file %s: %w", file, err)
	}
	return k, nil
}

// ParsePublicKeysPEM returns every RSA or ECDSA public key that the PEM data holds (see
// LoadPublicKeys). Like upstream it tries each block against every encoding rather than trusting
// the block's label, so a mislabelled but valid key still loads.
func ParsePublicKeysPEM(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if k := publicKeyOfBlock(block.Bytes); k != nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("data does not contain any valid RSA or ECDSA public keys")
	}
	return keys, nil
}

// publicKeyOfBlock returns the RSA or ECDSA public key a DER block encodes in any of the accepted
// forms, or nil.
func publicKeyOfBlock(der []byte) crypto.PublicKey {
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		return supportedPublic(k)
	}
	if c, err := x509.ParseCertificate(der); err == nil {
		return supportedPublic(c.PublicKey)
	}
	if k, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return k
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return &k.PublicKey
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return supportedPublic(&k.PublicKey)
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return supportedPublic(s.Public())
		}
	}
	return nil
}

// supportedPublic keeps the keys tokens can be verified with: RSA, and ECDSA on the curves the
// ES256/ES384/ES512 algorithms name.
func supportedPublic(k crypto.PublicKey) crypto.PublicKey {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return k
	case *ecdsa.PublicKey:
		if _, err := ecAlgorithm(k.Curve); err == nil {
			return k
		}
	}
	return nil
}

// ParsePrivateKeyPEM returns the first RSA or ECDSA private key of the PEM data: "RSA PRIVATE
// KEY" (PKCS#1), "EC PRIVATE KEY" (SEC1) or "PRIVATE KEY" (PKCS#8) blocks; other blocks are skipped.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var key any
		var err error
		switch block.Type {
		case blockRSAPrivateKey:
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case blockECPrivateKey:
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case blockPrivateKey:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			continue
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			if _, err := ecAlgorithm(k.Curve); err == nil {
				return k, nil
			}
		}
	}
	return nil, errors.New("data does not contain a valid RSA or ECDSA private key")
}

// KeyID is the "kid" header of tokens signed with the private half of pub, computed as upstream
// does (SHA-256 of the PKIX DER encoding, base64url without padding), so verifiers and the
// issuer-discovery key set agree on it. It is one-way: the key cannot be recovered from it.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("failed to serialize public key to DER format: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// ecAlgorithm names the JWS algorithm of an ECDSA curve.
func ecAlgorithm(c elliptic.Curve) (string, error) {
	switch c {
	case elliptic.P256():
		return "ES256", nil
	case elliptic.P384():
		return "ES384", nil
	case elliptic.P521():
		return "ES512", nil
	}
	return "", errors.New("unknown private key curve, must be 256, 384, or 521")
}
