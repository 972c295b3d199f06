package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/pager"

	"platform.io/test/stack"
)

// Spec 000 "Verbs", "URL shapes" and "Common object metadata": create, get, list, update and
// delete through client-go's dynamic client, for a core namespaced kind (ConfigMap), a kind of a
// named group that keeps its name (apps/v1 Deployment) and a cluster-scoped kind of a renamed
// group (rbac.authorization.platform.io/v1 ClusterRole). Updates are compare-and-swap on
// resourceVersion (409 Conflict for a stale one); names are unique per kind and namespace (409
// AlreadyExists) and reusable after deletion.
func TestDynamicClientCRUD(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-crud-")
	ctx := ctxFor(t, 60*time.Second)

	t.Run("ConfigMap", func(t *testing.T) {
		cms := dyn.Resource(configMapsGVR).Namespace(ns)
		created, err := cms.Create(ctx, configMap("settings", map[string]string{"app": "e2e"}, map[string]string{"color": "blue"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetNamespace() != ns || created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetCreationTimestamp().Time.IsZero() {
			t.Fatalf("create did not set the system metadata: %v", created.Object["metadata"])
		}
		if created.GetAPIVersion() != "v1" || created.GetKind() != "ConfigMap" {
			t.Errorf("created object is %s %s", created.GetAPIVersion(), created.GetKind())
		}
		got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() || nestedString(got, "data", "color") != "blue" {
			t.Fatalf("get returned %v, want what create returned %v", got.Object, created.Object)
		}
		if _, err := cms.Create(ctx, configMap("settings", nil, nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("second create of the same name: %v, want AlreadyExists", err)
		}

		stale := got.DeepCopy()
		setNested(t, got, "green", "data", "color")
		updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if updated.GetResourceVersion() == created.GetResourceVersion() || nestedString(updated, "data", "color") != "green" || updated.GetUID() != created.GetUID() {
			t.Fatalf("update returned %v", updated.Object)
		}
		setNested(t, stale, "red", "data", "color")
		if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
		}

		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if list.GetKind() != "ConfigMapList" || list.GetResourceVersion() == "" {
			t.Errorf("list is %q with resourceVersion %q", list.GetKind(), list.GetResourceVersion())
		}
		if names := itemNames(list); len(names) != 1 || names[0] != "settings" {
			t.Errorf("list has %v", names)
		}
		if list.Items[0].GetResourceVersion() != updated.GetResourceVersion() || nestedString(&list.Items[0], "data", "color") != "green" {
			t.Errorf("listed item is not the updated object: %v", list.Items[0].Object)
		}

		if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
		if err := cms.Delete(ctx, "settings", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("second delete: %v, want NotFound", err)
		}
		again, err := cms.Create(ctx, configMap("settings", nil, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the name is not reusable after deletion: %v", err)
		}
		if again.GetUID() == created.GetUID() {
			t.Errorf("a new object reuses the uid %s", again.GetUID())
		}
	})

	t.Run("Deployment", func(t *testing.T) {
		deps := dyn.Resource(deploymentsGVR).Namespace(ns)
		created, err := deps.Create(ctx, deployment("web", 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetAPIVersion() != "apps/v1" || created.GetKind() != "Deployment" || created.GetGeneration() != 1 {
			t.Errorf("created %s %s generation %d", created.GetAPIVersion(), created.GetKind(), created.GetGeneration())
		}
		got, err := deps.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 2 {
			t.Errorf("spec.replicas = %d, want 2", r)
		}
		if err := unstructured.SetNestedField(got.Object, int64(3), "spec", "replicas"); err != nil {
			t.Fatal(err)
		}
		updated, err := deps.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(updated.Object, "spec", "replicas"); r != 3 || updated.GetGeneration() != 2 {
			t.Errorf("after a spec update: replicas %d generation %d, want 3 and 2", r, updated.GetGeneration())
		}
		// Namespaced type, all namespaces: /apis/apps/v1/deployments.
		all, err := dyn.Resource(deploymentsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range all.Items {
			found = found || (it.GetNamespace() == ns && it.GetName() == "web")
		}
		if !found {
			t.Errorf("the all-namespaces list lacks %s/web", ns)
		}
		if err := deps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := deps.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
	})

	t.Run("ClusterRole", func(t *testing.T) {
		roles := dyn.Resource(clusterRolesGVR)
		name := ns + "-reader"
		role := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": clusterRolesGVR.GroupVersion().String(), "kind": "ClusterRole",
			"metadata": map[string]any{"name": name},
			"rules": []any{map[string]any{
				"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list"},
			}},
		}}
		created, err := roles.Create(ctx, role, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetAPIVersion() != clusterRolesGVR.GroupVersion().String() || created.GetKind() != "ClusterRole" || created.GetNamespace() != "" {
			t.Errorf("created %s %s in namespace %q", created.GetAPIVersion(), created.GetKind(), created.GetNamespace())
		}
		got, err := roles.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules, _, _ := unstructured.NestedSlice(got.Object, "rules")
		if len(rules) != 1 {
			t.Fatalf("rules = %v", rules)
		}
		rules = append(rules, map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": []any{"watch"}})
		if err := unstructured.SetNestedSlice(got.Object, rules, "rules"); err != nil {
			t.Fatal(err)
		}
		updated, err := roles.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedSlice(updated.Object, "rules"); len(r) != 2 {
			t.Errorf("updated rules = %v", r)
		}
		list, err := roles.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if names := itemNames(list); len(names) != 1 || names[0] != name || list.GetKind() != "ClusterRoleList" {
			t.Errorf("list %s by name: %v", list.GetKind(), names)
		}
		if err := roles.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := roles.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: %v, want NotFound", err)
		}
	})
}

// Spec 000 "List, paging and watch behaviour" 1-2 and "Collection (list) response": paging with
// limit/continue through 30 objects returns each exactly once; every page carries the first
// page's resourceVersion (a consistent snapshot: an object created between pages is not in it);
// continue is empty on the last page; remainingItemCount counts what is left (and is absent with
// a label selector). client-go's pager gets the same.
func TestDynamicClientPaging(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-paging-")
	ctx := ctxFor(t, 60*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	var want []string
	for i := range 30 {
		name := fmt.Sprintf("page-%02d", i)
		want = append(want, name)
		if _, err := cms.Create(ctx, configMap(name, map[string]string{"set": "paging"}, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var got []string
	var snapshot, token string
	var remaining []int64
	for page := 0; ; page++ {
		list, err := cms.List(ctx, metav1.ListOptions{Limit: 7, Continue: token})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(list.Items) > 7 {
			t.Fatalf("page %d has %d items, limit 7", page, len(list.Items))
		}
		got = append(got, itemNames(list)...)
		if page == 0 {
			snapshot = list.GetResourceVersion()
			// Not in the snapshot the remaining pages are read at.
			if _, err := cms.Create(ctx, configMap("page-late", map[string]string{"set": "paging"}, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if list.GetResourceVersion() != snapshot {
			t.Errorf("page %d has resourceVersion %s, the first page %s", page, list.GetResourceVersion(), snapshot)
		}
		token = list.GetContinue()
		if rc := list.GetRemainingItemCount(); rc != nil {
			remaining = append(remaining, *rc)
		} else {
			remaining = append(remaining, -1)
		}
		if token == "" {
			break
		}
		if page > 10 {
			t.Fatal("paging does not end")
		}
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paged through %d names %v, want the 30 of the snapshot", len(got), got)
	}
	if fmt.Sprint(remaining) != "[23 16 9 2 -1]" {
		t.Errorf("remainingItemCount per page = %v, want [23 16 9 2 absent]", remaining)
	}

	// With a label selector remainingItemCount is omitted.
	list, err := cms.List(ctx, metav1.ListOptions{Limit: 5, LabelSelector: "set=paging"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 || list.GetContinue() == "" || list.GetRemainingItemCount() != nil {
		t.Errorf("selector page: %d items, continue %q, remainingItemCount %v", len(list.Items), list.GetContinue(), list.GetRemainingItemCount())
	}

	// client-go's pager (what kubectl and informers use for chunked lists) sees the 31 objects.
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cms.List(ctx, opts)
	})
	p.PageSize = 4
	n := 0
	if err := p.EachListItem(ctx, metav1.ListOptions{}, func(runtime.Object) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 31 {
		t.Errorf("the pager listed %d objects, want 31", n)
	}
}

// Spec 000: label selectors (parameter labelSelector, upstream syntax: equality, inequality,
// set-based, existence) and field selectors (fieldSelector) on lists.
func TestDynamicClientSelectors(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-selectors-")
	ctx := ctxFor(t, 60*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	objs := map[string]map[string]string{
		"front-prod": {"tier": "front", "env": "prod"},
		"front-dev":  {"tier": "front", "env": "dev"},
		"back-prod":  {"tier": "back", "env": "prod"},
		"cache":      {"tier": "cache"},
		"plain":      nil,
	}
	for name, labels := range objs {
		if _, err := cms.Create(ctx, configMap(name, labels, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ label, field, want string }{
		{label: "tier=front", want: "[front-dev front-prod]"},
		{label: "tier==back", want: "[back-prod]"},
		{label: "tier!=front", want: "[back-prod cache plain]"},
		{label: "tier in (front,back)", want: "[back-prod front-dev front-prod]"},
		{label: "tier notin (front,back)", want: "[cache plain]"},
		{label: "env", want: "[back-prod front-dev front-prod]"},
		{label: "!env", want: "[cache plain]"},
		{label: "tier=front,env=prod", want: "[front-prod]"},
		{label: "tier=nothing", want: "[]"},
		{field: "metadata.name=cache", want: "[cache]"},
		{field: "metadata.name!=cache", label: "tier", want: "[back-prod front-dev front-prod]"},
		{field: "metadata.namespace=" + ns, label: "env=dev", want: "[front-dev]"},
	} {
		list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: c.label, FieldSelector: c.field})
		if err != nil {
			t.Errorf("labelSelector %q fieldSelector %q: %v", c.label, c.field, err)
			continue
		}
		if got := fmt.Sprint(itemNames(list)); got != c.want {
			t.Errorf("labelSelector %q fieldSelector %q: %s, want %s", c.label, c.field, got, c.want)
		}
	}
	if _, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "tier in (front"}); !apierrors.IsBadRequest(err) {
		t.Errorf("malformed label selector: %v, want BadRequest", err)
	}
}

// Spec 000 "Dry-run": dryRun=All runs every stage but storage: the response is the object that
// would have been stored, with the normal status; nothing is stored, changed or deleted.
func TestDynamicClientDryRun(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-dryrun-")
	ctx := ctxFor(t, 60*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	dry := []string{metav1.DryRunAll}

	got, err := cms.Create(ctx, configMap("phantom", nil, map[string]string{"k": "v"}), metav1.CreateOptions{DryRun: dry})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetName() != "phantom" || got.GetNamespace() != ns || nestedString(got, "data", "k") != "v" {
		t.Errorf("dry-run create returned %v", got.Object)
	}
	gen := configMap("", nil, nil)
	gen.SetGenerateName("phantom-")
	if got, err := cms.Create(ctx, gen, metav1.CreateOptions{DryRun: dry}); err != nil || len(got.GetName()) <= len("phantom-") {
		t.Errorf("dry-run create with generateName: %v, name %q", err, got.GetName())
	}
	if _, err := cms.Get(ctx, "phantom", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after a dry-run create: %v, want NotFound", err)
	}
	if list, err := cms.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Fatalf("a dry-run create stored something: %v %v", err, list)
	}

	real, err := cms.Create(ctx, configMap("real", nil, map[string]string{"k": "v"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := real.DeepCopy()
	setNested(t, changed, "changed", "data", "k")
	out, err := cms.Update(ctx, changed, metav1.UpdateOptions{DryRun: dry})
	if err != nil || nestedString(out, "data", "k") != "changed" {
		t.Fatalf("dry-run update: %v %v", err, out)
	}
	if err := cms.Delete(ctx, "real", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Fatalf("dry-run delete: %v", err)
	}
	now, err := cms.Get(ctx, "real", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after dry-run update and delete: %v", err)
	}
	if now.GetResourceVersion() != real.GetResourceVersion() || nestedString(now, "data", "k") != "v" || now.GetDeletionTimestamp() != nil {
		t.Errorf("dry-run update or delete changed the object: %v", now.Object)
	}
}

// Spec 000 "Deletion of a resource": a delete of an object with finalizers sets
// deletionTimestamp and keeps it (watchers see MODIFIED); removing the last finalizer with an
// update removes it (watchers see DELETED).
func TestDynamicClientFinalizers(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-finalizers-")
	ctx := ctxFor(t, 60*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	obj := configMap("held", nil, map[string]string{"k": "v"})
	obj.SetFinalizers([]string{"e2e.platform.io/a", "e2e.platform.io/b"})
	created, err := cms.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	before := time.Now().Add(-2 * time.Second)
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after the delete of an object with finalizers: %v", err)
	}
	ts := got.GetDeletionTimestamp()
	if ts == nil || ts.Time.Before(before) || ts.Time.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("deletionTimestamp = %v, want about now", ts)
	}
	if len(got.GetFinalizers()) != 2 {
		t.Errorf("finalizers = %v", got.GetFinalizers())
	}
	if ev := nextEvent(t, w); ev.Type != watch.Modified || ev.Object.(*unstructured.Unstructured).GetDeletionTimestamp() == nil {
		t.Errorf("watch after delete: %s %v, want MODIFIED with deletionTimestamp", ev.Type, ev.Object)
	}
	// A second delete changes nothing (the first deletionTimestamp stays).
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Errorf("second delete: %v", err)
	}

	// Remove one finalizer: still there.
	got.SetFinalizers([]string{"e2e.platform.io/b"})
	got, err = cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDeletionTimestamp() == nil || !got.GetDeletionTimestamp().Equal(ts) {
		t.Errorf("deletionTimestamp changed to %v", got.GetDeletionTimestamp())
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); err != nil {
		t.Fatalf("object gone with one finalizer left: %v", err)
	}
	// Remove the last: gone.
	got.SetFinalizers(nil)
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 10*time.Second, "object removed after its last finalizer", func() error {
		_, err := cms.Get(ctx, "held", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get: %v", err)
	})
	var types []watch.EventType
	for {
		ev := nextEvent(t, w)
		types = append(types, ev.Type)
		if ev.Type == watch.Deleted {
			break
		}
	}
	// Upstream removes the object in the update that empties the finalizers (one DELETED event);
	// a MODIFIED before it is tolerated.
	if types[0] != watch.Modified || len(types) > 3 {
		t.Errorf("watch events after the first delete: %v, want MODIFIED (a finalizer removed), DELETED", types)
	}
}

// Spec 000 "Deletion of a resource": deleting a namespace deletes every namespace-scoped resource
// in it, then the namespace; while it terminates, nothing new can be created in it (403).
func TestNamespaceDeletion(t *testing.T) {
	s := useShared(t)
	dyn := dynamicClient(t, s)
	ns := createNamespace(t, dyn, "e2e-nsdelete-")
	ctx := ctxFor(t, 60*time.Second)
	cms := dyn.Resource(configMapsGVR).Namespace(ns)
	for i := range 5 {
		if _, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%d", i), nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dyn.Resource(deploymentsGVR).Namespace(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A finalizer holds one object, and so the namespace, until the test removes it.
	held := configMap("held", nil, nil)
	held.SetFinalizers([]string{"e2e.platform.io/hold"})
	if _, err := cms.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := dyn.Resource(namespacesGVR).Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDeletionTimestamp() == nil || nestedString(got, "status", "phase") != "Terminating" {
		t.Errorf("namespace after delete: deletionTimestamp %v phase %q, want set and Terminating", got.GetDeletionTimestamp(), nestedString(got, "status", "phase"))
	}
	// Creates may be admitted for a short while (the gateway caches namespace lookups for a second).
	stack.Eventually(t, 10*time.Second, "create in a terminating namespace is forbidden", func() error {
		late := configMap("", nil, nil)
		late.SetGenerateName("late-")
		_, err := cms.Create(ctx, late, metav1.CreateOptions{})
		if err == nil {
			return fmt.Errorf("create succeeded")
		}
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create in a terminating namespace: %v, want Forbidden", err)
		}
		return nil
	})
	stack.Eventually(t, 20*time.Second, "the namespace's content deleted", func() error {
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		deps, err := dyn.Resource(deploymentsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "held" || list.Items[0].GetDeletionTimestamp() == nil || len(deps.Items) != 0 {
			return fmt.Errorf("left: configmaps %v, deployments %v", itemNames(list), itemNames(deps))
		}
		return nil
	})
	if _, err := dyn.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("the namespace went away while an object in it is held by a finalizer: %v", err)
	}

	h, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.SetFinalizers(nil)
	if _, err := cms.Update(ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, 20*time.Second, "the namespace removed", func() error {
		_, err := dyn.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get namespace: %v", err)
	})
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("configmaps left after the namespace is gone: %v %v", err, itemNames(list))
	}
}

func deployment(name string, replicas int64) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{
					map[string]any{"name": "web", "image": "nginx:1.27"},
				}},
			},
		},
	}}
}

func nestedString(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func setNested(t *testing.T, u *unstructured.Unstructured, value string, fields ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
		t.Fatal(err)
	}
}

// itemNames are the names of a list's items, sorted.
func itemNames(list *unstructured.UnstructuredList) []string {
	names := []string{}
	if list == nil {
		return names
	}
	for _, it := range list.Items {
		names = append(names, it.GetName())
	}
	sort.Strings(names)
	return names
}

// nextEvent is the next watch event that is not a bookmark, within 10 seconds.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			return ev
		case <-timeout:
			t.Fatal("no watch event in 10s")
		}
	}
}
