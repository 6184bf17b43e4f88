package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

type opKind uint8

const (
	opCreate opKind = iota + 1
	opUpdate
	opDelete
)

func (o opKind) String() string {
	switch o {
	case opCreate:
		return "create"
	case opUpdate:
		return "update"
	case opDelete:
		return "delete"
	}
	return "?"
}

// writeReq is one queued write. key and value are owned by the store.
type writeReq struct {
	ctx      context.Context
	op       opKind
	key      []byte
	buf      []byte // a put's value, after dataHeaderRoom bytes of room for the data header
	expected int64
	done     chan writeResult // buffered, receives exactly one result
}

type writeResult struct {
	rev  int64
	prev storage.KeyValue // the deleted key-value, for deletes
	err  error
}

// Create writes key only if it does not exist.
func (s *Store) Create(ctx context.Context, key, value []byte) (int64, error) {
	r := s.write(ctx, opCreate, key, value, 0)
	return r.rev, r.err
}

// Update replaces the value of an existing key, guarded by expectedRevision
// when it is not 0.
func (s *Store) Update(ctx context.Context, key, value []byte, expectedRevision int64) (int64, error) {
	r := s.write(ctx, opUpdate, key, value, expectedRevision)
	return r.rev, r.err
}

// Delete removes an existing key, guarded by expectedRevision when it is not
// 0, and returns the deleted key-value.
func (s *Store) Delete(ctx context.Context, key []byte, expectedRevision int64) (storage.KeyValue, int64, error) {
	r := s.write(ctx, opDelete, key, nil, expectedRevision)
	return r.prev, r.rev, r.err
}

// write validates a write, queues it for the sequencer and waits for its
// result. Once queued, a write is not abandoned when ctx ends: the caller
// waits for the outcome (a group commit takes milliseconds) so that the
// result is never ambiguous. The sequencer drops writes whose ctx ended
// before their batch started.
func (s *Store) write(ctx context.Context, op opKind, key, value []byte, expected int64) writeResult {
	if err := ctx.Err(); err != nil {
		return writeResult{err: err}
	}
	if err := s.checkKey(key); err != nil {
		return writeResult{err: fmt.Errorf("%s: %w", op, err)}
	}
	if len(value) > s.opts.MaxValueSize {
		return writeResult{err: fmt.Errorf("%s %q: value of %d bytes exceeds the limit of %d: %w",
			op, key, len(value), s.opts.MaxValueSize, storage.ErrTooLarge)}
	}
	if expected < 0 {
		return writeResult{err: fmt.Errorf("%s %q: negative expected revision %d: %w", op, key, expected, storage.ErrInvalid)}
	}
	req := &writeReq{
		ctx:      ctx,
		op:       op,
		key:      bytes.Clone(key),
		expected: expected,
		done:     make(chan writeResult, 1),
	}
	if op != opDelete {
		// One copy of the value, with room for the data header in front
		// (encodeData): the stored data value and the event share it.
		req.buf = make([]byte, dataHeaderRoom+len(value))
		copy(req.buf[dataHeaderRoom:], value)
	}
	select {
	case s.queue <- req:
	default:
		// The queue is full: wait for room, for the end of the store, for
		// ctx (asked for its Done channel only now: an HTTP request's
		// context makes its timer then; see apiserver's deadlineCtx) or
		// at most MaxWriteWait (the disk is slower than writes arrive).
		var waited <-chan time.Time
		if s.opts.MaxWriteWait > 0 {
			t := time.NewTimer(s.opts.MaxWriteWait)
			defer t.Stop()
			waited = t.C
		}
		select {
		case s.queue <- req:
		case <-s.closing:
			return writeResult{err: storage.ErrClosed}
		case <-ctx.Done():
			return writeResult{err: ctx.Err()}
		case <-waited:
			return writeResult{err: fmt.Errorf("%s %q: waited %v for room in the write queue (%d writes wait for the disk): %w",
				op, key, s.opts.MaxWriteWait, cap(s.queue), storage.ErrBusy)}
		}
	}
	select {
	case r := <-req.done:
		return r
	case <-s.seqDone:
		// The sequencer answers everything it dequeued before stopping; a
		// request that raced into the queue after its final drain is not.
		select {
		case r := <-req.done:
			return r
		default:
			return writeResult{err: storage.ErrClosed}
		}
	}
}

// runSequencer is the single writer: it forms batches from the queue and
// commits them one after the other. After a failed commit it also tries,
// every RecoveryInterval, to recover (recover.go).
func (s *Store) runSequencer() {
	defer close(s.seqDone)
	batch := make([]*writeReq, 0, s.opts.MaxBatchWrites)
	var retry *time.Ticker
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		var retryC <-chan time.Time
		switch failed := s.failErr.Load() != nil && !s.failPermanent; {
		case failed && retry == nil:
			retry = time.NewTicker(s.opts.RecoveryInterval)
			retryC = retry.C
		case failed:
			retryC = retry.C
		case retry != nil:
			retry.Stop()
			retry = nil
		}
		select {
		case <-retryC:
			s.tryRecover()
			continue
		case req := <-s.queue:
			batch = append(batch[:0], req)
		case <-s.closing:
			for {
				select {
				case req := <-s.queue:
					req.done <- writeResult{err: storage.ErrClosed}
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case req := <-s.queue:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
		clear(batch)
	}
}

// keyState is the latest state of a key as the sequencer sees it.
type keyState struct {
	exists    bool
	modRev    int64
	createRev int64
	parts     int // number of value parts stored (for chunk cleanup)
	value     []byte
}

// accepted is a write that passed its check and was given a revision.
type accepted struct {
	req  *writeReq
	rev  int64
	prev storage.KeyValue
}

// commitBatch checks, commits, syncs, publishes and answers one batch.
func (s *Store) commitBatch(batch []*writeReq) {
	if err := s.refusal(batch); err != nil {
		for _, req := range batch {
			req.done <- writeResult{err: err}
		}
		return
	}
	base := s.current.Load()
	read := s.db.NewTransactionAt(uint64(base), false)
	defer read.Discard()
	var commits commitWaiter
	acc, events, rev := s.queueCommits(read, batch, base, &commits)
	if len(acc) == 0 {
		return
	}
	err := commits.wait()
	badgerFailed := err != nil
	if err == nil {
		err = s.syncBatch()
	}
	if err != nil {
		s.failBatch(acc, err, base+1, rev, badgerFailed)
		return
	}
	s.hub.publish(s, rev, events)
	s.batches.Add(1)
	s.batchedWrites.Add(int64(len(acc)))
	for _, a := range acc {
		// The caller gets its own copies: the event shares these slices.
		a.prev.Key, a.prev.Value = bytes.Clone(a.prev.Key), bytes.Clone(a.prev.Value)
		a.req.done <- writeResult{rev: a.rev, prev: a.prev}
	}
}

// queueCommits checks each write of batch against the state before it
// (storage at revision base, then the batch's own earlier writes), queues
// the commit of each that passes at the next revision, and answers the
// others. It returns the accepted writes, their events and the last
// revision given.
func (s *Store) queueCommits(read *bdb.Txn, batch []*writeReq, base int64, commits *commitWaiter) ([]accepted, []storage.Event, int64) {
	overlay := make(map[string]keyState, len(batch))
	acc := make([]accepted, 0, len(batch))
	events := make([]storage.Event, 0, len(batch))
	rev := base
	for _, req := range batch {
		st, err := stateToCheck(read, overlay, req)
		if err == nil {
			err = check(req, st)
		}
		if err != nil {
			req.done <- writeResult{err: err}
			continue
		}
		txn, ns, ev, err := s.prepare(req, st, rev+1)
		if err != nil {
			req.done <- writeResult{err: fmt.Errorf("%s %q: %w", req.op, req.key, err)}
			continue
		}
		rev++
		commits.commit(txn, rev)
		overlay[string(req.key)] = ns
		a := accepted{req: req, rev: rev}
		if req.op == opDelete {
			a.prev = storage.KeyValue{Key: req.key, Value: st.value, Revision: st.modRev, CreateRevision: st.createRev}
		}
		acc = append(acc, a)
		events = append(events, ev)
	}
	return acc, events, rev
}

// stateToCheck returns the state of req's key that req is checked against:
// the batch's last write of it (overlay), else the state in read. A write
// whose context has ended gets its context's error instead.
func stateToCheck(read *bdb.Txn, overlay map[string]keyState, req *writeReq) (keyState, error) {
	if err := req.ctx.Err(); err != nil {
		return keyState{}, err
	}
	if st, ok := overlay[string(req.key)]; ok {
		return st, nil
	}
	st, err := latest(read, req.key)
	if err != nil {
		return keyState{}, fmt.Errorf("%s %q: read current state: %w", req.op, req.key, err)
	}
	return st, nil
}

// commitWaiter waits for the commits of a batch queued on Badger and
// gathers their errors.
type commitWaiter struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// commit queues txn's commit at rev. CommitAt with a callback returns once
// the transaction is queued on Badger's write channel; queuing happens in
// call order, which is revision order. The callback runs when it is in the
// memtable.
func (c *commitWaiter) commit(txn *bdb.Txn, rev int64) {
	c.wg.Add(1)
	if err := txn.CommitAt(uint64(rev), func(err error) {
		if err != nil {
			c.fail(rev, err)
		}
		c.wg.Done()
	}); err != nil {
		// Not reached with a callback (Badger reports through it), but
		// do not wait for a callback that would never come.
		c.fail(rev, err)
		c.wg.Done()
	}
}

func (c *commitWaiter) fail(rev int64, err error) {
	c.mu.Lock()
	c.err = errors.Join(c.err, fmt.Errorf("commit revision %d: %w", rev, err))
	c.mu.Unlock()
}

// wait waits for every queued commit and returns their errors.
func (c *commitWaiter) wait() error {
	c.wg.Wait()
	return c.err
}

// latest reads the current state of key in read.
func latest(read *bdb.Txn, key []byte) (keyState, error) {
	item, err := read.Get(dataKey(key))
	if errors.Is(err, bdb.ErrKeyNotFound) {
		return keyState{}, nil
	}
	if err != nil {
		return keyState{}, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return keyState{}, err
	}
	h, err := decodeData(v)
	if err != nil {
		return keyState{}, err
	}
	value, err := readParts(read, key, item.Version(), h)
	if err != nil {
		return keyState{}, err
	}
	return keyState{exists: true, modRev: int64(item.Version()), createRev: h.createRev, parts: h.parts, value: value}, nil
}

// check applies the write's precondition to the key's latest state.
func check(req *writeReq, st keyState) error {
	switch {
	case req.op == opCreate && st.exists:
		return fmt.Errorf("create %q: %w", req.key, storage.ErrAlreadyExists)
	case req.op == opCreate:
		return nil
	case !st.exists:
		return fmt.Errorf("%s %q: %w", req.op, req.key, storage.ErrNotFound)
	case req.expected != 0 && req.expected != st.modRev:
		return &storage.ConflictError{Key: req.key, Expected: req.expected, Actual: st.modRev}
	}
	return nil
}

// prepare builds the Badger transaction of an accepted write at revision rev:
// the data version (or delete marker), its chunks, delete markers for chunks
// the new value no longer has, and the change-log entry. It returns the
// key's new state and the write's event.
func (s *Store) prepare(req *writeReq, st keyState, rev int64) (*bdb.Txn, keyState, storage.Event, error) {
	txn := s.db.NewTransactionAt(uint64(rev-1), true)
	dk := dataKey(req.key)
	var (
		ns  keyState
		ev  storage.Event
		err error
	)
	le := logEntry{key: req.key}
	if req.op == opDelete {
		le.op, le.prevRev, le.createRev = logDelete, st.modRev, st.createRev
		err = txn.Delete(dk)
		for i := 1; i < st.parts && err == nil; i++ {
			err = txn.Delete(chunkKey(req.key, i))
		}
		ev = storage.Event{Type: storage.EventDelete, Key: req.key, PrevValue: st.value,
			Revision: rev, PrevRevision: st.modRev, CreateRevision: st.createRev}
	} else {
		createRev := rev
		if st.exists {
			createRev = st.createRev
		}
		le.op, le.prevRev, le.createRev = logPut, st.modRev, createRev
		value := req.buf[dataHeaderRoom:]
		data, chunks := encodeData(createRev, req.buf)
		err = txn.SetEntry(bdb.NewEntry(dk, data))
		for i, c := range chunks {
			if err == nil {
				err = txn.SetEntry(bdb.NewEntry(chunkKey(req.key, i+1), c))
			}
		}
		for i := len(chunks) + 1; i < st.parts && err == nil; i++ {
			err = txn.Delete(chunkKey(req.key, i))
		}
		ns = keyState{exists: true, modRev: rev, createRev: createRev, parts: len(chunks) + 1, value: value}
		ev = storage.Event{Type: storage.EventPut, Key: req.key, Value: value,
			Revision: rev, PrevRevision: st.modRev, CreateRevision: createRev}
		if st.exists {
			ev.PrevValue = st.value
		}
	}
	if err == nil {
		err = txn.SetEntry(bdb.NewEntry(logKey(rev), encodeLog(le)))
	}
	if err != nil {
		txn.Discard()
		return nil, keyState{}, storage.Event{}, err
	}
	return txn, ns, ev, nil
}
