package generic

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/kinds"
)

// The store's stages, in process: the store over in-memory storage, authorization and admission
// that record what is asked of them, and strategies that record the kind's stages. No socket, no
// service: what is checked is the order the store runs its stages in, which the end-to-end
// suites cannot see.

// stageLog records the stages a write ran, in order.
type stageLog struct {
	mu     sync.Mutex
	stages []string
}

func (l *stageLog) add(s string) {
	l.mu.Lock()
	l.stages = append(l.stages, s)
	l.mu.Unlock()
}

func (l *stageLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.stages
	l.stages = nil
	return out
}

// memStorage is storage in a map: one revision counter, compare-and-swap updates; conflicts
// makes the next Update calls lose their compare-and-swap, as if another write got there first.
type memStorage struct {
	log       *stageLog
	mu        sync.Mutex
	rev       int64
	objs      map[string]*storagev1.Object
	conflicts int
}

func key(t *storagev1.ResourceType, ns, name string) string {
	return t.GetGroup() + "/" + t.GetResource() + "/" + ns + "/" + name
}

func (m *memStorage) Create(_ context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	m.log.add("storage.create")
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(req.Type, req.Object.Namespace, req.Object.Name)
	if _, ok := m.objs[k]; ok {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_ALREADY_EXISTS}
	}
	m.rev++
	o := proto.Clone(req.Object).(*storagev1.Object)
	o.ResourceVersion = m.rev
	m.objs[k] = o
	return &storagev1.CreateResponse{Object: o}, nil
}

func (m *memStorage) Get(_ context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	m.log.add("storage.get")
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key(req.Type, req.Namespace, req.Name)]
	if !ok {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_NOT_FOUND}
	}
	return &storagev1.GetResponse{Object: o}, nil
}

func (m *memStorage) Update(_ context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	m.log.add("storage.update")
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(req.Type, req.Object.Namespace, req.Object.Name)
	cur, ok := m.objs[k]
	if !ok {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_NOT_FOUND}
	}
	if m.conflicts > 0 || cur.ResourceVersion != req.Preconditions.GetResourceVersion() {
		m.conflicts--
		return nil, &storage.Error{Reason: storagev1.ErrorReason_CONFLICT}
	}
	m.rev++
	o := proto.Clone(req.Object).(*storagev1.Object)
	o.ResourceVersion = m.rev
	m.objs[k] = o
	return &storagev1.UpdateResponse{Object: o}, nil
}

func (m *memStorage) Delete(context.Context, *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	return nil, fmt.Errorf("not used")
}

// recordingAdmitter allows every write, recording each phase.
type recordingAdmitter struct{ log *stageLog }

func (r recordingAdmitter) Mutate(_ context.Context, at Attempt) (runtime.Object, error) {
	r.log.add("admission.mutate " + at.Op)
	return at.Obj, nil
}

func (r recordingAdmitter) Validate(_ context.Context, at Attempt) error {
	r.log.add("admission.validate " + at.Op)
	return nil
}

func (r recordingAdmitter) Delete(_ context.Context, at Attempt) error {
	r.log.add("admission.delete " + at.Op)
	return nil
}

// recordingAuthorizer allows everything but the verbs in deny, recording each decision asked.
type recordingAuthorizer struct {
	log  *stageLog
	deny map[string]bool
}

func (r recordingAuthorizer) Authorize(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
	r.log.add("authorize " + a.Verb)
	if r.deny[a.Verb] {
		return auth.DecisionNoOpinion, "", nil
	}
	return auth.DecisionAllow, "", nil
}

// recordingStrategy records the kind's stages of the strategy it wraps.
type recordingStrategy struct {
	registry.Strategy
	log *stageLog
}

func (s recordingStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.log.add("prepare")
	s.Strategy.PrepareForCreate(ctx, obj)
}

func (s recordingStrategy) PrepareForUpdate(sub string, obj, cur runtime.Object) (runtime.Object, error) {
	s.log.add("prepare")
	return s.Strategy.PrepareForUpdate(sub, obj, cur)
}

func (s recordingStrategy) FieldManager(sub string) (*managedfields.FieldManager, error) {
	s.log.add("fieldmanager")
	return s.Strategy.FieldManager(sub)
}

func (s recordingStrategy) ValidateName(name string) []string {
	s.log.add("objectmeta")
	return s.Strategy.ValidateName(name)
}

func (s recordingStrategy) Validate(obj, old runtime.Object) field.ErrorList {
	s.log.add("validate")
	return s.Strategy.Validate(obj, old)
}

func (s recordingStrategy) CheckWrite(ctx context.Context, obj, old runtime.Object) error {
	s.log.add("checkwrite")
	return s.Strategy.CheckWrite(ctx, obj, old)
}

// newStageStore is the store over the recording seams, and the ConfigMaps resource, whose
// strategy records the kind's stages.
func newStageStore(t *testing.T, deny ...string) (*Store, *registry.Resource, *memStorage, *stageLog) {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	log := &stageLog{}
	mem := &memStorage{log: log, objs: map[string]*storagev1.Object{}}
	denied := map[string]bool{}
	for _, v := range deny {
		denied[v] = true
	}
	factory := kinds.Factory(kinds.Deps{Registry: reg, Shared: builtin.NewShared(reg.Scheme)})
	reg.UseStrategies(registry.StrategyFactory{
		Builtin: func(res *registry.Resource) registry.Strategy {
			return recordingStrategy{Strategy: factory.Builtin(res), log: log}
		},
		Custom: factory.Custom,
	})
	res, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		t.Fatal("configmaps are not served")
	}
	s := New(Config{Storage: mem, Authorizer: recordingAuthorizer{log: log, deny: denied}, Admitter: recordingAdmitter{log: log},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s, res, mem, log
}

func asUser(name string) context.Context {
	return auth.WithUser(context.Background(), &auth.User{Name: name, Groups: []string{auth.GroupAuthenticated}})
}

// configMapOp is an update of default/cm to data, as PUT makes it.
func configMapOp(res *registry.Resource, log *stageLog, data map[string]string, rv string) *Update {
	return &Update{Res: res, Namespace: "default", Name: "cm", Manager: "test", Create: true,
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			log.add("transform")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", ResourceVersion: rv}, Data: data}
			cm.SetGroupVersionKind(res.GroupVersionKind())
			return cm, nil
		}}
}

// TestStoreStageOrder: every write of an existing object runs the stages in the order
// docs/architecture.md decision 66 records; a lost compare-and-swap starts again from the read;
// a stale precondition stops before admission; an update that creates is authorized as a create
// and runs the create stages in the same order.
func TestStoreStageOrder(t *testing.T) {
	s, res, mem, log := newStageStore(t)
	ctx := asUser("alice")

	if _, created, err := s.Update(ctx, configMapOp(res, log, map[string]string{"a": "1"}, "")); err != nil || !created {
		t.Fatalf("create through update: created %v, %v", created, err)
	}
	wantCreate := []string{"storage.get", "transform", "authorize create", "admission.mutate CREATE", "prepare", "fieldmanager",
		"objectmeta", "validate", "checkwrite", "admission.validate CREATE", "storage.create"}
	if got := log.take(); !slices.Equal(got, wantCreate) {
		t.Errorf("create through update:\n got %v\nwant %v", got, wantCreate)
	}

	update := []string{"storage.get", "transform", "admission.mutate UPDATE", "prepare", "fieldmanager",
		"objectmeta", "validate", "checkwrite", "admission.validate UPDATE", "storage.update"}
	if _, _, err := s.Update(ctx, configMapOp(res, log, map[string]string{"a": "2"}, "")); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); !slices.Equal(got, update) {
		t.Errorf("update:\n got %v\nwant %v", got, update)
	}

	mem.conflicts = 1
	if _, _, err := s.Update(ctx, configMapOp(res, log, map[string]string{"a": "3"}, "")); err != nil {
		t.Fatal(err)
	}
	if got := log.take(); !slices.Equal(got, append(slices.Clone(update), update...)) {
		t.Errorf("a lost compare-and-swap starts again from the read:\n got %v", got)
	}

	_, _, err := s.Update(ctx, configMapOp(res, log, map[string]string{"a": "4"}, "1"))
	if !apierrors.IsConflict(err) {
		t.Errorf("a stale resourceVersion: %v, want 409", err)
	}
	if got := log.take(); !slices.Equal(got, []string{"storage.get", "transform"}) {
		t.Errorf("a stale precondition ran %v, want it to stop before admission", got)
	}

	mem.conflicts = MaxAttempts
	_, _, err = s.Update(ctx, configMapOp(res, log, map[string]string{"a": "5"}, ""))
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "too many concurrent writers") {
		t.Errorf("losing every compare-and-swap: %v", err)
	}
	log.take()
}

// TestStoreCreateNeedsCreate: an update that would create is refused before any other stage when
// the caller may not create; the gateway's own writes (no user) are not authorized (whether they
// are admitted is the Admitter's choice: apiserver's admits only a user's writes).
func TestStoreCreateNeedsCreate(t *testing.T) {
	s, res, _, log := newStageStore(t, "create")
	_, _, err := s.Update(asUser("bob"), configMapOp(res, log, map[string]string{"a": "1"}, ""))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "configmaps"`) {
		t.Errorf("create through update without create: %v", err)
	}
	if got := log.take(); !slices.Equal(got, []string{"storage.get", "transform", "authorize create"}) {
		t.Errorf("refused create ran %v", got)
	}
	if _, created, err := s.Update(context.Background(), configMapOp(res, log, nil, "")); err != nil || !created {
		t.Errorf("the gateway's own create: %v %v", created, err)
	}
	if got := log.take(); slices.Contains(got, "authorize create") {
		t.Errorf("the gateway's own write was authorized: %v", got)
	}
}
