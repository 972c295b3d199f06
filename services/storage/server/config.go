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
