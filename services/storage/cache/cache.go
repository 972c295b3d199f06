// Package cache serves the storage service's reads and watches from memory. One typeCache per
// resource type holds a multi-version index of its objects and its retained events, fed by a
// single reader of the backend's log; gets, lists at a revision, continue tokens, watches and
// bookmarks are answered from it, and "most recent" reads first wait until the cache has caught
// up with the backend's current revision, so they are never older than an acknowledged write.
package cache

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Config tunes the cache.
type Config struct {
	// FutureWait bounds how long a read or watch waits for a revision the type has not reached
	// before failing with TOO_LARGE_RESOURCE_VERSION.
	FutureWait time.Duration
	// BookmarkInterval is how often an idle watch that allows bookmarks gets one.
	BookmarkInterval time.Duration
	// ReadBatch is the most events the log reader takes from the backend at once.
	ReadBatch int
	// CoalesceRevisions makes concurrent consistent reads of a type share the backend's
	// Revision calls (see revisionBatcher): for a backend where a call is a network round trip
	// (Redis), not for one where it is a read of local memory (embedded).
	CoalesceRevisions bool
}

// revisionCallTimeout bounds a Revision call shared by several reads.
const revisionCallTimeout = 5 * time.Second

func (c *Config) defaults() {
	if c.FutureWait <= 0 {
		c.FutureWait = 3 * time.Second
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = time.Minute
	}
	if c.ReadBatch <= 0 {
		c.ReadBatch = 1000
	}
}

// Cache holds a typeCache for every resource type in use.
type Cache struct {
	be     backend.Backend
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	secret []byte

	mu    sync.Mutex
	types map[string]*typeEntry
}

type typeEntry struct {
	ready chan struct{}
	tc    *typeCache
	err   error
}

// New creates a cache over be. Its readers run until ctx ends.
func New(ctx context.Context, be backend.Backend, cfg Config, log *slog.Logger) (*Cache, error) {
	cfg.defaults()
	secret, err := be.Secret(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cache{be: be, cfg: cfg, log: log, ctx: ctx, secret: secret, types: make(map[string]*typeEntry)}
	types, err := be.Types(ctx)
	if err != nil {
		return nil, err
	}
	for _, rt := range types {
		c.Ensure(rt)
	}
	return c, nil
}

// Ensure starts loading the cache of rt in the background, if it is not loaded yet.
func (c *Cache) Ensure(rt *storagev1.ResourceType) { c.entry(rt) }

func (c *Cache) entry(rt *storagev1.ResourceType) *typeEntry {
	name := backend.TypeName(rt)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.types[name]
	if !ok {
		e = &typeEntry{ready: make(chan struct{})}
		c.types[name] = e
		go c.load(e, &storagev1.ResourceType{Group: rt.GetGroup(), Resource: rt.GetResource()}, name)
	}
	return e
}

func (c *Cache) load(e *typeEntry, rt *storagev1.ResourceType, name string) {
	tc := newTypeCache(rt, c.be, c.log)
	if c.cfg.CoalesceRevisions {
		tc.revs = &revisionBatcher{base: c.ctx, timeout: revisionCallTimeout, fetch: func(ctx context.Context) (int64, error) {
			rev, _, err := c.be.Revision(ctx, rt)
			return rev, err
		}}
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	err := tc.load(ctx)
	cancel()
	if err != nil {
		e.err = err
		c.mu.Lock()
		delete(c.types, name) // the next request tries again
		c.mu.Unlock()
		close(e.ready)
		return
	}
	e.tc = tc
	close(e.ready)
	go tc.run(c.ctx, c.cfg.ReadBatch)
}

func (c *Cache) typeCache(ctx context.Context, rt *storagev1.ResourceType) (*typeCache, error) {
	e := c.entry(rt)
	select {
	case <-e.ready:
		return e.tc, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// rvKind is how a request's resourceVersion string reads.
type rvKind int

const (
	rvUnset rvKind = iota // ""
	rvZero                // "0"
	rvExact               // a revision
)

func parseRV(field, s string) (rvKind, int64, error) {
	switch s {
	case "":
		return rvUnset, 0, nil
	case "0":
		return rvZero, 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, 0, storage.NewInvalid(field, "invalid value %q: must be a resource version returned by the server", s)
	}
	return rvExact, n, nil
}

// consistentRev returns a revision not older than any write acknowledged before the call, once
// the cache has reached it.
func (c *Cache) consistentRev(ctx context.Context, tc *typeCache) (int64, error) {
	var cur int64
	var err error
	if tc.revs != nil {
		cur, err = tc.revs.revision(ctx)
	} else {
		cur, _, err = c.be.Revision(ctx, tc.rt)
	}
	if err != nil {
		return 0, err
	}
	ok, err := tc.waitFor(ctx, cur, c.cfg.FutureWait)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, &storage.Error{Reason: storagev1.ErrorReason_UNAVAILABLE, RetryAfterSeconds: 1,
			Message: "storage cache of " + tc.name + " has not caught up with revision " + strconv.FormatInt(cur, 10)}
	}
	return cur, nil
}

// notOlderThan waits until the cache has applied rev and returns the cache's revision then.
func (c *Cache) notOlderThan(ctx context.Context, tc *typeCache, rev int64) (int64, error) {
	ok, err := tc.waitFor(ctx, rev, c.cfg.FutureWait)
	if err != nil {
		return 0, err
	}
	cur, _, _, _ := tc.state()
	if !ok {
		return 0, tooLarge(rev, cur)
	}
	return cur, nil
}

// readRev resolves the common resourceVersion semantics of reads: unset is most recent (a
// consistent read), "0" is any (the cache as it is), a revision is not older than it.
func (c *Cache) readRev(ctx context.Context, tc *typeCache, kind rvKind, n int64) (int64, error) {
	switch kind {
	case rvUnset:
		return c.consistentRev(ctx, tc)
	case rvZero:
		rev, _, _, _ := tc.state()
		return rev, nil
	}
	return c.notOlderThan(ctx, tc, n)
}

// request parses what lists and watches share: the filter, the resourceVersion and the type.
func (c *Cache) request(ctx context.Context, rt *storagev1.ResourceType, namespace, labelSelector, fieldSelector, resourceVersion string) (*typeCache, *storage.Filter, rvKind, int64, error) {
	f, err := storage.NewFilter(namespace, labelSelector, fieldSelector)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	kind, n, err := parseRV("resourceVersion", resourceVersion)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	tc, err := c.typeCache(ctx, rt)
	return tc, f, kind, n, err
}

func tooLarge(rev, cur int64) error {
	return &storage.Error{Reason: storagev1.ErrorReason_TOO_LARGE_RESOURCE_VERSION, CurrentRevision: cur, RetryAfterSeconds: 1,
		Message: "Too large resource version: " + strconv.FormatInt(rev, 10) + ", current: " + strconv.FormatInt(cur, 10)}
}

func tooOld(rev, compacted int64) error {
	return &storage.Error{Reason: storagev1.ErrorReason_EXPIRED,
		Message: "too old resource version: " + strconv.FormatInt(rev, 10) + " (" + strconv.FormatInt(compacted, 10) + ")"}
}

// inconsistentContinue is upstream's message for a continue token whose revision was compacted,
// answered with a token that continues the list at the most recent revision.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

// Get reads one object under the get semantics of resourceVersion: unset is most recent, "0"
// is any, a revision is not older than it.
func (c *Cache) Get(ctx context.Context, rt *storagev1.ResourceType, namespace, name, resourceVersion string) (*storagev1.Object, error) {
	kind, n, err := parseRV("resourceVersion", resourceVersion)
	if err != nil {
		return nil, err
	}
	tc, err := c.typeCache(ctx, rt)
	if err != nil {
		return nil, err
	}
	if _, err := c.readRev(ctx, tc, kind, n); err != nil {
		return nil, err
	}
	// The cache has reached the revision asked for; its newest state is at least as new.
	tc.mu.RLock()
	v := tc.ix.at(backend.Key(namespace, name), tc.rev)
	cur := tc.rev
	tc.mu.RUnlock()
	if v == nil {
		return nil, &storage.Error{Reason: storagev1.ErrorReason_NOT_FOUND, CurrentRevision: cur,
			Message: tc.name + " \"" + name + "\" not found"}
	}
	return v.out, nil
}

// List reads a collection under the list semantics of resourceVersion, resourceVersionMatch,
// limit and continue (the table in the spec's "Resource version semantics").
func (c *Cache) List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	resp, found, err := c.list(ctx, req)
	if err != nil {
		return nil, err
	}
	for i := range found {
		resp.Items = append(resp.Items, found[i].out)
	}
	return resp, nil
}

// ListWire is List for a response that is only encoded (the gRPC service): the same message,
// but its items are carried already encoded, as unknown fields of the response, so Items is
// empty and marshaling copies them (or, with the service's codec, writes them out as they
// are) instead of encoding 2,000 objects field by field.
// Each item's encoding is made once per version and shared by every later list. Decoding the
// response gives List's Items (the encoding is field 1, items, repeated; field order does not
// matter to a Protobuf decoder).
func (c *Cache) ListWire(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	resp, found, err := c.list(ctx, req)
	if err != nil {
		return nil, err
	}
	size := 0
	encs := make([][]byte, len(found))
	for i := range found {
		encs[i] = found[i].encoded()
		size += protowire.SizeTag(1) + protowire.SizeBytes(len(encs[i]))
	}
	// From gRPC's buffer pool: the service's codec writes it out as it is and returns it there.
	raw := (*mem.DefaultBufferPool().Get(size))[:0]
	for _, e := range encs {
		raw = protowire.AppendTag(raw, 1, protowire.BytesType)
		raw = protowire.AppendBytes(raw, e)
	}
	resp.ProtoReflect().SetUnknown(raw)
	return resp, nil
}

// list reads the versions a list returns (copies, so they can be read after the type's lock is
// released) and the response without its items.
func (c *Cache) list(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, []version, error) {
	if req.GetLimit() < 0 {
		return nil, nil, storage.NewInvalid("limit", "must be >= 0")
	}
	tc, f, kind, n, err := c.request(ctx, req.GetType(), req.GetNamespace(), req.GetLabelSelector(), req.GetFieldSelector(), req.GetResourceVersion())
	if err != nil {
		return nil, nil, err
	}

	var (
		rev          int64
		after        string
		exact        bool // rev must still be retained
		expiredError = func(rev, compacted int64) error { return tooOld(rev, compacted) }
	)
	match := req.GetResourceVersionMatch()
	switch {
	case req.GetContinue() != "":
		if match != storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_UNSPECIFIED {
			return nil, nil, storage.NewInvalid("resourceVersionMatch", "is forbidden when continue is provided")
		}
		if kind == rvExact {
			return nil, nil, storage.NewInvalid("resourceVersion", "specifying resource version is not allowed when using continue")
		}
		tok, ok := decodeToken(c.secret, tc.name, req.GetNamespace(), req.GetContinue())
		if !ok {
			return nil, nil, storage.NewInvalid("continue", "invalid continue token")
		}
		after = tok.lastKey
		if tok.rev == 0 {
			// An inconsistent continue: the rest of the list at the most recent revision.
			rev, err = c.readRev(ctx, tc, rvUnset, 0)
			break
		}
		rev, exact = tok.rev, true
		expiredError = func(int64, int64) error {
			return &storage.Error{Reason: storagev1.ErrorReason_EXPIRED, Message: inconsistentContinue,
				Continue: encodeToken(c.secret, tc.name, req.GetNamespace(), continueToken{rev: 0, lastKey: tok.lastKey})}
		}
		if _, err := c.notOlderThan(ctx, tc, rev); err != nil {
			return nil, nil, err
		}
	case match == storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_EXACT:
		if kind != rvExact {
			return nil, nil, storage.NewInvalid("resourceVersionMatch", "\"Exact\" is forbidden for resourceVersion %q", req.GetResourceVersion())
		}
		rev, exact = n, true
		if _, err := c.notOlderThan(ctx, tc, rev); err != nil {
			return nil, nil, err
		}
	case match == storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_NOT_OLDER_THAN:
		if kind == rvUnset {
			return nil, nil, storage.NewInvalid("resourceVersionMatch", "is forbidden unless resourceVersion is provided")
		}
		rev, err = c.readRev(ctx, tc, kind, n)
	case match == storagev1.ResourceVersionMatch_RESOURCE_VERSION_MATCH_UNSPECIFIED:
		if kind == rvExact && req.GetLimit() > 0 { // a first page at a revision is Exact
			rev, exact = n, true
			_, err = c.notOlderThan(ctx, tc, rev)
		} else {
			rev, err = c.readRev(ctx, tc, kind, n)
		}
	default:
		return nil, nil, storage.NewInvalid("resourceVersionMatch", "unsupported value %d", int32(match))
	}
	if err != nil {
		return nil, nil, err
	}

	limit := int(req.GetLimit())
	resp := &storagev1.ListResponse{ResourceVersion: rev}
	var found []version
	var lastKey string
	more, remaining := false, int64(0)
	tc.mu.RLock()
	compacted := tc.compacted
	if !exact && rev < compacted {
		rev = tc.rev // a "not older than" read may move forward past a compaction
		resp.ResourceVersion = rev
	}
	if rev >= compacted {
		tc.ix.scan(f.Prefix(), after, rev, func(key string, v *version) bool {
			if !f.Matches(v.obj) {
				return true
			}
			if limit > 0 && len(found) == limit {
				more = true
				if f.HasSelectors() {
					return false
				}
				remaining++
				return true
			}
			found = append(found, *v)
			lastKey = key
			return true
		})
	}
	tc.mu.RUnlock()
	if rev < compacted {
		return nil, nil, expiredError(rev, compacted)
	}
	if more {
		resp.Continue = encodeToken(c.secret, tc.name, req.GetNamespace(), continueToken{rev: rev, lastKey: lastKey})
		if !f.HasSelectors() {
			resp.RemainingItemCount = &remaining
		}
	}
	return resp, found, nil
}

// Revision reports the type's current and compacted revision, consistently (from the backend).
func (c *Cache) Revision(ctx context.Context, rt *storagev1.ResourceType) (current, compacted int64, err error) {
	return c.be.Revision(ctx, rt)
}

// Compact discards history up to rev in the backend and in the cache.
func (c *Cache) Compact(ctx context.Context, rt *storagev1.ResourceType, rev int64) (int64, error) {
	tc, err := c.typeCache(ctx, rt)
	if err != nil {
		return 0, err
	}
	eff, err := c.be.Compact(ctx, rt, rev)
	if err != nil {
		return 0, err
	}
	// The cache drops history only up to what it has read; let it catch up with the compacted
	// revision first, so that once Compact answers, nothing older is served (continue tokens and
	// watches from before it get 410). If it cannot, its reader reloads from the backend.
	if _, err := tc.waitFor(ctx, eff, c.cfg.FutureWait); err != nil {
		return 0, err
	}
	tc.compact(eff)
	return eff, nil
}

// Retention says how much history to keep per type.
type Retention struct {
	// Duration keeps every event younger than this.
	Duration time.Duration
	// MaxEvents bounds the events kept per type, whatever their age (0: unbounded).
	MaxEvents int
	// Interval is how often compaction runs.
	Interval time.Duration
}

// RunCompactor compacts every type in the background according to r until ctx ends. It works
// on one type at a time and never holds a type's lock while it talks to the backend, so writes
// and reads go on while it runs.
func (c *Cache) RunCompactor(ctx context.Context, r Retention) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, tc := range c.loaded() {
			target := tc.compactionTarget(time.Now().Add(-r.Duration), r.MaxEvents)
			if _, compacted, _, _ := tc.state(); target <= compacted {
				continue
			}
			eff, err := c.be.Compact(ctx, tc.rt, target)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("storage compaction failed", "type", tc.name, "err", err)
				}
				continue
			}
			tc.compact(eff)
		}
	}
}

func (c *Cache) loaded() []*typeCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*typeCache, 0, len(c.types))
	for _, e := range c.types {
		select {
		case <-e.ready:
			if e.tc != nil {
				out = append(out, e.tc)
			}
		default:
		}
	}
	return out
}

// TypeStats describes one loaded type, for metrics.
type TypeStats struct {
	Type      string
	Revision  int64
	Compacted int64
	Events    int
	Objects   int
	// Live is the number of objects that exist now (Objects also counts deleted keys whose
	// history is retained).
	Live     int
	Watchers int
}

// Stats reports every loaded type.
func (c *Cache) Stats() []TypeStats {
	var out []TypeStats
	for _, tc := range c.loaded() {
		tc.mu.RLock()
		out = append(out, TypeStats{Type: tc.name, Revision: tc.rev, Compacted: tc.compacted,
			Events: len(tc.events), Objects: tc.ix.len(), Live: tc.ix.live, Watchers: tc.watchers})
		tc.mu.RUnlock()
	}
	return out
}

// Lag reports, per loaded type, how many revisions the cache is behind the backend.
func (c *Cache) Lag(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	for _, tc := range c.loaded() {
		cur, _, err := c.be.Revision(ctx, tc.rt)
		if err != nil {
			continue
		}
		have, _, _, _ := tc.state()
		out[tc.name] = max(0, cur-have)
	}
	return out
}

// errReset ends a watch whose cache was rebuilt; its client resumes from its last revision.
var errReset = errors.New("storage cache was reloaded; resume the watch from the last revision")

// IsReset reports whether a watch ended because the cache was reloaded.
func IsReset(err error) bool { return errors.Is(err, errReset) }
