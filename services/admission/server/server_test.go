package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/storage"
	admissionv1 "platform.io/proto/admission/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/admission/server"
	storageserver "platform.io/services/storage/server"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a storage service and an admission service over it running the test plugins.
type env struct {
	store   *storage.Client
	adm     *server.Server
	client  admissionv1.AdmissionClient
	health  healthpb.HealthClient
	plugins *plugins
}

// startStorage starts the storage service (embedded backend) on addr ("127.0.0.1:0" for any).
func startStorage(t *testing.T, addr string) (*storageserver.Server, *storage.Client) {
	t.Helper()
	sc := storageserver.DefaultConfig()
	sc.DataDir = filepath.Join(t.TempDir(), "storage")
	sc.Listen = addr
	st, err := storageserver.Start(context.Background(), sc, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Stop(context.Background()) })
	conn, err := grpc.NewClient(st.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return st, storage.NewClient(conn)
}

// startAdmission starts the admission service reading storage at storageAddr.
func startAdmission(t *testing.T, storageAddr string, configure func(*server.Config)) *env {
	t.Helper()
	p := newPlugins()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = storageAddr
	// No plugin here asks the authorization service; the connection is lazy.
	cfg.Authz.Address = "127.0.0.1:1"
	cfg.EnablePlugins = p.enabled
	cfg.DisablePlugins = p.disabled
	cfg.ShutdownTimeout = 5 * time.Second
	if configure != nil {
		configure(&cfg)
	}
	adm, err := server.Start(context.Background(), cfg, server.Options{Registry: p.registry()}, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Stop(context.Background()) })
	conn, err := grpc.NewClient(adm.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{adm: adm, client: admissionv1.NewAdmissionClient(conn), health: healthpb.NewHealthClient(conn), plugins: p}
}

func start(t *testing.T) *env {
	t.Helper()
	st, client := startStorage(t, "127.0.0.1:0")
	e := startAdmission(t, st.Addr().String(), nil)
	e.store = client
	e.waitReady(t)
	return e
}

// waitReady waits until the informers have synced (health SERVING).
func (e *env) waitReady(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(15 * time.Second)
	for {
		resp, err := e.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: admissionv1.Admission_ServiceDesc.ServiceName})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission service is not SERVING after 15s: %v %v", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// put stores a built-in object as the gateway does.
func (e *env) put(t *testing.T, resource, kind string, obj interface {
	storage.Marshaler
	GetNamespace() string
	GetName() string
}) int64 {
	t.Helper()
	value, err := storage.EncodeStored("v1", kind, obj)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.store.Create(context.Background(), &storagev1.CreateRequest{
		Type:   &storagev1.ResourceType{Resource: resource},
		Object: &storagev1.Object{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: value},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetObject().GetResourceVersion()
}

func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > 10*time.Second {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(begin)
}

var (
	configMapKind     = &admissionv1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMapResource = &admissionv1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgetKind        = &admissionv1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	widgetResource    = &admissionv1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

func configMap(name string, ann map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann, Labels: map[string]string{"app": "a"}},
		Data:       map[string]string{"k": "v"},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createRequest is a CREATE of a ConfigMap encoded as the gateway encodes it.
func createRequest(t *testing.T, cm *corev1.ConfigMap) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		Uid: "uid-1", Operation: "CREATE", Kind: configMapKind, Resource: configMapResource,
		RequestKind: configMapKind, RequestResource: configMapResource,
		Namespace: cm.Namespace, Name: cm.Name, Object: mustJSON(t, cm), Options: []byte(`{"kind":"CreateOptions","apiVersion":"meta.platform.io/v1"}`),
		User: &admissionv1.User{Name: "alice", Uid: "u1", Groups: []string{"dev", "system:authenticated"}, Extra: map[string]*admissionv1.Values{"scopes": {Values: []string{"a", "b"}}}},
	}
}

// Admit answers the mutated object only when a plugin changed it, by value: an unchanged object,
// or one a plugin rewrote with the same content, costs the gateway no decode.
func TestAdmitReturnsObjectOnlyWhenChanged(t *testing.T) {
	e := start(t)
	ctx := context.Background()

	t.Run("unchanged", func(t *testing.T) {
		resp, err := e.client.Admit(ctx, createRequest(t, configMap("plain", nil)))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || len(resp.Object) != 0 || resp.Rejection != nil {
			t.Fatalf("Admit = %v, want allowed with no object", resp)
		}
		if resp.AuditAnnotations["test/admitted"] != "CREATE" {
			t.Errorf("audit annotations %v", resp.AuditAnnotations)
		}
	})
	t.Run("rewritten with the same content", func(t *testing.T) {
		resp, err := e.client.Admit(ctx, createRequest(t, configMap("same", map[string]string{annMutate: "same"})))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || len(resp.Object) != 0 {
			t.Fatalf("Admit = %v, want allowed with no object", resp)
		}
	})
	t.Run("changed", func(t *testing.T) {
		resp, err := e.client.Admit(ctx, createRequest(t, configMap("changed", map[string]string{annMutate: "yes"})))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || len(resp.Object) == 0 {
			t.Fatalf("Admit = %v, want the mutated object", resp)
		}
		var got corev1.ConfigMap
		if err := json.Unmarshal(resp.Object, &got); err != nil {
			t.Fatal(err)
		}
		if got.Kind != "ConfigMap" || got.APIVersion != "v1" || got.Name != "changed" || got.Data["mutated"] != "true" || got.Data["k"] != "v" || got.Labels["app"] != "a" {
			t.Fatalf("mutated object %s", resp.Object)
		}
		if !slices.Equal(resp.Warnings, []string{"mutated by the test plugin"}) {
			t.Errorf("warnings %q", resp.Warnings)
		}
	})
	t.Run("custom resource changed", func(t *testing.T) {
		obj := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","annotations":{"test/mutate":"yes"}},"spec":{"size":9007199254740993}}`)
		resp, err := e.client.Admit(ctx, &admissionv1.AdmissionRequest{Operation: "CREATE", Kind: widgetKind, Resource: widgetResource, Namespace: "default", Name: "w", Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Object), `"labels":{"mutated":"true"}`) || !strings.Contains(string(resp.Object), "9007199254740993") {
			t.Fatalf("mutated widget %s", resp.Object)
		}
	})
	t.Run("custom resource unchanged, keys in another order", func(t *testing.T) {
		obj := []byte(`{"spec":{"size":1},"metadata":{"namespace":"default","name":"w"},"kind":"Widget","apiVersion":"example.com/v1"}`)
		resp, err := e.client.Admit(ctx, &admissionv1.AdmissionRequest{Operation: "CREATE", Kind: widgetKind, Resource: widgetResource, Namespace: "default", Name: "w", Object: obj})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || len(resp.Object) != 0 {
			t.Fatalf("Admit = %v, want no object", resp)
		}
	})
	t.Run("DELETE has no object", func(t *testing.T) {
		req := createRequest(t, configMap("gone", nil))
		req.Operation, req.OldObject, req.Object = "DELETE", req.Object, nil
		resp, err := e.client.Admit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || len(resp.Object) != 0 {
			t.Fatalf("Admit = %v", resp)
		}
		a := e.plugins.lastAttributes()
		if a.Object != nil || a.OldObject.(*corev1.ConfigMap).Name != "gone" {
			t.Fatalf("plugin saw object %v, old object %v", a.Object, a.OldObject)
		}
	})
}

// The plugins see every attribute of the request, with objects typed.
func TestAttributes(t *testing.T) {
	e := start(t)
	req := createRequest(t, configMap("attrs", nil))
	req.Operation = "UPDATE"
	req.OldObject = mustJSON(t, configMap("attrs", map[string]string{"old": "yes"}))
	req.SubResource = "status"
	req.RequestSubResource = "status"
	req.RequestKind = &admissionv1.GroupVersionKind{Version: "v1beta1", Kind: "ConfigMap"}
	req.RequestResource = &admissionv1.GroupVersionResource{Version: "v1beta1", Resource: "configmaps"}
	req.DryRun = true
	if _, err := e.client.Admit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	a := e.plugins.lastAttributes()
	switch {
	case a.Operation != "UPDATE" || a.UID != "uid-1" || !a.DryRun || a.Namespace != "default" || a.Name != "attrs":
		t.Errorf("request: %+v", a)
	case a.Kind.Kind != "ConfigMap" || a.Resource.Resource != "configmaps" || a.Subresource != "status":
		t.Errorf("kind/resource: %v %v %q", a.Kind, a.Resource, a.Subresource)
	case a.RequestKind.Version != "v1beta1" || a.RequestResource.Version != "v1beta1" || a.RequestSubresource != "status":
		t.Errorf("as requested: %v %v %q", a.RequestKind, a.RequestResource, a.RequestSubresource)
	case a.User == nil || a.User.Name != "alice" || a.User.UID != "u1" || !a.User.InGroup("dev") || !slices.Equal(a.User.Extra["scopes"], []string{"a", "b"}):
		t.Errorf("user: %+v", a.User)
	case !strings.Contains(string(a.Options), "CreateOptions"):
		t.Errorf("options: %s", a.Options)
	case a.Reinvocation:
		t.Error("first round is not a reinvocation")
	}
	if _, ok := a.Object.(*corev1.ConfigMap); !ok {
		t.Errorf("object is %T, want *corev1.ConfigMap", a.Object)
	}
	if old, ok := a.OldObject.(*corev1.ConfigMap); !ok || old.Annotations["old"] != "yes" {
		t.Errorf("old object %v", a.OldObject)
	}

	// No user at all (never from the gateway, but not a crash).
	req.User = nil
	if _, err := e.client.Validate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if e.plugins.lastAttributes().User != nil {
		t.Error("a request without a user has one")
	}
}

// Rejections carry the plugin's Status: code, reason, message, causes and retry-after, as the
// gateway answers them; an error that is not a Status is a 500.
func TestRejections(t *testing.T) {
	e := start(t)
	type cause struct{ typ, field, message string }
	cases := []struct {
		rule       string
		reject, in string
		code       int32
		reason     string
		message    string
		causes     []cause
		retryAfter int32
	}{
		{
			rule: "403 Forbidden names the resource and object (upstream admission.NewForbidden)", reject: "forbidden",
			code: 403, reason: "Forbidden", message: `configmaps "cm" is forbidden: test says no`,
		},
		{
			rule: "422 Invalid with a cause per field", reject: "invalid",
			code: 422, reason: "Invalid",
			message: `ConfigMap "cm" is invalid: [data.x: Invalid value: "bad": must be good, data.y: Required value]`,
			causes: []cause{
				{"FieldValueInvalid", "data.x", `Invalid value: "bad": must be good`},
				{"FieldValueRequired", "data.y", "Required value"},
			},
		},
		{
			rule: "429 TooManyRequests with retryAfterSeconds (EventRateLimit)", reject: "toomany",
			code: 429, reason: "TooManyRequests", message: "limit reached", retryAfter: 7,
		},
		{
			rule: "a wrapped Status keeps its code", reject: "badrequest-wrapped",
			code: 400, reason: "BadRequest", message: "not like this",
		},
		{
			rule: "a plain error is a 500 InternalError", reject: "plain",
			code: 500, reason: "InternalError", message: "Internal error occurred: boom",
		},
		{
			rule: "a rejection in the mutating phase maps the same way", reject: "forbidden", in: "admit",
			code: 403, reason: "Forbidden", message: `configmaps "cm" is forbidden: test says no`,
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ann := map[string]string{annReject: c.reject}
			if c.in != "" {
				ann[annRejectIn] = c.in
			}
			req := createRequest(t, configMap("cm", ann))
			call := e.client.Validate
			if c.in == "admit" {
				call = e.client.Admit
			}
			resp, err := call(context.Background(), req)
			if err != nil {
				t.Fatalf("a rejection is an answer, not a gRPC error: %v", err)
			}
			r := resp.Rejection
			if resp.Allowed || r == nil || len(resp.Object) != 0 {
				t.Fatalf("response %v", resp)
			}
			if r.Code != c.code || r.Reason != c.reason || r.Message != c.message || r.RetryAfterSeconds != c.retryAfter {
				t.Errorf("rejection %d %s %q retry %d\nwant      %d %s %q retry %d", r.Code, r.Reason, r.Message, r.RetryAfterSeconds, c.code, c.reason, c.message, c.retryAfter)
			}
			var got []cause
			for _, x := range r.Causes {
				got = append(got, cause{x.Type, x.Field, x.Message})
			}
			if !slices.Equal(got, c.causes) {
				t.Errorf("causes %v, want %v", got, c.causes)
			}
			if c.in == "" && (!slices.Contains(resp.Warnings, "validated by the test plugin") || resp.AuditAnnotations["test/validated"] != "true") {
				t.Errorf("warnings %q and annotations %v recorded before the rejection are lost", resp.Warnings, resp.AuditAnnotations)
			}
		})
	}
}

// A request the service cannot read is InvalidArgument (the gateway's bug, not the user's).
func TestInvalidArgument(t *testing.T) {
	e := start(t)
	cases := []struct {
		rule   string
		mutate func(*admissionv1.AdmissionRequest)
		want   string
	}{
		{"an operation AdmissionReview does not have", func(r *admissionv1.AdmissionRequest) { r.Operation = "PATCH" }, `unknown operation "PATCH"`},
		{"an empty operation", func(r *admissionv1.AdmissionRequest) { r.Operation = "" }, `unknown operation ""`},
		{"lower-case operation", func(r *admissionv1.AdmissionRequest) { r.Operation = "create" }, `unknown operation "create"`},
		{"an object that is not JSON", func(r *admissionv1.AdmissionRequest) { r.Object = []byte(`{"metadata":`) }, "decoding ConfigMap"},
		{"an object of the wrong shape", func(r *admissionv1.AdmissionRequest) { r.Object = []byte(`{"data":["not","a","map"]}`) }, "decoding ConfigMap"},
		{"an old object that is not JSON", func(r *admissionv1.AdmissionRequest) {
			r.Operation, r.OldObject = "UPDATE", []byte("{")
		}, "decoding ConfigMap"},
		{"a custom object that is not JSON", func(r *admissionv1.AdmissionRequest) {
			r.Kind, r.Resource, r.Object = widgetKind, widgetResource, []byte(`{"a"`)
		}, "decoding Widget"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			for name, call := range map[string]func(context.Context, *admissionv1.AdmissionRequest, ...grpc.CallOption) (*admissionv1.AdmissionResponse, error){
				"Admit": e.client.Admit, "Validate": e.client.Validate,
			} {
				req := createRequest(t, configMap("cm", nil))
				c.mutate(req)
				_, err := call(context.Background(), req)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
					t.Errorf("%s = %v, want InvalidArgument containing %q", name, err, c.want)
				}
			}
		})
	}
}

func recvSet(t *testing.T, stream admissionv1.Admission_WatchInterestClient) *admissionv1.InterestSet {
	t.Helper()
	type result struct {
		set *admissionv1.InterestSet
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := stream.Recv()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.set
	case <-time.After(10 * time.Second):
		t.Fatal("no interest set within 10s")
		return nil
	}
}

// WatchInterest streams the static rules and the dynamic namespaces at once, then a new set (next
// generation) each time a dynamic plugin's interest really changed.
func TestWatchInterest(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := e.client.WatchInterest(ctx, &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first := recvSet(t, stream)
	if len(first.Rules) != 1 {
		t.Fatalf("rules %v, want the one static rule", first.Rules)
	}
	r := first.Rules[0]
	if !slices.Equal(r.Operations, []string{"CREATE", "DELETE"}) || !slices.Equal(r.ApiGroups, []string{""}) || !slices.Equal(r.Resources, []string{"configmaps", "namespaces"}) ||
		r.Scope != "*" || !slices.Equal(r.UserGroups, []string{"system:authenticated"}) {
		t.Errorf("rule %v", r)
	}
	if !slices.Equal(first.Namespaces, []string{"initial"}) || first.OwnerReferences || first.Generation == 0 {
		t.Fatalf("first set %v", first)
	}

	// Namespaces from every dynamic plugin, deduplicated and sorted; owner references if any
	// plugin wants them.
	begin := time.Now()
	e.plugins.quota.set([]string{"b", "a", "b"}, false)
	e.plugins.owners.set([]string{"b", "c"}, true)
	var second *admissionv1.InterestSet
	for second == nil || !second.OwnerReferences || len(second.Namespaces) != 3 {
		second = recvSet(t, stream)
	}
	t.Logf("a change reached the stream in %v", time.Since(begin))
	if !slices.Equal(second.Namespaces, []string{"a", "b", "c"}) || len(second.Rules) != 1 || second.Generation <= first.Generation {
		t.Fatalf("second set %v after %v", second, first)
	}

	// A signal without a change sends nothing; the next real change is exactly one generation on.
	e.plugins.quota.set([]string{"a", "b"}, false)
	e.plugins.owners.set([]string{"c", "b"}, true)
	e.plugins.owners.set(nil, false)
	third := recvSet(t, stream)
	if third.Generation != second.Generation+1 || !slices.Equal(third.Namespaces, []string{"a", "b"}) || third.OwnerReferences {
		t.Fatalf("third set %v after %v: an unchanged interest must not make a generation", third, second)
	}

	// A watcher that connects later gets the current set at once.
	late, err := e.client.WatchInterest(ctx, &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recvSet(t, late); got.Generation != third.Generation || !slices.Equal(got.Namespaces, third.Namespaces) {
		t.Fatalf("late watcher got %v, want %v", got, third)
	}

	// Cancelling the stream ends it on the server (no leak): the next call still works.
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel = %v", err)
	}
	if _, err := e.client.Admit(context.Background(), createRequest(t, configMap("after", nil))); err != nil {
		t.Fatal(err)
	}
}

// Before the informers have listed, the service is NOT_SERVING and answers UNAVAILABLE (the
// plugins would decide on empty listers); once storage answers, it becomes ready by itself.
func TestUnavailableUntilSynced(t *testing.T) {
	// A free port for the storage service that is not running yet.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	e := startAdmission(t, addr, nil)
	for _, call := range []func(context.Context, *admissionv1.AdmissionRequest, ...grpc.CallOption) (*admissionv1.AdmissionResponse, error){e.client.Admit, e.client.Validate} {
		_, err := call(context.Background(), createRequest(t, configMap("early", nil)))
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "loading the objects") {
			t.Fatalf("before sync: %v, want UNAVAILABLE", err)
		}
	}
	resp, err := e.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: admissionv1.Admission_ServiceDesc.ServiceName})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before sync: %v %v", resp, err)
	}
	// The interest stream is available before sync (it is what the gateway needs first).
	stream, err := e.client.WatchInterest(context.Background(), &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvSet(t, stream)

	startStorage(t, addr)
	took := e.waitReady(t)
	t.Logf("ready %v after storage started", took)
	if _, err := e.client.Admit(context.Background(), createRequest(t, configMap("late", nil))); err != nil {
		t.Fatalf("after sync: %v", err)
	}
}

// Stop is graceful: interest streams end with UNAVAILABLE (the gateway reconnects elsewhere),
// in-flight calls finish, new calls are refused.
func TestGracefulStop(t *testing.T) {
	e := start(t)
	checkGracefulStop(t, e, e.client, "")
	e.adm.Stop(context.Background()) // twice is harmless
}

// checkGracefulStop stops the service while client (over the socket, or in process: what names
// it in messages) holds an interest stream and a call in flight: the stream ends with
// UNAVAILABLE, Stop waits for the call, which succeeds, and a later call is refused.
func checkGracefulStop(t *testing.T, e *env, client admissionv1.AdmissionClient, what string) {
	t.Helper()
	stream, err := client.WatchInterest(context.Background(), &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvSet(t, stream)

	inflight := make(chan error, 1)
	go func() {
		resp, err := client.Validate(context.Background(), createRequest(t, configMap("slow", map[string]string{annBlock: "yes"})))
		if err == nil && !resp.Allowed {
			err = status.Error(codes.Internal, "rejected")
		}
		inflight <- err
	}()
	select {
	case <-e.plugins.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking call never reached the plugin")
	}

	stopped := make(chan struct{})
	begin := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.adm.Stop(ctx)
		close(stopped)
	}()
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("%sinterest stream at Stop: %v, want UNAVAILABLE", what, err)
	}
	select {
	case <-stopped:
		t.Fatalf("Stop returned with %sa call in flight", what)
	case <-time.After(100 * time.Millisecond):
	}
	close(e.plugins.release)
	if err := <-inflight; err != nil {
		t.Fatalf("%sin-flight call: %v", what, err)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after the in-flight call finished")
	}
	t.Logf("Stop took %v", time.Since(begin))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.Admit(ctx, createRequest(t, configMap("after", nil))); status.Code(err) != codes.Unavailable {
		t.Fatalf("%sAdmit after Stop = %v, want UNAVAILABLE", what, err)
	}
}
