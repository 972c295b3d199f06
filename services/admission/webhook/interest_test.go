package webhook

import (
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// The interest is the union of the configured rules, groups in Platform's names; a changed
// configuration is signalled through Changed.
func TestInterest(t *testing.T) {
	e := newEnv(t)
	e.addMutating("m", hookSpec{name: "m.example.com", url: "https://127.0.0.1:1/x", rules: []admissionregistrationv1.RuleWithOperations{
		rule([]string{"CREATE", "UPDATE"}, []string{"networking.k8s.io"}, []string{"v1"}, []string{"ingresses"}, "Namespaced"),
		rule([]string{"CREATE", "UPDATE"}, []string{"networking.k8s.io"}, []string{"v1"}, []string{"ingresses"}, "Namespaced"),
	}})
	m, err := NewMutating(e.deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValidating(e.deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []admission.Interest{{Operations: []admission.Operation{admission.Create, admission.Update},
		APIGroups: []string{naming.Group("networking.k8s.io")}, Resources: []string{"ingresses"}, Scope: "Namespaced"}}
	if got := m.Interests(); !reflect.DeepEqual(got, want) {
		t.Errorf("mutating interest = %+v, want %+v", got, want)
	}
	if got := v.Interests(); len(got) != 0 {
		t.Errorf("validating interest with no configuration = %+v", got)
	}
	if m.Namespaces() != nil || m.OwnerReferences() {
		t.Error("webhooks declare no namespace or owner reference interest")
	}

	changed := v.Changed()
	select {
	case <-changed:
		t.Fatal("signalled without a change")
	case <-time.After(3 * PollInterval):
	}
	// A configuration that adds nothing new is not a change of interest.
	mChanged := m.Changed()
	c, _ := e.objects.MutatingWebhookList.Get("", "m")
	c = c.DeepCopy()
	c.ResourceVersion = "2"
	e.objects.MutatingWebhookList.Add(c)
	select {
	case <-mChanged:
		t.Fatal("signalled for a configuration with the same rules")
	case <-time.After(3 * PollInterval):
	}

	e.addValidating("v", hookSpec{name: "v.example.com", url: "https://127.0.0.1:1/x", rules: []admissionregistrationv1.RuleWithOperations{
		rule([]string{"*"}, []string{"*"}, []string{"*"}, []string{"*/*"}, ""),
		rule([]string{"DELETE"}, []string{""}, []string{"v1"}, []string{"pods"}, "*"),
	}})
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("no signal within 2s of a new configuration")
	}
	got := v.Interests()
	if len(got) != 2 {
		t.Fatalf("interest = %+v", got)
	}
	var keysSeen []string
	for _, in := range got {
		keysSeen = append(keysSeen, in.Key())
	}
	if !strings.Contains(strings.Join(keysSeen, " "), "*|*|*/*|") || !strings.Contains(strings.Join(keysSeen, " "), "DELETE||pods|") {
		t.Errorf("interest keys %v", keysSeen)
	}
	next := v.Changed()
	if next == changed {
		t.Error("Changed returned the closed channel again")
	}
	e.objects.ValidatingWebhookList.Delete("", "v")
	select {
	case <-next:
	case <-time.After(2 * time.Second):
		t.Fatal("no signal after a configuration was removed")
	}
	if len(v.Interests()) != 0 {
		t.Errorf("interest after removal: %+v", v.Interests())
	}
}

// Configurations are consulted sorted by name, webhooks in order, and compiled once per
// version.
func TestHookOrderAndCache(t *testing.T) {
	e := newEnv(t)
	e.addValidating("b", hookSpec{name: "b1.example.com", url: "https://x/"}, hookSpec{name: "b2.example.com", url: "https://x/"})
	e.addValidating("a", hookSpec{name: "a1.example.com", url: "https://x/"})
	v, err := NewValidating(e.deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := v.hooks.get()
	var names []string
	for _, h := range set.hooks {
		names = append(names, h.name)
	}
	if strings.Join(names, ",") != "a1.example.com,b1.example.com,b2.example.com" {
		t.Errorf("order %v", names)
	}
	if again := v.hooks.get(); again != set {
		t.Error("an unchanged set was rebuilt")
	}
	c, _ := e.objects.ValidatingWebhookList.Get("", "b")
	first := set.hooks[1]
	c = c.DeepCopy()
	c.ResourceVersion = "new"
	c.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
	e.objects.ValidatingWebhookList.Add(c)
	next := v.hooks.get()
	if next == set || next.hooks[1] == first || next.hooks[0] != set.hooks[0] {
		t.Error("a changed configuration was not rebuilt alone")
	}
}

// A caller that listed the configurations before a change must not store its set after a caller
// that listed after it: the cache would go back to the old configurations, with a newer
// generation, and the interest derived from it would skip the new configuration's writes.
func TestHookCacheNeverGoesBack(t *testing.T) {
	old := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "old", ResourceVersion: "1"}}
	added := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "added", ResourceVersion: "2"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "added.example.com"}}}
	var (
		mu      sync.Mutex
		current = []configuration{{name: "old", obj: &old, rv: "1"}}
		calls   int
	)
	listing := make(chan struct{}) // the first list has its snapshot
	release := make(chan struct{}) // ...and may return it
	src := validatingSource(nil)
	src.list = func() []configuration {
		mu.Lock()
		snapshot := append([]configuration(nil), current...)
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(listing)
			<-release
		}
		return snapshot
	}
	c := newHookCache(src)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.get() }()
	<-listing
	mu.Lock()
	current = append(current, configuration{name: "added", obj: &added, rv: "2"})
	mu.Unlock()
	go func() { defer wg.Done(); c.get() }()
	time.Sleep(50 * time.Millisecond) // the second caller lists, and stores unless it must wait
	close(release)
	wg.Wait()
	c.mu.Lock()
	set := c.current
	c.mu.Unlock()
	if len(set.hooks) != 1 || set.hooks[0].name != "added.example.com" {
		t.Fatalf("the cache went back to the configurations listed first: %d hooks", len(set.hooks))
	}
}
