// Package authenticator is what every identity method of the authentication service implements.
// A request is authenticated by the first method that succeeds; a credential that a method
// recognizes and refuses makes the request 401 unless another method accepts it (upstream's union).
package authenticator

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
)

// Well-known users and groups.
const (
	Anonymous            = "system:anonymous"
	GroupUnauthenticated = "system:unauthenticated"
	GroupAuthenticated   = "system:authenticated"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Request is what a request presents to authentication.
type Request struct {
	// Token is the bearer token ("" when none).
	Token string
	// PeerCertificates is the client certificate chain of the TLS connection, leaf first.
	PeerCertificates []*x509.Certificate
	// Header holds the request headers an authenticating proxy sets (only those the service
	// announced).
	Header http.Header
	// Audiences are the audiences the token must be valid for; empty means the API server's.
	Audiences []string
}

// Response is a successful authentication.
type Response struct {
	User *User
	// Audiences are those of the request's audiences the credential is valid for (for tokens).
	Audiences []string
}

// ErrNotMine is returned by a method that does not recognize the request's credentials (a token
// that is not a JWT for the JWT methods, no certificate for x509): the next method is asked.
var ErrNotMine = errors.New("credentials not recognized by this method")

// Method is one identity method. It returns (response, nil) when it authenticates the request,
// ErrNotMine when the request's credentials are not its kind, and any other error when it
// recognizes and refuses them (its message may be shown to the client, so it never contains the
// credential).
type Method interface {
	Name() string
	Authenticate(ctx context.Context, req *Request) (*Response, error)
}

// ErrNotFound is what Objects returns for an object that does not exist.
var ErrNotFound = errors.New("not found")

// Objects reads the API objects token methods check: service accounts and the Secrets, Pods and
// Nodes tokens are bound to, and bootstrap token Secrets. Reads are consistent (never older than
// an acknowledged write), so a deleted object is seen as gone at once.
type Objects interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// UnavailableError is a failure to decide (a store or remote service could not be reached), as
// opposed to a refusal of the credentials: the request is answered 503, not 401. Methods keep it in
// their error chain (wrap with %w).
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "authentication unavailable: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable tells whether err says the decision could not be made.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}
