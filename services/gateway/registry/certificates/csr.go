package certificates

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/gateway/auth"
)

// The API rules of certificates.platform.io/v1 CertificateSigningRequests (the spec's
// "CertificateSigningRequest" sections, as upstream's v1 API):
//
//   - create: spec.username, uid, groups and extra come from the requesting user, never from the
//     body, and status starts empty; spec.request is a PEM CERTIFICATE REQUEST whose signature
//     verifies, spec.signerName a well-formed signer name other than the legacy one, spec.usages
//     known key usages without duplicates, spec.expirationSeconds at least 600;
//   - the main resource never changes spec (422) nor status (kept from the stored object);
//   - the approval subresource changes nothing but status.conditions;
//   - the status subresource changes status only, keeping the stored Approved and Denied
//     conditions; status.certificate may be set once, and only for an approved request that is
//     neither denied nor failed;
//   - conditions: Approved and Denied never both, Approved, Denied and Failed never removed once
//     set and always "True", no type twice; missing timestamps are set to the time of the write.

// minCSRExpirationSeconds is the smallest duration a request may ask for (the spec's Limits).
const minCSRExpirationSeconds = 600

// fieldImmutable is upstream's message for a change to a field that cannot change.
const fieldImmutable = "field is immutable"

// csrRequestBlockType and csrCertificateBlockType are the PEM block types of a certificate
// request and of an issued certificate.
const (
	csrRequestBlockType     = "CERTIFICATE REQUEST"
	csrCertificateBlockType = "CERTIFICATE"
)

// knownKeyUsages are the key usages the v1 API accepts.
var knownKeyUsages = map[certificatesv1.KeyUsage]bool{
	certificatesv1.UsageSigning: true, certificatesv1.UsageDigitalSignature: true,
	certificatesv1.UsageContentCommitment: true, certificatesv1.UsageKeyEncipherment: true,
	certificatesv1.UsageKeyAgreement: true, certificatesv1.UsageDataEncipherment: true,
	certificatesv1.UsageCertSign: true, certificatesv1.UsageCRLSign: true,
	certificatesv1.UsageEncipherOnly: true, certificatesv1.UsageDecipherOnly: true,
	certificatesv1.UsageAny: true, certificatesv1.UsageServerAuth: true,
	certificatesv1.UsageClientAuth: true, certificatesv1.UsageCodeSigning: true,
	certificatesv1.UsageEmailProtection: true, certificatesv1.UsageSMIME: true,
	certificatesv1.UsageIPsecEndSystem: true, certificatesv1.UsageIPsecTunnel: true,
	certificatesv1.UsageIPsecUser: true, certificatesv1.UsageTimestamping: true,
	certificatesv1.UsageOCSPSigning: true, certificatesv1.UsageMicrosoftSGC: true,
	certificatesv1.UsageNetscapeSGC: true,
}

// sortedKnownKeyUsages lists knownKeyUsages for messages, in the API's documented order.
var sortedKnownKeyUsages = []string{
	"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
	"data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
	"server auth", "client auth", "code signing", "email protection", "s/mime",
	"ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
	"microsoft sgc", "netscape sgc",
}

// prepareCSRCreate stamps a new request with its requestor (the request's user, after
// impersonation; nobody for the gateway's own writes) and clears its status: a request cannot be
// created approved, nor claim someone else's identity.
func prepareCSRCreate(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) {
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if u, ok := auth.UserFrom(ctx); ok && u != nil {
		csr.Spec.Username, csr.Spec.UID = u.Name, u.UID
		csr.Spec.Groups = append([]string(nil), u.Groups...)
		if len(u.Extra) > 0 {
			csr.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				csr.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
			}
		}
	}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// prepareCSRUpdate builds the object a write through the approval or status subresource stores:
// the stored object with the conditions (approval) or the status (status, keeping the stored
// Approved and Denied conditions) of the client's object. ok is false for the main resource,
// which the generic rules serve (spec immutability is checked by validateCSRUpdate).
func prepareCSRUpdate(subresource string, newCSR, cur *certificatesv1.CertificateSigningRequest, now time.Time) (runtime.Object, bool) {
	switch subresource {
	case "approval":
		out := cur.DeepCopy()
		out.Status.Conditions = newCSR.Status.Conditions
		defaultConditionTimes(out, cur, now)
		return out, true
	case "status":
		out := cur.DeepCopy()
		out.Status = *newCSR.Status.DeepCopy()
		var conditions []certificatesv1.CertificateSigningRequestCondition
		for _, c := range newCSR.Status.Conditions {
			if !isApprovalCondition(c.Type) {
				conditions = append(conditions, c)
			}
		}
		for _, c := range cur.Status.Conditions {
			if isApprovalCondition(c.Type) {
				conditions = append(conditions, c)
			}
		}
		out.Status.Conditions = conditions
		defaultConditionTimes(out, cur, now)
		return out, true
	}
	return nil, false
}

func isApprovalCondition(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

// defaultConditionTimes sets missing condition timestamps: lastUpdateTime to now;
// lastTransitionTime to the stored one when the stored condition of the type had the same
// status, to now otherwise.
func defaultConditionTimes(csr, cur *certificatesv1.CertificateSigningRequest, now time.Time) {
	stamp := metav1.NewTime(now.Truncate(time.Second))
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = stamp
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = stamp
		for _, old := range cur.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
				break
			}
		}
	}
}

// validateCSRCreate checks the spec of a new request (status is cleared on create).
func validateCSRCreate(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if err := checkCertificateRequest(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), field.OmitValueType{}, err.Error()))
	}
	if csr.Spec.SignerName == naming.SignerLegacyUnknown {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		p := spec.Child("usages").Index(i)
		if !knownKeyUsages[u] {
			errs = append(errs, field.NotSupported(p, u, sortedKnownKeyUsages))
		}
		if seen[u] {
			errs = append(errs, field.Duplicate(p, u))
		}
		seen[u] = true
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < minCSRExpirationSeconds {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, fmt.Sprintf("may not specify a duration less than %d seconds (%s)", minCSRExpirationSeconds, time.Duration(minCSRExpirationSeconds)*time.Second)))
	}
	return errs
}

// checkCertificateRequest tells why data is not a PEM certificate request with a valid
// signature. Only the first PEM block counts, as upstream.
func checkCertificateRequest(data []byte) error {
	if len(data) == 0 {
		return errors.New("a PEM-encoded certificate request is required")
	}
	block, _ := pem.Decode(data)
	switch {
	case block == nil:
		return errors.New("must be a PEM block of type " + csrRequestBlockType + ": no PEM data found")
	case block.Type != csrRequestBlockType:
		return fmt.Errorf("PEM block type must be %s, found %q", csrRequestBlockType, block.Type)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("cannot parse the certificate request: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return fmt.Errorf("the certificate request's signature does not verify: %v", err)
	}
	return nil
}

// validateSignerName applies upstream's rules for signer names: "<domain>/<path>" where the domain
// is at least two DNS labels joined by dots (at most 253 characters) and the path is one or more
// DNS subdomains joined by dots, the whole at most 571 characters (a domain, a namespace and a
// resource name fit).
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, signerPath, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(signerPath, "/") {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(p, domain, validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			// One bad label is enough to report; the others would repeat the message.
			errs = append(errs, field.Invalid(p, domain, fmt.Sprintf("validating label %q: %s", l, strings.Join(msgs, "; "))))
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(p, domain, "should be a domain with at least two segments separated by dots"))
	}
	for _, c := range strings.Split(signerPath, ".") {
		if msgs := validation.IsDNS1123Subdomain(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p, signerPath, fmt.Sprintf("validating component %q: %s", c, strings.Join(msgs, "; "))))
			break
		}
	}
	maxLen := validation.DNS1123SubdomainMaxLength + 1 + validation.DNS1123SubdomainMaxLength + 1 + validation.DNS1123LabelMaxLength
	if len(name) > maxLen {
		errs = append(errs, field.TooLong(p, name, maxLen))
	}
	return errs
}

// validateCSRUpdate checks a write to a stored request: spec unchanged, conditions well-formed
// and never losing Approved, Denied or Failed, the certificate valid, set only for an approved
// request and never changed once set.
func validateCSRUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	o, n := old.Spec, csr.Spec
	if !bytes.Equal(n.Request, o.Request) {
		errs = append(errs, field.Invalid(spec.Child("request"), field.OmitValueType{}, fieldImmutable))
	}
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"signerName", n.SignerName, o.SignerName},
		{"expirationSeconds", n.ExpirationSeconds, o.ExpirationSeconds},
		{"usages", n.Usages, o.Usages},
		{"username", n.Username, o.Username},
		{"uid", n.UID, o.UID},
		{"groups", n.Groups, o.Groups},
		{"extra", n.Extra, o.Extra},
	} {
		if !equality.Semantic.DeepEqual(f.new, f.old) {
			errs = append(errs, field.Invalid(spec.Child(f.name), f.new, fieldImmutable))
		}
	}
	errs = append(errs, validateCSRConditions(csr, old)...)

	status := field.NewPath("status")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if countConditions(csr, t) < countConditions(old, t) {
			errs = append(errs, field.Forbidden(status.Child("conditions"), fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	certPath := status.Child("certificate")
	switch {
	case len(old.Status.Certificate) > 0:
		if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
			errs = append(errs, field.Invalid(certPath, field.OmitValueType{}, "updates may not modify existing certificate content"))
		}
	case len(csr.Status.Certificate) > 0:
		if countConditions(csr, certificatesv1.CertificateApproved) == 0 || countConditions(csr, certificatesv1.CertificateDenied) > 0 || countConditions(csr, certificatesv1.CertificateFailed) > 0 {
			errs = append(errs, field.Forbidden(certPath, "a certificate may only be issued for a request that is Approved and neither Denied nor Failed"))
		} else if err := checkCertificates(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(certPath, field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

// validateCSRConditions checks status.conditions: every condition has a type; Approved, Denied
// and Failed are "True", others True, False or Unknown; no type twice (unless the stored object
// already had it twice); Approved and Denied never together.
func validateCSRConditions(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("status", "conditions")
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range csr.Status.Conditions {
		cp := p.Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), ""))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if c.Status != corev1.ConditionTrue {
				errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{string(corev1.ConditionTrue)}))
			}
		default:
			switch c.Status {
			case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
			case "":
				errs = append(errs, field.Required(cp.Child("status"), ""))
			default:
				errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}))
			}
		}
		if seen[c.Type] && countConditions(old, c.Type) < 2 {
			errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
		}
		seen[c.Type] = true
	}
	if seen[certificatesv1.CertificateApproved] && seen[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "Approved and Denied conditions are mutually exclusive"))
	}
	return errs
}

func countConditions(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) int {
	n := 0
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			n++
		}
	}
	return n
}

// checkCertificates tells why data is not one or more PEM CERTIFICATE blocks without headers,
// each holding parseable certificates (text outside the blocks is ignored, as the spec says).
func checkCertificates(data []byte) error {
	blocks := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		blocks++
		if block.Type != csrCertificateBlockType {
			return fmt.Errorf("only %s PEM blocks are allowed, found %q", csrCertificateBlockType, block.Type)
		}
		if len(block.Headers) > 0 {
			return errors.New("PEM blocks may not carry headers")
		}
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return fmt.Errorf("cannot parse certificate %d: %v", blocks, err)
		}
		if len(certs) == 0 {
			return fmt.Errorf("%s PEM block %d holds no certificate", csrCertificateBlockType, blocks)
		}
	}
	if blocks == 0 {
		return fmt.Errorf("must contain at least one %s PEM block", csrCertificateBlockType)
	}
	return nil
}
