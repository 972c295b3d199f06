package admission

import (
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// InterestPollInterval is how often an InterestWatch looks for a changed interest to signal
// (its source is kept current by watches; a look costs a comparison of generations).
const InterestPollInterval = 200 * time.Millisecond

// InterestWatch derives a plugin's interest from a source of configurations (webhook
// configurations, bound policies) and signals when it changes. S is the source's snapshot; a
// snapshot's generation tells whether its interest needs computing again.
type InterestWatch[S any] struct {
	get        func() S
	generation func(S) uint64
	of         func(S) ([]Interest, string)

	mu      sync.Mutex
	gen     uint64
	cached  []Interest
	key     string
	changed chan struct{}

	once sync.Once
	stop chan struct{}
}

// NewInterestWatch watches the interest of(get()) of snapshots numbered by generation.
func NewInterestWatch[S any](get func() S, generation func(S) uint64, of func(S) ([]Interest, string)) *InterestWatch[S] {
	return &InterestWatch[S]{get: get, generation: generation, of: of, changed: make(chan struct{}), stop: make(chan struct{})}
}

// StopWhenUnreachable ends w's poller once plugin is garbage (the poller holds only the watch,
// not the plugin).
func StopWhenUnreachable[T, S any](w *InterestWatch[S], plugin *T) {
	runtime.AddCleanup(plugin, func(stop chan struct{}) { close(stop) }, w.stop)
}

// Current returns the interest as it is now, and its key.
func (w *InterestWatch[S]) Current() ([]Interest, string) {
	set := w.get()
	gen := w.generation(set)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cached != nil && w.gen == gen {
		return w.cached, w.key
	}
	interests, key := w.of(set)
	w.gen, w.cached = gen, interests
	if w.key == "" {
		w.key = key
	}
	return interests, key
}

// Interests is a copy of the current interest (the plugin's Interests).
func (w *InterestWatch[S]) Interests() []Interest {
	in, _ := w.Current()
	return append([]Interest(nil), in...)
}

// Changed is closed when the interest changes (checked every InterestPollInterval); call it
// again for the next change (the plugin's Changed).
func (w *InterestWatch[S]) Changed() <-chan struct{} {
	w.once.Do(func() {
		w.Current()
		go w.run()
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// poll signals a change when the interest differs from the last one signalled.
func (w *InterestWatch[S]) poll() {
	_, key := w.Current()
	w.mu.Lock()
	defer w.mu.Unlock()
	if key != w.key {
		w.key = key
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

func (w *InterestWatch[S]) run() {
	t := time.NewTicker(InterestPollInterval)
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

// InterestSet collects interests without duplicates.
type InterestSet map[string]Interest

// Add adds in (one that matches nothing, without operations, groups or resources, is left out).
func (s InterestSet) Add(in Interest) {
	if len(in.Operations) == 0 || len(in.APIGroups) == 0 || len(in.Resources) == 0 {
		return
	}
	s[in.Key()] = in
}

// Key identifies an interest: its operations, groups, resources and scope.
func (in Interest) Key() string {
	ops := make([]string, len(in.Operations))
	for i, o := range in.Operations {
		ops[i] = string(o)
	}
	return strings.Join(ops, ",") + "|" + strings.Join(in.APIGroups, ",") + "|" + strings.Join(in.Resources, ",") + "|" + in.Scope
}

// Sorted returns the interests in a stable order, and a key that changes with them.
func (s InterestSet) Sorted() ([]Interest, string) {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Interest, 0, len(keys))
	for _, k := range keys {
		out = append(out, s[k])
	}
	return out, "v1;" + strings.Join(keys, "\n")
}
