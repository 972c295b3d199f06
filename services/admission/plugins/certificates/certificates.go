// Package certificates has the admission plugins of CertificateSigningRequests, as upstream's:
// CertificateApproval (approving needs "approve" on the signer), CertificateSigning (issuing a
// certificate or failing a request needs "sign" on the signer) and CertificateSubjectRestriction
// (no system:masters client certificates from the API client signer). None takes a
// configuration.
package certificates

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Register registers the package's plugins.
func Register(r *admission.Registry) {
	r.Register(admission.CertificateApproval, func(deps admission.Deps, config []byte) (admission.Plugin, error) {
		return &approval{authz: deps.Authorizer}, noConfig(admission.CertificateApproval, config)
	})
	r.Register(admission.CertificateSigning, func(deps admission.Deps, config []byte) (admission.Plugin, error) {
		return &signing{authz: deps.Authorizer}, noConfig(admission.CertificateSigning, config)
	})
	r.Register(admission.CertificateSubjectRestriction, func(_ admission.Deps, config []byte) (admission.Plugin, error) {
		return subjectRestriction{}, noConfig(admission.CertificateSubjectRestriction, config)
	})
}

// noConfig refuses a configuration: these plugins have none.
func noConfig(name string, config []byte) error {
	c := bytes.TrimSpace(config)
	if len(c) == 0 || string(c) == "null" || string(c) == "{}" {
		return nil
	}
	return fmt.Errorf("admission plugin %s takes no configuration", name)
}

// group is the group CertificateSigningRequests and signers are served in.
var group = naming.Group("certificates.k8s.io")

const (
	resource = "certificatesigningrequests"
	// systemMasters is the group every authorizer lets do everything.
	systemMasters = "system:masters"
)

func interest(op admission.Operation, sub string) []admission.Interest {
	r := resource
	if sub != "" {
		r += "/" + sub
	}
	return []admission.Interest{{Operations: []admission.Operation{op}, APIGroups: []string{group}, Resources: []string{r}, Scope: "Cluster"}}
}

// authorizedForSigner tells whether the user may verb the signer: the signer's own name, or
// "<domain>/*" for every signer of its domain (the part before the first "/").
func authorizedForSigner(ctx context.Context, authz admission.Authorizer, user *admission.User, verb, signer string) (bool, error) {
	domain, _, _ := strings.Cut(signer, "/")
	var errs []error
	for _, name := range []string{signer, domain + "/*"} {
		ok, _, err := authz.Authorize(ctx, admission.AuthorizationAttributes{
			User: user, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "*", Resource: "signers", Name: name,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return true, nil
		}
	}
	// As upstream, an authorizer that cannot decide means not permitted; when it could decide
	// nothing at all, say so (the request is answered 500 rather than a misleading 403).
	if len(errs) == 2 {
		return false, errors.Join(errs...)
	}
	return false, nil
}

func csrOf(a *admission.Attributes, obj any) (*certificatesv1.CertificateSigningRequest, error) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok || csr == nil {
		return nil, admission.Forbidden(a, fmt.Errorf("expected type CertificateSigningRequest, got: %T", obj))
	}
	return csr, nil
}

// approval: setting Approved or Denied (the approval subresource) needs "approve" on the signer
// the request names (the new object's, so changing the signer on the way cannot side-step it).
type approval struct{ authz admission.Authorizer }

func (*approval) Name() string                    { return admission.CertificateApproval }
func (*approval) Interests() []admission.Interest { return interest(admission.Update, "approval") }

func (p *approval) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Update || !a.Is(group, resource, "approval") {
		return nil
	}
	csr, err := csrOf(a, a.Object)
	if err != nil {
		return err
	}
	ok, err := authorizedForSigner(ctx, p.authz, a.User, "approve", csr.Spec.SignerName)
	if err != nil {
		return err
	}
	if !ok {
		return admission.Forbidden(a, fmt.Errorf("user not permitted to approve requests with signerName %q", csr.Spec.SignerName))
	}
	return nil
}

// signing: changing status.certificate or the conditions through the status subresource needs
// "sign" on the signer.
type signing struct{ authz admission.Authorizer }

func (*signing) Name() string                    { return admission.CertificateSigning }
func (*signing) Interests() []admission.Interest { return interest(admission.Update, "status") }

func (p *signing) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Update || !a.Is(group, resource, "status") {
		return nil
	}
	old, err := csrOf(a, a.OldObject)
	if err != nil {
		return err
	}
	csr, err := csrOf(a, a.Object)
	if err != nil {
		return err
	}
	if reflect.DeepEqual(old.Status.Certificate, csr.Status.Certificate) && apiequality.Semantic.DeepEqual(old.Status.Conditions, csr.Status.Conditions) {
		return nil
	}
	ok, err := authorizedForSigner(ctx, p.authz, a.User, "sign", old.Spec.SignerName)
	if err != nil {
		return err
	}
	if !ok {
		return admission.Forbidden(a, fmt.Errorf("user not permitted to sign requests with signerName %q", old.Spec.SignerName))
	}
	return nil
}

// subjectRestriction: the API client signer never issues certificates in the system:masters
// group (which bypasses authorization).
type subjectRestriction struct{}

func (subjectRestriction) Name() string { return admission.CertificateSubjectRestriction }
func (subjectRestriction) Interests() []admission.Interest {
	return interest(admission.Create, "")
}

func (subjectRestriction) Validate(_ context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || !a.Is(group, resource, "") {
		return nil
	}
	csr, err := csrOf(a, a.Object)
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != naming.SignerAPIServerClient {
		return nil
	}
	parsed, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return admission.Forbidden(a, fmt.Errorf("failed to parse CSR: %v", err))
	}
	for _, org := range parsed.Subject.Organization {
		if org == systemMasters {
			return admission.Forbidden(a, fmt.Errorf("use of %s signer with %s group is not allowed", csr.Spec.SignerName, systemMasters))
		}
	}
	return nil
}

// parseCSR reads a PEM "CERTIFICATE REQUEST" block.
func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}
