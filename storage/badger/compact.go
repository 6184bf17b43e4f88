package badger

import (
	"context"
	"errors"
	"fmt"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// Compact discards history older than revision: reads below it fail with a
// *storage.CompactedError from now on. Compacting at or below the compacted
// revision (or at 0) does nothing; a revision above the current one fails
// with a *storage.FutureRevisionError.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if revision < 0 {
		return fmt.Errorf("compact: negative revision %d: %w", revision, storage.ErrInvalid)
	}
	if !s.enter() {
		return storage.ErrClosed
	}
	defer s.leave()
	return s.compact(ctx, revision)
}

// compact raises the compacted revision to rev. Callers are inside an op.
//
// Order: the new compacted revision is first made durable (meta key written
// at Badger version rev, synced), then published (readers are checked against
// it, Badger may drop versions at or below it), then the change log below it
// is trimmed. A crash in between leaves at worst untrimmed log entries, which
// the next Open trims.
func (s *Store) compact(ctx context.Context, rev int64) error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if cur := s.current.Load(); rev > cur {
		return &storage.FutureRevisionError{Requested: rev, Current: cur}
	}
	if rev <= s.compacted.Load() {
		return nil
	}
	if errp := s.failErr.Load(); errp != nil {
		// Not while writes are refused after a failed write: Badger may be
		// unable to write until it is reopened (which holds compactMu).
		return *errp
	}
	txn := s.db.NewTransactionAt(uint64(rev), true)
	if err := txn.Set(metaCompactedKey, encodeRev(rev)); err != nil {
		txn.Discard()
		return fmt.Errorf("compact to %d: %w", rev, err)
	}
	if err := txn.CommitAt(uint64(rev), nil); err != nil {
		return fmt.Errorf("compact to %d: %w", rev, err)
	}
	if s.sync != nil {
		if err := s.sync.sync(); err != nil {
			return fmt.Errorf("compact to %d: %w", rev, err)
		}
	}

	s.histMu.Lock()
	s.compacted.Store(rev)
	s.db.SetDiscardTs(uint64(s.backups.discardTs(rev))) // a running backup may hold it lower
	s.histMu.Unlock()
	s.log.Debug("storage compacted", "revision", rev)

	return s.trimLog(ctx, rev)
}

// trimLog deletes the change-log entries below rev. The delete markers are
// written at Badger version rev (revisions below rev are never read any
// more); Badger drops the entries and their markers in its compactions since
// rev is at or below the discard timestamp. Callers hold compactMu.
func (s *Store) trimLog(ctx context.Context, rev int64) error {
	wb := s.db.NewWriteBatchAt(uint64(rev))
	defer wb.Cancel()
	txn := s.db.NewTransactionAt(uint64(rev), false)
	defer txn.Discard()
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		r, err := parseLogKey(it.Item().Key())
		if err != nil {
			return err
		}
		if r >= rev {
			break
		}
		if n%1024 == 0 && (ctx.Err() != nil || s.isClosing()) {
			break // the next compaction or Open finishes the job
		}
		if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
			return fmt.Errorf("trim change log below %d: %w", rev, err)
		}
		n++
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("trim change log below %d: %w", rev, err)
	}
	if n > 0 {
		s.log.Debug("change log trimmed", "below", rev, "entries", n)
	}
	return nil
}

// runCompactor applies the retention limits every CompactionInterval. The
// time limit uses samples (time, current revision) taken at each tick: the
// newest sample at least RetentionTime old is a revision all of whose history
// is older than RetentionTime. Samples are not persisted, so after a restart
// history is kept for RetentionTime from the restart at least.
func (s *Store) runCompactor() {
	defer close(s.bgDone)
	if s.enter() {
		// Finish trimming the log after an interrupted compaction.
		s.compactMu.Lock()
		err := s.trimLog(context.Background(), s.compacted.Load())
		s.compactMu.Unlock()
		s.leave()
		if err != nil {
			s.log.Warn("trimming the change log failed", "error", err)
		}
	}
	if s.opts.RetentionTime < 0 && s.opts.RetentionRevisions < 0 {
		<-s.closing
		return
	}
	type sample struct {
		at  time.Time
		rev int64
	}
	samples := []sample{{time.Now(), s.current.Load()}}
	t := time.NewTicker(s.opts.CompactionInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		now, cur := time.Now(), s.current.Load()
		var target int64
		if s.opts.RetentionRevisions >= 0 {
			target = cur - s.opts.RetentionRevisions
		}
		if s.opts.RetentionTime >= 0 {
			samples = append(samples, sample{now, cur})
			cutoff := now.Add(-s.opts.RetentionTime)
			i := -1
			for j := range samples {
				if samples[j].at.After(cutoff) {
					break
				}
				i = j
			}
			if i >= 0 {
				target = max(target, samples[i].rev)
				samples = samples[i:]
			}
		}
		if target <= s.compacted.Load() || !s.enter() {
			continue
		}
		err := s.compact(context.Background(), target)
		s.leave()
		if err != nil && !errors.Is(err, storage.ErrClosed) {
			s.log.Warn("automatic compaction failed", "target", target, "error", err)
		}
	}
}
