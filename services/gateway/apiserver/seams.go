package apiserver

import (
	"context"

	"platform.io/libs/storage"
	admissionv1 "platform.io/proto/admission/v1"
	authnv1 "platform.io/proto/authn/v1"
	authzv1 "platform.io/proto/authz/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/admission"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/listcache"
	"platform.io/services/gateway/registry/generic"
	"platform.io/services/gateway/registry/rbac"
)

// The API's seams: what it needs from the services behind the gateway, as interfaces. The
// server hands it the gRPC clients (libs/storage.Client, auth.Remote, auth.RemoteAuthorizer,
// admission.Client); tests of a kind's rules and of the store's stages hand it small in-memory
// implementations instead (store_internal_test.go), while the end-to-end suites keep the wire.

// Storage is the storage service's API: the writes and reads of the generic store, the list
// caches' revisions and watches, and lists.
type Storage interface {
	generic.Storage
	listcache.Storage
	List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error)
}

// EventStream is a storage watch: batches of events until an error ends it.
type EventStream = listcache.EventStream

// StorageClient adapts the storage service's client to Storage.
func StorageClient(c *storage.Client) Storage { return storageClient{c} }

type storageClient struct{ *storage.Client }

func (c storageClient) Watch(ctx context.Context, req *storagev1.WatchRequest) (EventStream, error) {
	s, err := c.Client.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Authenticator is what the API asks the authentication service beyond identifying callers
// (the handler chain does that): its settings (the service account issuer), token reviews and
// service account tokens.
type Authenticator interface {
	Describe(ctx context.Context) (*authnv1.DescribeResponse, error)
	ReviewToken(ctx context.Context, token string, audiences []string) (*auth.User, []string, error)
	IssueServiceAccountToken(ctx context.Context, req *authnv1.IssueServiceAccountTokenRequest) (*authnv1.IssueServiceAccountTokenResponse, error)
}

// Authorizer is what the API asks the authorization service: decisions (access reviews, a write
// that creates), the rules a user holds (SelfSubjectRulesReview) and escalation checks (roles
// and bindings).
type Authorizer interface {
	rbac.Authorizer
	RulesFor(ctx context.Context, u *auth.User, namespace string) (*authzv1.ReviewRulesResponse, error)
}

// Admission is the admission service: whether anything may act on a write, and its two phases.
type Admission interface {
	Interested(r admission.Request) bool
	Admit(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error)
	Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error)
}
