package embedded

import (
	"context"
	"errors"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// typeTx is a resource type's buckets inside one transaction. In a write-ahead-logged batch (see
// wal.go) the buckets are those of a read-only transaction (nil when the type has no bucket yet),
// and st stages the batch's writes on top of them and of the logged writes not yet checkpointed.
type typeTx struct {
	meta, objs, log *bolt.Bucket
	rev, compacted  int64
	st              *stagedType
	// The encoding of the last object get decoded, which a write's event reuses as its Prev.
	gotKey string
	gotVal []byte
}

// openType returns the type's buckets, or nil if the type has never been written. With create,
// the buckets are created if needed (in a read-write transaction).
func openType(tx *bolt.Tx, rt *storagev1.ResourceType, name string, create bool) (*typeTx, error) {
	tb := tx.Bucket([]byte(name))
	if tb == nil {
		if !create {
			return nil, nil
		}
		var err error
		if tb, err = tx.CreateBucket([]byte(name)); err != nil {
			return nil, err
		}
		m, err := tb.CreateBucket(metaBucket)
		if err != nil {
			return nil, err
		}
		if err := m.Put(groupKey, []byte(rt.GetGroup())); err != nil {
			return nil, err
		}
		if err := m.Put(resourceKey, []byte(rt.GetResource())); err != nil {
			return nil, err
		}
		if _, err := tb.CreateBucket(objsBucket); err != nil {
			return nil, err
		}
		if _, err := tb.CreateBucket(logBucket); err != nil {
			return nil, err
		}
	}
	t := &typeTx{meta: tb.Bucket(metaBucket), objs: tb.Bucket(objsBucket), log: tb.Bucket(logBucket)}
	if t.meta == nil || t.objs == nil || t.log == nil {
		return nil, errors.New("embedded: type bucket " + name + " is incomplete")
	}
	var err error
	if t.rev, err = readU64(t.meta.Get(revKey)); err != nil {
		return nil, err
	}
	if t.compacted, err = readU64(t.meta.Get(compactedKey)); err != nil {
		return nil, err
	}
	if tx.Writable() {
		// The log is append-only: fill its pages completely.
		t.log.FillPercent = 1.0
	}
	return t, nil
}

// value returns the stored encoding of the live object under key, or nil.
func (t *typeTx) value(key string) []byte {
	if t.st != nil {
		if e, ok := t.st.lookup(key); ok {
			return e.val
		}
		if t.objs == nil {
			return nil
		}
	}
	return t.objs.Get([]byte(key))
}

// get returns the live object under key, or nil.
func (t *typeTx) get(key string) (*storagev1.Object, error) {
	v := t.value(key)
	if v == nil {
		return nil, nil
	}
	t.gotKey, t.gotVal = key, v
	return decodeObject(v)
}

// encodings returns the stored encoding of stored and the log entry of ev, reusing stored's
// encoding for ev.Object (the same object) and that of the object get last returned for ev.Prev
// (the key's previous state, which writes do not modify).
func (t *typeTx) encodings(key string, stored *storagev1.Object, ev *backend.Event) (val, entry []byte, err error) {
	if stored != nil {
		if val, err = encodeObject(stored); err != nil {
			return nil, nil, err
		}
	}
	var object, prev []byte
	if ev.Object == stored {
		object = val
	}
	if ev.Prev != nil && key == t.gotKey {
		prev = t.gotVal
	}
	entry, err = encodeEventWith(ev, object, prev)
	return val, entry, err
}

// commit stores the state change of ev (ev.Revision == t.rev+1), appends ev to the log and
// advances the revision. stored is the new state of the key, nil for Deleted.
func (t *typeTx) commit(key string, stored *storagev1.Object, ev *backend.Event) error {
	val, entry, err := t.encodings(key, stored, ev)
	if err != nil {
		return err
	}
	if t.st != nil {
		if err := t.st.stage(key, val, entry, ev.Revision); err != nil {
			return err
		}
		t.rev = ev.Revision
		return nil
	}
	if val != nil {
		err = t.objs.Put([]byte(key), val)
	} else {
		err = t.objs.Delete([]byte(key))
	}
	if err != nil {
		return err
	}
	if err := t.log.Put(u64(ev.Revision), entry); err != nil {
		return err
	}
	t.rev = ev.Revision
	return t.meta.Put(revKey, u64(ev.Revision))
}

// checkPreconditions returns a *backend.ConflictError if cur does not satisfy pre. The uid is
// checked first (a different uid means a different object, whatever its resourceVersion).
func (t *typeTx) checkPreconditions(cur *storagev1.Object, pre *storagev1.Preconditions) error {
	if uid := pre.GetUid(); uid != "" && uid != cur.GetUid() {
		return &backend.ConflictError{Field: "uid", Expected: uid, Actual: cur.GetUid(), CurrentRevision: t.rev}
	}
	if rv := pre.GetResourceVersion(); rv != 0 && rv != cur.GetResourceVersion() {
		return &backend.ConflictError{
			Field:           "resourceVersion",
			Expected:        strconv.FormatInt(rv, 10),
			Actual:          strconv.FormatInt(cur.GetResourceVersion(), 10),
			CurrentRevision: t.rev,
		}
	}
	return nil
}

func cloneObject(o *storagev1.Object) *storagev1.Object {
	return proto.Clone(o).(*storagev1.Object)
}

// Create stores obj with a new revision; obj.ResourceVersion is ignored, obj.Uid is kept.
func (b *Backend) Create(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object) (backend.Event, error) {
	if obj == nil {
		return backend.Event{}, errors.New("embedded: Create without an object")
	}
	return b.write(ctx, rt, true, func(t *typeTx) (backend.Event, error) {
		key := backend.Key(obj.GetNamespace(), obj.GetName())
		if t.value(key) != nil {
			return backend.Event{}, backend.ErrAlreadyExists
		}
		n := cloneObject(obj)
		n.ResourceVersion = t.rev + 1
		ev := backend.Event{Type: backend.Added, Revision: n.ResourceVersion, Object: n, UnixNano: time.Now().UnixNano()}
		if err := t.commit(key, n, &ev); err != nil {
			return backend.Event{}, err
		}
		return ev, nil
	})
}

// live returns the live object at key if pre holds for it: ErrNotFound if there is none, a
// *backend.ConflictError if a precondition fails.
func (t *typeTx) live(key string, pre *storagev1.Preconditions) (*storagev1.Object, error) {
	cur, err := t.get(key)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, backend.ErrNotFound
	}
	if err := t.checkPreconditions(cur, pre); err != nil {
		return nil, err
	}
	return cur, nil
}

// Update replaces a live object; the stored uid is kept and obj.Uid is ignored.
func (b *Backend) Update(ctx context.Context, rt *storagev1.ResourceType, obj *storagev1.Object, pre *storagev1.Preconditions) (backend.Event, error) {
	if obj == nil {
		return backend.Event{}, errors.New("embedded: Update without an object")
	}
	return b.write(ctx, rt, false, func(t *typeTx) (backend.Event, error) {
		key := backend.Key(obj.GetNamespace(), obj.GetName())
		cur, err := t.live(key, pre)
		if err != nil {
			return backend.Event{}, err
		}
		n := cloneObject(obj)
		n.ResourceVersion = t.rev + 1
		n.Uid = cur.GetUid()
		ev := backend.Event{Type: backend.Modified, Revision: n.ResourceVersion, Object: n, Prev: cur, UnixNano: time.Now().UnixNano()}
		if err := t.commit(key, n, &ev); err != nil {
			return backend.Event{}, err
		}
		return ev, nil
	})
}

// Delete removes a live object. The event's Object is the last state with the deletion revision.
func (b *Backend) Delete(ctx context.Context, rt *storagev1.ResourceType, namespace, name string, pre *storagev1.Preconditions) (backend.Event, error) {
	return b.write(ctx, rt, false, func(t *typeTx) (backend.Event, error) {
		key := backend.Key(namespace, name)
		cur, err := t.live(key, pre)
		if err != nil {
			return backend.Event{}, err
		}
		last := cloneObject(cur)
		last.ResourceVersion = t.rev + 1
		ev := backend.Event{Type: backend.Deleted, Revision: last.ResourceVersion, Object: last, Prev: cur, UnixNano: time.Now().UnixNano()}
		if err := t.commit(key, nil, &ev); err != nil {
			return backend.Event{}, err
		}
		return ev, nil
	})
}

// isOutcome reports whether err is an answer to the caller (the write was refused), as opposed to
// a failure of the write.
func isOutcome(err error) bool {
	var conflict *backend.ConflictError
	return errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrAlreadyExists) || errors.As(err, &conflict)
}

// write runs op in a read-write transaction and, on success, wakes the type's readers.
//
// With group commit (or db.Batch), the transaction may be shared with concurrent writes and fn
// may run more than once: if another write of the transaction fails, the transaction is rolled
// back and the others run again in a new one. So op only computes from the transaction, and each
// run replaces the results of the previous one; the result that counts is the one of the run
// that committed. A refused write (not found, already exists, conflict) does not fail the shared
// transaction, which would roll back the other writes: op's error is kept aside and fn returns
// nil, having written nothing. Other errors of op fail the transaction.
func (b *Backend) write(ctx context.Context, rt *storagev1.ResourceType, create bool, op func(t *typeTx) (backend.Event, error)) (backend.Event, error) {
	name, err := typeName(rt)
	if err != nil {
		return backend.Event{}, err
	}
	if err := ctx.Err(); err != nil {
		return backend.Event{}, err
	}
	if b.isClosed() {
		return backend.Event{}, errClosed
	}
	var (
		ev    backend.Event
		opErr error
	)
	run := func(open func() (*typeTx, error)) error {
		ev, opErr = backend.Event{}, nil
		t, err := open()
		if err != nil {
			opErr = err
			return err
		}
		if t == nil {
			opErr = backend.ErrNotFound
		} else {
			ev, opErr = op(t)
		}
		if opErr != nil && (b.mode == soloCommit || !isOutcome(opErr)) {
			return opErr // a solo transaction is rolled back, cheaper than an empty commit
		}
		return nil
	}
	fn := func(tx *bolt.Tx) error {
		return run(func() (*typeTx, error) { return openType(tx, rt, name, create) })
	}
	switch b.mode {
	case soloCommit:
		err = b.db.Update(fn)
	case boltBatch:
		err = b.db.Batch(fn)
	case groupCommit:
		err = b.committer.update(fn)
	default:
		err = b.wal.update(func(wb *walBatch) error {
			return run(func() (*typeTx, error) { return wb.openType(rt, name, create) })
		})
	}
	if opErr != nil {
		return backend.Event{}, opErr
	}
	if err != nil {
		return backend.Event{}, unavailable(err)
	}
	b.notify(name)
	return ev, nil
}
