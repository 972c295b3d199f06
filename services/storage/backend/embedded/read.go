package embedded

import (
	"bytes"
	"context"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// Revision returns the type's current and compacted revision (0, 0 for an unknown type).
func (b *Backend) Revision(ctx context.Context, rt *storagev1.ResourceType) (current, compacted int64, err error) {
	name, err := typeName(rt)
	if err != nil {
		return 0, 0, err
	}
	err = b.read(name, false, func(tx *bolt.Tx, pv *pendingView) error {
		t, err := openType(tx, rt, name, false)
		if t != nil {
			current, compacted = t.rev, t.compacted
		}
		if pv != nil {
			current = pv.rev
		}
		return err
	})
	return current, compacted, err
}

// read runs fn with a read-only transaction and the write-ahead log's view of the type (see
// wal.beginRead). Errors as for view.
func (b *Backend) read(name string, withObjs bool, fn func(tx *bolt.Tx, pv *pendingView) error) error {
	if b.isClosed() {
		return errClosed
	}
	tx, pv, err := b.wal.beginRead(name, withObjs)
	if err != nil {
		return unavailable(err)
	}
	defer tx.Rollback()
	return fn(tx, pv)
}

// pendingEvents decodes up to max (all if max <= 0) of the view's events with revision > after.
func (pv *pendingView) pendingEvents(after int64, max int) ([]backend.Event, error) {
	if pv == nil {
		return nil, nil
	}
	var evs []backend.Event
	for _, pe := range pv.events {
		if pe.rev <= after {
			continue
		}
		if max > 0 && len(evs) >= max {
			break
		}
		ev, err := decodeEvent(pe.rev, pe.entry)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Snapshot returns the type's objects (ordered by key) and retained events, read in one
// transaction.
func (b *Backend) Snapshot(ctx context.Context, rt *storagev1.ResourceType) (*backend.Snapshot, error) {
	name, err := typeName(rt)
	if err != nil {
		return nil, err
	}
	s := &backend.Snapshot{}
	err = b.read(name, true, func(tx *bolt.Tx, pv *pendingView) error {
		t, err := openType(tx, rt, name, false)
		if err != nil {
			return err
		}
		if t == nil && pv == nil {
			return nil
		}
		if t == nil {
			t = &typeTx{}
		}
		s.Revision, s.Compacted = t.rev, t.compacted
		s.Objects = []*storagev1.Object{}
		// The logged writes' keys, in bbolt's order, merged with the bucket's.
		var keys []string
		if pv != nil {
			s.Revision = pv.rev
			keys = make([]string, 0, len(pv.objs))
			for k := range pv.objs {
				keys = append(keys, k)
			}
			slices.Sort(keys) // bytewise, as bbolt orders keys
		}
		add := func(v []byte) error {
			if v == nil {
				return nil
			}
			o, err := decodeObject(v)
			if err == nil {
				s.Objects = append(s.Objects, o)
			}
			return err
		}
		if t.objs != nil {
			err = t.objs.ForEach(func(k, v []byte) error {
				for len(keys) > 0 && keys[0] < string(k) {
					if err := add(pv.objs[keys[0]].val); err != nil {
						return err
					}
					keys = keys[1:]
				}
				if len(keys) > 0 && keys[0] == string(k) {
					v = pv.objs[keys[0]].val
					keys = keys[1:]
				}
				return add(v)
			})
			if err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := add(pv.objs[k].val); err != nil {
				return err
			}
		}
		if t.log != nil {
			if s.Events, err = t.events(t.compacted, 0); err != nil {
				return err
			}
		} else {
			s.Events = []backend.Event{}
		}
		more, err := pv.pendingEvents(max(t.rev, t.compacted), 0)
		s.Events = append(s.Events, more...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// events returns up to max (all if max <= 0) logged events with revision > after.
func (t *typeTx) events(after int64, max int) ([]backend.Event, error) {
	if after < t.compacted {
		after = t.compacted // entries at or below compacted may be left by an interrupted Compact
	}
	n := t.rev - after
	if max > 0 && int64(max) < n {
		n = int64(max)
	}
	if n <= 0 {
		return []backend.Event{}, nil
	}
	evs := make([]backend.Event, 0, n)
	c := t.log.Cursor()
	for k, v := c.Seek(u64(after + 1)); k != nil && int64(len(evs)) < n; k, v = c.Next() {
		rev, err := readU64(k)
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(rev, v)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Read returns up to max events (all available if max <= 0) with revision > after. When there
// are none, it waits for a commit of the type and reads again, until ctx ends: then it returns an
// empty slice and a nil error, whether ctx was cancelled or reached its deadline. It returns
// backend.ErrCompacted if after is below the compacted revision, backend.ErrRewound if after is
// above the current revision (this process never hands out a revision it has not committed, so
// the caller's revision came from a different data file), and backend.ErrUnavailable once the
// backend is closed.
func (b *Backend) Read(ctx context.Context, rt *storagev1.ResourceType, after int64, max int) ([]backend.Event, error) {
	name, err := typeName(rt)
	if err != nil {
		return nil, err
	}
	for {
		wake := b.waitChan(name)
		var evs []backend.Event
		err := b.read(name, false, func(tx *bolt.Tx, pv *pendingView) error {
			t, err := openType(tx, rt, name, false)
			if err != nil {
				return err
			}
			if t == nil {
				t = &typeTx{}
			}
			current := t.rev
			if pv != nil {
				current = pv.rev
			}
			switch {
			case after < t.compacted:
				return backend.ErrCompacted
			case after > current:
				return backend.ErrRewound
			case after == current:
				return nil
			}
			if after < t.rev {
				if evs, err = t.events(after, max); err != nil {
					return err
				}
			}
			if max > 0 && len(evs) >= max {
				return nil
			}
			more, err := pv.pendingEvents(maxInt64(after, t.rev), max-len(evs))
			evs = append(evs, more...)
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			return evs, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return []backend.Event{}, nil
		case <-b.closed:
			return nil, errClosed
		}
	}
}

// Compact discards the type's log entries with revision <= rev, never going beyond the current
// revision nor below the compacted revision in force, and returns the compacted revision. The new
// compacted revision is stored first (so it is in force at once); the entries are then deleted in
// transactions of compactChunk keys, so writes are not held up for long. If ctx ends during the
// deletion, Compact stops and returns the compacted revision; the next Compact of the type
// deletes what is left.
func (b *Backend) Compact(ctx context.Context, rt *storagev1.ResourceType, rev int64) (int64, error) {
	name, err := typeName(rt)
	if err != nil {
		return 0, err
	}
	// Move what the write-ahead log holds into bbolt first, where the log is compacted.
	if err := b.wal.checkpoint(); err != nil {
		return 0, unavailable(err)
	}
	var compacted int64
	exists := false
	err = b.update(func(tx *bolt.Tx) error {
		t, err := openType(tx, rt, name, false)
		if t == nil || err != nil {
			return err
		}
		exists = true
		compacted = max(t.compacted, min(rev, t.rev))
		if compacted == t.compacted {
			return errNothingToDo
		}
		return t.meta.Put(compactedKey, u64(compacted))
	})
	if err == errNothingToDo {
		err = nil
	}
	if err != nil || !exists {
		return compacted, err
	}
	limit := u64(compacted)
	for ctx.Err() == nil {
		done := false
		err := b.update(func(tx *bolt.Tx) error {
			t, err := openType(tx, rt, name, false)
			if t == nil || err != nil {
				done = true
				return err
			}
			keys := make([][]byte, 0, compactChunk)
			c := t.log.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k, limit) <= 0 && len(keys) < compactChunk; k, _ = c.Next() {
				keys = append(keys, append([]byte(nil), k...))
			}
			done = len(keys) < compactChunk
			if len(keys) == 0 {
				return errNothingToDo // roll back: no need to write and sync
			}
			for _, k := range keys {
				if err := t.log.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && err != errNothingToDo {
			return compacted, err
		}
		if done {
			break
		}
	}
	return compacted, nil
}

// errNothingToDo rolls back a read-write transaction that changed nothing.
var errNothingToDo = errors.New("nothing to do")

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
