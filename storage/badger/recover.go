package badger

import (
	"errors"
	"fmt"
	"syscall"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// Disk faults on the write path.
//
// Before each batch the disk guard (diskguard.go) may refuse it: the batch's
// writes fail with storage.ErrNoSpace or storage.ErrUnavailable, nothing
// reaches Badger, and the next batch checks again, so writes resume as soon
// as the disk allows. That is the usual path for a full disk or a read-only
// or removed directory.
//
// A fault the guard did not see fails the batch inside Badger (its commit) or
// in the fsync. The batch's writes may or may not be durable, and after a
// failed fsync the page cache can no longer be trusted to hold what reaches
// the disk (Linux may drop dirty pages after a write-back error and report
// the error only once). So the store refuses writes, and every
// RecoveryInterval probes the directory (guard checks and a synced test
// write); once a probe succeeds it reopens Badger: closing it writes the
// memtables, which hold every committed write, anew into synced tables, and
// the write-ahead logs whose fsync failed are deleted. The current revision
// is then what is durable: every acknowledged write (their fsyncs
// succeeded), plus a prefix of the failed batch, whose events the watchers
// then receive. Writes resume without a restart.

// refusal returns why batch may not be written now, or nil.
func (s *Store) refusal(batch []*writeReq) error {
	if errp := s.failErr.Load(); errp != nil {
		return *errp
	}
	if s.guard == nil {
		return nil
	}
	var need int64
	for _, r := range batch {
		need += int64(len(r.key) + len(r.buf))
	}
	err := s.guard.check(need)
	s.noteGuard(err)
	return err
}

// noteGuard logs the guard's changes of mind (not every refused batch).
func (s *Store) noteGuard(err error) {
	prev := s.guardErr
	s.guardErr = err
	switch {
	case err != nil && (prev == nil || errors.Is(err, storage.ErrNoSpace) != errors.Is(prev, storage.ErrNoSpace)):
		s.log.Error("storage refuses writes; reads continue", "error", err)
	case err == nil && prev != nil:
		s.log.Info("storage accepts writes again", "dir", s.opts.Dir, "revision", s.current.Load())
	}
}

// syncBatch makes the batch durable (the test hook first).
func (s *Store) syncBatch() error {
	if h := s.opts.hooks; h != nil && h.sync != nil {
		if err := h.sync(); err != nil {
			return err
		}
	}
	if s.sync == nil {
		return nil
	}
	return s.sync.sync()
}

// failBatch answers the accepted writes of a batch (revisions first to last)
// whose commit or fsync failed, and makes the store refuse writes until it
// recovers. After a failed Badger commit, reads stop too: Badger may have
// been left without a memtable (a failed write-ahead-log creation), and
// reading it then would crash.
func (s *Store) failBatch(acc []accepted, cerr error, first, last int64, badgerFailed bool) {
	kind := storage.ErrUnavailable
	if errors.Is(cerr, syscall.ENOSPC) || errors.Is(cerr, syscall.EDQUOT) {
		kind = storage.ErrNoSpace
	}
	refused := fmt.Errorf("%w: a write to %s failed, writes are refused until the store recovers: %w", kind, s.where(), cerr)
	if s.opts.InMemory {
		// Reopening would empty it: refuse writes for good instead.
		refused = fmt.Errorf("%w: a write to %s failed, writes are refused until the process restarts: %w", kind, s.where(), cerr)
		s.failPermanent = true
	}
	s.failErr.Store(&refused)
	if badgerFailed {
		s.histMu.Lock()
		s.dbErr = fmt.Errorf("%w: reads wait for the store to reopen after a failed write: %w", storage.ErrUnavailable, cerr)
		s.histMu.Unlock()
	}
	s.log.Error("storage write failed; writes are refused until the store recovers",
		"error", cerr, "revisions", fmt.Sprintf("%d-%d", first, last), "readsStopped", badgerFailed)
	answer := fmt.Errorf("%w: the write failed and may or may not have been applied (revisions %d-%d): %w",
		kind, first, last, cerr)
	for _, a := range acc {
		a.req.done <- writeResult{err: answer}
	}
}

// tryRecover probes the disk and, if it works, reopens Badger and resumes
// writes. It runs in the sequencer.
func (s *Store) tryRecover() {
	if s.guard != nil {
		if err := s.guard.probe(); err != nil {
			s.log.Debug("storage still cannot write", "error", err)
			return
		}
	}
	pub := s.current.Load()
	cur, err := s.reopen()
	if err != nil {
		s.log.Warn("reopening the storage failed; retrying", "error", err, "every", s.opts.RecoveryInterval)
		return
	}
	if err := s.publishRecovered(pub, cur); err != nil {
		perm := fmt.Errorf("%w: after a failed write the store at %s is inconsistent, restore it from a backup: %w",
			storage.ErrUnavailable, s.where(), err)
		s.failErr.Store(&perm)
		s.failPermanent = true
		s.log.Error("storage inconsistent after recovery; writes stay refused", "error", err)
		return
	}
	s.failErr.Store(nil)
	s.guardErr = nil
	s.log.Info("storage recovered; writes resume", "dir", s.opts.Dir, "revision", cur,
		"failedBatchWritesApplied", cur-pub)
}

// reopen closes Badger and opens it again, and returns the revision of what
// it holds. Reads and compactions wait meanwhile.
func (s *Store) reopen() (int64, error) {
	s.backups.stopAll() // they read the Badger about to be closed
	defer s.backups.resume()
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.histMu.Lock()
	defer s.histMu.Unlock()
	bo := badgerOptions(s.opts)
	wasOpen := s.db != nil
	if wasOpen {
		err := s.db.Close()
		s.db, s.dbErr = nil, fmt.Errorf("%w: the store is reopening after a failed write", storage.ErrUnavailable)
		if s.sync != nil {
			err = errors.Join(err, s.sync.close())
			s.sync = nil
		}
		if err != nil {
			return 0, fmt.Errorf("close Badger: %w", err)
		}
	}
	if !s.opts.InMemory {
		// As at Open: an empty log left by a failed file creation is
		// removed, a damaged one refused.
		if err := removeEmptyLogs(s.opts.Dir, s.log); err != nil {
			return 0, err
		}
		if err := checkWALs(s.opts.Dir); err != nil {
			return 0, err
		}
	}
	if !wasOpen && !s.opts.InMemory {
		// An earlier close failed and may have left memtables only in
		// write-ahead logs whose last fsync failed: open and close once
		// more, so that Badger writes them into synced tables before new
		// writes follow them.
		db, err := openBadger(bo)
		if err != nil {
			return 0, fmt.Errorf("open Badger: %w", err)
		}
		if err := db.Close(); err != nil {
			return 0, fmt.Errorf("close Badger: %w", err)
		}
	}
	db, err := openBadger(bo)
	if err != nil {
		return 0, fmt.Errorf("open Badger: %w", err)
	}
	if !s.opts.InMemory && !s.opts.NoSync {
		if s.sync, err = newSyncer(s.opts.Dir, s.opts.hooks); err != nil {
			return 0, errors.Join(err, db.Close())
		}
	}
	db.SetDiscardTs(uint64(s.backups.discardTs(s.compacted.Load()))) // as compact does
	s.db, s.dbErr = db, nil
	return int64(db.MaxVersion()), nil
}

// publishRecovered checks that the reopened store holds every published
// revision (up to pub) and a contiguous change log up to cur, and sends the
// events of pub+1..cur (writes of the failed batch that were applied after
// all) to the watchers.
func (s *Store) publishRecovered(pub, cur int64) error {
	if cur < pub {
		return fmt.Errorf("the reopened store is at revision %d, below the %d already acknowledged", cur, pub)
	}
	if cur == pub {
		return nil
	}
	if err := s.checkLog(pub+1, cur); err != nil {
		return err
	}
	var events []storage.Event
	for from := pub + 1; from <= cur; {
		evs, end, err := s.readLog([]byte{}, from, cur, catchUpMaxBytes)
		if err != nil {
			return err
		}
		events = append(events, evs...)
		from = end + 1
	}
	s.hub.publish(s, cur, events)
	return nil
}

// checkLog checks that the change log has exactly one entry for each
// revision from..to.
func (s *Store) checkLog(from, to int64) error {
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	txn := s.db.NewTransactionAt(uint64(to), false)
	defer txn.Discard()
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}, PrefetchValues: false})
	defer it.Close()
	want := from
	for it.Seek(logKey(from)); it.Valid() && want <= to; it.Next() {
		rev, err := parseLogKey(it.Item().Key())
		if err != nil {
			return err
		}
		if rev != want {
			return fmt.Errorf("the change log lacks revision %d (next is %d)", want, rev)
		}
		want++
	}
	if want <= to {
		return fmt.Errorf("the change log lacks revisions %d-%d", want, to)
	}
	return nil
}

// where names the store in messages.
func (s *Store) where() string {
	if s.opts.InMemory {
		return "the in-memory store"
	}
	return s.opts.Dir
}
