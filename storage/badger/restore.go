package badger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	bdb "github.com/dgraph-io/badger/v4"
)

// DefaultRestoreBump is how far above the last backup's revision a restored
// store starts (RestoreOptions.BumpRevision), as etcd suggests for
// etcdutl snapshot restore --bump-revision.
const DefaultRestoreBump = 1_000_000_000

// RestoreOptions configures Restore.
type RestoreOptions struct {
	// ToRevision is the revision to restore: 0 for the last backup's
	// revision, or any revision from the full backup's CompactedRevision to
	// the last backup's Revision (point-in-time restore).
	ToRevision int64

	// BumpRevision sets the restored store's revision: the last backup's
	// revision plus this. It must exceed the number of writes the backed-up
	// store made after its last backup, so that no resourceVersion a client
	// saw is handed out again. Default DefaultRestoreBump.
	BumpRevision int64

	// Logger receives a record of the restore. Default: discard.
	Logger *slog.Logger
}

// RestoreInfo describes a restore.
type RestoreInfo struct {
	// Revision is the revision whose state was restored.
	Revision int64
	// StoreRevision is the restored store's current and compacted revision:
	// new writes get revisions above it, and every earlier revision answers
	// a *storage.CompactedError (the API's 410 Gone).
	StoreRevision int64
	// Backups and Versions count the backups read and the versions written.
	Backups  int
	Versions int64
}

// Restore creates a store in dir, which must not exist or be empty, from a
// full backup followed by the incremental backups that continue it, in
// order, as the state at opts.ToRevision. Every backup is read to its end
// and its checksum verified; a truncated, corrupt, foreign or out-of-order
// backup fails with an error wrapping ErrBadBackup, and a failed restore
// removes what it wrote to dir.
//
// Clients cannot be fooled by the restored store, as with etcd's restore
// --bump-revision --mark-compacted: its revision starts BumpRevision above
// the last backup's, and every revision up to there is compacted, so a
// watch, a continue token or a read at any resourceVersion handed out before
// the restore gets 410 Gone and the client lists again. Objects keep their
// resourceVersions and creation revisions.
func Restore(ctx context.Context, dir string, opts RestoreOptions, backups ...io.Reader) (info RestoreInfo, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BumpRevision == 0 {
		opts.BumpRevision = DefaultRestoreBump
	}
	if opts.BumpRevision < 0 || opts.ToRevision < 0 {
		return info, fmt.Errorf("badger: restore: negative BumpRevision %d or ToRevision %d", opts.BumpRevision, opts.ToRevision)
	}
	if len(backups) == 0 {
		return info, errors.New("badger: restore: no backup given")
	}
	chain, err := openChain(backups)
	if err != nil {
		return info, fmt.Errorf("badger: restore: %w", err)
	}
	full, last := chain[0].hdr, chain[len(chain)-1].hdr
	to := opts.ToRevision
	switch {
	case to == 0:
		to = last.Revision
	case to < full.Compacted:
		return info, fmt.Errorf("badger: restore: revision %d is older than the backups' history, which starts at %d", to, full.Compacted)
	case to > last.Revision:
		return info, fmt.Errorf("badger: restore: revision %d is newer than the last backup's revision %d", to, last.Revision)
	}
	bumped := last.Revision + opts.BumpRevision
	if bumped > maxRevision {
		return info, fmt.Errorf("badger: restore: revision %d plus BumpRevision %d is too large", last.Revision, opts.BumpRevision)
	}
	cleanup, err := prepareRestoreDir(dir)
	if err != nil {
		return info, fmt.Errorf("badger: restore: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup())
		}
	}()
	o, err := Options{Dir: dir}.withDefaults()
	if err != nil {
		return info, err
	}
	db, err := openBadger(badgerOptions(o))
	if err != nil {
		return info, fmt.Errorf("badger: restore into %s: %w", dir, err)
	}
	n, err := restoreInto(ctx, db, chain, to, bumped)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return info, fmt.Errorf("badger: restore into %s: %w", dir, err)
	}
	info = RestoreInfo{Revision: to, StoreRevision: bumped, Backups: len(chain), Versions: n}
	opts.Logger.Info("store restored", "dir", dir, "revision", to, "storeRevision", bumped,
		"backups", len(chain), "versions", n)
	return info, nil
}

// openChain reads the backups' headers and checks that they form one chain:
// a full backup, then incremental backups of the same store, each since the
// revision of the one before.
func openChain(backups []io.Reader) ([]*backupReader, error) {
	chain := make([]*backupReader, len(backups))
	for i, r := range backups {
		name := fmt.Sprintf("backup %d", i+1)
		if n, ok := r.(interface{ Name() string }); ok {
			name += " (" + n.Name() + ")"
		}
		b, err := openBackup(r, name)
		if err != nil {
			return nil, err
		}
		chain[i] = b
		h := b.hdr
		if i == 0 {
			if h.Since != 0 {
				return nil, fmt.Errorf("%s is incremental (since revision %d): a restore starts from a full backup: %w", name, h.Since, ErrBadBackup)
			}
			continue
		}
		prev := chain[i-1].hdr
		switch {
		case h.Since == 0:
			return nil, fmt.Errorf("%s is a full backup: give one full backup, then the incremental ones that follow it: %w", name, ErrBadBackup)
		case h.StoreID != prev.StoreID:
			return nil, fmt.Errorf("%s is a backup of another store (%s, not %s): %w", name, h.StoreID, prev.StoreID, ErrBadBackup)
		case h.Since > prev.Revision:
			return nil, fmt.Errorf("%s holds the changes after revision %d, but the backup before it ends at %d: the changes in between are missing: %w",
				name, h.Since, prev.Revision, ErrBadBackup)
		case h.Since < prev.Revision:
			return nil, fmt.Errorf("%s holds the changes after revision %d, but the backup before it ends at %d: give the incremental backups in the order they were taken: %w",
				name, h.Since, prev.Revision, ErrBadBackup)
		}
	}
	return chain, nil
}

// metaRestoringKey marks a restore in progress. It is the first key a
// restore writes: Open refuses a database with keys but no format marker,
// so a restore cut short by a crash never opens as a store, even before any
// data was written.
var metaRestoringKey = []byte{nsMeta, 'r', 'e', 's', 't', 'o', 'r', 'i', 'n', 'g'}

// restoreInto writes the chain into db (restoreData), then the metadata
// (restoreFinish).
func restoreInto(ctx context.Context, db *bdb.DB, chain []*backupReader, to, bumped int64) (int64, error) {
	n, err := restoreData(ctx, db, chain, to)
	if err != nil {
		return n, err
	}
	return n, restoreFinish(db, bumped)
}

// restoreData marks the restore in progress and writes the chain's versions
// up to revision to.
func restoreData(ctx context.Context, db *bdb.DB, chain []*backupReader, to int64) (int64, error) {
	if err := commitMeta(db, formatRevision, func(txn *bdb.Txn) error { return txn.Set(metaRestoringKey, nil) }); err != nil {
		return 0, err
	}
	if err := db.Sync(); err != nil {
		return 0, fmt.Errorf("sync: %w", err)
	}
	wb := db.NewManagedWriteBatch()
	defer wb.Cancel()
	var n int64
	for _, b := range chain {
		for {
			rec, ok, err := b.next()
			if err != nil {
				return n, err
			}
			if !ok {
				break
			}
			if n%1024 == 0 && ctx.Err() != nil {
				return n, ctx.Err()
			}
			if rec.version > uint64(to) {
				continue
			}
			key := append([]byte(nil), rec.key...)
			if rec.deleted {
				err = wb.DeleteAt(key, rec.version)
			} else {
				err = wb.SetEntryAt(bdb.NewEntry(key, append([]byte(nil), rec.value...)), rec.version)
			}
			if err != nil {
				return n, fmt.Errorf("write: %w", err)
			}
			n++
		}
	}
	if err := wb.Flush(); err != nil {
		return n, fmt.Errorf("write: %w", err)
	}
	return n, nil
}

// restoreFinish writes the compacted revision at bumped (which becomes the
// current revision) and clears the restore mark, syncs, and only then
// writes the store's identity (a new one) and its format marker.
func restoreFinish(db *bdb.DB, bumped int64) error {
	err := commitMeta(db, bumped, func(txn *bdb.Txn) error {
		return errors.Join(txn.Set(metaCompactedKey, encodeRev(bumped)), txn.Delete(metaRestoringKey))
	})
	if err != nil {
		return err
	}
	if err := db.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if _, err := writeStoreID(db); err != nil {
		return err
	}
	if err := commitMeta(db, formatRevision, func(txn *bdb.Txn) error { return txn.Set(metaFormatKey, formatMarker) }); err != nil {
		return err
	}
	return db.Sync()
}

// commitMeta commits the writes of fill as one transaction at rev.
func commitMeta(db *bdb.DB, rev int64, fill func(*bdb.Txn) error) error {
	txn := db.NewTransactionAt(uint64(rev), true)
	if err := fill(txn); err != nil {
		txn.Discard()
		return fmt.Errorf("write metadata: %w", err)
	}
	if err := txn.CommitAt(uint64(rev), nil); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	return nil
}

// prepareRestoreDir creates dir, or accepts an existing empty one, and
// returns what removes the restore's files on failure.
func prepareRestoreDir(dir string) (func() error, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		return func() error { return os.RemoveAll(dir) }, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", dir, err)
	case len(entries) > 0:
		names := make([]string, 0, 3)
		for _, e := range entries[:min(len(entries), 3)] {
			names = append(names, e.Name())
		}
		return nil, fmt.Errorf("%s is not empty (it holds %q): restore into a new or empty directory", dir, names)
	}
	return func() error {
		entries, err := os.ReadDir(dir)
		for _, e := range entries {
			err = errors.Join(err, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
		return err
	}, nil
}
