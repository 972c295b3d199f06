package embedded

import (
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// commitMode selects how writes are committed.
type commitMode int

const (
	// walCommit (the default) logs the writes that queue up while a group is being logged
	// together, with one fdatasync, and moves them into bbolt in the background (see wal.go).
	walCommit commitMode = iota
	// groupCommit commits the writes that queue up while a transaction is being committed
	// together in the next transaction, with bbolt's two fsyncs (see committer).
	groupCommit
	// soloCommit runs each write in a db.Update transaction of its own.
	soloCommit
	// boltBatch uses bbolt's DB.Batch, which waits up to DB.MaxBatchDelay for writes to join a
	// batch (kept for comparison in tests and benchmarks).
	boltBatch
)

// group is a group commit without delay. A writer that finds no group running runs its write at
// once, alone; writers that arrive meanwhile queue up, and when the group has been committed the
// first of them (the next leader) runs the whole queue as the next group. A lone writer thus
// waits for one sync, and concurrent writers share syncs, like with db.Batch, but without
// waiting for a timer. Each writer leads at most one group, so none is kept committing for
// others. F is what a write is (the function the leader calls in the group).
type group[F any] struct {
	mu      sync.Mutex
	running bool         // a leader is committing
	queue   []*member[F] // writes waiting for the next group
}

type member[F any] struct {
	fn   F
	done chan error // receives the result, or errLead
}

// errLead tells a queued writer to lead the next group.
var errLead = errors.New("lead the next group")

// join queues fn for the next group and returns its result; if it becomes the leader, it calls
// run with the group, which must send every member its result.
func (g *group[F]) join(fn F, run func([]*member[F])) error {
	p := &member[F]{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.running {
		g.mu.Unlock()
		if err := <-p.done; err != errLead {
			return err
		}
		g.mu.Lock()
	}
	g.running = true
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()

	run(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- errLead // buffered: does not block
	} else {
		g.running = false
	}
	g.mu.Unlock()
	return <-p.done
}

// committer commits groups of writes (group) each in one bbolt read-write transaction.
type committer struct {
	db    *bolt.DB
	group group[func(*bolt.Tx) error]
}

// update runs fn in a read-write transaction that may be shared with other writes, and returns
// when it has been committed (or has failed). As with db.Batch, fn may be run more than once: if
// another function of the transaction fails, the transaction is rolled back and the others run
// again in a new one. fn should fail only when the transaction cannot commit; a write that is
// refused should return nil (after writing nothing) and report the refusal by other means.
func (c *committer) update(fn func(*bolt.Tx) error) error {
	return c.group.join(fn, c.run)
}

// run commits batch, answering every call in it.
func (c *committer) run(batch []*member[func(*bolt.Tx) error]) {
	for len(batch) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bolt.Tx) error {
			for i, p := range batch {
				if err := call(p.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, p := range batch {
				p.done <- err
			}
			return
		}
		// Answer the failed call with its error and retry the others without it.
		batch[failed].done <- err
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// call runs fn, turning a panic into an error so that the other writers of the batch are answered.
func call(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("embedded: panic in write: %v", r)
		}
	}()
	return fn(tx)
}
