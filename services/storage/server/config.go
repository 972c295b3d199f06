package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/service"
)

// Config is everything the storage service needs to run; main parses it from flags.
type Config struct {
	// Backend is "embedded" (a bbolt file under DataDir) or "redis".
	Backend string
	// RedisURL is redis://[:password@]host:port/db, or rediss:// for TLS.
	RedisURL string
	// RedisPasswordFile holds the Redis password (overrides the URL's), kept out of ps and logs.
	RedisPasswordFile string
	// RedisCAFile verifies the Redis server's certificate (TLS).
	RedisCAFile string
	// RedisMode is "standalone" (one Redis, or the primary of a replicated set) or "cluster"
	// (a Redis Cluster; RedisURL is a seed node).
	RedisMode string
	// RedisClusterAddrs are more seed nodes (host:port) of the cluster.
	RedisClusterAddrs []string
	// RedisWaitReplicas is how many replicas must acknowledge a write (WAIT) before it is
	// acknowledged; -1 means 1 in cluster mode and 0 otherwise.
	RedisWaitReplicas int
	// RedisWaitTimeout bounds that wait; a write not acknowledged in time fails as unavailable.
	RedisWaitTimeout time.Duration
	// DataDir holds the embedded backend's file.
	DataDir string

	// ServerConfig is the gRPC listener: address, (mutual) TLS, metrics, shutdown timeout.
	service.ServerConfig

	// HistoryRetention keeps every change younger than this for watches and exact reads.
	HistoryRetention time.Duration
	// HistoryMaxEvents bounds the retained changes per resource type, whatever their age.
	HistoryMaxEvents int
	// CompactionInterval is how often history is compacted.
	CompactionInterval time.Duration
	// WatchBookmarkInterval is how often an idle watch that allows bookmarks gets one.
	WatchBookmarkInterval time.Duration
	// FutureRevisionWait bounds the wait for a revision a type has not reached yet.
	FutureRevisionWait time.Duration
}

// RegisterFlags registers the configuration's flags with their defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Backend, "backend", "embedded", "storage backend: embedded (a local file, no Redis needed) or redis")
	fs.StringVar(&c.RedisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis URL for --backend=redis (rediss:// for TLS)")
	fs.StringVar(&c.RedisPasswordFile, "redis-password-file", "", "file holding the Redis password (overrides the URL's)")
	fs.StringVar(&c.RedisCAFile, "redis-ca-file", "", "CA bundle that verifies the Redis server's certificate")
	fs.StringVar(&c.RedisMode, "redis-mode", "standalone", "standalone (one Redis, or the primary of a replicated set) or cluster (a Redis Cluster: --redis-url names a seed node, database 0)")
	fs.StringSliceVar(&c.RedisClusterAddrs, "redis-cluster-addrs", nil, "more seed nodes (host:port, comma-separated) of the Redis Cluster, with --redis-mode=cluster; the URL's scheme and credentials apply to them")
	fs.IntVar(&c.RedisWaitReplicas, "redis-wait-replicas", -1, "replicas that must acknowledge a write (Redis WAIT) before it is acknowledged, so a failover cannot lose it; -1: 1 with --redis-mode=cluster, 0 otherwise")
	fs.DurationVar(&c.RedisWaitTimeout, "redis-wait-timeout", time.Second, "how long a write waits for --redis-wait-replicas; a write not acknowledged in time fails as unavailable (its outcome unknown)")
	fs.StringVar(&c.DataDir, "data-dir", "data", "directory of the embedded backend's data")
	c.ServerConfig.RegisterFlags(fs, "127.0.0.1:7001")
	// The storage service's first releases called the mutual TLS CA --client-ca-file.
	fs.StringVar(&c.ClientCAFile, "client-ca-file", "", "")
	_ = fs.MarkDeprecated("client-ca-file", "use --tls-client-ca-file")
	fs.DurationVar(&c.HistoryRetention, "history-retention", 5*time.Minute, "how long changes are kept for watches, exact reads and continue tokens")
	fs.IntVar(&c.HistoryMaxEvents, "history-max-events", 100000, "most changes kept per resource type, whatever their age (0: no bound)")
	fs.DurationVar(&c.CompactionInterval, "compaction-interval", 10*time.Second, "how often history is compacted")
	fs.DurationVar(&c.WatchBookmarkInterval, "watch-bookmark-interval", time.Minute, "how often an idle watch that allows bookmarks gets one")
	fs.DurationVar(&c.FutureRevisionWait, "future-revision-wait", 3*time.Second, "how long a read or watch waits for a resource version not reached yet before 'Too large resource version'")
}

// Validate reports every configuration error, each naming the flag that fixes it.
func (c *Config) Validate() error {
	var errs []error
	switch c.Backend {
	case "embedded":
		if c.DataDir == "" {
			errs = append(errs, errors.New("--data-dir is required with --backend=embedded"))
		}
	case "redis":
		if !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
			errs = append(errs, errors.New("--redis-url must start with redis:// or rediss://"))
		}
		switch c.RedisMode {
		case "", "standalone":
			if len(c.RedisClusterAddrs) > 0 {
				errs = append(errs, errors.New("--redis-cluster-addrs needs --redis-mode=cluster"))
			}
		case "cluster":
		default:
			errs = append(errs, fmt.Errorf("--redis-mode must be standalone or cluster, not %q", c.RedisMode))
		}
		if c.RedisWaitReplicas < -1 {
			errs = append(errs, errors.New("--redis-wait-replicas must be -1 (automatic), 0 or more"))
		}
		if c.RedisWaitTimeout < 0 || c.RedisWaitTimeout > 2*time.Second {
			errs = append(errs, errors.New("--redis-wait-timeout must be at most 2s (below the Redis client's 3s read timeout)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--backend must be embedded or redis, not %q", c.Backend))
	}
	errs = append(errs, c.ServerConfig.Validate()...)
	if c.HistoryRetention <= 0 {
		errs = append(errs, errors.New("--history-retention must be positive"))
	}
	if c.HistoryMaxEvents < 0 {
		errs = append(errs, errors.New("--history-max-events must not be negative"))
	}
	if c.CompactionInterval <= 0 {
		errs = append(errs, errors.New("--compaction-interval must be positive"))
	}
	if c.WatchBookmarkInterval <= 0 {
		errs = append(errs, errors.New("--watch-bookmark-interval must be positive"))
	}
	if c.FutureRevisionWait <= 0 {
		errs = append(errs, errors.New("--future-revision-wait must be positive"))
	}
	return errors.Join(errs...)
}

// DefaultConfig is the configuration with every flag at its default.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError))
	return c
}

// WaitReplicas is the number of replicas a Redis write waits for, with -1 resolved.
func (c *Config) WaitReplicas() int {
	if c.RedisWaitReplicas >= 0 {
		return c.RedisWaitReplicas
	}
	if c.RedisMode == "cluster" {
		return 1
	}
	return 0
}
