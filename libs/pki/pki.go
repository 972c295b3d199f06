// Package pki creates and loads the cluster's certificate authority, issues the serving, client
// and peer certificates signed by it, and writes kubeconfig files that carry them.
//
// Keys are ECDSA P-256. Certificates and keys are PEM encoded ("CERTIFICATE" and PKCS#8
// "PRIVATE KEY" blocks); private key files are written with mode 0600 and the directories that
// hold them are created with mode 0700.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// caValidity is how long a CA created by EnsureCA is valid.
const caValidity = 10 * 365 * 24 * time.Hour

// clockSkew is how far in the past NotBefore is set, so that a certificate is accepted straight
// away by a peer whose clock runs slightly behind.
const clockSkew = time.Minute

// CA is a certificate authority that signs the cluster's serving and client certificates.
type CA struct {
	// Cert is the CA's self-signed certificate.
	Cert *x509.Certificate
	// Key is the CA's private key; its public half matches Cert.
	Key crypto.Signer
	// CertPEM is Cert PEM encoded, ready to be handed to clients as their trust root.
	CertPEM []byte
}

// NewCA creates a self-signed CA with an ECDSA P-256 key, valid from a minute ago for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("pki: CA common name is empty")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("pki: CA validity %v is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true, // x509 derives SubjectKeyId for CAs; leaves get it as AuthorityKeyId
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, nil
}

// LoadCA reads a CA certificate and its private key from PEM files, such as those written by
// CA.Write. It fails if the certificate is not a CA or the key does not belong to it.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certData, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA certificate: %w", err)
	}
	keyData, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA key: %w", err)
	}
	cert, err := parseCertPEM(certData)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: %s: certificate is not a CA", certFile)
	}
	key, err := parseKeyPEM(keyData)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", keyFile, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("pki: %s does not hold the key of %s", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(cert.Raw)}, nil
}

// Write stores the CA certificate and key as PEM files. The key file gets mode 0600, and missing
// parent directories are created with mode 0700.
func (ca *CA) Write(certFile, keyFile string) error {
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return err
	}
	return WritePair(certFile, keyFile, ca.CertPEM, keyPEM)
}

// IssueServing signs a new key pair for a TLS server: ExtKeyUsageServerAuth, Subject CN
// commonName, and hosts as subject alternative names (IP addresses go to IPAddresses, anything
// else to DNSNames).
func (ca *CA) IssueServing(commonName string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("pki: serving certificate needs at least one host")
	}
	return ca.issue(pkix.Name{CommonName: commonName}, hosts, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, validity)
}

// IssueClient signs a new key pair for a TLS client: ExtKeyUsageClientAuth, Subject CN user and
// O groups, which is where the API server reads the client's identity from.
func (ca *CA) IssueClient(user string, groups []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if user == "" {
		return nil, nil, errors.New("pki: client certificate user is empty")
	}
	subject := pkix.Name{CommonName: user, Organization: append([]string(nil), groups...)}
	return ca.issue(subject, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, validity)
}

// IssuePeer signs a new key pair usable both as a server and as a client certificate, for
// service-to-service mutual TLS: ExtKeyUsageServerAuth and ExtKeyUsageClientAuth, Subject CN
// commonName, and hosts as subject alternative names as in IssueServing.
func (ca *CA) IssuePeer(commonName string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("pki: peer certificate needs at least one host")
	}
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return ca.issue(pkix.Name{CommonName: commonName}, hosts, usages, validity)
}

func (ca *CA) issue(subject pkix.Name, hosts []string, usages []x509.ExtKeyUsage, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, nil, errors.New("pki: CA has no certificate or key")
	}
	if subject.CommonName == "" {
		return nil, nil, errors.New("pki: certificate common name is empty")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("pki: certificate validity %v is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usages,
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: sign certificate for %q: %w", subject.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// WritePair stores a PEM certificate and key, as returned by the Issue methods. The certificate
// file gets mode 0644, the key file 0600, and missing parent directories are created with mode
// 0700. Each file is replaced atomically.
func WritePair(certFile, keyFile string, certPEM, keyPEM []byte) error {
	if err := writeFileAtomic(certFile, certPEM, 0o644); err != nil {
		return err
	}
	return writeFileAtomic(keyFile, keyPEM, 0o600)
}

// EnsureCA loads ca.crt and ca.key from dir, or, when neither exists yet, creates a CA named
// commonName (valid for ten years) and writes it there, so that a restart keeps the same CA.
// created reports whether a new CA was made. Finding only one of the two files is an error
// rather than a reason to replace it.
func EnsureCA(dir, commonName string) (ca *CA, created bool, err error) {
	certFile := filepath.Join(dir, "ca.crt")
	keyFile := filepath.Join(dir, "ca.key")
	certExists, err := fileExists(certFile)
	if err != nil {
		return nil, false, err
	}
	keyExists, err := fileExists(keyFile)
	if err != nil {
		return nil, false, err
	}
	switch {
	case certExists && keyExists:
		ca, err := LoadCA(certFile, keyFile)
		return ca, false, err
	case certExists:
		return nil, false, fmt.Errorf("pki: %s exists but %s does not", certFile, keyFile)
	case keyExists:
		return nil, false, fmt.Errorf("pki: %s exists but %s does not", keyFile, certFile)
	}
	ca, err = NewCA(commonName, caValidity)
	if err != nil {
		return nil, false, err
	}
	if err := ca.Write(certFile, keyFile); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("pki: %w", err)
}

// writeFileAtomic writes data to a temporary file next to path with the given mode and renames
// it over path, creating missing directories with mode 0700.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: create directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// newSerial returns a random, positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCertificatePEM returns the first certificate in PEM data.
func ParseCertificatePEM(data []byte) (*x509.Certificate, error) { return parseCertPEM(data) }

// parseCertPEM returns the first certificate in data.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no CERTIFICATE PEM block found")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// parseKeyPEM returns the first private key in data, in PKCS#8, SEC 1 or PKCS#1 form.
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no private key PEM block found")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ad, err := x509.MarshalPKIXPublicKey(a)
	if err != nil {
		return false
	}
	bd, err := x509.MarshalPKIXPublicKey(b)
	if err != nil {
		return false
	}
	return bytes.Equal(ad, bd)
}

// LoadPool reads a PEM bundle of CA certificates (a --client-ca-file or --*-ca-file flag) into a
// pool; a file without any certificate is an error.
func LoadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}
