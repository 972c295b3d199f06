// Package listcache keeps, per storage type that clients list, every object of the type in the
// gateway's memory, fed by one storage watch (upstream's watch cache serving lists).
package listcache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/generic"
)

// The list cache keeps, per storage type that clients list, every object of the type in the
// gateway's memory, fed by one storage watch, so an unpaged list is answered without the
// collection crossing gRPC: upstream's watch cache, which serves lists (consistent ones too,
// since 1.31) for the same reason. A list of 2,000 ConfigMaps otherwise costs storage its
// encoding and the gateway its decoding, every time.
//
// Consistency: a list without resourceVersion asks storage for the type's current revision (a
// small RPC) and is served once the cache has applied that revision: never older than a write
// acknowledged before the list, as from storage. Revisions of a type are dense, so the cache has
// applied revision r exactly when it has seen the type's event r. "0" is any state (the cache as
// it is); a revision n is not older than n. Anything the cache cannot answer exactly (pages,
// continue tokens, Exact matches, a cache still loading or too far behind) goes to storage,
// which has the full history; so do selectors that do not parse, for storage's error.
//
// Selection uses the labels and fields storage indexes (the watch asks for them) through
// storage.Filter, so a selector selects what it selects in storage.

const (
	// listCacheIdle: a type's cache is dropped after this long without a list.
	listCacheIdle = 5 * time.Minute
	// listCacheWait bounds how long a list waits for the cache to reach its revision before it
	// asks storage instead.
	listCacheWait = time.Second
)

type entry struct {
	key string // backend key order: "<namespace>/<name>"
	obj *storagev1.Object
	enc *ItemEncoding // obj's JSON, once a list has encoded it
}

func newEntry(key string, obj *storagev1.Object) entry {
	return entry{key: key, obj: obj, enc: new(ItemEncoding)}
}

// ItemEncoding holds one cached object's JSON encoding, as the resource (group and version) that
// encoded it serves it, for the lists the cache answers: they then take each item's encoding
// without a lookup in the JSON cache (a hash of the item's namespace and name, a lock and a map
// probe: 11% of the all-in-one's CPU per list of 2,000). An entry's object is never replaced in
// place: a new version of the object gets a new itemEncoding.
type ItemEncoding struct {
	p atomic.Pointer[encodedItem]
}

type encodedItem struct {
	res  *registry.Resource
	json []byte
}

// Get returns the JSON encoding as res serves it, if it is known; e may be nil.
func (e *ItemEncoding) Get(res *registry.Resource) []byte {
	if e == nil {
		return nil
	}
	if v := e.p.Load(); v != nil && v.res == res {
		return v.json
	}
	return nil
}

// Set records the JSON encoding as res serves it; e may be nil.
func (e *ItemEncoding) Set(res *registry.Resource, b []byte) {
	if e != nil {
		e.p.Store(&encodedItem{res: res, json: b})
	}
}

// Cache is the cached state of one storage type.
type Cache struct {
	cs   *Caches
	rt   *storagev1.ResourceType
	name string

	lastUsed atomic.Int64 // unix nanoseconds of the last list

	mu      sync.RWMutex
	ready   bool // the initial state is loaded and the watch runs
	stopped bool
	rev     int64
	items   []entry       // sorted by key
	changed chan struct{} // closed (and replaced) whenever rev advances or the cache stops
	cancel  context.CancelFunc
}

// EventStream is a storage watch: batches of events until an error ends it.
type EventStream = interface {
	Recv() ([]*storagev1.Event, error)
}

// Storage is what the caches read: each type's revision, and its watch.
type Storage interface {
	Revision(ctx context.Context, req *storagev1.RevisionRequest) (*storagev1.RevisionResponse, error)
	Watch(ctx context.Context, req *storagev1.WatchRequest) (EventStream, error)
}

// Config is what the caches need.
type Config struct {
	Storage Storage
	// Context bounds the caches' watches (they end with it).
	Context context.Context
	// Now is the clock (tests may fix it).
	Now func() time.Time
	// BookmarkInterval is how often the caches' watches bring a bookmark on a quiet type.
	BookmarkInterval time.Duration
	// Metrics registers apiserver_cache_list_total (nil keeps it unexported).
	Metrics prometheus.Registerer
}

// Caches are the caches of the types clients list, each started on its first list and dropped
// after listCacheIdle without one.
type Caches struct {
	cfg    Config
	mu     sync.Mutex
	byType map[string]*Cache
	// served counts the lists answered from a cache: upstream's apiserver_cache_list_total.
	served *prometheus.CounterVec
}

// New returns the caches of cfg (none runs before a list asks for it).
func New(cfg Config) *Caches {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apiserver_cache_list_total",
		Help: "Number of LIST requests served from watch cache",
	}, []string{"resource_prefix", "index"})
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(c)
	}
	return &Caches{cfg: cfg, served: c}
}

// For returns the running cache of res's storage type, starting it on first use.
func (cs *Caches) For(res *registry.Resource) *Cache {
	rt := generic.StorageType(res)
	name := "/" + rt.Resource // upstream's resource_prefix: /configmaps, /deployments.apps
	if rt.Group != "" {
		name += "." + rt.Group
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byType == nil {
		cs.byType = map[string]*Cache{}
	}
	c, ok := cs.byType[name]
	if !ok {
		ctx, cancel := context.WithCancel(cs.cfg.Context)
		c = &Cache{cs: cs, rt: rt, name: name, changed: make(chan struct{}), cancel: cancel}
		c.lastUsed.Store(cs.cfg.Now().UnixNano())
		cs.byType[name] = c
		go c.run(ctx)
	}
	return c
}

// forget removes c from the API's caches (it stopped); the next list starts a new one.
func (c *Cache) forget() {
	c.cs.mu.Lock()
	if c.cs.byType[c.name] == c {
		delete(c.cs.byType, c.name)
	}
	c.cs.mu.Unlock()
}

// run loads the type through one watch (its initial events, then every change) and keeps the
// cache current until the watch ends, the API stops or the cache goes unused; then the cache is
// dropped, and lists go to storage until one starts it again.
func (c *Cache) run(ctx context.Context) {
	defer c.stop()
	stream, err := c.cs.cfg.Storage.Watch(ctx, &storagev1.WatchRequest{
		Type: c.rt, SendInitialEvents: true, AllowBookmarks: true, IndexAttributes: true,
		BookmarkIntervalMs: c.cs.cfg.BookmarkInterval.Milliseconds(),
	})
	if err != nil {
		return
	}
	go c.expireWhenIdle(ctx)
	var initial []entry
	for {
		events, err := stream.Recv()
		if err != nil {
			return
		}
		if !c.isReady() {
			for _, ev := range events {
				switch {
				case ev.Type == storagev1.EventType_ADDED:
					initial = append(initial, newEntry(ev.Object.Namespace+"/"+ev.Object.Name, ev.Object))
				case ev.Type == storagev1.EventType_BOOKMARK && ev.InitialEventsEnd:
					slices.SortFunc(initial, func(x, y entry) int { return strings.Compare(x.key, y.key) })
					c.load(initial, ev.ResourceVersion)
					initial = nil
				}
			}
			continue
		}
		c.apply(events)
	}
}

func (c *Cache) isReady() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

func (c *Cache) load(items []entry, rev int64) {
	c.mu.Lock()
	c.items, c.rev, c.ready = items, rev, true
	c.notifyLocked()
	c.mu.Unlock()
}

func (c *Cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// apply applies a batch of watch events in order.
func (c *Cache) apply(events []*storagev1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	advanced := false
	for _, ev := range events {
		if ev.ResourceVersion <= c.rev {
			continue
		}
		c.rev, advanced = ev.ResourceVersion, true
		if ev.Type == storagev1.EventType_BOOKMARK {
			continue
		}
		key := ev.Object.Namespace + "/" + ev.Object.Name
		i, found := slices.BinarySearchFunc(c.items, key, func(e entry, k string) int { return strings.Compare(e.key, k) })
		switch {
		case ev.Type == storagev1.EventType_DELETED:
			if found {
				c.items = slices.Delete(c.items, i, i+1)
			}
		case found:
			c.items[i] = newEntry(key, ev.Object)
		default:
			c.items = slices.Insert(c.items, i, newEntry(key, ev.Object))
		}
	}
	if advanced {
		c.notifyLocked()
	}
}

// expireWhenIdle stops the cache once no list has used it for listCacheIdle.
func (c *Cache) expireWhenIdle(ctx context.Context) {
	t := time.NewTicker(listCacheIdle / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c.cs.cfg.Now().Sub(time.Unix(0, c.lastUsed.Load())) > listCacheIdle {
				c.cancel()
				return
			}
		}
	}
}

// stop ends the cache: its watch, its memory, and its place in the API.
func (c *Cache) stop() {
	c.cancel()
	c.forget()
	c.mu.Lock()
	if !c.stopped {
		c.stopped, c.ready, c.items = true, false, nil
		c.notifyLocked()
	}
	c.mu.Unlock()
}

// waitFor waits until the cache has applied rev; false when it stops, is not ready, or does
// not get there within timeout.
func (c *Cache) waitFor(ctx context.Context, rev int64, timeout time.Duration) bool {
	var timer *time.Timer
	for {
		c.mu.RLock()
		ready, cur, changed := c.ready, c.rev, c.changed
		c.mu.RUnlock()
		if !ready {
			return false
		}
		if cur >= rev {
			return true
		}
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Params are a list's parameters, as the request gave them.
type Params struct {
	LabelSelector, FieldSelector string
	ResourceVersion              string
	Match                        storagev1.ResourceVersionMatch
	Limit                        int64
	Continue                     string
}

// Serves reports whether a cache may answer a list with these parameters: unpaged, and at "most
// recent", "any" or "not older than" a revision.
func Serves(p Params) bool {
	if p.Limit != 0 || p.Continue != "" {
		return false
	}
	switch p.Match {
	case storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_UNSPECIFIED:
		return true
	case storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_NOT_OLDER_THAN:
		return p.ResourceVersion != ""
	}
	return false
}

// ErrNotFromCache: the list is one the cache does not answer; storage does.
var ErrNotFromCache = errors.New("not served from the list cache")

// List answers an unpaged list from the cache: the selected objects in key order, the revision
// they are at, and each item's encoding holder (aligned with the items).
func (c *Cache) List(ctx context.Context, namespace string, p Params) (*storagev1.ListResponse, []*ItemEncoding, error) {
	c.lastUsed.Store(c.cs.cfg.Now().UnixNano())
	f, err := storage.NewFilter(namespace, p.LabelSelector, p.FieldSelector)
	if err != nil {
		return nil, nil, ErrNotFromCache // storage gives the error its wording
	}
	if !c.isReady() {
		return nil, nil, ErrNotFromCache
	}
	switch p.ResourceVersion {
	case "":
		// Most recent: at least the type's revision when the list arrived.
		rctx, cancel := context.WithTimeout(ctx, listCacheWait)
		cur, err := c.cs.cfg.Storage.Revision(rctx, &storagev1.RevisionRequest{Type: c.rt})
		cancel()
		if err != nil || !c.waitFor(ctx, cur.GetCurrent(), listCacheWait) {
			return nil, nil, ErrNotFromCache
		}
	case "0":
	default:
		n, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
		if err != nil || n < 0 || !c.waitFor(ctx, n, listCacheWait) {
			return nil, nil, ErrNotFromCache // storage says what is wrong, or waits its own time
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return nil, nil, ErrNotFromCache
	}
	items := c.items
	if prefix := f.Prefix(); prefix != "" {
		i, _ := slices.BinarySearchFunc(items, prefix, func(e entry, k string) int { return strings.Compare(e.key, k) })
		j := i
		for j < len(items) && strings.HasPrefix(items[j].key, prefix) {
			j++
		}
		items = items[i:j]
	}
	resp := &storagev1.ListResponse{ResourceVersion: c.rev, Items: make([]*storagev1.Object, 0, len(items))}
	encs := make([]*ItemEncoding, 0, len(items))
	for _, e := range items {
		if !f.HasSelectors() || f.Matches(e.obj) {
			resp.Items = append(resp.Items, e.obj)
			encs = append(encs, e.enc)
		}
	}
	c.cs.served.WithLabelValues(c.name, "").Inc()
	return resp, encs, nil
}
