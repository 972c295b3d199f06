// Package backend defines the durable half of the storage service: an append-only, per-type log of
// changes with atomic conditional writes. Two implementations exist (Redis Streams and an embedded
// bbolt file); the in-memory cache in package cache serves reads and watches from either.
package backend

import (
	"context"
	"errors"
	"fmt"

	storagev1 "platform.io/proto/storage/v1"
)

// EventType says what a logged change did to its key.
type EventType uint8

// The three kinds of change a write can log.
const (
	Added EventType = iota + 1
	Modified
	Deleted
)

// Event is one committed change of one resource type. Revisions of a type are dense: the event
// after revision r has revision r+1.
type Event struct {
	Type     EventType
	Revision int64
	// Object is the new state with ResourceVersion == Revision. For Deleted it is the last state,
	// also with ResourceVersion == Revision.
	Object *storagev1.Object
	// Prev is the state before the change (nil for Added) with its own ResourceVersion.
	Prev *storagev1.Object
	// UnixNano is the commit time, as the backend's clock saw it; retention is measured with it.
	UnixNano int64
}

// Snapshot is a consistent view of one resource type: every live object at Revision and the
// retained history (Compacted, Revision].
type Snapshot struct {
	Revision  int64
	Compacted int64
	Objects   []*storagev1.Object
	Events    []Event
}

// Backend is a durable, per-type change log. Implementations must make every write atomic: the
// precondition check, the revision assignment, the state change and the log append happen
// together or not at all, so revisions are dense and committed in order.
//
// Objects passed in are not retained or modified; objects returned are new and owned by the
// caller (the cache treats them as immutable).
type Backend interface {
	// Create stores obj under (obj.Namespace, obj.Name) and returns the logged event.
	// ErrAlreadyExists if the key is live.
	Create(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object) (Event, error)
	// Update replaces a live object when pre holds (zero fields are not checked).
	// ErrNotFound if the key is not live; a *ConflictError if a precondition fails.
	Update(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object, pre *storagev1.Preconditions) (Event, error)
	// Delete removes a live object when pre holds; errors as for Update.
	Delete(ctx context.Context, rt *storagev1.ResourceType, namespace, name string, pre *storagev1.Preconditions) (Event, error)

	// Revision returns the current and compacted revision of the type, read from durable state
	// (a consistent read: never older than an acknowledged write).
	Revision(ctx context.Context, rt *storagev1.ResourceType) (current, compacted int64, err error)
	// Snapshot returns the state and retained history of the type, consistently at one revision.
	Snapshot(ctx context.Context, rt *storagev1.ResourceType) (*Snapshot, error)
	// Read returns up to max events with revision > after, waiting up to the context's deadline
	// (or until ctx ends) when there are none yet; it then returns an empty slice and no error.
	// ErrCompacted if revision after+1 has been compacted away. If the backend's revision is
	// below after (durable state went back in time), it returns ErrRewound.
	Read(ctx context.Context, rt *storagev1.ResourceType, after int64, max int) ([]Event, error)
	// Compact discards history with revision <= rev (never beyond the current revision) and
	// returns the compacted revision now in force (which may be higher, if another replica
	// compacted further).
	Compact(ctx context.Context, rt *storagev1.ResourceType, rev int64) (int64, error)
	// Types lists the resource types that have ever been written.
	Types(ctx context.Context) ([]*storagev1.ResourceType, error)
	// Secret returns a random 32-byte key, created on first use and shared by every replica of
	// the storage service on this backend; continue tokens are signed with it.
	Secret(ctx context.Context) ([]byte, error)
	// Ping checks that the backend is reachable.
	Ping(ctx context.Context) error
	// Close releases the backend's resources.
	Close() error
}

// Errors a Backend returns. Unreachable-backend errors are wrapped in ErrUnavailable.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrCompacted     = errors.New("revision has been compacted")
	ErrRewound       = errors.New("backend revision went back in time")
	ErrUnavailable   = errors.New("storage backend unavailable")
)

// ConflictError reports a failed precondition, with the object's current revision and uid.
type ConflictError struct {
	Field           string // "resourceVersion" or "uid"
	Expected        string
	Actual          string
	CurrentRevision int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("precondition failed: %s is %q, expected %q", e.Field, e.Actual, e.Expected)
}

// Key is the storage key of an object within its type: "<namespace>/<name>" ("/<name>" for a
// cluster-scoped object). Keys sort by namespace, then name.
func Key(namespace, name string) string { return namespace + "/" + name }

// TypeName is the printable, unique name of a resource type: "<resource>.<group>", or
// "<resource>" for the core group.
func TypeName(rt *storagev1.ResourceType) string {
	if rt.GetGroup() == "" {
		return rt.GetResource()
	}
	return rt.GetResource() + "." + rt.GetGroup()
}
