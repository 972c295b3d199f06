package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func csrPEM(t *testing.T, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func csr(signer string, request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "req"}, Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: request}}
}

func attrs(op admission.Operation, sub string, obj, old runtime.Object) *admission.Attributes {
	return &admission.Attributes{
		Operation: op, Subresource: sub, Name: "req", Object: obj, OldObject: old,
		Resource: schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource},
		User:     &admission.User{Name: "alice", Groups: []string{"system:authenticated"}},
	}
}

// grants allows the verbs on the named signers ("verb name").
func grants(allowed ...string) (admission.Authorizer, *[]string) {
	var asked []string
	return admissiontest.AuthorizerFunc(func(_ context.Context, a admission.AuthorizationAttributes) (bool, string, error) {
		if a.APIGroup != group || a.Resource != "signers" || !a.ResourceRequest || a.APIVersion != "*" || a.User.Name != "alice" {
			return false, "", errors.New("unexpected attributes")
		}
		asked = append(asked, a.Verb+" "+a.Name)
		for _, g := range allowed {
			if g == a.Verb+" "+a.Name {
				return true, "", nil
			}
		}
		return false, "", nil
	}), &asked
}

func build(t *testing.T, name string, authz admission.Authorizer) admission.Validator {
	t.Helper()
	r := admission.NewRegistry()
	Register(r)
	f, _ := r.Factory(name)
	p, err := f(admissiontest.Deps(&admissiontest.Objects{}, authz), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(admission.Validator)
}

func TestCertificateApproval(t *testing.T) {
	const signer = "example.com/my-signer"
	for _, c := range []struct {
		name    string
		allowed []string
		sub     string
		want    string // "" allowed, else part of the 403 message
	}{
		{"approve on the signer's name", []string{"approve " + signer}, "approval", ""},
		{"approve on the signer's domain wildcard", []string{"approve example.com/*"}, "approval", ""},
		{"no approve permission", nil, "approval", `user not permitted to approve requests with signerName "example.com/my-signer"`},
		{"sign is not approve", []string{"sign " + signer}, "approval", "user not permitted to approve"},
		{"another domain's wildcard", []string{"approve other.com/*"}, "approval", "user not permitted to approve"},
		{"status updates are not approvals", nil, "status", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			authz, _ := grants(c.allowed...)
			p := build(t, admission.CertificateApproval, authz)
			obj := csr(signer, nil)
			err := p.Validate(context.Background(), attrs(admission.Update, c.sub, obj, obj.DeepCopy()))
			checkErr(t, err, c.want)
		})
	}
}

func TestCertificateApprovalChecksTheNewSigner(t *testing.T) {
	// Changing the signer on the approval call cannot side-step the check: the new one counts.
	authz, asked := grants("approve example.com/old")
	p := build(t, admission.CertificateApproval, authz)
	err := p.Validate(context.Background(), attrs(admission.Update, "approval", csr("example.com/new", nil), csr("example.com/old", nil)))
	checkErr(t, err, `signerName "example.com/new"`)
	if strings.Join(*asked, ",") != "approve example.com/new,approve example.com/*" {
		t.Fatalf("asked %v", *asked)
	}
}

func TestCertificateSigning(t *testing.T) {
	const signer = "example.com/my-signer"
	issued := func() *certificatesv1.CertificateSigningRequest {
		c := csr(signer, nil)
		c.Status.Certificate = []byte("cert")
		return c
	}
	failed := func() *certificatesv1.CertificateSigningRequest {
		c := csr(signer, nil)
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: "True"}}
		return c
	}
	for _, c := range []struct {
		name     string
		allowed  []string
		obj, old *certificatesv1.CertificateSigningRequest
		want     string
	}{
		{"issuing needs sign", nil, issued(), csr(signer, nil), `user not permitted to sign requests with signerName "example.com/my-signer"`},
		{"issuing with sign on the signer", []string{"sign " + signer}, issued(), csr(signer, nil), ""},
		{"issuing with sign on the domain", []string{"sign example.com/*"}, issued(), csr(signer, nil), ""},
		{"a Failed condition needs sign", nil, failed(), csr(signer, nil), "user not permitted to sign"},
		{"approve is not sign", []string{"approve " + signer}, issued(), csr(signer, nil), "user not permitted to sign"},
		{"status unchanged: nothing to check", nil, issued(), issued(), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			authz, _ := grants(c.allowed...)
			p := build(t, admission.CertificateSigning, authz)
			checkErr(t, p.Validate(context.Background(), attrs(admission.Update, "status", c.obj, c.old)), c.want)
		})
	}
}

func TestCertificateSubjectRestriction(t *testing.T) {
	p := build(t, admission.CertificateSubjectRestriction, nil)
	for _, c := range []struct {
		name string
		obj  *certificatesv1.CertificateSigningRequest
		want string
	}{
		{"system:masters from the API client signer", csr(naming.SignerAPIServerClient, csrPEM(t, "eve", "dev", "system:masters")),
			"use of " + naming.SignerAPIServerClient + " signer with system:masters group is not allowed"},
		{"other groups from the API client signer", csr(naming.SignerAPIServerClient, csrPEM(t, "bob", "dev")), ""},
		{"system:masters from another signer", csr("example.com/signer", csrPEM(t, "eve", "system:masters")), ""},
		{"unparseable request", csr(naming.SignerAPIServerClient, []byte("not pem")), "failed to parse CSR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkErr(t, p.Validate(context.Background(), attrs(admission.Create, "", c.obj, nil)), c.want)
		})
	}
}

func TestNoConfiguration(t *testing.T) {
	r := admission.NewRegistry()
	Register(r)
	for _, name := range []string{admission.CertificateApproval, admission.CertificateSigning, admission.CertificateSubjectRestriction} {
		f, _ := r.Factory(name)
		if _, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{"x":1}`)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with a configuration: %v", name, err)
		}
		if _, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{}`)); err != nil {
			t.Errorf("%s with an empty configuration: %v", name, err)
		}
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("want allowed, got %v", err)
		}
		return
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want 403 with %q, got %v", want, err)
	}
}
