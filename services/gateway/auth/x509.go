package auth

import (
	"net/http"
)

// X509 authenticates callers by the client certificate the TLS layer verified against the
// cluster CA: the subject's common name is the user, its organizations are the groups.
type X509 struct{}

// AuthenticateRequest reads the identity from the verified client certificate chain.
func (X509) AuthenticateRequest(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, false, nil
	}
	cert := r.TLS.VerifiedChains[0][0]
	if cert.Subject.CommonName == "" {
		return nil, false, nil
	}
	groups := append([]string(nil), cert.Subject.Organization...)
	return &User{Name: cert.Subject.CommonName, Groups: groups}, true, nil
}
