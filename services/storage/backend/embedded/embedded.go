// Package embedded implements backend.Backend on a bbolt file and a write-ahead log beside it,
// for the all-in-one binary that runs without Redis. It gives the same guarantees as the Redis
// backend: every write is atomic (precondition check, revision assignment, state change and log
// append), revisions are dense and strictly increasing per resource type, and a write is
// acknowledged only after it is on disk (its log record fdatasync'ed). Reopening the file
// continues exactly where the previous process left off, after replaying the log (wal.go).
//
// # Layout
//
// The file holds one top-level bucket per resource type, named by backend.TypeName, and one global
// bucket named "/global". Resources containing '/' or '.' are refused, so type names are unique
// and never "/global":
//
//	<type>/meta       "rev"       -> current revision, 8-byte big-endian (0 if absent)
//	                  "compacted" -> compacted revision, 8-byte big-endian (0 if absent)
//	                  "group", "resource" -> the type's ResourceType fields (for Types)
//	<type>/objs       backend.Key(namespace, name) -> protobuf storagev1.Object, with its
//	                  ResourceVersion and Uid
//	<type>/log        8-byte big-endian revision -> event envelope (protobuf wire format, see
//	                  codec.go: 1 type, 2 object, 3 previous object, 4 commit UnixNano; the object
//	                  of a Deleted event is not stored: it is the previous object with the
//	                  deletion revision)
//	/global           "secret" -> 32 random bytes, created when the file is first opened
//
// The log holds exactly the revisions (compacted, rev]. Compact first raises "compacted", then
// deletes the discarded entries in transactions of compactChunk keys so that writes interleave;
// entries at or below "compacted" left by an interrupted compaction are never read and are
// removed by the next Compact of the type.
//
// A type bucket is created by its first Create; Update and Delete of an unknown type fail with
// backend.ErrNotFound without creating it. Reads of an unknown type see revision 0, compacted
// revision 0 and no objects.
//
// Writes are group-committed to the write-ahead log (see wal.go): writes that arrive while a
// group is being logged share the next group and its one fdatasync, without any added delay; a
// write returns only after the group holding it has been synced. The log is moved into the file
// above in the background, many writes per bbolt transaction, and readers merge what it holds
// over the file. (committer, which commits each group in a bbolt transaction with bbolt's two
// fsyncs, remains for comparison in tests and benchmarks.) Readers blocked in Read are woken by an
// in-process broadcast after every commit of their type.
package embedded

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Bucket and key names.
var (
	globalBucket = []byte("/global")
	metaBucket   = []byte("meta")
	objsBucket   = []byte("objs")
	logBucket    = []byte("log")

	revKey       = []byte("rev")
	compactedKey = []byte("compacted")
	groupKey     = []byte("group")
	resourceKey  = []byte("resource")
	secretKey    = []byte("secret")
)

// compactChunk is the number of log entries Compact deletes per transaction (a variable for
// tests).
var compactChunk = 1000

// DefaultTimeout is the Options.Timeout used when none is given.
const DefaultTimeout = 5 * time.Second

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock, which another process holding the file open
	// keeps; zero means DefaultTimeout.
	Timeout time.Duration
}

// Backend is a backend.Backend on a bbolt file. It is safe for concurrent use.
type Backend struct {
	db        *bolt.DB
	mode      commitMode // set only by tests
	committer committer
	wal       *wal

	mu      sync.Mutex
	waiters map[string]chan struct{} // per type name; closed and removed on each commit
	closed  chan struct{}
	closing sync.Once
}

var _ backend.Backend = (*Backend)(nil)

// Open opens (creating it and its directory if needed) the bbolt file at path.
func Open(path string, opts Options) (*Backend, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("embedded: create data directory: %w", err)
	}
	bo := *bolt.DefaultOptions
	bo.Timeout = opts.Timeout
	if bo.Timeout <= 0 {
		bo.Timeout = DefaultTimeout
	}
	bo.FreelistType = bolt.FreelistMapType
	db, err := bolt.Open(path, 0o600, &bo)
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	// bbolt syncs the file, not its directory entry: make sure a new file survives a crash.
	if err := syncDir(filepath.Dir(path)); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded: sync data directory: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		g, err := tx.CreateBucketIfNotExists(globalBucket)
		if err != nil {
			return err
		}
		if g.Get(secretKey) != nil {
			return nil
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		return g.Put(secretKey, secret)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded: initialize %s: %w", path, err)
	}
	w, err := openWAL(db, path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded: %s: %w", path, err)
	}
	return &Backend{
		db:        db,
		committer: committer{db: db},
		wal:       w,
		waiters:   make(map[string]chan struct{}),
		closed:    make(chan struct{}),
	}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close closes the file; blocked Reads return backend.ErrUnavailable, and so does every later
// call. It waits for running transactions to end.
func (b *Backend) Close() error {
	var err error
	b.closing.Do(func() {
		close(b.closed)
		err = b.wal.close()
		if cerr := b.db.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Ping returns nil while the backend is open and its write-ahead log healthy: an append or sync
// of the log that failed (writes are refused from then on) or a failing checkpoint (the log grows)
// makes it return backend.ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error {
	if b.isClosed() {
		return errClosed
	}
	if err := b.wal.health(); err != nil {
		return fmt.Errorf("%w: embedded: %w", backend.ErrUnavailable, err)
	}
	return nil
}

// Secret returns the 32-byte secret created when the file was first opened.
func (b *Backend) Secret(ctx context.Context) ([]byte, error) {
	var secret []byte
	err := b.view(func(tx *bolt.Tx) error {
		g := tx.Bucket(globalBucket)
		if g == nil || len(g.Get(secretKey)) != 32 {
			return errors.New("embedded: secret missing")
		}
		secret = append([]byte(nil), g.Get(secretKey)...)
		return nil
	})
	return secret, err
}

// Types lists every type bucket, ordered by type name.
func (b *Backend) Types(ctx context.Context) ([]*storagev1.ResourceType, error) {
	var types []*storagev1.ResourceType
	// Types only the write-ahead log holds yet; taken before the transaction, so that a type
	// checkpointed meanwhile is in one or the other.
	pending := b.wal.pendingTypes()
	err := b.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, tb *bolt.Bucket) error {
			if string(name) == string(globalBucket) {
				return nil
			}
			delete(pending, string(name))
			rt := &storagev1.ResourceType{}
			if m := tb.Bucket(metaBucket); m != nil && m.Get(resourceKey) != nil {
				rt.Group = string(m.Get(groupKey))
				rt.Resource = string(m.Get(resourceKey))
			} else {
				// Not written by this package; recover the type from its name.
				rt.Resource, rt.Group, _ = strings.Cut(string(name), ".")
			}
			types = append(types, rt)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for _, rt := range pending {
		types = append(types, &storagev1.ResourceType{Group: rt.GetGroup(), Resource: rt.GetResource()})
	}
	sort.Slice(types, func(i, j int) bool { return backend.TypeName(types[i]) < backend.TypeName(types[j]) })
	return types, nil
}

var errClosed = fmt.Errorf("%w: embedded backend closed", backend.ErrUnavailable)

func (b *Backend) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// view runs fn in a read-only transaction. Errors of bbolt itself (such as a closed database) are
// wrapped in backend.ErrUnavailable; errors of fn are returned as they are.
func (b *Backend) view(fn func(tx *bolt.Tx) error) error {
	if b.isClosed() {
		return errClosed
	}
	var fnErr error
	err := b.db.View(func(tx *bolt.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return unavailable(err)
}

// update runs fn in a read-write transaction of its own; errors as for view.
func (b *Backend) update(fn func(tx *bolt.Tx) error) error {
	if b.isClosed() {
		return errClosed
	}
	var fnErr error
	err := b.db.Update(func(tx *bolt.Tx) error {
		fnErr = fn(tx)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return unavailable(err)
}

// unavailable wraps an error of bbolt's transaction machinery in backend.ErrUnavailable.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return errClosed
	}
	return fmt.Errorf("%w: embedded: %w", backend.ErrUnavailable, err)
}

// typeName validates rt and returns the name of its bucket.
func typeName(rt *storagev1.ResourceType) (string, error) {
	if rt.GetResource() == "" {
		return "", errors.New("embedded: resource type without a resource")
	}
	if strings.Contains(rt.GetResource(), "/") || strings.Contains(rt.GetResource(), ".") {
		return "", fmt.Errorf("embedded: invalid resource name %q", rt.GetResource())
	}
	return backend.TypeName(rt), nil
}

// waitChan returns the channel that the next commit of the type closes. Take it before reading,
// so that a commit between the read and the wait is not missed.
func (b *Backend) waitChan(name string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.waiters[name]
	if !ok {
		ch = make(chan struct{})
		b.waiters[name] = ch
	}
	return ch
}

// notify wakes the readers waiting for a commit of the type.
func (b *Backend) notify(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.waiters[name]; ok {
		close(ch)
		delete(b.waiters, name)
	}
}
