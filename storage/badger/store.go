// Package badger is kapi's embedded storage backend: a storage.Store on
// Badger v4 in managed mode, where a kapi revision is the Badger commit
// timestamp of the write.
//
// # Writes
//
// One sequencer goroutine (sequencer.go) takes the writes queued by callers
// in batches, checks each one's compare-and-swap condition against the latest
// state (including the earlier writes of the same batch), gives each accepted
// write the next revision and commits it as one Badger transaction at that
// timestamp: the data key's new version (or delete marker) and the change-log
// entry for the revision. When the whole batch is in Badger, one fsync makes
// it durable (sync.go), the batch becomes visible (the current revision moves
// to its last revision), its events go to the watchers, and the callers get
// their results. While a batch commits, new writes queue up and form the next
// batch, so throughput grows with concurrency (group commit).
//
// # Atomicity on crash (what Badger v4.9 guarantees, from its source)
//
// Badger writes every transaction as one request to the memtable's
// write-ahead log. When all entries of a transaction share one commit
// timestamp, Txn.commitAndSend marks each with bitTxn and appends a
// "!badger!txn" entry with bitFinTxn whose value is the timestamp. On replay
// (logFile.iterate) entries marked bitTxn are buffered and applied only when
// the matching bitFinTxn entry is read; a torn or missing tail stops the
// replay at the last complete transaction and the WAL is truncated there. So
// one transaction is all-or-nothing.
//
// That marker is only written when every entry has the same version: as soon
// as one entry carries its own version (WriteBatch.SetEntryAt,
// NewManagedWriteBatch), keepTogether is false, no bitTxn/bitFinTxn is written
// and each entry is replayed on its own, so a crash can apply part of it; and
// the replay also stops at a bitTxn entry whose timestamp differs from the
// transaction being collected. Badger therefore cannot commit several
// versions atomically. A batch in which each write has its own revision can
// not be one Badger transaction, and a managed write batch with per-entry
// versions would let a crash separate a data key from its change-log entry.
//
// kapi therefore commits one transaction per write (atomic: data version,
// chunks and change-log entry together) and submits the transactions of a
// batch in revision order. Badger's single writer goroutine appends requests
// to the WAL in submission order (the order is fixed under writeChLock), and
// replay stops at the first incomplete transaction, so after a process crash
// the surviving writes are always a prefix of the revision sequence: no write
// is half-applied and no revision is missing before the last one that
// survived. Writes of the batch being committed at the time of the crash may
// be lost, but none of them was acknowledged. (After a power loss the same
// holds for every acknowledged write; for unacknowledged ones the page cache
// may have reached the disk out of order, so only per-write atomicity holds.)
//
// # Reads and history
//
// Get and List read a Badger snapshot at the requested revision (0 = the
// current one); a list's continuation pages pass the first page's revision
// and see the same snapshot. Deletes are Badger delete markers at their
// revision, so older snapshots still see the old value. Compaction moves
// Badger's discard timestamp (old versions below it are dropped by Badger's
// LSM compactions) and trims the change log; the compacted revision is
// stored, so it survives a restart.
//
// # Watches
//
// See watch.go: a watch replays the change log from its start revision, then
// switches to live delivery from the sequencer without a gap or a duplicate.
package badger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/kapi-dev/kapi/storage"
)

// Store is a storage.Store on Badger. Create it with Open.
type Store struct {
	opts Options
	log  *slog.Logger
	db   *bdb.DB
	sync *syncer // nil in memory or with NoSync

	// current is the latest committed and visible revision. It only changes
	// under hub.mu (see hub.publish), which is what makes the watch hand-over
	// from log replay to live delivery exact.
	current atomic.Int64
	// compacted is the oldest readable revision. It only changes under
	// histMu's write lock.
	compacted atomic.Int64
	// histMu: readers of history at a given revision hold it shared while
	// they check the revision against compacted and read; compaction holds it
	// exclusively while it raises compacted and Badger's discard timestamp.
	// Badger's managed mode does not track read timestamps, so without this a
	// read could see versions Badger is discarding.
	histMu    sync.RWMutex
	compactMu sync.Mutex // serialises compactions and log trimming

	queue   chan *writeReq
	failErr atomic.Pointer[error] // set when a commit failed; writes then fail until recovered

	guard         *diskGuard // nil in memory
	guardErr      error      // the guard's last answer; sequencer only
	failPermanent bool       // recovery found the store inconsistent; sequencer only
	// dbErr, when set, is returned by reads instead of using db (nil while
	// Badger is reopened). Guarded by histMu.
	dbErr error

	// Group-commit counters: committed batches and the writes in them.
	batches, batchedWrites atomic.Int64

	hub     hub
	counts  countCache     // remaining-key counts of paged lists
	trim    *mappedTrimmer // nil when the mapped-memory bound is off (mapped.go)
	backups backupState    // pins of running backups (backup.go)

	closing chan struct{} // closed when Close starts
	seqDone chan struct{} // closed when the sequencer has stopped
	bgDone  chan struct{} // closed when the compactor has stopped

	opMu      sync.RWMutex
	closed    bool
	ops       sync.WaitGroup // in-flight operations that use db
	closeOnce sync.Once
	closeErr  error
}

var _ storage.Store = (*Store)(nil)

// Open opens (or creates) the store described by opts. Opening an existing
// directory resumes its revision counter and its compacted revision. A
// directory that holds something other than a kapi store is refused with an
// error.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	where := opts.Dir
	if opts.InMemory {
		where = "in-memory store"
	}
	fail := func(err error, cleanup ...error) (*Store, error) {
		return nil, errors.Join(append([]error{fmt.Errorf("badger: open %s: %w", where, err)}, cleanup...)...)
	}
	bo := badgerOptions(opts)
	var guard *diskGuard
	if !opts.InMemory {
		if err := checkDir(opts.Dir); err != nil {
			return fail(err)
		}
		if err := checkTables(opts.Dir, bo, opts.SkipTableVerification); err != nil {
			return fail(damaged(err))
		}
		if err := removeEmptyLogs(opts.Dir, opts.Logger); err != nil {
			return fail(err)
		}
		if err := checkWALs(opts.Dir); err != nil {
			return fail(err)
		}
		if guard, err = newDiskGuard(opts.Dir, opts.MinFreeSpace); err != nil {
			return fail(err)
		}
		fail = func(err error, cleanup ...error) (*Store, error) {
			return nil, errors.Join(append([]error{fmt.Errorf("badger: open %s: %w", where, err), guard.close()}, cleanup...)...)
		}
	}
	db, err := openBadger(bo)
	if errors.Is(err, bdb.ErrEncryptionKeyMismatch) {
		err = fmt.Errorf("KEYREGISTRY: %w", err) // Badger does not say which file
	}
	if err != nil {
		return fail(damaged(err))
	}
	s := &Store{
		opts:    opts,
		log:     opts.Logger,
		db:      db,
		queue:   make(chan *writeReq, opts.MaxBatchWrites),
		closing: make(chan struct{}),
		seqDone: make(chan struct{}),
		bgDone:  make(chan struct{}),
		hub:     hub{watchers: make(map[*watcher]struct{})},
		guard:   guard,
	}
	if !opts.InMemory && !opts.NoSync {
		if s.sync, err = newSyncer(opts.Dir, opts.hooks); err != nil {
			return fail(err, db.Close())
		}
	}
	if err := s.load(); err != nil {
		if s.sync != nil {
			return fail(err, db.Close(), s.sync.close())
		}
		return fail(err, db.Close())
	}
	go s.runSequencer()
	go s.runCompactor()
	if s.trim = newMappedTrimmer(opts); s.trim != nil {
		go s.trim.run(s.closing)
	}
	s.log.Info("storage opened", "dir", opts.Dir, "inMemory", opts.InMemory,
		"revision", s.current.Load(), "compacted", s.compacted.Load())
	if guard != nil {
		if err := guard.check(0); err != nil {
			s.log.Error("storage opened but refuses writes; reads are served", "error", err)
		}
	}
	return s, nil
}

func badgerOptions(o Options) bdb.Options {
	bo := bdb.DefaultOptions(o.Dir)
	if o.InMemory {
		bo = bo.WithDir("").WithValueDir("").WithInMemory(true)
	}
	return bo.
		WithLogger(badgerLogger{o.Logger}).
		WithSyncWrites(false). // the syncer does it, once per batch
		WithDetectConflicts(false).
		WithMetricsEnabled(false). // Badger's metrics are process-global expvars
		WithNumVersionsToKeep(1).  // below the discard timestamp only; all newer versions are kept
		WithExternalMagic(externalMagic).
		WithMemTableSize(o.MemTableSize).
		WithCompression(compression(o.Compress)).
		WithBlockCacheSize(o.BlockCacheSize).
		WithValueThreshold(1 << 20).   // every value (< chunkSize + header) stays in the LSM
		WithValueLogFileSize(1 << 20). // Badger's minimum: the value log stays empty

		// Verify each block's checksum when it is read: a corrupt block is
		// an error, not garbage. (OnTableRead would make Badger skip a
		// corrupt table at open, silently losing its data.)
		WithChecksumVerificationMode(options.OnBlockRead)
}

func compression(on bool) options.CompressionType {
	if on {
		return options.Snappy
	}
	return options.None
}

// openBadger opens Badger in managed mode. Badger asserts by panicking in a
// few places when files are corrupt; Open turns such a panic into an error.
func openBadger(bo bdb.Options) (db *bdb.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked while opening (corrupt data directory?): %v", r)
		}
	}()
	return bdb.OpenManaged(bo)
}

// checkDir creates dir if needed and refuses a non-empty directory that has
// no Badger MANIFEST: Badger would otherwise create a new database among some
// other program's files.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if _, ro, err := volumeState(dir); err == nil && ro {
		return fmt.Errorf("data directory %s is on a read-only file system; the store writes to it even to serve reads: "+
			"mount it read-write, or copy the directory to a writable place and open the copy", dir)
	}
	if err := writable(dir); err != nil {
		return fmt.Errorf("data directory %s is not writable (%w); the store writes to it even to serve reads: "+
			"give the process write permission on it", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read data directory: %w", err)
	}
	var manifest bool
	var others []string
	for _, e := range entries {
		switch e.Name() {
		case "MANIFEST":
			manifest = true
		case "LOCK":
		default:
			others = append(others, e.Name())
		}
	}
	if !manifest && len(others) > 0 {
		return fmt.Errorf("not a kapi data directory: %s has no MANIFEST but holds %q",
			dir, others[:min(len(others), 3)])
	}
	return nil
}

// load reads (or, for a new store, writes) the format marker and recovers
// the current and compacted revisions.
func (s *Store) load() error {
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	item, err := txn.Get(metaFormatKey)
	switch {
	case errors.Is(err, bdb.ErrKeyNotFound):
		if err := s.checkEmpty(txn); err != nil {
			return err
		}
		w := s.db.NewTransactionAt(formatRevision, true)
		if err := w.Set(metaFormatKey, formatMarker); err != nil {
			w.Discard()
			return fmt.Errorf("write format marker: %w", err)
		}
		if err := w.CommitAt(formatRevision, nil); err != nil {
			return fmt.Errorf("write format marker: %w", err)
		}
		if s.sync != nil {
			if err := s.sync.sync(); err != nil {
				return fmt.Errorf("write format marker: %w", err)
			}
		}
	case err != nil:
		return fmt.Errorf("read format marker: %w", err)
	default:
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("read format marker: %w", err)
		}
		if string(v) != string(formatMarker) {
			return fmt.Errorf("unsupported storage format %q (this version reads %q)", v, formatMarker)
		}
	}

	compacted := int64(formatRevision)
	item, err = txn.Get(metaCompactedKey)
	switch {
	case errors.Is(err, bdb.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("read compacted revision: %w", err)
	default:
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("read compacted revision: %w", err)
		}
		if compacted, err = decodeRev(v); err != nil {
			return fmt.Errorf("read compacted revision: %w", err)
		}
	}

	current := int64(s.db.MaxVersion())
	if current < formatRevision || current > math.MaxInt64/2 || compacted > current {
		return fmt.Errorf("inconsistent revisions: current %d, compacted %d", current, compacted)
	}
	s.current.Store(current)
	s.compacted.Store(compacted)
	s.db.SetDiscardTs(uint64(compacted))
	return nil
}

// checkEmpty refuses a Badger database that holds keys but no format marker.
func (s *Store) checkEmpty(txn *bdb.Txn) error {
	it := txn.NewIterator(bdb.IteratorOptions{AllVersions: true})
	defer it.Close()
	it.Rewind()
	if it.Valid() {
		return fmt.Errorf("not a kapi store: the database holds keys (%q...) but no kapi format marker",
			it.Item().KeyCopy(nil))
	}
	return nil
}

// Close stops the store: queued writes fail with storage.ErrClosed, in-flight
// reads finish, watches end with an EventError carrying storage.ErrClosed,
// and Badger is closed. Close is idempotent; later calls return the first
// call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	s.opMu.Lock()
	s.closed = true
	s.opMu.Unlock()
	close(s.closing)
	<-s.seqDone
	<-s.bgDone
	if s.trim != nil {
		<-s.trim.done
	}
	s.ops.Wait()
	var err error
	if s.guard != nil {
		flush := int64(-1) // room for the final flush of a full memtable
		if s.opts.MinFreeSpace >= 0 {
			flush = 2 * s.opts.MemTableSize
		}
		if gerr := s.guard.checkFree(0, flush); gerr != nil {
			// Badger's Close flushes the memtable into a new table: on a
			// full volume that write dies with SIGBUS, in a read-only or
			// removed directory Badger retries it forever. Leave Badger
			// open instead: every acknowledged write is in a synced
			// write-ahead log, replayed at the next Open, and Badger's lock
			// is released when the process exits.
			s.log.Error("storage not closed: its data directory cannot take the final flush", "error", gerr)
			return fmt.Errorf("badger: close %s: Badger left open: %w", s.opts.Dir, errors.Join(gerr, s.guard.close()))
		}
		defer s.guard.close()
	}
	if s.db != nil {
		err = s.db.Close()
	}
	if s.sync != nil {
		err = errors.Join(err, s.sync.close())
	}
	if err != nil {
		return fmt.Errorf("badger: close: %w", err)
	}
	s.log.Info("storage closed", "dir", s.opts.Dir, "revision", s.current.Load())
	return nil
}

// enter registers an operation that uses the database; it reports false when
// the store is closed. Every true must be followed by leave.
func (s *Store) enter() bool {
	s.opMu.RLock()
	defer s.opMu.RUnlock()
	if s.closed {
		return false
	}
	s.ops.Add(1)
	return true
}

func (s *Store) leave() { s.ops.Done() }

func (s *Store) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// CurrentRevision returns the revision of the latest committed write.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.isClosing() {
		return 0, storage.ErrClosed
	}
	return s.current.Load(), nil
}

// CompactedRevision returns the oldest revision that can still be read or
// watched from.
func (s *Store) CompactedRevision(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.isClosing() {
		return 0, storage.ErrClosed
	}
	return s.compacted.Load(), nil
}

// readRevision resolves a requested read revision (0 = current) and checks
// it against the retention window. Callers hold histMu shared.
func (s *Store) readRevision(rev int64) (int64, error) {
	if s.dbErr != nil {
		return 0, s.dbErr
	}
	cur := s.current.Load()
	switch {
	case rev < 0:
		return 0, fmt.Errorf("revision %d: %w", rev, storage.ErrInvalid)
	case rev == 0:
		return cur, nil
	case rev > cur:
		return 0, &storage.FutureRevisionError{Requested: rev, Current: cur}
	case rev < s.compacted.Load():
		return 0, &storage.CompactedError{Requested: rev, Oldest: s.compacted.Load()}
	}
	return rev, nil
}

func (s *Store) checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("empty key: %w", storage.ErrInvalid)
	case len(key) > s.opts.MaxKeySize:
		return fmt.Errorf("key of %d bytes exceeds the limit of %d: %w", len(key), s.opts.MaxKeySize, storage.ErrKeyTooLong)
	}
	return nil
}
