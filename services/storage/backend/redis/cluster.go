package redisbackend

// # Redis Cluster
//
// With Options.Cluster the backend talks to a Redis Cluster through go-redis's cluster client.
// Nothing in the data layout changes: every key of a type carries the type's hash tag, so a
// type lives in one slot, on one master, and every command the backend sends touches one type:
// the write, compaction, read and snapshot scripts, the MGET of rev and compacted and the log
// reader's single-stream XREAD BLOCK. No command spans two slots, so nothing
// can fail with CROSSSLOT; the continue-token secret is a key of its own. Types are found by
// scanning every master.
//
// The log readers stay one per type in use, each parked in an XREAD BLOCK on its own stream,
// on a blocking pool of its own (per node); watchers still fan out in process. There is no
// multi-stream XREAD to split by slot.
//
// Writes do not go through the cluster client's command loop: it retries a command whose
// connection broke after it was sent, and a retried write that did commit would commit twice.
// clusterWrite sends the script to the master of the type's slot itself, follows MOVED and ASK
// (the script did not run), waits and retries on TRYAGAIN, CLUSTERDOWN, READONLY and failed dials
// (it did not run either), and returns anything else, a broken connection included, to the
// caller as it is.
//
// Read and Snapshot are scripts in cluster mode (readScript, snapshotScript): one command
// each, which the cluster client redirects on its own during a slot migration.
//
// # Replicated reads
//
// With WaitReplicas, the log readers show nothing that the replicas do not have: Read and
// Snapshot run on the slot's master and, when they return changes, end with a write to the
// type's readmark key and a WAIT on the same connection (confirmedRun); XREAD BLOCK only wakes
// the reader, which then reads again that way. So a write reaches watchers and lists only once
// a replica, the one a failover would promote, has it, and a master crash cannot take back a
// change that a watcher saw (and give its revision to another). The price is one round trip
// and one small replicated write per read that finds changes, and while a master has no live
// replica its types' caches stand still: watches and "0" reads keep what they had, consistent
// reads fail UNAVAILABLE, as writes do.
//
// # Acknowledged writes and failover
//
// Redis replicates asynchronously: a master that acknowledged a write and died before its
// replica received it loses the write when the replica is promoted. With Options.WaitReplicas
// (the service's default in cluster mode is 1), each write is pipelined with WAIT on the same
// connection and acknowledged only once that many replicas have it; otherwise it fails as
// unavailable with an unknown outcome (it is committed on the master and may survive). A
// coordinated failover (CLUSTER FAILOVER) loses nothing either way.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"platform.io/libs/naming"
)

const (
	// maxWriteAttempts bounds the redirects and retries of one write in cluster mode.
	maxWriteAttempts = 8
	// clusterReloadInterval bounds how stale the cluster client's slot map gets without errors.
	clusterReloadInterval = 2 * time.Second
)

// openCluster makes a Backend on a cluster client whose seed nodes are ro's address and
// opts.ClusterAddrs, without talking to Redis yet.
func openCluster(ro *redis.Options, opts Options) (*Backend, error) {
	if ro.DB != 0 {
		return nil, errors.New("redisbackend: a Redis Cluster has database 0 only: drop the /<db> from the Redis URL")
	}
	tlsConfig := ro.TLSConfig
	if tlsConfig != nil && opts.TLSConfig == nil {
		// rediss:// names one seed as the TLS server name; each node is verified by its own
		// address instead.
		tlsConfig = tlsConfig.Clone()
		tlsConfig.ServerName = ""
	}
	b := &Backend{
		addr:      ro.Addr,
		secretKey: naming.RedisKeyPrefix + ":continue-secret",
		typesGlob: naming.RedisKeyPrefix + ":{*}:rev",
		types:     make(map[typeID]*typeKeys),
	}
	co := func(poolSize int) *redis.ClusterOptions {
		o := &redis.ClusterOptions{
			Addrs:                      append([]string{ro.Addr}, opts.ClusterAddrs...),
			Username:                   ro.Username,
			Password:                   ro.Password,
			TLSConfig:                  tlsConfig,
			DialTimeout:                ro.DialTimeout,
			DialerRetries:              ro.DialerRetries,
			ReadTimeout:                ro.ReadTimeout,
			WriteTimeout:               ro.WriteTimeout,
			PoolSize:                   poolSize,
			MaxRetries:                 -1,
			ContextTimeoutEnabled:      true,
			DisableIdentity:            true,
			MaintNotificationsConfig:   &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			ClusterStateReloadInterval: clusterReloadInterval,
			// Reads, compaction and the secret's SETNX may be retried (writes do not come this
			// way): enough attempts to outlast a slot held half migrated (TRYAGAIN) for a second.
			MaxRedirects: maxWriteAttempts,
		}
		return o
	}
	b.cluster = redis.NewClusterClient(co(ro.PoolSize))
	// Record each node's client once go-redis has set it up: its own new-node callbacks run
	// first (a client taken from Options.NewClient, before them, raced with their writes).
	b.cluster.OnNewNode(func(c *redis.Client) { b.nodes.Store(c.Options().Addr, c) })
	b.client = b.cluster
	b.blocking = redis.NewClusterClient(co(blockingPoolSize))
	return b, nil
}

// readScript is Read's first step in cluster mode, as one command: go-redis's cluster pipelines
// mishandle commands redirected during a slot migration (the race detector caught two node
// goroutines filling in one command), and a single command is redirected by its own loop.
//
//	KEYS: rev, compacted, log[, readmark]
//	ARGV: the first entry ID, the most entries
//
// It returns {rev, compacted, entries} ("0" for a missing counter). Given readmark, and
// entries to return, it increments readmark: a write after the read on the same connection, so
// that a WAIT that follows covers everything the read saw (see confirmedRun).
var readScript = redis.NewScript(`
local r = {redis.call('GET', KEYS[1]) or '0', redis.call('GET', KEYS[2]) or '0',
  redis.call('XRANGE', KEYS[3], ARGV[1], '+', 'COUNT', ARGV[2])}
if KEYS[4] and #r[3] > 0 then
  redis.call('INCR', KEYS[4])
end
return r
`)

// snapshotScript is Snapshot in cluster mode, as one command, for the same reason (and the
// cluster client's MULTI/EXEC is no simpler).
//
//	KEYS: rev, compacted, objs, log[, readmark]
//
// It returns {rev, compacted, HGETALL of objs, every log entry}; given readmark, it increments
// it when the revision is not 0, as readScript does.
var snapshotScript = redis.NewScript(`
local r = {redis.call('GET', KEYS[1]) or '0', redis.call('GET', KEYS[2]) or '0',
  redis.call('HGETALL', KEYS[3]), redis.call('XRANGE', KEYS[4], '-', '+')}
if KEYS[5] and r[1] ~= '0' then
  redis.call('INCR', KEYS[5])
end
return r
`)

// clusterRead is the first step of Read in cluster mode: the type's counters and up to max log
// entries from first, in one command.
func (b *Backend) clusterRead(ctx context.Context, k *typeKeys, first string, max int) (current, compacted int64, msgs []redis.XMessage, err error) {
	var res []any
	if b.confirmReads() {
		res, err = b.confirmedRun(ctx, k, readScript, k.readKeys, []any{first, max}, func(res []any) bool {
			entries, _ := res[2].([]any)
			return len(entries) > 0
		})
	} else {
		res, err = readScript.RunRO(ctx, b.client, k.readKeys[:3], first, max).Slice()
	}
	if err != nil {
		return 0, 0, nil, b.wrap(ctx, err)
	}
	if len(res) != 3 {
		return 0, 0, nil, fmt.Errorf("redisbackend: unexpected read script reply %v", res)
	}
	if current, compacted, err = parseMeta(res[:2]); err != nil {
		return 0, 0, nil, err
	}
	msgs, err = scriptEntries(res[2])
	return current, compacted, msgs, err
}

// clusterSnapshot reads what Snapshot needs in one command.
func (b *Backend) clusterSnapshot(ctx context.Context, k *typeKeys) (meta []any, objs map[string]string, msgs []redis.XMessage, err error) {
	var res []any
	if b.confirmReads() {
		res, err = b.confirmedRun(ctx, k, snapshotScript, k.snapshotKeys, nil, func(res []any) bool {
			rev, _ := res[0].(string)
			return rev != "0"
		})
	} else {
		res, err = snapshotScript.RunRO(ctx, b.client, k.snapshotKeys[:4]).Slice()
	}
	if err != nil {
		return nil, nil, nil, b.wrap(ctx, err)
	}
	if len(res) != 4 {
		return nil, nil, nil, fmt.Errorf("redisbackend: unexpected snapshot script reply %v", res)
	}
	flat, ok := res[2].([]any)
	if !ok || len(flat)%2 != 0 {
		return nil, nil, nil, fmt.Errorf("redisbackend: unexpected HGETALL reply %v", res[2])
	}
	objs = make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, ok1 := flat[i].(string)
		v, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return nil, nil, nil, fmt.Errorf("redisbackend: unexpected HGETALL reply %v", res[2])
		}
		objs[k] = v
	}
	msgs, err = scriptEntries(res[3])
	return res[:2], objs, msgs, err
}

// scriptEntries parses XRANGE's reply as a script returns it.
func scriptEntries(v any) ([]redis.XMessage, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisbackend: unexpected XRANGE reply %v", v)
	}
	msgs := make([]redis.XMessage, 0, len(list))
	for _, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("redisbackend: unexpected stream entry %v", e)
		}
		id, ok1 := pair[0].(string)
		fields, ok2 := pair[1].([]any)
		if !ok1 || !ok2 || len(fields)%2 != 0 {
			return nil, fmt.Errorf("redisbackend: unexpected stream entry %v", e)
		}
		m := redis.XMessage{ID: id, Values: make(map[string]any, len(fields)/2)}
		for i := 0; i < len(fields); i += 2 {
			f, ok := fields[i].(string)
			if !ok {
				return nil, fmt.Errorf("redisbackend: unexpected stream entry %v", e)
			}
			m.Values[f] = fields[i+1]
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// CheckReplicas reports the masters that have fewer replicas online than writes wait for
// (WaitReplicas), as each master's INFO replication says: their types take no writes until
// they have them. Nil outside cluster mode or without WaitReplicas.
func (b *Backend) CheckReplicas(ctx context.Context) error {
	if b.cluster == nil || b.waitReplicas == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		short []string
	)
	err := b.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		online := 0
		for line := range strings.SplitSeq(info, "\n") {
			if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") {
				online++
			}
		}
		if online < b.waitReplicas {
			mu.Lock()
			short = append(short, fmt.Sprintf("%s (%d)", c.Options().Addr, online))
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return b.wrap(ctx, err)
	}
	if len(short) > 0 {
		slices.Sort(short)
		return fmt.Errorf("redisbackend: writes wait for %d replicas, and these masters have fewer online, so their types take no writes until they do: %s",
			b.waitReplicas, strings.Join(short, ", "))
	}
	return nil
}

// runWrite runs writeScript for k with args and returns its reply.
func (b *Backend) runWrite(ctx context.Context, k *typeKeys, args ...any) ([]any, error) {
	switch {
	case b.cluster != nil:
		return b.clusterWrite(ctx, k, args)
	case b.waitReplicas > 0:
		return b.evalOn(ctx, b.client.(*redis.Client), false, k, args)
	}
	return writeScript.Run(ctx, b.client, k.writeKeys, args...).Slice()
}

// clusterWrite runs writeScript on the master of k's slot, following redirects.
func (b *Backend) clusterWrite(ctx context.Context, k *typeKeys, args []any) ([]any, error) {
	return b.onSlotMaster(ctx, k, func(c *redis.Client, asking bool) ([]any, error) {
		return b.evalOn(ctx, c, asking, k, args)
	})
}

// onSlotMaster runs fn with the client of the master of k's slot (asking: after ASKING),
// following redirects and retrying what Redis refused to run; fn's other errors end it.
func (b *Backend) onSlotMaster(ctx context.Context, k *typeKeys, fn func(c *redis.Client, asking bool) ([]any, error)) ([]any, error) {
	c, err := b.cluster.MasterForKey(ctx, k.rev)
	if err != nil {
		return nil, err
	}
	asking := false
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := fn(c, asking)
		asking = false
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		kind, addr := redirection(err)
		if attempt >= maxWriteAttempts {
			if kind != "" || isUnavailable(err) {
				b.cluster.ReloadState(ctx)
			}
			return nil, err
		}
		switch kind {
		case "MOVED", "ASK":
			if kind == "MOVED" {
				b.cluster.ReloadState(ctx)
			}
			if n, ok := b.nodes.Load(addr); ok {
				c, asking = n.(*redis.Client), kind == "ASK"
				continue
			}
			// A node the client has not met yet: wait for the new slot map.
			fallthrough
		case "RETRY":
			b.cluster.ReloadState(ctx)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 500*time.Millisecond)
			if c, err = b.cluster.MasterForKey(ctx, k.rev); err != nil {
				return nil, err
			}
			continue
		}
		if isUnavailable(err) {
			b.cluster.ReloadState(ctx)
		}
		return nil, err
	}
}

// redirection says how a failed cluster write may be retried: "MOVED" or "ASK" (with the
// address to send it to), "RETRY" (it did not run: retry on the slot's master after a pause),
// or "" (it may have run: do not retry).
func redirection(err error) (kind, addr string) {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return "RETRY", ""
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return "", ""
	}
	f := strings.Fields(re.Error())
	switch {
	case len(f) == 3 && (f[0] == "MOVED" || f[0] == "ASK"):
		return f[0], f[2]
	case len(f) > 0 && (f[0] == "TRYAGAIN" || f[0] == "CLUSTERDOWN" || f[0] == "READONLY"):
		return "RETRY", ""
	}
	return "", ""
}

// confirmReads reports whether the log readers confirm what they read (see "Replicated
// reads" above): in cluster mode, when writes wait for replicas.
func (b *Backend) confirmReads() bool { return b.cluster != nil && b.waitReplicas > 0 }

// confirmedRun runs script on the master of k's slot and, when data(reply) says the reply
// shows changes, waits (WAIT, on the same connection) until waitReplicas replicas have
// everything the master had when the script ran: the script's last command is a write
// (readmark), and WAIT waits for the connection's last write. A reply not confirmed in time
// is an unavailable error, and the caller tries again later.
func (b *Backend) confirmedRun(ctx context.Context, k *typeKeys, script *redis.Script, keys []string, args []any, data func([]any) bool) ([]any, error) {
	return b.onSlotMaster(ctx, k, func(c *redis.Client, asking bool) ([]any, error) {
		conn := c.Conn()
		defer conn.Close()
		run := func(sha bool) ([]any, error) {
			var cmd *redis.Cmd
			_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
				if asking {
					_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
				}
				if sha {
					cmd = script.EvalSha(ctx, p, keys, args...)
				} else {
					cmd = script.Eval(ctx, p, keys, args...)
				}
				return nil
			})
			return cmd.Slice()
		}
		res, err := run(true)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = run(false)
		}
		if err != nil || len(res) < 3 || !data(res) {
			return res, err
		}
		n, err := conn.Wait(ctx, b.waitReplicas, b.waitFor(ctx)).Result()
		if err == nil && n < int64(b.waitReplicas) {
			err = fmt.Errorf("%d of %d replicas have it", n, b.waitReplicas)
		}
		if err != nil {
			return nil, &unavailableError{addr: c.Options().Addr, err: fmt.Errorf("what the log reader read is not replicated yet: %w", err)}
		}
		return res, nil
	})
}

// evalOn runs writeScript on c (after ASKING when asking), followed on the same connection by
// WAIT when writes wait for replicas.
func (b *Backend) evalOn(ctx context.Context, c *redis.Client, asking bool, k *typeKeys, args []any) ([]any, error) {
	res, err := b.evalPipe(ctx, c, asking, true, k, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A node that has not seen the script (a promoted replica, a restarted node): EVAL it,
		// which also caches it there.
		res, err = b.evalPipe(ctx, c, asking, false, k, args)
	}
	return res, err
}

func (b *Backend) evalPipe(ctx context.Context, c *redis.Client, asking, sha bool, k *typeKeys, args []any) ([]any, error) {
	var (
		ev   *redis.Cmd
		wait *redis.IntCmd
	)
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		if asking {
			_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		if sha {
			ev = writeScript.EvalSha(ctx, p, k.writeKeys, args...)
		} else {
			ev = writeScript.Eval(ctx, p, k.writeKeys, args...)
		}
		if b.waitReplicas > 0 {
			wait = redis.NewIntCmd(ctx, "wait", b.waitReplicas, max(b.waitFor(ctx).Milliseconds(), 1))
			_ = p.Process(ctx, wait)
		}
		return nil
	})
	res, err := ev.Slice()
	if err != nil || wait == nil || len(res) < 2 {
		return res, err
	}
	if code, _ := res[0].(int64); code != replyOK {
		return res, nil // nothing was written
	}
	n, werr := wait.Result()
	if werr == nil && n < int64(b.waitReplicas) {
		werr = errors.New("not enough replicas acknowledged in time")
	}
	if werr != nil {
		rev, _ := res[1].(int64)
		return nil, &unavailableError{addr: c.Options().Addr, err: &unacknowledgedError{rev: rev, acked: n, want: b.waitReplicas, err: werr}}
	}
	return res, nil
}

// waitFor is the WAIT timeout of a write under ctx: waitTimeout, but within ctx's deadline (a
// socket timeout would cost the connection), and never 0 (WAIT 0 waits forever).
func (b *Backend) waitFor(ctx context.Context) time.Duration {
	d := b.waitTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-20*time.Millisecond)
	}
	return max(d, time.Millisecond)
}

// unacknowledgedError is a write its master committed but too few replicas acknowledged.
type unacknowledgedError struct {
	rev, acked int64
	want       int
	err        error
}

func (e *unacknowledgedError) Error() string {
	return fmt.Sprintf("write committed on the master at revision %d but acknowledged by %d of %d replicas (%v): its outcome is unknown",
		e.rev, e.acked, e.want, e.err)
}

func (e *unacknowledgedError) Unwrap() error { return e.err }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
