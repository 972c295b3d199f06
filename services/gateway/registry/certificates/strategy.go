// Package certificates holds the rules of certificates.<domain>/v1 CertificateSigningRequests
// (csr.go): the default built-in strategy with the kind's create, update and validation rules.
package certificates

import (
	"context"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy is the strategy of CertificateSigningRequests.
type Strategy struct {
	*builtin.Strategy
}

// New returns the strategy of CertificateSigningRequests over their default one.
func New(b *builtin.Strategy) registry.Strategy { return &Strategy{Strategy: b} }

// Validate applies the create rules to a new request and the update rules to a change.
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return nil
	}
	if prev, ok := old.(*certificatesv1.CertificateSigningRequest); ok {
		return validateCSRUpdate(csr, prev)
	}
	return validateCSRCreate(csr)
}

// PrepareForCreate stamps the requestor and clears the status.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		prepareCSRCreate(ctx, csr)
	}
}

// PrepareForUpdate: the approval and status subresources change what prepareCSRUpdate says;
// the main resource follows the default rules (its spec cannot change: Validate).
func (s *Strategy) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	csr, ok1 := obj.(*certificatesv1.CertificateSigningRequest)
	prev, ok2 := cur.(*certificatesv1.CertificateSigningRequest)
	if ok1 && ok2 {
		if out, handled := prepareCSRUpdate(subresource, csr, prev, time.Now()); handled {
			return out, nil
		}
	}
	return s.Strategy.PrepareForUpdate(subresource, obj, cur)
}
