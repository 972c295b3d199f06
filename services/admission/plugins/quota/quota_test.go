package quota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
	"platform.io/services/admission/plugins/quota/evaluator"
)

const ns = "team"

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// rq is a quota as the controller leaves it: status.hard from spec.hard, status.used measured.
func rq(name string, hard, used corev1.ResourceList, mutate ...func(*corev1.ResourceQuota)) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
	for _, m := range mutate {
		m(q)
	}
	return q
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func resources(requests, limits corev1.ResourceList) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

func attrs(op admission.Operation, group, res string, obj, old runtime.Object) *admission.Attributes {
	a := &admission.Attributes{Operation: op, Namespace: ns, Object: obj, OldObject: old,
		Resource: schema.GroupVersionResource{Group: group, Version: "v1", Resource: res},
		User:     &admission.User{Name: "alice"}}
	if m := admission.Accessor(obj); m != nil && !isNil(obj) {
		a.Name = m.GetName()
	} else if m := admission.Accessor(old); m != nil && !isNil(old) {
		a.Name = m.GetName()
	}
	if _, ok := obj.(*corev1.Pod); ok {
		a.Kind = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	}
	return a
}

func newPlugin(t testing.TB, objs *admissiontest.Objects, store admission.Store, config string) *Plugin {
	t.Helper()
	deps := admissiontest.Deps(objs, nil)
	if store != nil {
		deps.Store = store
	}
	var cfg []byte
	if config != "" {
		cfg = []byte(config)
	}
	p, err := New(deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Plugin)
}

func used(t testing.TB, objs *admissiontest.Objects, name string) corev1.ResourceList {
	t.Helper()
	q, ok := objs.ResourceQuotaList.Get(ns, name)
	if !ok {
		t.Fatalf("quota %s is gone", name)
	}
	return q.Status.Used
}

func TestResourceQuota(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	gold := "gold"
	cases := []struct {
		name   string
		quotas []*corev1.ResourceQuota
		config string
		attrs  *admission.Attributes
		// wantErr is the whole message of the rejection ("" admits); wantCode its HTTP code.
		wantErr  string
		wantCode int32
		// wantUsed is each quota's status.used afterwards (unchanged when absent).
		wantUsed map[string]corev1.ResourceList
	}{
		{
			name:     "upstream: a create within the quota is charged to status.used",
			quotas:   []*corev1.ResourceQuota{rq("q", list("pods", "2"), list("pods", "1"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p"), nil),
			wantUsed: map[string]corev1.ResourceList{"q": list("pods", "2")},
		},
		{
			name:     "upstream: a create beyond the quota is refused (403 exceeded quota, naming requested, used and limited)",
			quotas:   []*corev1.ResourceQuota{rq("q", list("pods", "2"), list("pods", "2"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p"), nil),
			wantErr:  `pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`,
			wantCode: 403,
			wantUsed: map[string]corev1.ResourceList{"q": list("pods", "2")},
		},
		{
			name:     "upstream: count/<resource> and the legacy name both count configmaps",
			quotas:   []*corev1.ResourceQuota{rq("q", list("count/configmaps", "5", "configmaps", "1"), list("count/configmaps", "0", "configmaps", "1"))},
			attrs:    attrs(admission.Create, "", "configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}, nil),
			wantErr:  `configmaps "c" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=1, limited: configmaps=1`,
			wantCode: 403,
		},
		{
			name:     "upstream: count/<resource>.<group> counts any resource, custom ones too",
			quotas:   []*corev1.ResourceQuota{rq("q", list("count/widgets.example.com", "3"), list("count/widgets.example.com", "1"))},
			attrs:    attrs(admission.Create, "example.com", "widgets", &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "w"}}}, nil),
			wantUsed: map[string]corev1.ResourceList{"q": list("count/widgets.example.com", "2")},
		},
		{
			name:     "upstream: object counts are charged on create only",
			quotas:   []*corev1.ResourceQuota{rq("q", list("configmaps", "1"), list("configmaps", "1"))},
			attrs:    attrs(admission.Update, "", "configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: "5"}}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: "5"}}),
			wantUsed: map[string]corev1.ResourceList{"q": list("configmaps", "1")},
		},
		{
			name:     "upstream: a pod's cpu and memory requests and limits are charged",
			quotas:   []*corev1.ResourceQuota{rq("compute", list("requests.cpu", "1", "limits.memory", "1Gi"), list("requests.cpu", "300m", "limits.memory", "0"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "500m"), list("memory", "512Mi"))), nil),
			wantUsed: map[string]corev1.ResourceList{"compute": list("requests.cpu", "800m", "limits.memory", "512Mi")},
		},
		{
			name:     "upstream: only the exceeded resources are named",
			quotas:   []*corev1.ResourceQuota{rq("compute", list("requests.cpu", "1", "pods", "10"), list("requests.cpu", "600m", "pods", "1"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "600m"), nil)), nil),
			wantErr:  `pods "p" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1`,
			wantCode: 403,
		},
		{
			name:     "upstream: a quota on cpu or memory requires every container to declare it (failed quota: must specify)",
			quotas:   []*corev1.ResourceQuota{rq("compute", list("limits.memory", "1Gi", "requests.cpu", "2"), list("limits.memory", "0", "requests.cpu", "0"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "100m"), nil)), nil),
			wantErr:  `pods "p" is forbidden: failed quota: compute: must specify limits.memory for: app`,
			wantCode: 403,
		},
		{
			name:     "upstream: a quota whose usage is not measured yet refuses what it limits (status unknown)",
			quotas:   []*corev1.ResourceQuota{rq("q", list("pods", "5"), nil)},
			attrs:    attrs(admission.Create, "", "pods", pod("p"), nil),
			wantErr:  `pods "p" is forbidden: status unknown for quota: q, resources: pods`,
			wantCode: 403,
		},
		{
			name:   "upstream: a quota without status.hard (not synced by the controller yet) constrains nothing",
			quotas: []*corev1.ResourceQuota{rq("q", nil, nil, func(q *corev1.ResourceQuota) { q.Spec.Hard = list("pods", "0") })},
			attrs:  attrs(admission.Create, "", "pods", pod("p"), nil),
		},
		{
			name: "upstream: a BestEffort-scoped quota counts best-effort pods",
			quotas: []*corev1.ResourceQuota{rq("be", list("pods", "1"), list("pods", "1"), func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
			})},
			attrs:    attrs(admission.Create, "", "pods", pod("p"), nil),
			wantErr:  `pods "p" is forbidden: exceeded quota: be, requested: pods=1, used: pods=1, limited: pods=1`,
			wantCode: 403,
		},
		{
			name: "upstream: a BestEffort-scoped quota ignores pods that request resources",
			quotas: []*corev1.ResourceQuota{rq("be", list("pods", "1"), list("pods", "1"), func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
			})},
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("memory", "64Mi"), nil)), nil),
			wantUsed: map[string]corev1.ResourceList{"be": list("pods", "1")},
		},
		{
			name: "upstream: a Terminating-scoped quota counts pods with an active deadline only",
			quotas: []*corev1.ResourceQuota{rq("term", list("pods", "5"), list("pods", "0"), func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}
			}), rq("long", list("pods", "5"), list("pods", "0"), func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
			})},
			attrs: attrs(admission.Create, "", "pods", pod("p", func(p *corev1.Pod) {
				d := int64(60)
				p.Spec.ActiveDeadlineSeconds = &d
			}), nil),
			wantUsed: map[string]corev1.ResourceList{"term": list("pods", "1"), "long": list("pods", "0")},
		},
		{
			name: "upstream: a PriorityClass scope selector (In) counts pods of those classes",
			quotas: []*corev1.ResourceQuota{rq("high", list("pods", "1"), list("pods", "1"), func(q *corev1.ResourceQuota) {
				q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
			})},
			attrs:    attrs(admission.Create, "", "pods", pod("p", func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" }), nil),
			wantErr:  `pods "p" is forbidden: exceeded quota: high, requested: pods=1, used: pods=1, limited: pods=1`,
			wantCode: 403,
		},
		{
			name: "upstream: a PriorityClass scope selector ignores pods of other classes",
			quotas: []*corev1.ResourceQuota{rq("high", list("pods", "1"), list("pods", "1"), func(q *corev1.ResourceQuota) {
				q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
			})},
			attrs: attrs(admission.Create, "", "pods", pod("p", func(p *corev1.Pod) { p.Spec.PriorityClassName = "low" }), nil),
		},
		{
			name:   "upstream: a LoadBalancer service uses a load balancer and a node port per port",
			quotas: []*corev1.ResourceQuota{rq("net", list("services", "10", "services.loadbalancers", "2", "services.nodeports", "10"), list("services", "0", "services.loadbalancers", "0", "services.nodeports", "0"))},
			attrs: attrs(admission.Create, "", "services", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
				Spec: corev1.ServiceSpec{Type: lb, Ports: []corev1.ServicePort{{Port: 80}, {Port: 443}}}}, nil),
			wantUsed: map[string]corev1.ResourceList{"net": list("services", "1", "services.loadbalancers", "1", "services.nodeports", "2")},
		},
		{
			name:   "upstream: an update charges only what it adds (ClusterIP to LoadBalancer)",
			quotas: []*corev1.ResourceQuota{rq("net", list("services", "1", "services.loadbalancers", "1"), list("services", "1", "services.loadbalancers", "0"))},
			attrs: attrs(admission.Update, "", "services",
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns, ResourceVersion: "7"}, Spec: corev1.ServiceSpec{Type: lb}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns, ResourceVersion: "7"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}),
			wantUsed: map[string]corev1.ResourceList{"net": list("services", "1", "services.loadbalancers", "1")},
		},
		{
			name:   "upstream: claims are charged overall and per storage class",
			quotas: []*corev1.ResourceQuota{rq("st", list("requests.storage", "100Gi", "gold"+evaluator.StorageClassSuffix+"requests.storage", "10Gi"), list("requests.storage", "0", "gold"+evaluator.StorageClassSuffix+"requests.storage", "5Gi"))},
			attrs: attrs(admission.Create, "", "persistentvolumeclaims", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold, Resources: corev1.VolumeResourceRequirements{Requests: list("storage", "6Gi")}}}, nil),
			wantErr:  `persistentvolumeclaims "c" is forbidden: exceeded quota: st, requested: gold.storageclass.storage.` + naming.GroupSuffix + `/requests.storage=6Gi, used: gold.storageclass.storage.` + naming.GroupSuffix + `/requests.storage=5Gi, limited: gold.storageclass.storage.` + naming.GroupSuffix + `/requests.storage=10Gi`,
			wantCode: 403,
		},
		{
			name:   "upstream: expanding a claim charges the growth",
			quotas: []*corev1.ResourceQuota{rq("st", list("requests.storage", "10Gi"), list("requests.storage", "4Gi"))},
			attrs: attrs(admission.Update, "", "persistentvolumeclaims",
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: "3"}, Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: list("storage", "6Gi")}}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: "3"}, Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: list("storage", "4Gi")}}}),
			wantUsed: map[string]corev1.ResourceList{"st": list("requests.storage", "6Gi")},
		},
		{
			name:    "upstream: a request must fit every quota that constrains it; none is charged when one refuses",
			quotas:  []*corev1.ResourceQuota{rq("a", list("pods", "5"), list("pods", "1")), rq("b", list("pods", "3"), list("pods", "3"))},
			attrs:   attrs(admission.Create, "", "pods", pod("p"), nil),
			wantErr: `pods "p" is forbidden: exceeded quota: b, requested: pods=1, used: pods=3, limited: pods=3`, wantCode: 403,
			wantUsed: map[string]corev1.ResourceList{"a": list("pods", "1"), "b": list("pods", "3")},
		},
		{
			name:   "upstream: a dry-run request is checked but charges nothing",
			quotas: []*corev1.ResourceQuota{rq("q", list("pods", "2"), list("pods", "1"))},
			attrs: func() *admission.Attributes {
				a := attrs(admission.Create, "", "pods", pod("p"), nil)
				a.DryRun = true
				return a
			}(),
			wantUsed: map[string]corev1.ResourceList{"q": list("pods", "1")},
		},
		{
			name:   "upstream: a dry-run request over the quota is refused like a real one",
			quotas: []*corev1.ResourceQuota{rq("q", list("pods", "1"), list("pods", "1"))},
			attrs: func() *admission.Attributes {
				a := attrs(admission.Create, "", "pods", pod("p"), nil)
				a.DryRun = true
				return a
			}(),
			wantErr: `pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1`, wantCode: 403,
		},
		{
			name:   "upstream: subresources cost nothing",
			quotas: []*corev1.ResourceQuota{rq("q", list("pods", "1"), list("pods", "1"))},
			attrs: func() *admission.Attributes {
				a := attrs(admission.Create, "", "pods", pod("p"), nil)
				a.Subresource = "binding"
				return a
			}(),
			wantUsed: map[string]corev1.ResourceList{"q": list("pods", "1")},
		},
		{
			name:     "upstream: deletes release nothing at admission (the controller recounts)",
			quotas:   []*corev1.ResourceQuota{rq("q", list("pods", "3"), list("pods", "2"))},
			attrs:    attrs(admission.Delete, "", "pods", nil, pod("p")),
			wantUsed: map[string]corev1.ResourceList{"q": list("pods", "2")},
		},
		{
			name:     "upstream: limitedResources refuses consumption no quota covers",
			config:   `{"apiVersion":"apiserver.config.k8s.io/v1","kind":"ResourceQuotaConfiguration","limitedResources":[{"resource":"pods","matchContains":["requests.cpu"]}]}`,
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "1"), nil)), nil),
			wantErr:  `pods "p" is forbidden: insufficient quota to consume: requests.cpu`,
			wantCode: 403,
		},
		{
			name:     "upstream: limitedResources admits consumption a quota covers",
			config:   `{"limitedResources":[{"resource":"pods","matchContains":["requests.cpu"]}]}`,
			quotas:   []*corev1.ResourceQuota{rq("q", list("requests.cpu", "2"), list("requests.cpu", "0"))},
			attrs:    attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "1"), nil)), nil),
			wantUsed: map[string]corev1.ResourceList{"q": list("requests.cpu", "1")},
		},
		{
			name:    "upstream: limitedResources matchScopes needs a quota of that scope",
			config:  `{"limitedResources":[{"resource":"pods","matchScopes":[{"scopeName":"PriorityClass","operator":"In","values":["cluster-critical"]}]}]}`,
			attrs:   attrs(admission.Create, "", "pods", pod("p", func(p *corev1.Pod) { p.Spec.PriorityClassName = "cluster-critical" }), nil),
			wantErr: "Internal error occurred: insufficient quota to match these scopes: [{PriorityClass In [cluster-critical]}]", wantCode: 500,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := &admissiontest.Objects{}
			for _, q := range tc.quotas {
				objs.ResourceQuotaList.Add(q)
			}
			before := map[string]corev1.ResourceList{}
			for _, q := range tc.quotas {
				before[q.Name] = q.Status.Used
			}
			p := newPlugin(t, objs, nil, tc.config)
			err := p.Validate(context.Background(), tc.attrs)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("admitted; want %q", tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("error\n got %q\nwant %q", err.Error(), tc.wantErr)
				}
				var st apierrors.APIStatus
				if !errorsAs(err, &st) {
					t.Fatalf("error %T is not a Status", err)
				}
				if st.Status().Code != tc.wantCode {
					t.Errorf("code %d, want %d", st.Status().Code, tc.wantCode)
				}
			}
			for _, q := range tc.quotas {
				want, ok := tc.wantUsed[q.Name]
				if !ok {
					want = before[q.Name]
				}
				if got := used(t, objs, q.Name); !evaluator.Equals(got, want) {
					t.Errorf("quota %s used %s, want %s", q.Name, evaluator.Format(got), evaluator.Format(want))
				}
			}
		})
	}
}

func errorsAs(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*st = s
	}
	return ok
}

// conflictingStore is a compare-and-swap store in which another writer (a second admission
// replica, the controller) charges the quota just before each of the first n writes of this
// one, so that those writes conflict.
type conflictingStore struct {
	*admissiontest.Store
	n     atomic.Int32
	other func()
}

func (s *conflictingStore) UpdateResourceQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	if s.n.Add(-1) >= 0 {
		s.other()
	}
	return s.Store.UpdateResourceQuotaStatus(ctx, q)
}

// Upstream rule: a charge whose write conflicts is checked again against the quota as stored now
// (never overwriting the other writer's charge), and refused if it no longer fits.
func TestConflictRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int32
		hard      string
		wantErr   string
		wantUsed  string
	}{
		{name: "a conflicting charge is re-read and charged on top", conflicts: 2, hard: "5", wantUsed: "4"},
		{name: "a charge that no longer fits after the other writer's is refused", conflicts: 1, hard: "2", wantUsed: "2",
			wantErr: `pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`},
		{name: "after maxAttempts conflicts the conflict is returned (409)", conflicts: maxAttempts, hard: "100", wantUsed: "9",
			wantErr: `Operation cannot be fulfilled on resourcequotas "q": the object has been modified`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &admissiontest.Objects{}
			objs.ResourceQuotaList.Add(rq("q", list("pods", tc.hard), list("pods", "1")))
			base := &admissiontest.Store{Objects: objs}
			store := &conflictingStore{Store: base}
			store.n.Store(tc.conflicts)
			store.other = func() {
				q, _ := base.GetResourceQuota(context.Background(), ns, "q")
				u := q.Status.Used[corev1.ResourcePods]
				u.Add(resource.MustParse("1"))
				q.Status.Used[corev1.ResourcePods] = u
				if _, err := base.UpdateResourceQuotaStatus(context.Background(), q); err != nil {
					t.Error(err)
				}
			}
			p := newPlugin(t, objs, store, "")
			err := p.Validate(context.Background(), attrs(admission.Create, "", "pods", pod("p"), nil))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if got := used(t, objs, "q")[corev1.ResourcePods]; got.String() != tc.wantUsed {
				t.Errorf("used pods=%s, want %s", got.String(), tc.wantUsed)
			}
		})
	}
}

// Upstream rule: a quota deleted while a request is charged constrains nothing any more.
func TestQuotaDeletedDuringCharge(t *testing.T) {
	objs := &admissiontest.Objects{}
	objs.ResourceQuotaList.Add(rq("q", list("pods", "5"), list("pods", "1")))
	stale := &admissiontest.Objects{}
	stale.ResourceQuotaList.Add(rq("q", list("pods", "5"), list("pods", "1")))
	objs.ResourceQuotaList.Delete(ns, "q")
	deps := admissiontest.Deps(stale, nil)
	deps.Store = &admissiontest.Store{Objects: objs}
	p, err := New(deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(*Plugin).Validate(context.Background(), attrs(admission.Create, "", "pods", pod("p"), nil)); err != nil {
		t.Fatalf("rejected: %v", err)
	}
}

// The brief's rule (upstream's guarantee): concurrent creates never overcommit a quota. 16
// creators through two plugin instances (two admission replicas sharing one store, so their
// writes conflict) race for 10 pods; exactly 10 are admitted and status.used says 10.
func TestConcurrentCreatorsNeverOvercommit(t *testing.T) {
	const creators, each, hard = 16, 4, 10
	objs := &admissiontest.Objects{}
	objs.ResourceQuotaList.Add(rq("q", list("pods", fmt.Sprint(hard), "count/pods", "100"), list("pods", "0", "count/pods", "0")))
	store := &countingStore{Store: &admissiontest.Store{Objects: objs}}
	replicas := []*Plugin{newPlugin(t, objs, store, ""), newPlugin(t, objs, store, "")}
	var admitted, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := 0; c < creators; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < each; i++ {
				err := replicas[(c+i)%2].Validate(context.Background(), attrs(admission.Create, "", "pods", pod(fmt.Sprintf("p-%d-%d", c, i)), nil))
				switch {
				case err == nil:
					admitted.Add(1)
				case strings.Contains(err.Error(), "exceeded quota: q"):
					refused.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted.Load() != hard || refused.Load() != creators*each-hard {
		t.Errorf("admitted %d, refused %d; want %d and %d", admitted.Load(), refused.Load(), hard, creators*each-hard)
	}
	u := used(t, objs, "q")
	if got := u[corev1.ResourcePods]; got.Value() != hard {
		t.Errorf("status.used pods=%s, want %d", got.String(), hard)
	}
	if got := u["count/pods"]; got.Value() != hard {
		t.Errorf("status.used count/pods=%s, want %d", got.String(), hard)
	}
	t.Logf("%d attempts: %d admitted, %d refused; %d status writes (%d conflicted), %d re-reads",
		creators*each, admitted.Load(), refused.Load(), store.writes.Load(), store.conflicts.Load(), store.reads.Load())
}

// The plugin's interest: the namespaces that have a quota, the creates and deletes of quotas,
// and (configured) the limited resources; Changed fires after a quota is created.
func TestInterest(t *testing.T) {
	objs := &admissiontest.Objects{}
	objs.ResourceQuotaList.Add(rq("q", list("pods", "1"), list("pods", "0")))
	other := rq("q2", list("pods", "1"), list("pods", "0"))
	other.Namespace = "another"
	objs.ResourceQuotaList.Add(other)
	p := newPlugin(t, objs, nil, `{"limitedResources":[{"apiGroup":"storage.k8s.io","resource":"volumeattachments","matchContains":["x"]}]}`)
	if got := strings.Join(p.Namespaces(), ","); got != "another,team" {
		t.Errorf("Namespaces() = %s", got)
	}
	if p.OwnerReferences() {
		t.Error("OwnerReferences() = true")
	}
	in := p.Interests()
	if len(in) != 2 || in[0].Resources[0] != "resourcequotas" || in[0].Scope != "Namespaced" ||
		in[1].APIGroups[0] != naming.Group("storage.k8s.io") || in[1].Resources[0] != "volumeattachments" {
		t.Errorf("Interests() = %+v", in)
	}
	changed := p.Changed()
	if err := p.Validate(context.Background(), attrs(admission.Create, "", "resourcequotas", rq("new", nil, nil), nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("Changed did not fire after a quota was created")
	}
}

func TestConfiguration(t *testing.T) {
	for _, tc := range []struct{ name, config, wantErr string }{
		{"no configuration", "", ""},
		{"null", "null", ""},
		{"upstream v1beta1 kind", `{"apiVersion":"resourcequota.admission.k8s.io/v1beta1","kind":"Configuration","limitedResources":[{"resource":"pods","matchContains":["cpu"]}]}`, ""},
		{"unknown field", `{"limitedResource":[]}`, `ResourceQuota: invalid configuration: json: unknown field "limitedResource"`},
		{"wrong kind", `{"kind":"Other"}`, `ResourceQuota: invalid configuration: kind must be ResourceQuotaConfiguration, not "Other"`},
		{"resource required", `{"limitedResources":[{"matchContains":["cpu"]}]}`, `ResourceQuota: invalid configuration: limitedResources[0].resource: Required value`},
		{"bad scope", `{"limitedResources":[{"resource":"pods","matchScopes":[{"scopeName":"Nope","operator":"Exists"}]}]}`, `ResourceQuota: invalid configuration: limitedResources[0].matchScopes[0].scopeName: Unsupported value: "Nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg []byte
			if tc.config != "" {
				cfg = []byte(tc.config)
			}
			_, err := New(admissiontest.Deps(&admissiontest.Objects{}, nil), cfg)
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("New() error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A burst of creates in one namespace through one replica costs one write each: the plugin
// charges on top of its own last write instead of a lagging lister's copy.
func TestBurstDoesNotConflictWithItself(t *testing.T) {
	fresh := &admissiontest.Objects{}
	fresh.ResourceQuotaList.Add(rq("q", list("pods", "100"), list("pods", "0")))
	// The plugin's lister never catches up (the worst case of lag).
	stale := &admissiontest.Objects{}
	stale.ResourceQuotaList.Add(rq("q", list("pods", "100"), list("pods", "0")))
	counting := &countingStore{Store: &admissiontest.Store{Objects: fresh}}
	deps := admissiontest.Deps(stale, nil)
	deps.Store = counting
	p, err := New(deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := p.(*Plugin).Validate(context.Background(), attrs(admission.Create, "", "pods", pod(fmt.Sprint("p", i)), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if counting.writes.Load() != 20 || counting.reads.Load() != 0 {
		t.Errorf("%d writes and %d reads for 20 creates; want 20 and 0", counting.writes.Load(), counting.reads.Load())
	}
	if got := used(t, fresh, "q")[corev1.ResourcePods]; got.Value() != 20 {
		t.Errorf("used pods=%s, want 20", got.String())
	}
}

type countingStore struct {
	*admissiontest.Store
	writes, reads, conflicts atomic.Int32
}

func (s *countingStore) UpdateResourceQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) (*corev1.ResourceQuota, error) {
	s.writes.Add(1)
	out, err := s.Store.UpdateResourceQuotaStatus(ctx, q)
	if apierrors.IsConflict(err) {
		s.conflicts.Add(1)
	}
	return out, err
}

func (s *countingStore) GetResourceQuota(ctx context.Context, namespace, name string) (*corev1.ResourceQuota, error) {
	s.reads.Add(1)
	return s.Store.GetResourceQuota(ctx, namespace, name)
}

// BenchmarkCharge is the plugin's own cost of admitting a pod create in a namespace with two
// quotas (one on pods and compute, one on object counts), against the in-memory store.
func BenchmarkCharge(b *testing.B) {
	objs := &admissiontest.Objects{}
	objs.ResourceQuotaList.Add(rq("compute", list("pods", "1000000000", "requests.cpu", "1000000"), list("pods", "0", "requests.cpu", "0")),
		rq("counts", list("count/pods", "1000000000", "configmaps", "100"), list("count/pods", "0", "configmaps", "0")))
	p := newPlugin(b, objs, nil, "")
	a := attrs(admission.Create, "", "pods", pod("p", resources(list("cpu", "10m"), nil)), nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Validate(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}

// The framework's rule: odd objects (nil pointers, unstructured objects where a typed one is
// expected, another kind) never panic the plugin.
func TestOddObjectsDoNotPanic(t *testing.T) {
	objs := &admissiontest.Objects{}
	objs.ResourceQuotaList.Add(rq("q", list("pods", "5", "services", "5", "persistentvolumeclaims", "5", "count/widgets.example.com", "5"),
		list("pods", "0", "services", "0", "persistentvolumeclaims", "0", "count/widgets.example.com", "0")))
	p := newPlugin(t, objs, nil, "")
	odd := []runtime.Object{nil, (*corev1.Pod)(nil), (*corev1.Service)(nil), &unstructured.Unstructured{}, &corev1.ConfigMap{}}
	for _, res := range []string{"pods", "services", "persistentvolumeclaims", "widgets"} {
		for _, op := range []admission.Operation{admission.Create, admission.Update} {
			for _, obj := range odd {
				for _, old := range odd {
					group := ""
					if res == "widgets" {
						group = "example.com"
					}
					func() {
						defer func() {
							if v := recover(); v != nil {
								t.Fatalf("panicked on %s %s with %T and %T: %v", op, res, obj, old, v)
							}
						}()
						_ = p.Validate(context.Background(), attrs(op, group, res, obj, old))
					}()
				}
			}
		}
	}
}

// Register registers the plugin under its name, as a validating plugin.
func TestRegister(t *testing.T) {
	r := admission.NewRegistry()
	Register(r)
	f, ok := r.Factory(admission.ResourceQuota)
	if !ok {
		t.Fatal("ResourceQuota not registered")
	}
	p, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(admission.Validator); !ok || p.Name() != admission.ResourceQuota {
		t.Errorf("%T named %s is not upstream's validating ResourceQuota", p, p.Name())
	}
	if _, ok := p.(admission.Mutator); ok {
		t.Error("ResourceQuota must not mutate (upstream's is validating)")
	}
}

// liveStore answers ListResourceQuotas with quotas the listers have not seen yet.
type liveStore struct {
	admission.Store
	live []corev1.ResourceQuota
}

func (s *liveStore) ListResourceQuotas(context.Context, string) ([]corev1.ResourceQuota, error) {
	return s.live, nil
}

// A namespace's first quota makes the namespace of interest synchronously (the answer to that
// very request carries the change), and until the lister shows the quota, writes there are
// checked against the quotas read from storage, as upstream's live lookup; a dry-run create
// changes nothing.
func TestFirstQuotaOfNamespace(t *testing.T) {
	objs := &admissiontest.Objects{}
	store := &liveStore{Store: admissiontest.Deps(objs, nil).Store}
	p := newPlugin(t, objs, store, "")
	quota := attrs(admission.Create, "", "resourcequotas", rq("q", list("pods", "1"), nil), nil)
	quota.DryRun = true
	changed := p.Changed()
	if err := p.Validate(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	if len(p.Namespaces()) != 0 {
		t.Fatalf("a dry-run quota made %v of interest", p.Namespaces())
	}
	create := attrs(admission.Create, "", "pods", pod("p"), nil)
	if err := p.Validate(context.Background(), create); err != nil {
		t.Fatalf("a namespace without quotas: %v", err)
	}

	quota.DryRun = false
	if err := p.Validate(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed was not signalled before Validate returned")
	}
	if got := strings.Join(p.Namespaces(), ","); got != ns {
		t.Fatalf("Namespaces() = %q right after the first quota, want %s", got, ns)
	}
	store.live = []corev1.ResourceQuota{*rq("q", list("pods", "1"), list("pods", "1"))}
	err := p.Validate(context.Background(), attrs(admission.Create, "", "pods", pod("p"), nil))
	if err == nil || !strings.Contains(err.Error(), "exceeded quota: q") {
		t.Fatalf("a create over the stored quota the lister has not seen: %v", err)
	}
}
