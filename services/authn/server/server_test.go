package server_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"platform.io/libs/pki"
	"platform.io/libs/serviceaccount"
	authnv1 "platform.io/proto/authn/v1"
	"platform.io/services/authn/server"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a running authentication service with a client certificate CA, a token file and
// service account keys. Storage is an address where nothing listens: every lookup fails.
type env struct {
	srv    *server.Server
	client authnv1.AuthenticationClient
	ca     *pki.CA
	saKey  string
}

func start(t testing.TB, edit func(*server.Config)) *env {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("users", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.Write(caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("s3cret,jane,1001,\"dev,ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := pki.WriteSigningKey(saKey); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = "127.0.0.1:1"
	cfg.ClientCAFile = caFile
	cfg.TokenAuthFile = tokens
	cfg.ServiceAccountIssuers = []string{"https://platform.test"}
	cfg.ServiceAccountSigningKeyFile = saKey
	if edit != nil {
		edit(&cfg)
	}
	s, err := server.Start(context.Background(), cfg, server.Options{}, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{srv: s, client: authnv1.NewAuthenticationClient(conn), ca: ca, saKey: saKey}
}

func (e *env) cert(t testing.TB, user string, groups ...string) []byte {
	t.Helper()
	certPEM, _, err := e.ca.IssueClient(user, groups, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw
}

// The union of methods, as upstream: the first method that accepts wins and every authenticated
// user is in system:authenticated; a refused credential is UNAUTHENTICATED unless another method
// accepts the request; no credentials is "not authenticated" (the caller decides on anonymous).
func TestAuthenticateUnion(t *testing.T) {
	e := start(t, nil)
	ctx := context.Background()
	resp, err := e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: "s3cret"})
	if err != nil || !resp.Authenticated || resp.User.Name != "jane" || resp.User.Uid != "1001" || resp.Method != "token-file" ||
		!slices.Equal(resp.User.Groups, []string{"dev", "ops", "system:authenticated"}) || resp.CacheTtlMs != 10000 {
		t.Fatalf("token file: %v, %v", resp, err)
	}
	resp, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{PeerCertificates: [][]byte{e.cert(t, "alice", "dev")}})
	if err != nil || resp.User.Name != "alice" || resp.Method != "x509" {
		t.Fatalf("client certificate: %v, %v", resp, err)
	}
	// A certificate of another CA is refused, but a good token on the same request wins.
	other, _ := pki.NewCA("other", time.Hour)
	foreignPEM, _, _ := other.IssueClient("mallory", nil, time.Hour)
	foreign, _ := pki.ParseCertificatePEM(foreignPEM)
	_, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{PeerCertificates: [][]byte{foreign.Raw}})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("foreign certificate: %v", err)
	}
	resp, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{PeerCertificates: [][]byte{foreign.Raw}, Token: "s3cret"})
	if err != nil || resp.User.Name != "jane" {
		t.Fatalf("foreign certificate with a good token: %v, %v", resp, err)
	}
	// A token nobody knows is refused with upstream's words, never "not authenticated".
	_, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: "nope"})
	if status.Code(err) != codes.Unauthenticated || status.Convert(err).Message() != "invalid bearer token" {
		t.Fatalf("unknown token: %v", err)
	}
	resp, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{})
	if err != nil || resp.Authenticated {
		t.Fatalf("no credentials: %v, %v", resp, err)
	}
	_, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{PeerCertificates: [][]byte{[]byte("not DER")}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed certificate: %v", err)
	}
}

// A service account token while storage cannot be read: the decision cannot be made, which is
// UNAVAILABLE (a 503 at the gateway), not a refusal of the client's credentials.
func TestUnavailableIsNotUnauthenticated(t *testing.T) {
	e := start(t, nil)
	key, err := serviceaccount.LoadSigningKey(e.saKey)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := serviceaccount.NewIssuer("https://platform.test", key)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := iss.IssueBound(serviceaccount.BoundRequest{Namespace: "default", Name: "robot", UID: "u1", Audiences: []string{"https://platform.test"}, Expiration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = e.client.Authenticate(ctx, &authnv1.AuthenticateRequest{Token: token})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("storage down: %v", err)
	}
}

// Describe and the TokenRequest side.
func TestDescribeAndIssue(t *testing.T) {
	e := start(t, func(c *server.Config) {
		c.AnonymousAuth = false
		c.EnableBootstrapTokenAuth = true
	})
	ctx := context.Background()
	d, err := e.client.Describe(ctx, &authnv1.DescribeRequest{})
	if err != nil || d.Anonymous || !slices.Equal(d.TokenMethods, []string{"token-file", "serviceaccount", "bootstrap-token"}) ||
		!slices.Equal(d.ApiAudiences, []string{"https://platform.test"}) {
		t.Fatalf("describe: %v, %v", d, err)
	}
	resp, err := e.client.IssueServiceAccountToken(ctx, &authnv1.IssueServiceAccountTokenRequest{Namespace: "default", Name: "robot", Uid: "u1", ExpirationSeconds: 3600})
	if err != nil || resp.Token == "" || time.Until(time.Unix(resp.ExpirationUnix, 0)) < 59*time.Minute {
		t.Fatalf("issue: %v, %v", resp, err)
	}
	if _, err := e.client.IssueServiceAccountToken(ctx, &authnv1.IssueServiceAccountTokenRequest{Namespace: "default", Name: "robot"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("issue without uid: %v", err)
	}

	noKey := start(t, func(c *server.Config) {
		c.ServiceAccountSigningKeyFile = ""
		c.ServiceAccountKeyFiles = []string{e.saKey}
	})
	if _, err := noKey.client.IssueServiceAccountToken(ctx, &authnv1.IssueServiceAccountTokenRequest{Namespace: "default", Name: "robot", Uid: "u1"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("issue without a signing key: %v", err)
	}
}
