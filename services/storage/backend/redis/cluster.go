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
// Read and Snapshot are read-only scripts in cluster mode (readScript, snapshotScript): one
// command each, which the cluster client redirects on its own during a slot migration.
//
// # Acknowledged writes and failover
//
// Redis replicates asynchronously: a master that acknowledged a write and died before its
// replica received it loses the write when the replica is promoted. With Options.WaitReplicas
// (the service's default in cluster mode is 1), each write is pipelined with WAIT on the same
// connection and acknowledged only once that many replicas have it; otherwise it fails as
// unavailable with an unknown outcome (it is committed on the master and may survive). A
// coordinated failover (CLUSTER FAILOVER) loses nothing either way.
//
// What is not covered: the log readers read the masters, so a write that its master committed
// but never replicated (a master cut off from its replica, or killed between the two socket
// writes) can reach watchers before the failover loses it; such a write was never acknowledged
// (its WAIT failed), and the promoted replica gives its revision to another write. The cache
// notices that the history diverged (cache decision 16), reloads and ends the type's watches,
// but a client that saw the lost revision and resumes from it misses the write that reused it.
// Reading the logs from replicas would close this, at the price of handling replicas that serve
// stale data while they resynchronise and keys half migrated during resharding (replicas know
// nothing of ASK); it is not done.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
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
	co := func(poolSize int, record bool) *redis.ClusterOptions {
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
		if record {
			o.NewClient = func(no *redis.Options) *redis.Client {
				c := redis.NewClient(no)
				b.nodes.Store(no.Addr, c)
				return c
			}
		}
		return o
	}
	b.cluster = redis.NewClusterClient(co(ro.PoolSize, true))
	b.client = b.cluster
	b.blocking = redis.NewClusterClient(co(blockingPoolSize, false))
	return b, nil
}

// readScript is Read's first step in cluster mode, as one command: go-redis's cluster pipelines
// mishandle commands redirected during a slot migration (the race detector caught two node
// goroutines filling in one command), and a single command is redirected by its own loop.
//
//	KEYS: rev, compacted, log
//	ARGV: the first entry ID, the most entries
//
// It returns {rev, compacted, entries} ("0" for a missing counter).
var readScript = redis.NewScript(`
return {redis.call('GET', KEYS[1]) or '0', redis.call('GET', KEYS[2]) or '0',
  redis.call('XRANGE', KEYS[3], ARGV[1], '+', 'COUNT', ARGV[2])}
`)

// snapshotScript is Snapshot in cluster mode, as one command, for the same reason (and the
// cluster client's MULTI/EXEC is no simpler).
//
//	KEYS: rev, compacted, objs, log
//
// It returns {rev, compacted, HGETALL of objs, every log entry}.
var snapshotScript = redis.NewScript(`
return {redis.call('GET', KEYS[1]) or '0', redis.call('GET', KEYS[2]) or '0',
  redis.call('HGETALL', KEYS[3]), redis.call('XRANGE', KEYS[4], '-', '+')}
`)

// clusterRead is the first step of Read in cluster mode: the type's counters and up to max log
// entries from first, in one command.
func (b *Backend) clusterRead(ctx context.Context, k *typeKeys, first string, max int) (current, compacted int64, msgs []redis.XMessage, err error) {
	res, err := readScript.RunRO(ctx, b.client, []string{k.rev, k.compacted, k.log}, first, max).Slice()
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
	res, err := snapshotScript.RunRO(ctx, b.client, []string{k.rev, k.compacted, k.objs, k.log}).Slice()
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
	c, err := b.cluster.MasterForKey(ctx, k.rev)
	if err != nil {
		return nil, err
	}
	asking := false
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := b.evalOn(ctx, c, asking, k, args)
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
