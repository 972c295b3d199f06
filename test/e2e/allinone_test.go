package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// Spec 000 "Verbs" and "List, paging and watch behaviour" 4, in the all-in-one binary (gateway
// and embedded storage in one process): create, get, list and watch a ConfigMap with client-go's
// dynamic client; after a restart of the process the object is still there, unchanged.
func TestAllInOne(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	dyn := dynamicClient(t, s)
	ctx := ctxFor(t, 60*time.Second)
	ns := createNamespace(t, dyn, "e2e-allinone-")
	cms := dyn.Resource(configMapsGVR).Namespace(ns)

	created, err := cms.Create(ctx, configMap("one", map[string]string{"mode": "allinone"}, map[string]string{"k": "v"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() || nestedString(got, "data", "k") != "v" {
		t.Errorf("get %v, create returned %v", got.Object, created.Object)
	}
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "mode=allinone"})
	if err != nil {
		t.Fatal(err)
	}
	if names := itemNames(list); len(names) != 1 || names[0] != "one" {
		t.Errorf("list: %v", names)
	}

	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	two, err := cms.Create(ctx, configMap("two", nil, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	// The root CA publisher puts its ConfigMap in every new namespace whenever it gets to it:
	// another writer's object, not the one this test waits for.
	for ev.Type == watch.Added && ev.Object.(*unstructured.Unstructured).GetName() == naming.RootCAConfigMap {
		ev = nextEvent(t, w)
	}
	if u := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Added || u.GetName() != "two" || u.GetResourceVersion() != two.GetResourceVersion() {
		t.Errorf("watch: %s %s@%s, want ADDED two@%s", ev.Type, u.GetName(), u.GetResourceVersion(), two.GetResourceVersion())
	}
	w.Stop()

	if err := s.Restart("allinone", false); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	after, err := cms.Get(ctx, "one", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after a restart: %v", err)
	}
	if after.GetUID() != created.GetUID() || after.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("after a restart: %s@%s, before %s@%s", after.GetUID(), after.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
	}
}

// Issues 10 and 11 in the all-in-one (`make run`): the default service account appears, `kubectl
// create token` gives a token that authenticates as the account, RBAC denies it until a binding
// grants it, a bootstrap token authenticates, and tokens survive a restart (the signing key is
// kept in the data directory).
func TestAllInOneAccessControl(t *testing.T) {
	t.Parallel()
	s := startStack(t, stack.Options{Mode: stack.AllInOne})
	k := newKubectl(t, s, "default")
	stack.Eventually(t, 20*time.Second, "the default service account", func() error {
		_, errOut, code := k.run("", "get", "serviceaccount", "default")
		if code != 0 {
			return fmt.Errorf("%s", errOut)
		}
		return nil
	})
	k.ok("", "create", "serviceaccount", "robot")
	token := strings.TrimSpace(k.ok("", "create", "token", "robot"))
	robot := kubectlWith(t, s, tokenKubeconfig(t, s, s.URL, token), "default")
	if got := whoamiName(t, robot); got != "system:serviceaccount:default:robot" {
		t.Fatalf("whoami: %q", got)
	}
	if _, errOut, code := robot.run("", "get", "pods"); code == 0 || !strings.Contains(errOut, "Forbidden") {
		t.Fatalf("robot before any grant: exit %d %s", code, errOut)
	}
	k.ok("", "create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=default:robot")
	stack.Eventually(t, 10*time.Second, "the view grant (an aggregated role the controllers fill)", func() error {
		if _, errOut, code := robot.run("", "get", "pods"); code != 0 {
			return fmt.Errorf("%s", errOut)
		}
		return nil
	})
	if err := s.Restart("allinone", false); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := whoamiName(t, robot); got != "system:serviceaccount:default:robot" {
		t.Errorf("whoami after a restart: %q", got)
	}
}
