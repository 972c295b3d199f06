package storage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	storagev1 "platform.io/proto/storage/v1"
)

// ChangeType says what happened to an object an Informer keeps.
type ChangeType int

// Change types.
const (
	Added ChangeType = iota + 1
	Modified
	Deleted
)

// Change is one applied change: Old is the previous object (Modified, Deleted), New the current
// one (Added, Modified).
type Change[T any] struct {
	Type     ChangeType
	Key      string
	Old, New T
}

// Informer keeps an up-to-date copy of one resource type's objects, read through the storage
// API as any controller would: a consistent list, then a watch from its revision, resumed from the
// last revision seen when it ends and relisted when that history is gone (the differences are
// delivered as changes, so handlers never miss a deletion).
type Informer[T any] struct {
	client *Client
	typ    *storagev1.ResourceType
	decode func(*storagev1.Object) (T, error)
	log    *slog.Logger

	handlersMu sync.Mutex
	handlers   []func([]Change[T])

	mu     sync.RWMutex
	items  map[string]item[T]
	rev    int64
	synced chan struct{}
	once   sync.Once
}

type item[T any] struct {
	obj T
	rv  int64
}

// Key is the key an Informer files an object under: "namespace/name", or "name" for
// cluster-scoped objects.
func Key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// NewInformer builds an informer of one type; decode turns a stored object into T (an object that
// fails to decode is logged and skipped).
func NewInformer[T any](client *Client, typ *storagev1.ResourceType, decode func(*storagev1.Object) (T, error), log *slog.Logger) *Informer[T] {
	if log == nil {
		log = slog.Default()
	}
	return &Informer[T]{client: client, typ: typ, decode: decode, log: log, items: map[string]item[T]{}, synced: make(chan struct{})}
}

// OnChange registers a handler of applied changes, called with each batch in order, from one
// goroutine, after the informer's copy reflects them. Register handlers before Run.
func (i *Informer[T]) OnChange(h func([]Change[T])) {
	i.handlersMu.Lock()
	i.handlers = append(i.handlers, h)
	i.handlersMu.Unlock()
}

// Synced is closed once the first list has been applied.
func (i *Informer[T]) Synced() <-chan struct{} { return i.synced }

// Get returns the object filed under key.
func (i *Informer[T]) Get(key string) (T, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	it, ok := i.items[key]
	return it.obj, ok
}

// List returns every object.
func (i *Informer[T]) List() []T {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]T, 0, len(i.items))
	for _, it := range i.items {
		out = append(out, it.obj)
	}
	return out
}

// Revision is the revision the copy reflects.
func (i *Informer[T]) Revision() int64 {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.rev
}

// Run keeps the copy up to date until ctx ends.
func (i *Informer[T]) Run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	needList := true
	for ctx.Err() == nil {
		var err error
		if needList {
			err = i.list(ctx)
			if err == nil {
				needList = false
			}
		}
		if err == nil {
			var progressed bool
			progressed, err = i.watch(ctx)
			if progressed {
				backoff = 50 * time.Millisecond
			}
			if IsExpired(err) {
				needList = true
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, io.EOF) {
			i.log.Debug("storage informer retrying", "type", i.typ.Resource, "group", i.typ.Group, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// list reads the whole type consistently and replaces the copy, delivering the differences.
func (i *Informer[T]) list(ctx context.Context) error {
	next := map[string]item[T]{}
	var rev int64
	cont := ""
	for {
		resp, err := i.client.List(ctx, &storagev1.ListRequest{Type: i.typ, Limit: 500, Continue: cont})
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = resp.ResourceVersion
		}
		for _, o := range resp.Items {
			obj, err := i.decode(o)
			if err != nil {
				i.log.Warn("storage informer skips an object it cannot decode", "type", i.typ.Resource, "namespace", o.Namespace, "name", o.Name, "err", err)
				continue
			}
			next[Key(o.Namespace, o.Name)] = item[T]{obj: obj, rv: o.ResourceVersion}
		}
		cont = resp.Continue
		if cont == "" {
			break
		}
	}
	i.mu.Lock()
	var changes []Change[T]
	for k, old := range i.items {
		if cur, ok := next[k]; !ok {
			changes = append(changes, Change[T]{Type: Deleted, Key: k, Old: old.obj})
		} else if cur.rv != old.rv {
			changes = append(changes, Change[T]{Type: Modified, Key: k, Old: old.obj, New: cur.obj})
		}
	}
	for k, cur := range next {
		if _, ok := i.items[k]; !ok {
			changes = append(changes, Change[T]{Type: Added, Key: k, New: cur.obj})
		}
	}
	i.items, i.rev = next, rev
	i.mu.Unlock()
	i.deliver(changes)
	i.once.Do(func() { close(i.synced) })
	return nil
}

// watch follows the type from the copy's revision until the stream ends. progressed reports
// whether any event arrived.
func (i *Informer[T]) watch(ctx context.Context) (progressed bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := i.client.Watch(wctx, &storagev1.WatchRequest{Type: i.typ, ResourceVersion: formatRev(i.Revision()), AllowBookmarks: true})
	if err != nil {
		return false, err
	}
	for {
		events, err := stream.Recv()
		if err != nil {
			return progressed, err
		}
		progressed = true
		i.apply(events)
	}
}

func (i *Informer[T]) apply(events []*storagev1.Event) {
	var changes []Change[T]
	i.mu.Lock()
	for _, ev := range events {
		if ev.ResourceVersion > i.rev {
			i.rev = ev.ResourceVersion
		}
		if ev.Type == storagev1.EventType_BOOKMARK || ev.Object == nil {
			continue
		}
		k := Key(ev.Object.Namespace, ev.Object.Name)
		old, had := i.items[k]
		if ev.Type == storagev1.EventType_DELETED {
			if had {
				delete(i.items, k)
				changes = append(changes, Change[T]{Type: Deleted, Key: k, Old: old.obj})
			}
			continue
		}
		obj, err := i.decode(ev.Object)
		if err != nil {
			i.log.Warn("storage informer skips an object it cannot decode", "type", i.typ.Resource, "namespace", ev.Object.Namespace, "name", ev.Object.Name, "err", err)
			continue
		}
		i.items[k] = item[T]{obj: obj, rv: ev.Object.ResourceVersion}
		if had {
			changes = append(changes, Change[T]{Type: Modified, Key: k, Old: old.obj, New: obj})
		} else {
			changes = append(changes, Change[T]{Type: Added, Key: k, New: obj})
		}
	}
	i.mu.Unlock()
	i.deliver(changes)
}

func (i *Informer[T]) deliver(changes []Change[T]) {
	if len(changes) == 0 {
		return
	}
	i.handlersMu.Lock()
	hs := i.handlers
	i.handlersMu.Unlock()
	for _, h := range hs {
		h(changes)
	}
}

func formatRev(rev int64) string { return strconv.FormatInt(rev, 10) }
