package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/encoding/protowire"

	storagev1 "platform.io/proto/storage/v1"
)

// The write-ahead log (walCommit, the default way of committing).
//
// A bbolt commit syncs the file twice (the new pages, then the meta page that points at them), and
// nothing else can commit meanwhile: with 0.5-0.6 ms per fdatasync that was 1.2-1.4 ms per commit
// on the machines here, the larger part of a create's latency at one client, and the limit of the
// all-in-one's writes at 16 (batches of about seven writes, each commit 2.7-3 ms). Like etcd, the
// backend therefore acknowledges a write once it is in a log that costs one fdatasync per group of
// writes, and moves the log into bbolt in the background (a checkpoint), many writes per bbolt
// commit.
//
//   - A group of writes (group in commit.go: the queue that built up while the previous group was
//     being logged) is evaluated against a read-only bbolt transaction plus the writes logged but not
//     yet checkpointed (the overlay), appended to the current log segment in one write, and
//     fdatasync'ed. Only then is it merged into the overlay, where readers see it, and
//     acknowledged.
//   - Readers (Revision, Read, Snapshot, Types) merge the overlay over a read-only bbolt
//     transaction begun under the overlay's lock, so they see every acknowledged write exactly
//     once, whether or not it has been checkpointed.
//   - Every checkpointInterval (or sooner when checkpointEvents writes are waiting), the
//     checkpointer starts a new segment, writes what the overlay held into bbolt in one
//     transaction (synced as usual), drops it from the overlay and retires the older segments:
//     the newest is kept as the spare that the next checkpoint renames into the next segment,
//     the others are deleted.
//   - Open replays the segments into bbolt (records at or below a type's bbolt revision are
//     already there), cutting a torn record at the end of the last segment (a group whose
//     fdatasync never returned, so never acknowledged). A bad record anywhere else fails Open.
//
// Segments are files named by a hexadecimal sequence number in the directory <data file>.wal.
// Each record is a frame: 4 bytes little-endian payload length, 4 bytes little-endian CRC-32C of
// the segment's sequence number (8 bytes little-endian) followed by the payload, then the
// payload, a protobuf message written with protowire (walField*). Each append ends with eight
// zero bytes, the end of the log, which the next append overwrites.
//
// Segments are reused: a group overwrites the spare's blocks in place, and an fdatasync of an
// overwrite that does not grow the file commits no metadata (0.145 against 0.200 ms for an
// append on the machines here). The old records a reused segment still holds past the end are
// not mistaken for new ones: their checksums were seeded with another sequence number, and the
// zero bytes after every append mark where the segment's records end.

// checkpointInterval and checkpointEvents bound how long and how much the overlay holds
// (variables for tests).
var (
	checkpointInterval = 100 * time.Millisecond
	checkpointEvents   = 4096
)

// maxSpareBytes bounds the segment kept for reuse (a variable for tests): 100 ms of writes at
// the machines' rates is well under a megabyte, 4,096 writes of large objects may be far more.
var maxSpareBytes int64 = 16 << 20

// Fields of a log record.
const (
	walFieldType     = 1 // string: the type's bucket name
	walFieldGroup    = 2 // string
	walFieldResource = 3 // string
	walFieldRevision = 4 // varint
	walFieldKey      = 5 // string: backend.Key
	walFieldValue    = 6 // bytes: the stored object (absent when the write deleted the key)
	walFieldEntry    = 7 // bytes: the log entry (codec.go's event envelope)
)

// pendingEvent is one logged write: the key's new stored value (nil: deleted) and its log entry.
type pendingEvent struct {
	rev   int64
	key   string
	val   []byte
	entry []byte
}

// objEntry is the latest stored value of a key (nil: deleted) and the revision that wrote it.
type objEntry struct {
	val []byte
	rev int64
}

// pendingType is the overlay of one type: its writes logged since its last checkpoint.
type pendingType struct {
	rt     *storagev1.ResourceType
	rev    int64          // the type's current revision (that of the last event)
	events []pendingEvent // consecutive revisions, ending at rev
	objs   map[string]objEntry
}

// overlay is every type's logged, not yet checkpointed writes. It changes only under wal.logMu
// (merges and trims) and then also under mu, which readers hold to read it.
type overlay struct {
	mu    sync.RWMutex
	types map[string]*pendingType
	count int // events held
}

// stagedType is a type's writes in the group being evaluated, on top of the overlay.
type stagedType struct {
	wb      *walBatch
	name    string
	rt      *storagev1.ResourceType
	pending *pendingType // the overlay's, nil if none (stable: the leader holds logMu)
	rev     int64
	events  []pendingEvent
	objs    map[string]objEntry
}

// lookup returns the key's latest logged or staged state, if it has one newer than bbolt's.
func (s *stagedType) lookup(key string) (objEntry, bool) {
	if e, ok := s.objs[key]; ok {
		return e, true
	}
	if s.pending != nil {
		if e, ok := s.pending.objs[key]; ok {
			return e, true
		}
	}
	return objEntry{}, false
}

// stage records a write in the group (see typeTx.commit: the key's new stored value, nil when
// deleted, and the log entry of revision rev), and its log record. It refuses what bbolt would
// refuse at the checkpoint, where it could no longer be answered.
func (s *stagedType) stage(key string, val, entry []byte, rev int64) error {
	switch {
	case key == "":
		return berrors.ErrKeyRequired
	case len(key) > bolt.MaxKeySize:
		return berrors.ErrKeyTooLarge
	case len(val) > bolt.MaxValueSize, len(entry) > bolt.MaxValueSize:
		return berrors.ErrValueTooLarge
	}
	pe := pendingEvent{rev: rev, key: key, val: val, entry: entry}
	s.events = append(s.events, pe)
	s.objs[key] = objEntry{val: val, rev: rev}
	s.rev = rev
	s.wb.records = appendRecord(s.wb.records, s.wb.w.segSeq, s.name, s.rt, pe) // logMu held: the segment stays
	return nil
}

// walBatch is a group of writes being evaluated.
type walBatch struct {
	w       *wal
	tx      *bolt.Tx // read-only
	types   map[string]*stagedType
	records []byte // the group's log frames
}

// openType is openType for a write of the group: nil if the type has never been written and
// create is false.
func (wb *walBatch) openType(rt *storagev1.ResourceType, name string, create bool) (*typeTx, error) {
	st, ok := wb.types[name]
	if !ok {
		bt, err := openType(wb.tx, rt, name, false)
		if err != nil {
			return nil, err
		}
		pt := wb.w.ov.types[name]
		if bt == nil && pt == nil && !create {
			return nil, nil
		}
		st = &stagedType{wb: wb, name: name, rt: rt, pending: pt, objs: map[string]objEntry{}}
		switch {
		case pt != nil:
			st.rev = pt.rev
		case bt != nil:
			st.rev = bt.rev
		}
		wb.types[name] = st
	}
	t := &typeTx{rev: st.rev, st: st}
	if bt := wb.tx.Bucket([]byte(name)); bt != nil {
		t.meta, t.objs, t.log = bt.Bucket(metaBucket), bt.Bucket(objsBucket), bt.Bucket(logBucket)
	}
	return t, nil
}

// wal is the write-ahead log of a Backend.
type wal struct {
	db  *bolt.DB
	dir string

	group group[func(*walBatch) error]

	// logMu is held by the leader from evaluating a group to merging it, and by the checkpointer
	// to switch segments and to trim the overlay.
	logMu    sync.Mutex
	seg      *os.File
	segSeq   uint64
	segBytes int64 // the offset of the next append: the end of the segment's records
	failed   error // an append or sync failed: the log refuses writes from then on
	closed   bool

	ov overlay

	ckptMu  sync.Mutex // one checkpoint at a time
	ckptErr error      // the last checkpoint's error (ckptMu)
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// errWALClosed answers writes that reach the log after Close.
var errWALClosed = errors.New("write-ahead log closed")

// openWAL replays the log directory of db's file into db, then starts a new segment and the
// checkpointer.
func openWAL(db *bolt.DB, path string) (*wal, error) {
	w := &wal{
		db:   db,
		dir:  path + ".wal",
		ov:   overlay{types: map[string]*pendingType{}},
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	if err := syncDir(filepath.Dir(w.dir)); err != nil {
		return nil, err
	}
	// A spare left by the last run holds checkpointed records only.
	if err := os.Remove(w.sparePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	seqs, err := w.segments()
	if err != nil {
		return nil, err
	}
	data := make([][]byte, len(seqs))
	for i, seq := range seqs {
		if data[i], err = os.ReadFile(w.segPath(seq)); err != nil {
			return nil, err
		}
	}
	// The log ends in the last segment whose first record is whole. The segments after it were
	// started by a checkpoint just before a crash (a checkpoint starts the next segment while
	// writes still go to the current one) and hold nothing or a torn first group: a new file is
	// empty, a reused one holds records checksummed for another sequence number. They do not
	// make the torn tail of the segment before them damage.
	last := len(seqs) - 1
	for last > 0 {
		if _, _, _, _, err := readRecord(data[last], seqs[last]); err == nil {
			break
		}
		last--
	}
	for i, seq := range seqs {
		if err := w.replay(seq, data[i], i >= last); err != nil {
			return nil, err
		}
		w.segSeq = seq
	}
	if w.ov.count > 0 {
		if err := w.apply(w.snapshot()); err != nil {
			return nil, fmt.Errorf("replay the log: %w", err)
		}
		w.ov.types, w.ov.count = map[string]*pendingType{}, 0
	}
	// Delete the replayed segments before creating the next: were a crash to leave both, a torn
	// tail of the old last segment would read as damage in a segment that is not the last. The
	// new segment's directory sync makes the deletions durable too.
	for _, seq := range seqs {
		if err := os.Remove(w.segPath(seq)); err != nil {
			return nil, err
		}
	}
	if w.seg, err = w.createSegment(w.segSeq + 1); err != nil {
		return nil, err
	}
	w.segSeq++
	go w.checkpointer()
	return w, nil
}

func (w *wal) segPath(seq uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("%016x.wal", seq))
}

// sparePath is the retired segment the next checkpoint reuses (not a segment: segments ignores
// it).
func (w *wal) sparePath() string { return filepath.Join(w.dir, "spare") }

// segments returns the sequence numbers of the log's segments, in order.
func (w *wal) segments() ([]uint64, error) {
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok || len(base) != 16 {
			continue
		}
		seq, err := strconv.ParseUint(base, 16, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// createSegment starts segment seq, from the spare when there is one, else as a new file, and
// makes its directory entry durable, so that writes acknowledged from it survive a crash.
func (w *wal) createSegment(seq uint64) (*os.File, error) {
	path := w.segPath(seq)
	err := os.Rename(w.sparePath(), path)
	flags := os.O_WRONLY
	if errors.Is(err, os.ErrNotExist) {
		flags |= os.O_CREATE | os.O_EXCL
	} else if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// replay reads a segment's records (data, the whole file) into the overlay. They end at the end
// mark (or the end of the file); in the last segment, a torn or partly written record ends the
// log too.
func (w *wal) replay(seq uint64, data []byte, last bool) error {
	path := w.segPath(seq)
	revs := map[string]int64{}
	off := 0
	for off < len(data) {
		name, rt, pe, n, err := readRecord(data[off:], seq)
		if errors.Is(err, errEnd) {
			return nil
		}
		if err != nil {
			if !last {
				return fmt.Errorf("log segment %s: record at offset %d: %w", path, off, err)
			}
			// The end of the log: a group whose fdatasync did not return (never acknowledged).
			// Open continues in a new segment and deletes this one once applied.
			return nil
		}
		pt := w.ov.types[name]
		cur, ok := revs[name]
		switch {
		case pt != nil:
			cur = pt.rev
		case !ok:
			err := w.db.View(func(tx *bolt.Tx) error {
				t, err := openType(tx, rt, name, false)
				if t != nil {
					cur = t.rev
				}
				return err
			})
			if err != nil {
				return err
			}
			revs[name] = cur
		}
		switch {
		case pe.rev <= cur:
			// Already in bbolt (checkpointed before the segment was deleted).
		case pe.rev == cur+1:
			if pt == nil {
				pt = &pendingType{rt: rt, objs: map[string]objEntry{}}
				w.ov.types[name] = pt
			}
			pt.events = append(pt.events, pe)
			pt.objs[pe.key] = objEntry{val: pe.val, rev: pe.rev}
			pt.rev = pe.rev
			w.ov.count++
		default:
			return fmt.Errorf("log segment %s: type %s jumps from revision %d to %d", path, name, cur, pe.rev)
		}
		off += n
	}
	return nil
}

// update runs fn in the next group of writes and returns when the group has been logged and
// synced (or has failed). fn runs exactly once.
func (w *wal) update(fn func(*walBatch) error) error {
	return w.group.join(fn, w.commit)
}

// commit evaluates, logs and merges a group of writes, answering each.
func (w *wal) commit(batch []*member[func(*walBatch) error]) {
	errs := make([]error, len(batch))
	answer := func() {
		for i, p := range batch {
			p.done <- errs[i]
		}
	}
	fail := func(err error) {
		for i := range errs {
			errs[i] = err
		}
		answer()
	}
	w.logMu.Lock()
	defer w.logMu.Unlock()
	switch {
	case w.closed:
		fail(errWALClosed)
		return
	case w.failed != nil:
		fail(w.failed)
		return
	}
	tx, err := w.db.Begin(false)
	if err != nil {
		fail(err)
		return
	}
	wb := &walBatch{w: w, tx: tx, types: map[string]*stagedType{}}
	for i, p := range batch {
		errs[i] = callWAL(p.fn, wb)
	}
	_ = tx.Rollback()
	if len(wb.records) > 0 {
		if err := w.append(wb.records); err != nil {
			w.failed = fmt.Errorf("write-ahead log: %w", err)
			fail(w.failed)
			return
		}
		w.merge(wb)
	}
	answer()
}

// callWAL runs fn, turning a panic into an error so that the other writers of the group are
// answered.
func callWAL(fn func(*walBatch) error, wb *walBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("embedded: panic in write: %v", r)
		}
	}()
	return fn(wb)
}

// append writes frames, and the end mark after them, at the end of the current segment's records
// and syncs them.
func (w *wal) append(frames []byte) error {
	n := len(frames)
	frames = append(frames, endMark[:]...)
	if _, err := w.seg.WriteAt(frames, w.segBytes); err != nil {
		return err
	}
	if err := syncLog(w.seg); err != nil {
		return err
	}
	w.segBytes += int64(n)
	return nil
}

// endMark follows the last record of a segment: a frame header of length 0 and checksum 0.
var endMark [8]byte

// syncLog makes a segment's appended frames durable (a variable for tests).
var syncLog = fdatasync

// merge makes a logged group visible to readers (logMu held).
func (w *wal) merge(wb *walBatch) {
	w.ov.mu.Lock()
	for name, st := range wb.types {
		if len(st.events) == 0 {
			continue
		}
		pt := w.ov.types[name]
		if pt == nil {
			pt = &pendingType{rt: st.rt, objs: make(map[string]objEntry, len(st.objs))}
			w.ov.types[name] = pt
		}
		pt.events = append(pt.events, st.events...)
		for k, e := range st.objs {
			pt.objs[k] = e
		}
		pt.rev = st.rev
		w.ov.count += len(st.events)
	}
	full := w.ov.count >= checkpointEvents
	w.ov.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// ckptType is what a checkpoint moves of one type.
type ckptType struct {
	name   string
	rt     *storagev1.ResourceType
	events []pendingEvent
}

// snapshot returns the overlay's events (logMu held, or before the log is in use).
func (w *wal) snapshot() []ckptType {
	snap := make([]ckptType, 0, len(w.ov.types))
	for name, pt := range w.ov.types {
		snap = append(snap, ckptType{name: name, rt: pt.rt, events: pt.events})
	}
	sort.Slice(snap, func(i, j int) bool { return snap[i].name < snap[j].name })
	return snap
}

// apply writes snap into bbolt in one transaction. Events at or below a type's bbolt revision are
// skipped, so applying again after a failure or a crash is harmless.
func (w *wal) apply(snap []ckptType) error {
	return w.db.Update(func(tx *bolt.Tx) error {
		for _, ct := range snap {
			t, err := openType(tx, ct.rt, ct.name, true)
			if err != nil {
				return err
			}
			for _, pe := range ct.events {
				if pe.rev <= t.rev {
					continue
				}
				if pe.rev != t.rev+1 {
					return fmt.Errorf("embedded: checkpoint of %s jumps from revision %d to %d", ct.name, t.rev, pe.rev)
				}
				if pe.val != nil {
					err = t.objs.Put([]byte(pe.key), pe.val)
				} else {
					err = t.objs.Delete([]byte(pe.key))
				}
				if err != nil {
					return err
				}
				if err := t.log.Put(u64(pe.rev), pe.entry); err != nil {
					return err
				}
				t.rev = pe.rev
			}
			if err := t.meta.Put(revKey, u64(t.rev)); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkpoint moves the overlay into bbolt and deletes the segments it came from.
func (w *wal) checkpoint() error {
	w.ckptMu.Lock()
	defer w.ckptMu.Unlock()
	w.ckptErr = w.checkpointLocked()
	return w.ckptErr
}

// health returns why the log cannot take writes, or why the last checkpoint failed (the log
// then keeps growing), or nil.
func (w *wal) health() error {
	w.logMu.Lock()
	failed := w.failed
	w.logMu.Unlock()
	if failed != nil {
		return failed
	}
	w.ckptMu.Lock()
	defer w.ckptMu.Unlock()
	if w.ckptErr != nil {
		return fmt.Errorf("checkpoint: %w", w.ckptErr)
	}
	return nil
}

func (w *wal) checkpointLocked() error {
	w.logMu.Lock()
	if w.closed || w.segBytes == 0 {
		w.logMu.Unlock()
		return nil
	}
	if w.failed != nil {
		// The current segment may end in a torn group: keep it the last one. Move the
		// acknowledged writes into bbolt; replay skips them.
		snap := w.snapshot()
		w.logMu.Unlock()
		if len(snap) == 0 {
			return nil
		}
		if err := w.apply(snap); err != nil {
			return err
		}
		w.trim(snap)
		return nil
	}
	w.logMu.Unlock()
	// Create the next segment outside logMu: it costs a directory sync.
	next, err := w.createSegment(w.segSeq + 1)
	if err != nil {
		return err
	}
	w.logMu.Lock()
	if w.closed || w.failed != nil {
		// Closed or failed meanwhile: the next checkpoint (Close's, or the next tick's) does
		// what is left.
		w.logMu.Unlock()
		next.Close()
		return os.Remove(w.segPath(w.segSeq + 1))
	}
	snap := w.snapshot()
	old := w.seg
	w.seg, w.segBytes = next, 0
	w.segSeq++
	w.logMu.Unlock()
	old.Close()

	if err := w.apply(snap); err != nil {
		// The overlay and the older segments stay; the next checkpoint applies them again.
		return err
	}
	w.trim(snap)
	current := w.segSeq // ckptMu held: only checkpoints change it

	seqs, err := w.segments()
	if err != nil {
		return err
	}
	// Retire the older segments, newest first: the first becomes the spare unless one is
	// waiting or it grew past maxSpareBytes (a burst of large writes need not keep its disk
	// space); it holds checkpointed records only, and past the end mark of the next records
	// written into it, nothing replay reads.
	_, err = os.Stat(w.sparePath())
	haveSpare := err == nil
	for i := len(seqs) - 1; i >= 0; i-- {
		seq := seqs[i]
		if seq >= current {
			continue
		}
		if !haveSpare {
			haveSpare = true
			if fi, err := os.Stat(w.segPath(seq)); err == nil && fi.Size() <= maxSpareBytes {
				if err := os.Rename(w.segPath(seq), w.sparePath()); err != nil {
					return err
				}
				continue
			}
		}
		if err := os.Remove(w.segPath(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// trim drops from the overlay what a checkpoint has applied to bbolt (snap, taken by the
// checkpoint; the overlay has only grown at its end since).
func (w *wal) trim(snap []ckptType) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	w.ov.mu.Lock()
	defer w.ov.mu.Unlock()
	for _, ct := range snap {
		pt := w.ov.types[ct.name]
		if pt == nil || len(ct.events) == 0 {
			continue
		}
		upto := ct.events[len(ct.events)-1].rev
		pt.events = slices.Clone(pt.events[len(ct.events):])
		for k, e := range pt.objs {
			if e.rev <= upto {
				delete(pt.objs, k)
			}
		}
		w.ov.count -= len(ct.events)
		if len(pt.events) == 0 {
			delete(w.ov.types, ct.name)
		}
	}
}

// checkpointer checkpoints every checkpointInterval, or when merge kicks it, until stop.
func (w *wal) checkpointer() {
	defer close(w.done)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		_ = w.checkpoint() // on failure the log keeps the writes; the next tick retries
	}
}

// close stops the checkpointer, checkpoints what is left and closes the current segment. Writes
// after it fail.
func (w *wal) close() error {
	close(w.stop)
	<-w.done
	err := w.checkpoint()
	w.logMu.Lock()
	w.closed = true
	if cerr := w.seg.Close(); err == nil {
		err = cerr
	}
	w.logMu.Unlock()
	return err
}

// pendingView is what the overlay holds of one type, for a reader.
type pendingView struct {
	rev    int64
	events []pendingEvent
	objs   map[string]objEntry // only when asked for
}

// beginRead begins a read-only bbolt transaction and returns it with the overlay's view of the
// type (nil if the overlay holds nothing of it). Both are taken under the overlay's lock, and a
// checkpoint trims the overlay only after its bbolt transaction has committed, so the view holds
// every write that the transaction lacks (and possibly some it has: readers skip events at or
// below the transaction's revision of the type).
func (w *wal) beginRead(name string, withObjs bool) (*bolt.Tx, *pendingView, error) {
	w.ov.mu.RLock()
	defer w.ov.mu.RUnlock()
	tx, err := w.db.Begin(false)
	if err != nil {
		return nil, nil, err
	}
	pt := w.ov.types[name]
	if pt == nil {
		return tx, nil, nil
	}
	pv := &pendingView{rev: pt.rev, events: pt.events}
	if withObjs {
		pv.objs = make(map[string]objEntry, len(pt.objs))
		for k, e := range pt.objs {
			pv.objs[k] = e
		}
	}
	return tx, pv, nil
}

// pendingTypes returns the resource types the overlay holds.
func (w *wal) pendingTypes() map[string]*storagev1.ResourceType {
	w.ov.mu.RLock()
	defer w.ov.mu.RUnlock()
	m := make(map[string]*storagev1.ResourceType, len(w.ov.types))
	for name, pt := range w.ov.types {
		m[name] = pt.rt
	}
	return m
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameChecksum is a frame's CRC-32C: of the segment's sequence number, then of the payload.
func frameChecksum(seq uint64, payload []byte) uint32 {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], seq)
	return crc32.Update(crc32.Update(0, castagnoli, s[:]), castagnoli, payload)
}

// appendRecord appends the frame of one logged write to segment seq.
func appendRecord(b []byte, seq uint64, name string, rt *storagev1.ResourceType, pe pendingEvent) []byte {
	size := protowire.SizeTag(walFieldType) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(walFieldGroup) + protowire.SizeBytes(len(rt.GetGroup())) +
		protowire.SizeTag(walFieldResource) + protowire.SizeBytes(len(rt.GetResource())) +
		protowire.SizeTag(walFieldRevision) + protowire.SizeVarint(uint64(pe.rev)) +
		protowire.SizeTag(walFieldKey) + protowire.SizeBytes(len(pe.key)) +
		protowire.SizeTag(walFieldEntry) + protowire.SizeBytes(len(pe.entry))
	if pe.val != nil {
		size += protowire.SizeTag(walFieldValue) + protowire.SizeBytes(len(pe.val))
	}
	b = slices.Grow(b, 8+size)
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // length and checksum, set below
	b = protowire.AppendTag(b, walFieldType, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, walFieldGroup, protowire.BytesType)
	b = protowire.AppendString(b, rt.GetGroup())
	b = protowire.AppendTag(b, walFieldResource, protowire.BytesType)
	b = protowire.AppendString(b, rt.GetResource())
	b = protowire.AppendTag(b, walFieldRevision, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(pe.rev))
	b = protowire.AppendTag(b, walFieldKey, protowire.BytesType)
	b = protowire.AppendString(b, pe.key)
	if pe.val != nil {
		b = protowire.AppendTag(b, walFieldValue, protowire.BytesType)
		b = protowire.AppendBytes(b, pe.val)
	}
	b = protowire.AppendTag(b, walFieldEntry, protowire.BytesType)
	b = protowire.AppendBytes(b, pe.entry)
	p := b[start+8:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(b[start+4:], frameChecksum(seq, p))
	return b
}

// errTorn is a frame that is cut short or whose checksum does not match (also a record of a
// reused segment's earlier life); errEnd is the end mark, or the end of the file.
var (
	errTorn = errors.New("torn or corrupt record")
	errEnd  = errors.New("end of the segment's records")
)

// readRecord decodes the frame of segment seq at the start of b and returns its length. The
// record's bytes are b's (replay reads each segment into a buffer of its own).
func readRecord(b []byte, seq uint64) (name string, rt *storagev1.ResourceType, pe pendingEvent, n int, err error) {
	if len(b) == 0 || len(b) >= 8 && [8]byte(b[:8]) == endMark {
		return "", nil, pe, 0, errEnd
	}
	if len(b) < 8 {
		return "", nil, pe, 0, errTorn
	}
	size := int(binary.LittleEndian.Uint32(b))
	if size == 0 || size > len(b)-8 {
		return "", nil, pe, 0, errTorn
	}
	p := b[8 : 8+size]
	if frameChecksum(seq, p) != binary.LittleEndian.Uint32(b[4:]) {
		return "", nil, pe, 0, errTorn
	}
	rt = &storagev1.ResourceType{}
	var haveRev, haveKey, haveEntry bool
	for len(p) > 0 {
		num, typ, tn := protowire.ConsumeTag(p)
		if tn < 0 {
			return "", nil, pe, 0, protowire.ParseError(tn)
		}
		p = p[tn:]
		var vn int
		switch {
		case num == walFieldRevision && typ == protowire.VarintType:
			var v uint64
			v, vn = protowire.ConsumeVarint(p)
			pe.rev, haveRev = int64(v), true
		case typ == protowire.BytesType && num >= walFieldType && num <= walFieldEntry:
			var v []byte
			v, vn = protowire.ConsumeBytes(p)
			if vn < 0 {
				break
			}
			switch num {
			case walFieldType:
				name = string(v)
			case walFieldGroup:
				rt.Group = string(v)
			case walFieldResource:
				rt.Resource = string(v)
			case walFieldKey:
				pe.key, haveKey = string(v), true
			case walFieldValue:
				pe.val = v // non-nil even when empty: present means stored
			case walFieldEntry:
				pe.entry, haveEntry = v, true
			}
		default:
			vn = protowire.ConsumeFieldValue(num, typ, p)
		}
		if vn < 0 {
			return "", nil, pe, 0, protowire.ParseError(vn)
		}
		p = p[vn:]
	}
	if name == "" || rt.Resource == "" || !haveRev || !haveKey || !haveEntry {
		return "", nil, pe, 0, errors.New("record lacks a field")
	}
	return name, rt, pe, 8 + size, nil
}
