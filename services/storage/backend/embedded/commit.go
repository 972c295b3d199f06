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

// committer is a group commit without delay. A writer that finds no transaction running commits
// its write at once, alone; writers that arrive meanwhile queue up, and when the transaction has
// been committed the first of them (the next leader) commits the whole queue in one transaction.
// A lone writer thus waits for one fsync, like with db.Update, and concurrent writers share
// fsyncs, like with db.Batch, but without waiting for a timer. Each writer leads at most one
// transaction, so none is kept committing for others.
type committer struct {
	db      *bolt.DB
	mu      sync.Mutex
	running bool       // a leader is committing
	queue   []*pending // writes waiting for the next transaction
}

type pending struct {
	fn   func(*bolt.Tx) error
	done chan error // receives the result, or errLead
}

// errLead tells a queued writer to lead the next transaction.
var errLead = errors.New("lead the next transaction")

// update runs fn in a read-write transaction that may be shared with other writes, and returns
// when it has been committed (or has failed). As with db.Batch, fn may be run more than once: if
// another function of the transaction fails, the transaction is rolled back and the others run
// again in a new one. fn should fail only when the transaction cannot commit; a write that is
// refused should return nil (after writing nothing) and report the refusal by other means.
func (c *committer) update(fn func(*bolt.Tx) error) error {
	p := &pending{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if c.running {
		c.mu.Unlock()
		if err := <-p.done; err != errLead {
			return err
		}
		c.mu.Lock()
	}
	c.running = true
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()

	c.run(batch)

	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].done <- errLead // buffered: does not block
	} else {
		c.running = false
	}
	c.mu.Unlock()
	return <-p.done
}

// run commits batch, answering every call in it.
func (c *committer) run(batch []*pending) {
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
