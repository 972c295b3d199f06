package generic

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/kinds"
)

// deletingStorage is memStorage with deletes (compare-and-swap on the resourceVersion).
type deletingStorage struct{ *memStorage }

func (m deletingStorage) Delete(_ context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	m.log.add("storage.delete")
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(req.Type, req.Namespace, req.Name)
	cur, ok := m.objs[k]
	if !ok {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_NOT_FOUND}
	}
	if rv := req.Preconditions.GetResourceVersion(); rv != 0 && rv != cur.ResourceVersion {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_CONFLICT}
	}
	delete(m.objs, k)
	m.rev++
	return &storagev1.DeleteResponse{Previous: cur, ResourceVersion: m.rev}, nil
}

// podStore is the store with the real kinds' strategies over in-memory storage, its clock fixed
// at now, and the pods resource.
func podStore(t *testing.T, now time.Time) (*Store, *registry.Resource) {
	t.Helper()
	reg, err := registry.New(registry.RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg.UseStrategies(kinds.Factory(kinds.Deps{Registry: reg, Shared: builtin.NewShared(reg.Scheme)}))
	res, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if !ok {
		t.Fatal("pods are not served")
	}
	log := &stageLog{}
	mem := deletingStorage{&memStorage{log: log, objs: map[string]*storagev1.Object{}}}
	s := New(Config{Storage: mem, Admitter: recordingAdmitter{log: log}, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s, res
}

func createPod(t *testing.T, s *Store, res *registry.Resource, name string, edit func(*corev1.Pod)) {
	t.Helper()
	grace := int64(30)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}, TerminationGracePeriodSeconds: &grace}}
	if edit != nil {
		edit(p)
	}
	p.SetGroupVersionKind(res.GroupVersionKind())
	if _, err := s.Create(context.Background(), res, &Create{Obj: p, Manager: "test"}); err != nil {
		t.Fatal(err)
	}
}

func getPod(t *testing.T, s *Store, res *registry.Resource, name string) (*corev1.Pod, bool) {
	t.Helper()
	obj, err := s.Get(context.Background(), res, "ns", name)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Pod), true
}

func seconds(n int64) *int64 { return &n }

// TestPodGracefulDeletion: upstream's graceful deletion of pods. A pod on a node gets
// deletionTimestamp (now plus the period: the request's, else its terminationGracePeriodSeconds)
// and deletionGracePeriodSeconds, a bumped generation, and stays for its node to finish; a later
// delete may only shorten the period (a longer or equal one changes nothing), and a period of 0
// deletes it. A pod no node runs, or one that has finished, is deleted at once whatever the
// period. Finalizers hold a pod deleted with a period of 0, and the update that removes the last
// one removes it; a pod still in its grace period waits for the delete that ends it.
func TestPodGracefulDeletion(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s, res := podStore(t, now)
	ctx := context.Background()
	onNode := func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }

	// Unscheduled: deleted at once, even with a period.
	createPod(t, s, res, "pending", nil)
	if _, deleted, err := s.Delete(ctx, res, "ns", "pending", &metav1.DeleteOptions{GracePeriodSeconds: seconds(30)}); err != nil || !deleted {
		t.Fatalf("unscheduled pod: deleted %v, %v", deleted, err)
	}
	if _, ok := getPod(t, s, res, "pending"); ok {
		t.Error("the unscheduled pod is still stored")
	}

	// Finished on a node: deleted at once.
	createPod(t, s, res, "done", func(p *corev1.Pod) { onNode(p); p.Status.Phase = corev1.PodSucceeded })
	// (status is cleared on create; set it as the node would, through status.)
	if _, _, err := s.Update(ctx, &Update{Res: res, Namespace: "ns", Name: "done", Subresource: "status", Manager: "node",
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			p := cur.DeepCopyObject().(*corev1.Pod)
			p.Status.Phase = corev1.PodSucceeded
			return p, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := s.Delete(ctx, res, "ns", "done", &metav1.DeleteOptions{}); err != nil || !deleted {
		t.Fatalf("succeeded pod: deleted %v, %v", deleted, err)
	}

	// On a node: the pod's own period.
	createPod(t, s, res, "web", onNode)
	obj, deleted, err := s.Delete(ctx, res, "ns", "web", &metav1.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("scheduled pod: deleted %v, %v", deleted, err)
	}
	p, ok := getPod(t, s, res, "web")
	if !ok || p.DeletionTimestamp == nil || !p.DeletionTimestamp.Time.Equal(now.Add(30*time.Second)) ||
		p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 || p.Generation != 2 {
		t.Fatalf("marked pod: %+v", p.ObjectMeta)
	}
	if got := obj.(*corev1.Pod); got.DeletionTimestamp == nil {
		t.Error("the answer is not the marked pod")
	}
	// A longer or equal period, or none, changes nothing.
	for _, opts := range []*metav1.DeleteOptions{{}, {GracePeriodSeconds: seconds(30)}, {GracePeriodSeconds: seconds(60)}} {
		if _, deleted, err := s.Delete(ctx, res, "ns", "web", opts); err != nil || deleted {
			t.Fatalf("pending delete: %v %v", deleted, err)
		}
		again, _ := getPod(t, s, res, "web")
		if again.ResourceVersion != p.ResourceVersion {
			t.Errorf("a delete with %v changed the pending pod", opts.GracePeriodSeconds)
		}
	}
	// A shorter one moves the deletion timestamp by the difference.
	if _, deleted, err := s.Delete(ctx, res, "ns", "web", &metav1.DeleteOptions{GracePeriodSeconds: seconds(10)}); err != nil || deleted {
		t.Fatalf("shortening: %v %v", deleted, err)
	}
	p, _ = getPod(t, s, res, "web")
	if !p.DeletionTimestamp.Time.Equal(now.Add(10*time.Second)) || *p.DeletionGracePeriodSeconds != 10 || p.Generation != 2 {
		t.Errorf("shortened: %v %v generation %d", p.DeletionTimestamp, *p.DeletionGracePeriodSeconds, p.Generation)
	}
	// 0 ends it (kubectl delete --grace-period=0 --force, or the node).
	if _, deleted, err := s.Delete(ctx, res, "ns", "web", &metav1.DeleteOptions{GracePeriodSeconds: seconds(0)}); err != nil || !deleted {
		t.Fatalf("period 0: %v %v", deleted, err)
	}
	if _, ok := getPod(t, s, res, "web"); ok {
		t.Error("the pod deleted with a period of 0 is still stored")
	}

	// A negative period is 1 second.
	createPod(t, s, res, "neg", onNode)
	if _, _, err := s.Delete(ctx, res, "ns", "neg", &metav1.DeleteOptions{GracePeriodSeconds: seconds(-5)}); err != nil {
		t.Fatal(err)
	}
	if p, _ := getPod(t, s, res, "neg"); p == nil || *p.DeletionGracePeriodSeconds != 1 {
		t.Errorf("negative period: %+v", p)
	}

	// Finalizers: a period of 0 marks the pod now; removing the finalizer removes it.
	createPod(t, s, res, "held", func(p *corev1.Pod) { onNode(p); p.Finalizers = []string{"example.com/hold"} })
	if _, deleted, err := s.Delete(ctx, res, "ns", "held", &metav1.DeleteOptions{GracePeriodSeconds: seconds(0)}); err != nil || deleted {
		t.Fatalf("held pod: %v %v", deleted, err)
	}
	p, ok = getPod(t, s, res, "held")
	if !ok || !p.DeletionTimestamp.Time.Equal(now) || *p.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("held pod marked: %+v", p)
	}
	unfinalize := func(name string) {
		t.Helper()
		if _, _, err := s.Update(ctx, &Update{Res: res, Namespace: "ns", Name: name, Manager: "test",
			Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
				p := cur.DeepCopyObject().(*corev1.Pod)
				p.Finalizers = nil
				return p, nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	unfinalize("held")
	if _, ok := getPod(t, s, res, "held"); ok {
		t.Error("the held pod stayed once its finalizer was removed")
	}

	// A pod still in its grace period stays when its finalizer goes, until a delete ends it.
	createPod(t, s, res, "graceful", func(p *corev1.Pod) { onNode(p); p.Finalizers = []string{"example.com/hold"} })
	if _, _, err := s.Delete(ctx, res, "ns", "graceful", &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	unfinalize("graceful")
	if _, ok := getPod(t, s, res, "graceful"); !ok {
		t.Error("a pod in its grace period was removed with its finalizer")
	}
	if _, deleted, err := s.Delete(ctx, res, "ns", "graceful", &metav1.DeleteOptions{GracePeriodSeconds: seconds(0)}); err != nil || !deleted {
		t.Errorf("ending the grace period: %v %v", deleted, err)
	}
}
