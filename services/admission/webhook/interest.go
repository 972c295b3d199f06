package webhook

import (
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// PollInterval is how often the plugins look for changed configurations to signal a changed
// interest (the listers are kept current by watches; polling them costs a list and a compare).
const PollInterval = 200 * time.Millisecond

// interestWatch derives the plugin's interest from its configurations and signals changes.
type interestWatch struct {
	hooks *hookCache

	mu      sync.Mutex
	gen     uint64
	cached  []admission.Interest
	key     string
	changed chan struct{}

	once sync.Once
	stop chan struct{}
}

func newInterestWatch(hooks *hookCache) *interestWatch {
	return &interestWatch{hooks: hooks, changed: make(chan struct{}), stop: make(chan struct{})}
}

// stopWhenUnreachable ends w's poller once the plugin is garbage (the poller only holds the
// watch, not the plugin).
func stopWhenUnreachable[T any](w *interestWatch, plugin *T) {
	runtime.AddCleanup(plugin, func(stop chan struct{}) { close(stop) }, w.stop)
}

// current returns the interest of the configurations as they are now, and its key.
func (w *interestWatch) current() ([]admission.Interest, string) {
	set := w.hooks.get()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cached != nil && w.gen == set.generation {
		return w.cached, w.key
	}
	interests, key := interestsOf(set)
	w.gen, w.cached = set.generation, interests
	if w.key == "" {
		w.key = key
	}
	return interests, key
}

// poll signals a change when the interest differs from the last one signalled.
func (w *interestWatch) poll() {
	_, key := w.current()
	w.mu.Lock()
	defer w.mu.Unlock()
	if key != w.key {
		w.key = key
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

func (w *interestWatch) run() {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.poll()
		}
	}
}

// interestsOf translates every rule of every webhook into an interest (operations, Platform's
// group names, resources, scope), without duplicates, in a stable order.
func interestsOf(set *hookSet) ([]admission.Interest, string) {
	seen := map[string]admission.Interest{}
	for _, h := range set.hooks {
		for _, r := range h.rules {
			in := admission.Interest{Resources: append([]string(nil), r.Resources...)}
			for _, op := range r.Operations {
				in.Operations = append(in.Operations, admission.Operation(op))
			}
			for _, g := range r.APIGroups {
				if g != "*" {
					g = naming.Group(g)
				}
				in.APIGroups = append(in.APIGroups, g)
			}
			if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
				in.Scope = string(*r.Scope)
			}
			if len(in.Operations) == 0 || len(in.APIGroups) == 0 || len(in.Resources) == 0 {
				continue // matches nothing
			}
			seen[interestKey(in)] = in
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]admission.Interest, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out, "v1;" + strings.Join(keys, "\n")
}

func interestKey(in admission.Interest) string {
	ops := make([]string, len(in.Operations))
	for i, o := range in.Operations {
		ops[i] = string(o)
	}
	return strings.Join(ops, ",") + "|" + strings.Join(in.APIGroups, ",") + "|" + strings.Join(in.Resources, ",") + "|" + in.Scope
}

// Interests is the union of the rules of every configured webhook.
func (d *dispatcher) Interests() []admission.Interest {
	in, _ := d.interest.current()
	return append([]admission.Interest(nil), in...)
}

// Namespaces is empty: webhooks declare their interest by rules.
func (d *dispatcher) Namespaces() []string { return nil }

// OwnerReferences is false: webhooks declare their interest by rules.
func (d *dispatcher) OwnerReferences() bool { return false }

// Changed is closed when the configurations' interest changes (checked every PollInterval); call
// it again for the next change.
func (d *dispatcher) Changed() <-chan struct{} {
	w := d.interest
	w.once.Do(func() {
		w.current()
		go w.run()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}
