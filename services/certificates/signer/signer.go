// Package signer holds the built-in certificate signers: the restrictions each puts on the
// requests it signs, and the signing itself (a certificate for the request's public key, subject
// and SANs, with the usages asked for, signed by the signer's CA for a bounded lifetime).
//
// The restrictions are upstream's (kube-apiserver-client, kube-apiserver-client-kubelet and
// kubelet-serving), under the names of libs/naming.
package signer

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
)

const (
	// Backdate is how far before now a certificate's NotBefore is put, so that peers whose clock
	// runs a little behind accept it at once.
	Backdate = 5 * time.Minute
	// Short is the lifetime under which NotAfter is not backdated as well (five minutes are about
	// 1% of it).
	Short = 8 * time.Hour
	// MinLifetime is the shortest lifetime issued, whatever spec.expirationSeconds asks: twice the
	// backdate, so that a certificate is valid for a while after it is issued.
	MinLifetime = 10 * time.Minute
	// DefaultDuration is the longest lifetime issued unless configured otherwise
	// (--cluster-signing-duration).
	DefaultDuration = 365 * 24 * time.Hour
)

// nodeUserPrefix starts the common name of a node's certificates; nodesGroup is their only
// organization.
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// ValidationError is a request breaking its signer's restrictions, or one that cannot be read: it
// is final (the request gets the Failed condition with reason SignerValidationFailure).
type ValidationError struct{ msg string }

func (e *ValidationError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &ValidationError{msg: fmt.Sprintf(format, args...)}
}

// IsValidation tells whether err is a ValidationError.
func IsValidation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// ParseRequest reads spec.request: one PEM "CERTIFICATE REQUEST" block holding a PKCS#10 request
// whose signature verifies with its own public key. Every failure is a ValidationError.
func ParseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, invalid("the request is not PEM encoded")
	}
	if block.Type != "CERTIFICATE REQUEST" {
		return nil, invalid("the request's PEM block is %q, not \"CERTIFICATE REQUEST\"", block.Type)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, invalid("the request is not a valid certificate request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, invalid("the request's signature does not verify: %v", err)
	}
	return req, nil
}

// Restriction checks a request against a signer's rules; it returns a ValidationError when the
// request breaks them.
type Restriction func(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error

// Restrictions are the built-in signers by name.
var restrictions = map[string]Restriction{
	naming.SignerAPIServerClient:        ValidateAPIServerClient,
	naming.SignerAPIServerClientKubelet: ValidateKubeletClient,
	naming.SignerKubeletServing:         ValidateKubeletServing,
}

// Names are the built-in signers' names, sorted.
func Names() []string {
	out := make([]string, 0, len(restrictions))
	for n := range restrictions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RestrictionFor returns the rules of a built-in signer; ok is false for any other name.
func RestrictionFor(signerName string) (r Restriction, ok bool) {
	r, ok = restrictions[signerName]
	return r, ok
}

// usageSet is the usages as a set (a repeated usage counts once).
func usageSet(usages []certificatesv1.KeyUsage) map[certificatesv1.KeyUsage]bool {
	s := make(map[certificatesv1.KeyUsage]bool, len(usages))
	for _, u := range usages {
		s[u] = true
	}
	return s
}

// exactlyOneOf tells whether the set of usages equals one of the allowed sets.
func exactlyOneOf(usages []certificatesv1.KeyUsage, allowed ...[]certificatesv1.KeyUsage) bool {
	got := usageSet(usages)
	for _, want := range allowed {
		w := usageSet(want)
		if len(w) != len(got) {
			continue
		}
		same := true
		for u := range w {
			if !got[u] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

func quoteUsages(us []certificatesv1.KeyUsage) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = fmt.Sprintf("%q", string(u))
	}
	sort.Strings(s)
	return fmt.Sprint(s)
}

// ValidateAPIServerClient is the API server client signer's rule (upstream
// kube-apiserver-client): any subject; usages among digital signature, key encipherment and
// client auth, client auth included.
func ValidateAPIServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	hasClientAuth := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			hasClientAuth = true
		default:
			return invalid("usage %q is not allowed for signer %s: only \"client auth\", \"digital signature\" and \"key encipherment\" are", string(u), naming.SignerAPIServerClient)
		}
	}
	if !hasClientAuth {
		return invalid("signer %s requires the usage \"client auth\"", naming.SignerAPIServerClient)
	}
	return nil
}

var (
	kubeletClientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	kubeletClientNoRSA  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	kubeletServeUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	kubeletServeNoRSA   = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
)

// checkNodeOrganization checks the organization is exactly system:nodes.
func checkNodeOrganization(req *x509.CertificateRequest) error {
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != nodesGroup {
		return invalid("the subject's organization must be exactly [%s], not %q", nodesGroup, req.Subject.Organization)
	}
	return nil
}

// checkNodeCommonName checks the common name is system:node:<name> with a name.
func checkNodeCommonName(req *x509.CertificateRequest) error {
	cn := req.Subject.CommonName
	if len(cn) <= len(nodeUserPrefix) || cn[:len(nodeUserPrefix)] != nodeUserPrefix {
		return invalid("the subject's common name must be %s<node name>, not %q", nodeUserPrefix, cn)
	}
	return nil
}

// ValidateKubeletClient is the node client signer's rule (upstream
// kube-apiserver-client-kubelet): organization exactly system:nodes, no subject alternative names,
// common name system:node:<name>, usages exactly digital signature and client auth, with or
// without key encipherment.
func ValidateKubeletClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := checkNodeOrganization(req); err != nil {
		return err
	}
	switch {
	case len(req.DNSNames) > 0:
		return invalid("DNS subject alternative names are not allowed for signer %s", naming.SignerAPIServerClientKubelet)
	case len(req.EmailAddresses) > 0:
		return invalid("email subject alternative names are not allowed for signer %s", naming.SignerAPIServerClientKubelet)
	case len(req.IPAddresses) > 0:
		return invalid("IP subject alternative names are not allowed for signer %s", naming.SignerAPIServerClientKubelet)
	case len(req.URIs) > 0:
		return invalid("URI subject alternative names are not allowed for signer %s", naming.SignerAPIServerClientKubelet)
	}
	if err := checkNodeCommonName(req); err != nil {
		return err
	}
	if !exactlyOneOf(usages, kubeletClientUsages, kubeletClientNoRSA) {
		return invalid("usages %s do not match signer %s's: %s, \"key encipherment\" optional", quoteUsages(usages), naming.SignerAPIServerClientKubelet, quoteUsages(kubeletClientNoRSA))
	}
	return nil
}

// ValidateKubeletServing is the node serving signer's rule (upstream kubelet-serving):
// organization exactly system:nodes, at least one DNS or IP subject alternative name and no email
// or URI ones, usages exactly digital signature and server auth, with or without key
// encipherment, common name system:node:<name>.
func ValidateKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if err := checkNodeOrganization(req); err != nil {
		return err
	}
	switch {
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return invalid("signer %s requires at least one DNS or IP subject alternative name", naming.SignerKubeletServing)
	case len(req.EmailAddresses) > 0:
		return invalid("email subject alternative names are not allowed for signer %s", naming.SignerKubeletServing)
	case len(req.URIs) > 0:
		return invalid("URI subject alternative names are not allowed for signer %s", naming.SignerKubeletServing)
	}
	if !exactlyOneOf(usages, kubeletServeUsages, kubeletServeNoRSA) {
		return invalid("usages %s do not match signer %s's: %s, \"key encipherment\" optional", quoteUsages(usages), naming.SignerKubeletServing, quoteUsages(kubeletServeNoRSA))
	}
	return checkNodeCommonName(req)
}

// Lifetime is how long a certificate is valid: spec.expirationSeconds when set and smaller than
// max, never under MinLifetime.
func Lifetime(max time.Duration, expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return max
	}
	d := time.Duration(*expirationSeconds) * time.Second
	switch {
	case d > max:
		return max
	case d < MinLifetime:
		return MinLifetime
	default:
		return d
	}
}

// Validity is a certificate's NotBefore and NotAfter: from now minus Backdate, for the lifetime
// (ending Backdate earlier too unless the lifetime is Short), and never past caNotAfter.
func Validity(now time.Time, lifetime time.Duration, caNotAfter time.Time) (notBefore, notAfter time.Time, err error) {
	if !now.Before(caNotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("the signer's CA expired at %s", caNotAfter.UTC().Format(time.RFC3339))
	}
	notBefore = now.Add(-Backdate)
	if lifetime < Short {
		notAfter = now.Add(lifetime)
	} else {
		notAfter = now.Add(lifetime - Backdate)
	}
	if notAfter.After(caNotAfter) {
		notAfter = caNotAfter
	}
	return notBefore, notAfter, nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// Usages maps the API's usages to X.509 key usage bits and extended key usages (sorted, each
// once).
func Usages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	ext := map[x509.ExtKeyUsage]bool{}
	var unknown []string
	for _, u := range usages {
		if k, ok := keyUsages[u]; ok {
			ku |= k
		} else if e, ok := extKeyUsages[u]; ok {
			ext[e] = true
		} else {
			unknown = append(unknown, string(u))
		}
	}
	if len(unknown) > 0 {
		return 0, nil, invalid("unknown usages %q", unknown)
	}
	out := make([]x509.ExtKeyUsage, 0, len(ext))
	for e := range ext {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return ku, out, nil
}

// CASource gives the CA to sign with now (it may change when its files are rotated).
type CASource interface {
	Current() (*pki.CA, error)
}

// Signer is one built-in signer: its rules, its CA and the longest lifetime it issues.
type Signer struct {
	name        string
	restriction Restriction
	ca          CASource
	maxLifetime time.Duration
}

// New builds the built-in signer signerName over ca, issuing certificates for at most
// maxLifetime.
func New(signerName string, ca CASource, maxLifetime time.Duration) (*Signer, error) {
	r, ok := RestrictionFor(signerName)
	if !ok {
		return nil, fmt.Errorf("%q is not a built-in signer (%v)", signerName, Names())
	}
	if ca == nil {
		return nil, fmt.Errorf("signer %s has no CA", signerName)
	}
	if maxLifetime <= 0 {
		return nil, fmt.Errorf("signer %s: the certificate lifetime %v is not positive", signerName, maxLifetime)
	}
	return &Signer{name: signerName, restriction: r, ca: ca, maxLifetime: maxLifetime}, nil
}

// Name is the signer's name (spec.signerName of the requests it signs).
func (s *Signer) Name() string { return s.name }

// Validate checks a request against the signer's rules.
func (s *Signer) Validate(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	return s.restriction(req, usages)
}

// Sign issues the certificate of a validated request at now, PEM encoded: the request's public
// key, subject and SANs, the usages asked for, a random 128-bit serial, no other extension, signed
// by the signer's CA. An error that is not a ValidationError is worth retrying (the CA unreadable
// or expired, say).
func (s *Signer) Sign(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, expirationSeconds *int32, now time.Time) ([]byte, error) {
	ku, ext, err := Usages(usages)
	if err != nil {
		return nil, err
	}
	ca, err := s.ca.Current()
	if err != nil {
		return nil, err
	}
	notBefore, notAfter, err := Validity(now, Lifetime(s.maxLifetime, expirationSeconds), ca.Cert.NotAfter)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              ku,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
