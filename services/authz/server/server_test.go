package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/storage"
	authzv1 "platform.io/proto/authz/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/authz/server"
	storageserver "platform.io/services/storage/server"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a storage service and an authorization service reading from it.
type env struct {
	srv    *server.Server
	store  *storage.Client
	client authzv1.AuthorizationClient
	cfg    server.Config
}

func start(t *testing.T, modes ...string) *env {
	t.Helper()
	sc := storageserver.DefaultConfig()
	sc.DataDir = filepath.Join(t.TempDir(), "storage")
	sc.Listen = "127.0.0.1:0"
	st, err := storageserver.Start(context.Background(), sc, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Stop(context.Background()) })
	stConn, err := grpc.NewClient(st.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stConn.Close() })

	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = st.Addr().String()
	cfg.Modes = modes
	az, err := server.Start(context.Background(), cfg, server.Options{}, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { az.Stop(context.Background()) })
	conn, err := grpc.NewClient(az.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{srv: az, store: storage.NewClient(stConn), client: authzv1.NewAuthorizationClient(conn), cfg: cfg}
}

func (e *env) put(t *testing.T, group, resource, apiVersion, kind string, obj interface {
	storage.Marshaler
	GetNamespace() string
	GetName() string
}) {
	t.Helper()
	value, err := storage.EncodeStored(apiVersion, kind, obj)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.store.Create(context.Background(), &storagev1.CreateRequest{
		Type:   &storagev1.ResourceType{Group: group, Resource: resource},
		Object: &storagev1.Object{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: value},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) authorize(t *testing.T, attrs *authzv1.Attributes) *authzv1.AuthorizeResponse {
	t.Helper()
	var resp *authzv1.AuthorizeResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		resp, err = e.client.Authorize(context.Background(), &authzv1.AuthorizeRequest{Attributes: attrs})
		if status.Code(err) == codes.Unavailable && time.Now().Before(deadline) {
			// The policy is not loaded yet.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}

var rbacGroup = naming.Group("rbac.authorization.k8s.io")

// RBAC objects written to storage are enforced within a second, the generation stream announces
// every change, system:masters is always allowed, and the escalation check names what is missing.
func TestRBACFromStorage(t *testing.T) {
	e := start(t, server.ModeRBAC)
	alice := &authzv1.User{Name: "alice", Groups: []string{"system:authenticated"}}
	list := &authzv1.Attributes{User: alice, Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: "default"}
	if r := e.authorize(t, list); r.Decision != authzv1.Decision_DECISION_NO_OPINION || !r.Cacheable {
		t.Fatalf("before any binding: %v", r)
	}
	masters := e.authorize(t, &authzv1.Attributes{User: &authzv1.User{Name: "root", Groups: []string{"system:masters"}}, Verb: "delete", ResourceRequest: true, Resource: "nodes"})
	if masters.Decision != authzv1.Decision_DECISION_ALLOW {
		t.Fatalf("system:masters: %v", masters)
	}

	stream, err := e.client.WatchPolicy(context.Background(), &authzv1.WatchPolicyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.put(t, rbacGroup, "roles", rbacGroup+"/v1", "Role", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "default"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}})
	e.put(t, rbacGroup, "rolebindings", rbacGroup+"/v1", "RoleBinding", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-pods", Namespace: "default"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: "pod-reader"}, Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacGroup, Name: "alice"}}})
	for {
		r := e.authorize(t, list)
		if r.Decision == authzv1.Decision_DECISION_ALLOW {
			if !strings.Contains(r.Reason, `RoleBinding "alice-pods/default"`) || !r.NameIndependent {
				t.Errorf("allowed: %v", r)
			}
			break
		}
		if time.Since(start) > time.Second {
			t.Fatal("the binding was not enforced within a second")
		}
		time.Sleep(5 * time.Millisecond)
	}
	next, err := stream.Recv()
	if err != nil || next.Generation <= first.Generation {
		t.Fatalf("generation after the change: %v (first %v), %v", next, first, err)
	}

	esc, err := e.client.CheckEscalation(context.Background(), &authzv1.CheckEscalationRequest{User: alice, Namespace: "default",
		Rules: []*authzv1.PolicyRule{{Verbs: []string{"list", "delete"}, ApiGroups: []string{""}, Resources: []string{"pods"}}}})
	if err != nil || esc.Covered || len(esc.Missing) != 1 || !strings.Contains(esc.Message, "not currently held") {
		t.Fatalf("escalation: %v, %v", esc, err)
	}
	rules, err := e.client.ReviewRules(context.Background(), &authzv1.ReviewRulesRequest{User: alice, Namespace: "default"})
	if err != nil || len(rules.ResourceRules) != 1 || rules.Incomplete {
		t.Fatalf("rules: %v, %v", rules, err)
	}

	var out bytes.Buffer
	if err := server.DumpPolicy(context.Background(), e.cfg, &out, discard); err != nil {
		t.Fatal(err)
	}
	if dump := out.String(); !strings.Contains(dump, "package rbac") || !strings.Contains(dump, "alice-pods") {
		t.Errorf("--dump-policy output:\n%s", dump)
	}
}

// The Node mode reads pods from storage: a node may get what the pods bound to it use, and
// nothing else; modes are consulted in order and the first decision wins.
func TestNodeAndModeOrder(t *testing.T) {
	e := start(t, server.ModeNode, server.ModeAlwaysDeny)
	e.put(t, "", "pods", "v1", "Pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}},
	}})
	node := &authzv1.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	get := func(name string) *authzv1.Attributes {
		return &authzv1.Attributes{User: node, Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "default", Name: name}
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.authorize(t, get("db")).Decision != authzv1.Decision_DECISION_ALLOW {
		if time.Now().After(deadline) {
			t.Fatal("node n1 may not get the secret its pod uses")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := e.authorize(t, get("db")); r.Cacheable || r.NameIndependent {
		t.Errorf("a graph decision must not be reused: %v", r)
	}
	// The Node mode has no opinion on another secret; AlwaysDeny then denies.
	if r := e.authorize(t, get("other")); r.Decision != authzv1.Decision_DECISION_DENY {
		t.Errorf("other secret: %v", r)
	}
	other := &authzv1.User{Name: "bob", Groups: []string{"system:authenticated"}}
	if r := e.authorize(t, &authzv1.Attributes{User: other, Verb: "get", ResourceRequest: true, Resource: "secrets", Namespace: "default", Name: "db"}); r.Decision != authzv1.Decision_DECISION_DENY {
		t.Errorf("non-node user: %v", r)
	}
}

// Configuration: ABAC and unknown modes refuse to start with a message naming the flag.
func TestModesValidation(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Modes = []string{"RBAC", "ABAC", "Magic"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "ABAC is not supported") || !strings.Contains(err.Error(), `unknown mode "Magic"`) {
		t.Fatalf("modes validation: %v", err)
	}
	cfg = server.DefaultConfig()
	cfg.Modes = []string{"Webhook"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--authorization-webhook-config-file") {
		t.Fatalf("Webhook without a configuration: %v", err)
	}
}
