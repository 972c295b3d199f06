// Package redisbackend is the Redis Streams implementation of backend.Backend.
//
// # Keys
//
// Every key of one resource type shares one Redis Cluster hash tag, so a type lives in one slot
// and a Lua script may touch all of its keys:
//
//	<prefix>:{<TypeName>}:rev        string: the type's current revision (absent = 0)
//	<prefix>:{<TypeName>}:compacted  string: the compacted revision (absent = 0)
//	<prefix>:{<TypeName>}:objs       hash: backend.Key(ns, name) -> stored value of the live object
//	<prefix>:{<TypeName>}:log        stream: one entry per revision, entry ID "<revision>-0"
//	<prefix>:{<TypeName>}:readmark   string: a counter the log readers write to in cluster mode
//	                                 (see "Replicated reads" in cluster.go)
//	<prefix>:continue-secret         string: the 32-byte continue-token key shared by replicas
//
// <prefix> is naming.RedisKeyPrefix and <TypeName> is backend.TypeName ("<resource>.<group>", or
// "<resource>" for the core group); Types finds types by scanning for the rev keys.
//
// # Values
//
// A stored value is "<revision>|<len(uid)>|<uid>" followed by the object's protobuf encoding
// without resource_version and uid. The Lua script reads the revision and the uid (for
// preconditions) from the header without decoding protobuf, and builds the new value by putting
// a new header in front of the payload the client sent; decoding sets ResourceVersion and Uid
// from the header. The uid is fixed at creation: Update keeps the stored one.
//
// A log entry has the fields t (a|m|d: added, modified, deleted), k (the key), o (the new stored
// value; not for d), p (the previous stored value; not for a) and ts (the commit time in
// microseconds, from Redis's TIME). A Deleted event's Object is the previous object with the
// deletion's revision.
//
// # Writes
//
// Create, Update and Delete are one EVALSHA each (writeScript): check existence and the uid and
// resourceVersion preconditions, append to the log with ID <rev+1>-0, change the hash and set
// rev, all atomically. Redis 7 replicates a script's effects, so TIME is allowed before writing.
// Client-side retries are off: a retried write whose first attempt did commit would commit twice.
//
// # Reads
//
// Revision is one MGET; Snapshot one MULTI/EXEC (MGET, HGETALL, XRANGE); Read a pipeline (MGET,
// XRANGE) and, when nothing is there yet, an XREAD BLOCK bounded by the context's deadline (5s at
// most). Compact is a script: compacted = max(stored, min(requested, current)), then an exact
// XTRIM MINID.
//
// # Failures
//
// Network errors, pool timeouts and Redis's LOADING/MASTERDOWN-style replies are returned
// wrapping backend.ErrUnavailable. Dials time out after a second and are not retried, so a write
// against a dead Redis fails at once; go-redis redials on the next call once Redis is back.
package redisbackend

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"platform.io/libs/naming"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Options configure the connection to Redis.
type Options struct {
	// URL is a redis:// or rediss:// URL (go-redis ParseURL syntax, including its query options).
	URL string
	// Password, when non-empty, replaces the URL's password.
	Password string
	// TLSConfig, when non-nil, enables TLS with this configuration.
	TLSConfig *tls.Config
	// PoolSize is the number of pooled connections (per node in a cluster); 0 means 64.
	PoolSize int
	// Cluster makes URL the seed node of a Redis Cluster (see cluster.go): its scheme,
	// credentials and options apply to every node; the database must be 0.
	Cluster bool
	// ClusterAddrs are more seed nodes (host:port) of the cluster, tried when URL's is down.
	ClusterAddrs []string
	// WaitReplicas, when positive, makes every write wait (Redis WAIT) until that many replicas
	// of its master have acknowledged it, up to WaitTimeout, before it is acknowledged; a write
	// that is not acknowledged in time is reported as unavailable with an unknown outcome.
	WaitReplicas int
	// WaitTimeout bounds WaitReplicas' wait; 0 means 1s.
	WaitTimeout time.Duration
}

const (
	defaultPoolSize = 64
	connectTimeout  = 3 * time.Second // New's PING
	dialTimeout     = time.Second
	maxBlock        = 5 * time.Second // longest XREAD BLOCK of one Read
	defaultReadMax  = 1000            // Read's max when the caller passes <= 0
	secretLen       = 32
	// blockingPoolSize bounds the connections parked in XREAD BLOCK: one per resource type in
	// use. go-redis dials them only when needed.
	blockingPoolSize = 4096
	// defaultWaitTimeout bounds a write's WAIT for replicas when Options.WaitTimeout is 0.
	defaultWaitTimeout = time.Second
)

// Backend is a backend.Backend on one Redis (standalone, or the primary of a replicated set) or
// on a Redis Cluster.
type Backend struct {
	// client is a *redis.Client, or a *redis.ClusterClient in cluster mode.
	client redis.UniversalClient
	// blocking serves only XREAD BLOCK. Every resource type in use has a log reader parked there
	// for seconds at a time; sharing the request pool, more types than pooled connections would
	// starve every other command.
	blocking redis.UniversalClient
	// cluster is client in cluster mode, nil otherwise.
	cluster *redis.ClusterClient
	// nodes are cluster's per-node clients by address (writes go to them directly: see
	// clusterWrite).
	nodes sync.Map
	// waitReplicas and waitTimeout are Options.WaitReplicas and WaitTimeout.
	waitReplicas int
	waitTimeout  time.Duration
	addr         string
	secretKey    string
	typesGlob    string

	mu    sync.RWMutex
	types map[typeID]*typeKeys
}

var _ backend.Backend = (*Backend)(nil)

type typeID struct{ group, resource string }

// typeKeys are the key names of one type, built once.
type typeKeys struct {
	rev, compacted, objs, log string
	writeKeys                 []string // rev, objs, log
	readKeys                  []string // rev, compacted, log, readmark (cluster mode)
	snapshotKeys              []string // rev, compacted, objs, log, readmark (cluster mode)
	compactKeys               []string // rev, compacted, log
	metaKeys                  []string // rev, compacted
}

// New connects to Redis, checks it answers PING within a few seconds and loads the scripts.
func New(ctx context.Context, opts Options) (*Backend, error) {
	ro, err := clientOptions(opts)
	if err != nil {
		return nil, err
	}
	var b *Backend
	if opts.Cluster {
		if b, err = openCluster(ro, opts); err != nil {
			return nil, err
		}
	} else {
		b = open(ro)
	}
	if opts.WaitReplicas > 0 {
		b.waitReplicas = opts.WaitReplicas
		b.waitTimeout = cmp.Or(opts.WaitTimeout, defaultWaitTimeout)
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := b.client.Ping(pctx).Err(); err != nil {
		_ = b.Close()
		if ctx.Err() == nil && (pctx.Err() != nil || isUnavailable(err)) {
			return nil, &unavailableError{addr: b.addr, err: err}
		}
		return nil, fmt.Errorf("redisbackend: connect to Redis at %s: %w", b.addr, err)
	}
	for _, s := range []*redis.Script{writeScript, compactScript, readScript, snapshotScript} {
		if err := s.Load(pctx, b.client).Err(); err != nil {
			_ = b.Close()
			return nil, b.wrap(pctx, fmt.Errorf("load script: %w", err))
		}
	}
	return b, nil
}

// clientOptions turns Options into go-redis options.
func clientOptions(opts Options) (*redis.Options, error) {
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("redisbackend: invalid Redis URL: %s", redactErr(err, opts))
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	if opts.TLSConfig != nil {
		ro.TLSConfig = opts.TLSConfig
	}
	ro.PoolSize = opts.PoolSize
	if ro.PoolSize <= 0 {
		ro.PoolSize = defaultPoolSize
	}
	if ro.DialTimeout == 0 {
		ro.DialTimeout = dialTimeout
	}
	ro.DialerRetries = 1
	// No client-side retries: an EVALSHA whose reply was lost may have committed, and running it
	// again would commit twice. Dead pooled connections are weeded out by go-redis's health check
	// when they are taken from the pool.
	ro.MaxRetries = -1
	// Callers' deadlines bound socket reads and writes.
	ro.ContextTimeoutEnabled = true
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return ro, nil
}

// open makes a Backend on a new client, without talking to Redis yet.
func open(ro *redis.Options) *Backend {
	bo := *ro
	bo.PoolSize = blockingPoolSize
	return &Backend{
		client:    redis.NewClient(ro),
		blocking:  redis.NewClient(&bo),
		addr:      ro.Addr,
		secretKey: naming.RedisKeyPrefix + ":continue-secret",
		typesGlob: naming.RedisKeyPrefix + ":{*}:rev",
		types:     make(map[typeID]*typeKeys),
	}
}

// redactErr describes a URL parse error without repeating the URL (and its password).
func redactErr(err error, opts Options) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if opts.Password != "" {
		msg = strings.ReplaceAll(msg, opts.Password, "xxxxx")
	}
	if u, perr := url.Parse(opts.URL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// keys returns the key names of rt, rejecting type names that would not survive the round trip
// through a key name.
func (b *Backend) keys(rt *storagev1.ResourceType) (*typeKeys, error) {
	id := typeID{rt.GetGroup(), rt.GetResource()}
	b.mu.RLock()
	k := b.types[id]
	b.mu.RUnlock()
	if k != nil {
		return k, nil
	}
	if id.resource == "" || strings.ContainsAny(id.resource, ".{}") || strings.ContainsAny(id.group, "{}") {
		return nil, fmt.Errorf("redisbackend: invalid resource type %q (group %q)", id.resource, id.group)
	}
	base := naming.RedisKeyPrefix + ":{" + backend.TypeName(rt) + "}:"
	k = &typeKeys{rev: base + "rev", compacted: base + "compacted", objs: base + "objs", log: base + "log"}
	k.writeKeys = []string{k.rev, k.objs, k.log}
	k.readKeys = []string{k.rev, k.compacted, k.log, base + "readmark"}
	k.snapshotKeys = []string{k.rev, k.compacted, k.objs, k.log, base + "readmark"}
	k.compactKeys = []string{k.rev, k.compacted, k.log}
	k.metaKeys = []string{k.rev, k.compacted}
	b.mu.Lock()
	if prev := b.types[id]; prev != nil {
		k = prev
	} else {
		b.types[id] = k
	}
	b.mu.Unlock()
	return k, nil
}

var errNilObject = errors.New("redisbackend: nil object")

// writeResult is a committed write as writeScript reports it.
type writeResult struct {
	rev      int64
	unixNano int64
	prev     string // the previous stored value; "" for a create
}

func (b *Backend) write(ctx context.Context, k *typeKeys, op, key string, payload []byte, uid, rv string) (writeResult, error) {
	if err := ctx.Err(); err != nil {
		// Do not let go-redis turn an expired deadline into a socket timeout (and a dropped
		// connection).
		return writeResult{}, err
	}
	res, err := b.runWrite(ctx, k, op, key, payload, uid, rv)
	if err != nil {
		return writeResult{}, b.wrap(ctx, err)
	}
	var code int64
	if len(res) > 0 {
		code, _ = res[0].(int64)
	}
	switch code {
	case replyOK:
		if len(res) < 3 {
			break
		}
		r := writeResult{}
		r.rev, _ = res[1].(int64)
		ts, _ := res[2].(string)
		us, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || r.rev <= 0 {
			break
		}
		r.unixNano = us * 1000
		if len(res) > 3 {
			r.prev, _ = res[3].(string)
		}
		return r, nil
	case replyNotFound:
		return writeResult{}, backend.ErrNotFound
	case replyAlreadyExists:
		return writeResult{}, backend.ErrAlreadyExists
	case replyConflict:
		if len(res) < 5 {
			break
		}
		ce := &backend.ConflictError{}
		ce.Field, _ = res[1].(string)
		ce.Expected, _ = res[2].(string)
		ce.Actual, _ = res[3].(string)
		cur, _ := res[4].(string)
		ce.CurrentRevision, _ = strconv.ParseInt(cur, 10, 64)
		return writeResult{}, ce
	}
	return writeResult{}, fmt.Errorf("redisbackend: unexpected write script reply %v", res)
}

// Create implements backend.Backend.
func (b *Backend) Create(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object) (backend.Event, error) {
	return b.put(ctx, rt, obj, opCreate, obj.GetUid(), "")
}

// Update implements backend.Backend.
func (b *Backend) Update(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object, pre *storagev1.Preconditions) (backend.Event, error) {
	uid, rv := preArgs(pre)
	return b.put(ctx, rt, obj, opUpdate, uid, rv)
}

// put runs a create or an update (uid and rv are the script's arguments) and builds its event.
func (b *Backend) put(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object, op, uid, rv string) (backend.Event, error) {
	k, err := b.keys(rt)
	if err != nil {
		return backend.Event{}, err
	}
	if obj == nil {
		return backend.Event{}, errNilObject
	}
	buf := getBuf()
	payload, err := appendPayload(*buf, obj)
	if err != nil {
		return backend.Event{}, err
	}
	r, err := b.write(ctx, k, op, backend.Key(obj.GetNamespace(), obj.GetName()), payload, uid, rv)
	ev := backend.Event{Type: backend.Added, Revision: r.rev, UnixNano: r.unixNano}
	storedUID := obj.GetUid()
	if err == nil && op == opUpdate {
		ev.Type = backend.Modified
		if ev.Prev, err = decodeValue(r.prev); err == nil {
			storedUID = ev.Prev.GetUid() // the uid is fixed at creation
		}
	}
	if err == nil {
		// The event carries what was stored; decoding the payload is cheaper than proto.Clone.
		ev.Object, err = decodePayload(payload, r.rev, storedUID)
	}
	putBuf(buf, payload)
	if err != nil {
		return backend.Event{}, err
	}
	return ev, nil
}

// Delete implements backend.Backend.
func (b *Backend) Delete(ctx context.Context, rt *storagev1.ResourceType, namespace, name string, pre *storagev1.Preconditions) (backend.Event, error) {
	k, err := b.keys(rt)
	if err != nil {
		return backend.Event{}, err
	}
	uid, rv := preArgs(pre)
	r, err := b.write(ctx, k, opDelete, backend.Key(namespace, name), nil, uid, rv)
	if err != nil {
		return backend.Event{}, err
	}
	prev, err := decodeValue(r.prev)
	if err != nil {
		return backend.Event{}, err
	}
	o, err := decodeValue(r.prev)
	if err != nil {
		return backend.Event{}, err
	}
	o.ResourceVersion = r.rev
	return backend.Event{Type: backend.Deleted, Revision: r.rev, Object: o, Prev: prev, UnixNano: r.unixNano}, nil
}

// preArgs renders the preconditions as writeScript's uid and rv arguments ("" = unchecked).
func preArgs(pre *storagev1.Preconditions) (uid, rv string) {
	if v := pre.GetResourceVersion(); v != 0 {
		rv = strconv.FormatInt(v, 10)
	}
	return pre.GetUid(), rv
}

// Revision implements backend.Backend.
func (b *Backend) Revision(ctx context.Context, rt *storagev1.ResourceType) (current, compacted int64, err error) {
	k, err := b.keys(rt)
	if err != nil {
		return 0, 0, err
	}
	vals, err := b.client.MGet(ctx, k.metaKeys...).Result()
	if err != nil {
		return 0, 0, b.wrap(ctx, err)
	}
	return parseMeta(vals)
}

// parseMeta parses the MGET of rev and compacted.
func parseMeta(vals []any) (current, compacted int64, err error) {
	if len(vals) != 2 {
		return 0, 0, fmt.Errorf("redisbackend: unexpected MGET reply %v", vals)
	}
	if current, err = parseCounter(vals[0]); err != nil {
		return 0, 0, err
	}
	if compacted, err = parseCounter(vals[1]); err != nil {
		return 0, 0, err
	}
	return current, compacted, nil
}

func parseCounter(v any) (int64, error) {
	if v == nil {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("redisbackend: unexpected counter value %v", v)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisbackend: unexpected counter value %q", s)
	}
	return n, nil
}

// Snapshot implements backend.Backend.
func (b *Backend) Snapshot(ctx context.Context, rt *storagev1.ResourceType) (*backend.Snapshot, error) {
	k, err := b.keys(rt)
	if err != nil {
		return nil, err
	}
	var (
		metaVals []any
		objVals  map[string]string
		logVals  []redis.XMessage
	)
	if b.cluster != nil {
		if metaVals, objVals, logVals, err = b.clusterSnapshot(ctx, k); err != nil {
			return nil, err
		}
	} else {
		var (
			meta *redis.SliceCmd
			objs *redis.MapStringStringCmd
			log  *redis.XMessageSliceCmd
		)
		_, err = b.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.MGet(ctx, k.metaKeys...)
			objs = p.HGetAll(ctx, k.objs)
			log = p.XRange(ctx, k.log, "-", "+")
			return nil
		})
		if err != nil {
			return nil, b.wrap(ctx, err)
		}
		metaVals, objVals, logVals = meta.Val(), objs.Val(), log.Val()
	}
	s := &backend.Snapshot{}
	if s.Revision, s.Compacted, err = parseMeta(metaVals); err != nil {
		return nil, err
	}
	s.Objects = make([]*storagev1.Object, 0, len(objVals))
	for _, v := range objVals {
		o, err := decodeValue(v)
		if err != nil {
			return nil, err
		}
		s.Objects = append(s.Objects, o)
	}
	slices.SortFunc(s.Objects, func(a, b *storagev1.Object) int {
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	s.Events = make([]backend.Event, 0, len(logVals))
	for _, m := range logVals {
		ev, err := entryEvent(m.ID, m.Values)
		if err != nil {
			return nil, err
		}
		s.Events = append(s.Events, ev)
	}
	return s, nil
}

// Read implements backend.Backend.
func (b *Backend) Read(ctx context.Context, rt *storagev1.ResourceType, after int64, max int) ([]backend.Event, error) {
	k, err := b.keys(rt)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		max = defaultReadMax
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		current, compacted int64
		msgs               []redis.XMessage
	)
	first := strconv.FormatInt(after+1, 10) + "-0"
	if b.cluster != nil {
		if current, compacted, msgs, err = b.clusterRead(ctx, k, first, max); err != nil {
			return nil, err
		}
	} else {
		var (
			meta *redis.SliceCmd
			log  *redis.XMessageSliceCmd
		)
		_, err = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.MGet(ctx, k.metaKeys...)
			log = p.XRangeN(ctx, k.log, first, "+", int64(max))
			return nil
		})
		if err != nil {
			return nil, b.wrap(ctx, err)
		}
		if current, compacted, err = parseMeta(meta.Val()); err != nil {
			return nil, err
		}
		msgs = log.Val()
	}
	if after < compacted {
		return nil, backend.ErrCompacted
	}
	if current < after {
		return nil, backend.ErrRewound
	}
	if len(msgs) > 0 {
		return denseEvents(after, msgs)
	}
	if current > after {
		// (after, current] existed when MGET ran and is gone now: compacted in between.
		return nil, backend.ErrCompacted
	}
	return b.wait(ctx, k, after, max)
}

// wait blocks in XREAD for entries after `after`, up to the context's deadline (maxBlock at
// most), and returns them, or an empty slice when none arrived.
func (b *Backend) wait(ctx context.Context, k *typeKeys, after int64, max int) ([]backend.Event, error) {
	block := maxBlock
	if dl, ok := ctx.Deadline(); ok {
		block = min(time.Until(dl), maxBlock)
	}
	block = block.Truncate(time.Millisecond)
	if block <= 0 { // BLOCK 0 would wait forever
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			return nil, err
		}
		return []backend.Event{}, nil
	}
	args := &redis.XReadArgs{
		Streams: []string{k.log, strconv.FormatInt(after, 10) + "-0"},
		Count:   int64(max),
		Block:   block,
	}
	// The blocking read runs without the context's deadline: go-redis would otherwise make the
	// deadline the socket's, and it would race Redis's own BLOCK timeout (and drop the connection
	// when it won). go-redis cannot interrupt a read when ctx is cancelled, so then the XREAD is
	// left to finish (within block) on its own goroutine.
	rctx := context.WithoutCancel(ctx)
	type result struct {
		streams []redis.XStream
		err     error
	}
	var r result
	if ctx.Done() == nil {
		r.streams, r.err = b.blocking.XRead(rctx, args).Result()
	} else {
		ch := make(chan result, 1)
		go func() {
			s, err := b.blocking.XRead(rctx, args).Result()
			ch <- result{s, err}
		}()
		select {
		case r = <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, ctx.Err()
			}
			r = <-ch // the deadline: Redis answers by then too
		}
	}
	if r.err == redis.Nil {
		return []backend.Event{}, nil
	}
	if r.err != nil {
		return nil, b.wrap(rctx, r.err)
	}
	if len(r.streams) == 0 || len(r.streams[0].Messages) == 0 {
		return []backend.Event{}, nil
	}
	if b.confirmReads() {
		// The XREAD only woke the reader: read again, confirmed (cluster.go, "Replicated reads").
		cctx, cancel := context.WithTimeout(rctx, b.waitTimeout+time.Second)
		defer cancel()
		_, _, msgs, err := b.clusterRead(cctx, k, strconv.FormatInt(after+1, 10)+"-0", max)
		if err != nil || len(msgs) == 0 {
			return []backend.Event{}, err
		}
		return denseEvents(after, msgs)
	}
	return denseEvents(after, r.streams[0].Messages)
}

// denseEvents decodes log entries that must be the revisions after+1, after+2, ...; a gap means
// the entries in between were compacted away.
func denseEvents(after int64, msgs []redis.XMessage) ([]backend.Event, error) {
	evs := make([]backend.Event, 0, len(msgs))
	for i, m := range msgs {
		ev, err := entryEvent(m.ID, m.Values)
		if err != nil {
			return nil, err
		}
		if ev.Revision != after+1+int64(i) {
			return nil, backend.ErrCompacted
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Compact implements backend.Backend.
func (b *Backend) Compact(ctx context.Context, rt *storagev1.ResourceType, rev int64) (int64, error) {
	k, err := b.keys(rt)
	if err != nil {
		return 0, err
	}
	n, err := compactScript.Run(ctx, b.client, k.compactKeys, rev).Int64()
	if err != nil {
		return 0, b.wrap(ctx, err)
	}
	return n, nil
}

// Types implements backend.Backend.
func (b *Backend) Types(ctx context.Context) ([]*storagev1.ResourceType, error) {
	prefix := naming.RedisKeyPrefix + ":{"
	const suffix = "}:rev"
	seen := make(map[string]bool)
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, b.typesGlob, 1000).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			if !strings.HasPrefix(key, prefix) || !strings.HasSuffix(key, suffix) || len(key) <= len(prefix)+len(suffix) {
				continue
			}
			mu.Lock()
			seen[key[len(prefix):len(key)-len(suffix)]] = true
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if b.cluster != nil {
		// SCAN covers one node: every master's keys together are the cluster's.
		err = b.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, b.client)
	}
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*storagev1.ResourceType, 0, len(names))
	for _, n := range names {
		// Resources have no dots and groups may: the first dot ends the resource.
		rt := &storagev1.ResourceType{Resource: n}
		if i := strings.IndexByte(n, '.'); i >= 0 {
			rt.Resource, rt.Group = n[:i], n[i+1:]
		}
		out = append(out, rt)
	}
	return out, nil
}

// Secret implements backend.Backend.
func (b *Backend) Secret(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, secretLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("redisbackend: generate secret: %w", err)
	}
	var get *redis.StringCmd
	var err error
	if b.cluster != nil {
		// Two commands, not a pipeline: go-redis's cluster pipelines mishandle commands
		// redirected during a slot migration.
		if err = b.client.SetNX(ctx, b.secretKey, fresh, 0).Err(); err == nil {
			get = b.client.Get(ctx, b.secretKey)
		}
	} else {
		_, err = b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SetNX(ctx, b.secretKey, fresh, 0)
			get = p.Get(ctx, b.secretKey)
			return nil
		})
	}
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	s, err := get.Bytes()
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	if len(s) != secretLen {
		return nil, fmt.Errorf("redisbackend: %s holds %d bytes, want %d", b.secretKey, len(s), secretLen)
	}
	return s, nil
}

// Ping implements backend.Backend.
func (b *Backend) Ping(ctx context.Context) error {
	return b.wrap(ctx, b.client.Ping(ctx).Err())
}

// Close implements backend.Backend.
func (b *Backend) Close() error {
	return errors.Join(b.client.Close(), b.blocking.Close())
}

// unavailableError reports that Redis could not be reached; it matches backend.ErrUnavailable.
type unavailableError struct {
	addr string
	err  error
}

func (e *unavailableError) Error() string {
	return "redis at " + e.addr + " is unreachable: " + e.err.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{backend.ErrUnavailable, e.err} }

// wrap classifies an error of a Redis call made with ctx.
func (b *Backend) wrap(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// The caller's deadline or cancellation ended the call, whatever the socket said.
		return ctx.Err()
	case isUnavailable(err):
		if b.cluster != nil { // a master may have failed over: look again (lazily)
			b.cluster.ReloadState(ctx)
			b.blocking.(*redis.ClusterClient).ReloadState(ctx)
		}
		return &unavailableError{addr: b.addr, err: err}
	default:
		return fmt.Errorf("redisbackend: %w", err)
	}
}

// isUnavailable reports whether err means Redis cannot serve requests right now: network
// errors, a closed client, an exhausted pool, or a server that is loading its data set or has
// lost its primary.
func isUnavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, redis.ErrClosed),
		redis.IsLoadingError(err),
		redis.IsMasterDownError(err),
		redis.IsClusterDownError(err),
		redis.IsTryAgainError(err),
		redis.IsReadOnlyError(err),
		redis.IsMaxClientsError(err):
		return true
	}
	return false
}

// clientLog forwards go-redis's own log lines (dial failures while Redis is down, pool
// warnings) to a structured logger at debug level: the backend already reports unreachability
// through its errors, the service's health and its logs, so these would only repeat it.
type clientLog struct{ log *slog.Logger }

func (l clientLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// RouteClientLogs sends go-redis's process-wide log output to log.
func RouteClientLogs(log *slog.Logger) { redis.SetLogger(clientLog{log: log}) }
