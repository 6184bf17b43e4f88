package storage

import (
	"context"
	"io"
)

// Backuper is implemented by stores that can back themselves up while they
// serve reads and writes (storage/badger). The format of a backup and how
// to restore one are the backend's.
type Backuper interface {
	// Backup writes to w a consistent snapshot of the store at one revision
	// (the current one when it starts), with a checksum that a restore
	// verifies. With opts.Since > 0 it writes an incremental backup: the
	// changes after that revision (an earlier backup's Revision), deletes
	// included. Writes go on while it runs.
	//
	// Errors found before anything is written: a Since older than the
	// retained history is a *CompactedError (take a full backup), a Since
	// above the current revision a *FutureRevisionError, a negative one
	// ErrInvalid; a closed store ErrClosed. A failure after writing has
	// started leaves w with a backup that a restore refuses.
	Backup(ctx context.Context, w io.Writer, opts BackupOptions) (BackupInfo, error)
}

// BackupOptions selects what a backup holds.
type BackupOptions struct {
	// Since, when positive, makes the backup incremental: the changes after
	// this revision, to be restored on top of the backup it continues.
	Since int64
}

// BackupInfo describes a backup.
type BackupInfo struct {
	// Revision is the revision of the snapshot: the backup restores the
	// store as it was at this revision, or at an earlier retained one.
	Revision int64
	// CompactedRevision is the oldest revision of the history the backup
	// holds: a full backup can restore any revision from it to Revision.
	CompactedRevision int64
	// Since is the revision an incremental backup continues from; 0 for a
	// full backup.
	Since int64
	// Bytes is the size of the backup.
	Bytes int64
}
