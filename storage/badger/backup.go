package badger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// Online backup.
//
// A backup reads one Badger snapshot at the current revision R while writes
// go on: what it writes is every Badger version of the data and chunk keys
// that defines the store at some revision from the compacted revision C to
// R, i.e. each key's newest version at or below C (unless a delete) and all
// its versions above C. That is enough to restore the store as it was at
// any revision in [C, R] (Restore's ToRevision). An incremental backup since
// S holds the versions written after S, found through the change log.
//
// Badger's managed mode does not protect the versions a long read needs from
// its compactions; the store decides what they may drop with the discard
// timestamp. A backup pins the compacted revision it started at: compaction
// still moves the compacted revision (reads below it fail as usual) but the
// discard timestamp stays at the lowest pin until the backup ends.

// metaIDKey holds the store's identity, random bytes written at the format
// revision the first time a backup asks for it. Backups carry it so that a
// restore refuses an incremental backup of another store.
var metaIDKey = []byte{nsMeta, 'i', 'd'}

// backupState is the store's bookkeeping for running backups.
type backupState struct {
	mu   sync.Mutex
	pins map[int64]int // pinned revision -> running backups
	id   string        // the store's identity, once read
	// The running backups' cancel functions, and whether new ones are
	// refused: a recovery that reopens Badger (recover.go) cancels them
	// and waits for them to end before it closes the Badger they read.
	cancels map[*int]context.CancelCauseFunc
	blocked bool
	active  sync.WaitGroup
}

// errBackupReopen ends the backups running when the store reopens Badger.
var errBackupReopen = fmt.Errorf("%w: the store reopened Badger after a failed write while the backup ran; take it again", storage.ErrUnavailable)

// start registers a running backup, unless a recovery is reopening Badger.
func (b *backupState) start(cancel context.CancelCauseFunc) (*int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked {
		return nil, errBackupReopen
	}
	if b.cancels == nil {
		b.cancels = make(map[*int]context.CancelCauseFunc)
	}
	token := new(int)
	b.cancels[token] = cancel
	b.active.Add(1)
	return token, nil
}

// done unregisters a backup start registered.
func (b *backupState) done(token *int) {
	b.mu.Lock()
	delete(b.cancels, token)
	b.mu.Unlock()
	b.active.Done()
}

// stopAll refuses new backups, ends the running ones and waits for them;
// resume accepts backups again.
func (b *backupState) stopAll() {
	b.mu.Lock()
	b.blocked = true
	for _, cancel := range b.cancels {
		cancel(errBackupReopen)
	}
	b.mu.Unlock()
	b.active.Wait()
}

func (b *backupState) resume() {
	b.mu.Lock()
	b.blocked = false
	b.mu.Unlock()
}

// discardTs returns the discard timestamp for compacted revision rev: rev,
// or the lowest pinned revision if lower. Callers hold histMu exclusively.
func (b *backupState) discardTs(rev int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.pins {
		rev = min(rev, p)
	}
	return rev
}

// Backup writes a backup of the store to w; see storage.Backuper. A full
// backup (opts.Since 0) can restore any revision from its CompactedRevision
// to its Revision; an incremental one (Since an earlier backup's Revision)
// continues that backup. Since must still be retained: an incremental
// backup needs the change log from Since on, so take them more often than
// the retention window (Options.RetentionTime).
func (s *Store) Backup(ctx context.Context, w io.Writer, opts storage.BackupOptions) (storage.BackupInfo, error) {
	if err := ctx.Err(); err != nil {
		return storage.BackupInfo{}, err
	}
	if opts.Since < 0 {
		return storage.BackupInfo{}, fmt.Errorf("backup: negative since revision %d: %w", opts.Since, storage.ErrInvalid)
	}
	if !s.enter() {
		return storage.BackupInfo{}, storage.ErrClosed
	}
	defer s.leave()
	// The backup reads the Badger it pinned from start to end. A recovery
	// after a failed write (recover.go), which closes and replaces s.db,
	// first cancels the running backups and waits for them: they fail with
	// ErrUnavailable rather than read a closed Badger.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	token, err := s.backups.start(cancel)
	if err != nil {
		return storage.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	defer s.backups.done(token)
	hdr, db, err := s.pin(opts.Since)
	if err != nil {
		return storage.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	defer s.unpin(hdr.Compacted)
	id, err := s.storeID()
	if err != nil {
		return storage.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	hdr.Format, hdr.StoreFormat, hdr.StoreID = backupFormat, string(formatMarker), id

	bw, err := newBackupWriter(w, hdr)
	if err == nil {
		if hdr.Since == 0 {
			err = s.writeFull(ctx, db, bw, hdr)
		} else {
			err = s.writeSince(ctx, db, bw, hdr)
		}
	}
	if err != nil && errors.Is(context.Cause(ctx), errBackupReopen) {
		err = errBackupReopen
	}
	var n int64
	if err == nil {
		n, err = bw.finish()
	}
	if err != nil {
		return storage.BackupInfo{}, fmt.Errorf("backup at revision %d: %w", hdr.Revision, err)
	}
	s.log.Info("backup written", "revision", hdr.Revision, "compacted", hdr.Compacted,
		"since", hdr.Since, "records", bw.records, "bytes", n)
	return hdr.info(n), nil
}

// pin fixes the backup's revision (the current one) and pins the compacted
// revision until unpin. An incremental backup's since must be retained. It
// returns the Badger the backup reads; none while Badger is unusable after
// a failed write.
func (s *Store) pin(since int64) (backupHeader, *bdb.DB, error) {
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	h := backupHeader{Revision: s.current.Load(), Compacted: s.compacted.Load(), Since: since}
	if s.dbErr != nil {
		return h, nil, s.dbErr
	}
	switch {
	case since > h.Revision:
		return h, nil, &storage.FutureRevisionError{Requested: since, Current: h.Revision}
	case since > 0 && since < h.Compacted:
		return h, nil, fmt.Errorf("incremental backup since revision %d: the history from there is compacted; take a full backup: %w",
			since, &storage.CompactedError{Requested: since, Oldest: h.Compacted})
	}
	s.backups.mu.Lock()
	if s.backups.pins == nil {
		s.backups.pins = make(map[int64]int)
	}
	s.backups.pins[h.Compacted]++
	s.backups.mu.Unlock()
	return h, s.db, nil
}

// unpin releases a pin and lets Badger discard up to the compacted revision
// (or the next pin).
func (s *Store) unpin(rev int64) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	s.backups.mu.Lock()
	if s.backups.pins[rev]--; s.backups.pins[rev] <= 0 {
		delete(s.backups.pins, rev)
	}
	s.backups.mu.Unlock()
	if s.db != nil { // nil while a failed reopening is retried
		s.db.SetDiscardTs(uint64(s.backups.discardTs(s.compacted.Load())))
	}
}

// storeID returns the store's identity, making one the first time. It
// holds histMu shared: s.db and s.sync change only under its exclusive side
// (recover.go).
func (s *Store) storeID() (string, error) {
	s.backups.mu.Lock()
	defer s.backups.mu.Unlock()
	if s.backups.id != "" {
		return s.backups.id, nil
	}
	s.histMu.RLock()
	defer s.histMu.RUnlock()
	if s.dbErr != nil {
		return "", s.dbErr
	}
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	item, err := txn.Get(metaIDKey)
	if err == nil {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return "", fmt.Errorf("read store identity: %w", err)
		}
		s.backups.id = hex.EncodeToString(v)
		return s.backups.id, nil
	}
	if !errors.Is(err, bdb.ErrKeyNotFound) {
		return "", fmt.Errorf("read store identity: %w", err)
	}
	id, err := writeStoreID(s.db)
	if err == nil && s.sync != nil {
		err = s.sync.sync()
	}
	if err != nil {
		return "", err
	}
	s.backups.id = id
	return id, nil
}

// writeStoreID writes a new random identity at the format revision.
func writeStoreID(db *bdb.DB) (string, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	txn := db.NewTransactionAt(formatRevision, true)
	if err := txn.Set(metaIDKey, id); err != nil {
		txn.Discard()
		return "", fmt.Errorf("write store identity: %w", err)
	}
	if err := txn.CommitAt(formatRevision, nil); err != nil {
		return "", fmt.Errorf("write store identity: %w", err)
	}
	return hex.EncodeToString(id), nil
}

// writeFull writes, for every data and chunk key, its versions above the
// compacted revision and its newest version at or below it.
func (s *Store) writeFull(ctx context.Context, db *bdb.DB, bw *backupWriter, h backupHeader) error {
	txn := db.NewTransactionAt(uint64(h.Revision), false)
	defer txn.Discard()
	for _, ns := range []byte{nsData, nsChunk} {
		it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{ns}, AllVersions: true})
		err := s.writeVersions(ctx, it, bw, uint64(h.Compacted))
		it.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) writeVersions(ctx context.Context, it *bdb.Iterator, bw *backupWriter, compacted uint64) error {
	var key []byte
	below := false // key's newest version at or below compacted is done
	for it.Rewind(); it.Valid(); it.Next() {
		if err := s.checkBackup(ctx, bw.records); err != nil {
			return err
		}
		item := it.Item()
		if k := item.Key(); string(k) != string(key) {
			key, below = append(key[:0], k...), false
		} else if below {
			continue
		}
		v, del := item.Version(), item.IsDeletedOrExpired()
		if v <= compacted {
			below = true
			if del {
				continue
			}
		}
		if err := writeItem(bw, item, v, del); err != nil {
			return err
		}
	}
	return nil
}

func writeItem(bw *backupWriter, item *bdb.Item, v uint64, del bool) error {
	if del {
		return bw.put(item.Key(), v, true, nil)
	}
	return item.Value(func(val []byte) error { return bw.put(item.Key(), v, false, val) })
}

// checkBackup ends a backup whose context ended or whose store is closing,
// looking every 1024 records.
func (s *Store) checkBackup(ctx context.Context, records int64) error {
	if records%1024 != 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosing() {
		return storage.ErrClosed
	}
	return nil
}

// writeSince writes the versions written after h.Since, revision by
// revision from the change log: each write's data version or delete marker,
// and its chunk versions and chunk delete markers (see prepare).
func (s *Store) writeSince(ctx context.Context, db *bdb.DB, bw *backupWriter, h backupHeader) error {
	txn := db.NewTransactionAt(uint64(h.Revision), false)
	defer txn.Discard()
	// All versions: compaction may trim the log while the backup runs (its
	// delete markers are then visible here), but the pinned discard
	// timestamp keeps the entries themselves.
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}, AllVersions: true})
	defer it.Close()
	for it.Seek(logKey(h.Since + 1)); it.Valid(); it.Next() {
		if err := s.checkBackup(ctx, bw.records); err != nil {
			return err
		}
		item := it.Item()
		if item.IsDeletedOrExpired() {
			continue
		}
		rev, err := parseLogKey(item.Key())
		if err != nil {
			return err
		}
		if item.Version() != uint64(rev) {
			return fmt.Errorf("change-log entry %d has version %d", rev, item.Version())
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("read change-log entry %d: %w", rev, err)
		}
		e, err := decodeLog(v)
		if err != nil {
			return fmt.Errorf("change-log entry %d: %w", rev, err)
		}
		if err := writeRevision(db, bw, rev, e); err != nil {
			return fmt.Errorf("revision %d: %w", rev, err)
		}
	}
	return nil
}

// writeRevision writes the Badger versions of the write at rev.
func writeRevision(db *bdb.DB, bw *backupWriter, rev int64, e logEntry) error {
	at := db.NewTransactionAt(uint64(rev), false)
	defer at.Discard()
	parts := 1 // chunks 1..parts-1 are written at rev
	dk := dataKey(e.key)
	if e.op == logDelete {
		if err := bw.put(dk, uint64(rev), true, nil); err != nil {
			return err
		}
	} else {
		item, err := versionAt(at, dk, rev)
		if err != nil {
			return err
		}
		err = item.Value(func(v []byte) error {
			d, err := decodeData(v)
			if err != nil {
				return err
			}
			parts = d.parts
			return bw.put(dk, uint64(rev), false, v)
		})
		if err != nil {
			return err
		}
	}
	prevParts := 0 // chunks the previous value had, deleted at rev beyond parts
	if e.prevRev > 0 {
		prev := db.NewTransactionAt(uint64(e.prevRev), false)
		defer prev.Discard()
		item, err := versionAt(prev, dk, e.prevRev)
		if err != nil {
			return fmt.Errorf("previous version: %w", err)
		}
		if err := item.Value(func(v []byte) error {
			d, err := decodeData(v)
			prevParts = d.parts
			return err
		}); err != nil {
			return fmt.Errorf("previous version: %w", err)
		}
	}
	for i := 1; i < max(parts, prevParts); i++ {
		ck := chunkKey(e.key, i)
		if i >= parts {
			if err := bw.put(ck, uint64(rev), true, nil); err != nil {
				return err
			}
			continue
		}
		item, err := versionAt(at, ck, rev)
		if err != nil {
			return err
		}
		if err := writeItem(bw, item, uint64(rev), false); err != nil {
			return err
		}
	}
	return nil
}

// versionAt returns key's version rev from txn, read at rev.
func versionAt(txn *bdb.Txn, key []byte, rev int64) (*bdb.Item, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	if item.Version() != uint64(rev) {
		return nil, fmt.Errorf("%q has version %d, the change log says %d", key, item.Version(), rev)
	}
	return item, nil
}
