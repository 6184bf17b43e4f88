package badger

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

// TestRestoreRefusesDamagedBackups cuts a backup at many offsets and flips
// bytes at many offsets: every restore fails with ErrBadBackup and a clear
// cause, and leaves no directory behind; VerifyBackup says the same.
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	s := open(t, backupOptions(t))
	churn{s: s, keys: 20}.run(t, 200, 12)
	full, _ := backup(t, s, 0)
	if _, err := VerifyBackup(bytes.NewReader(full)); err != nil {
		t.Fatalf("VerifyBackup of an intact backup: %v", err)
	}

	step := len(full)/40 + 1
	for cut := 0; cut < len(full); cut += step {
		checkRefused(t, "cut at "+strconv.Itoa(cut), full[:cut], "truncated", "not a kapi Badger backup")
	}
	checkRefused(t, "cut before the last byte", full[:len(full)-1], "truncated")
	for off := 0; off < len(full); off += step {
		bad := bytes.Clone(full)
		bad[off] ^= 0x5a
		checkRefused(t, "flipped byte "+strconv.Itoa(off), bad, "corrupt", "malformed", "not a kapi Badger backup",
			"truncated", "unknown record", "outside the backup's range", "inconsistent header", "unexpected key", "format")
	}
	checkRefused(t, "trailing data", append(bytes.Clone(full), 0), "after the checksum")
	checkRefused(t, "not a backup", []byte("apiVersion: v1\nkind: List\n"), "not a kapi Badger backup")
}

// checkRefused restores b, which must fail with ErrBadBackup and one of the
// causes, leaving nothing behind.
func checkRefused(t *testing.T, what string, b []byte, causes ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "r")
	_, err := Restore(t.Context(), dir, RestoreOptions{}, bytes.NewReader(b))
	if !errors.Is(err, ErrBadBackup) || !containsAny(err.Error(), causes) {
		t.Errorf("%s: restore: %v; want ErrBadBackup saying one of %q", what, err, causes)
		return
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s: the refused restore left %s behind (%v)", what, dir, serr)
	}
	if _, verr := VerifyBackup(bytes.NewReader(b)); !errors.Is(verr, ErrBadBackup) {
		t.Errorf("%s: VerifyBackup: %v, want ErrBadBackup", what, verr)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRestoreRefusesNonEmptyDirectory: a restore goes into a new or empty
// directory only, and leaves an occupied one as it was.
func TestRestoreRefusesNonEmptyDirectory(t *testing.T) {
	s := open(t, backupOptions(t))
	churn{s: s, keys: 5}.run(t, 20, 13)
	full, _ := backup(t, s, 0)

	dir := t.TempDir()
	keep := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(t.Context(), dir, RestoreOptions{}, bytes.NewReader(full))
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Fatalf("the directory's file after a refused restore: %q, %v", b, err)
	}
	// The live store's own directory is not empty either.
	if _, err := Restore(t.Context(), s.opts.Dir, RestoreOptions{}, bytes.NewReader(full)); err == nil {
		t.Fatal("restore into the live store's directory succeeded")
	}
	// An empty directory is fine, and a failed restore empties it again.
	empty := t.TempDir()
	if _, err := Restore(t.Context(), empty, RestoreOptions{}, bytes.NewReader(full[:len(full)/2])); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("restore of half a backup: %v", err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("a failed restore left %d files in the directory it was given", len(entries))
	}
	if _, err := Restore(t.Context(), empty, RestoreOptions{}, bytes.NewReader(full)); err != nil {
		t.Fatalf("restore into an empty directory: %v", err)
	}
}

// TestBackupSinceErrors: an incremental backup needs a since revision
// inside the retained history; the errors come before anything is written.
func TestBackupSinceErrors(t *testing.T) {
	s := open(t, backupOptions(t))
	churn{s: s, keys: 5}.run(t, 40, 14)
	cur, _ := s.CurrentRevision(t.Context())
	if err := s.Compact(t.Context(), cur-3); err != nil {
		t.Fatal(err)
	}
	var compacted *storage.CompactedError
	var future *storage.FutureRevisionError
	for _, c := range []struct {
		since int64
		ok    func(error) bool
	}{
		{cur - 4, func(err error) bool { return errors.As(err, &compacted) }},
		{cur + 1, func(err error) bool { return errors.As(err, &future) }},
		{-1, func(err error) bool { return errors.Is(err, storage.ErrInvalid) }},
	} {
		var buf bytes.Buffer
		_, err := s.Backup(t.Context(), &buf, storage.BackupOptions{Since: c.since})
		if !c.ok(err) || buf.Len() != 0 {
			t.Errorf("backup since %d: %v, %d bytes written", c.since, err, buf.Len())
		}
	}
	if _, info := backup(t, s, cur-3); info.Since != cur-3 {
		t.Errorf("backup since the compacted revision: %+v", info)
	}
	s.Close()
	if _, err := s.Backup(t.Context(), io.Discard, storage.BackupOptions{}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("backup of a closed store: %v", err)
	}
}

// blockingWriter blocks its first Write until release is closed, after
// signalling started.
type blockingWriter struct {
	w        io.Writer
	started  chan struct{}
	release  chan struct{}
	didBlock bool
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	if !b.didBlock {
		b.didBlock = true
		close(b.started)
		<-b.release
	}
	return b.w.Write(p)
}

// TestBackupPinsHistory: history compacted while an incremental backup runs
// stays readable for it. The backup is held in its first write while the
// keys are rewritten, the history is compacted and Badger is made to drop
// what it may (memtables flushed, every level compacted); the backup must
// still hold every version since its start.
func TestBackupPinsHistory(t *testing.T) {
	s := open(t, backupOptions(t))
	c := churn{s: s, keys: 50}
	c.run(t, 100, 15)
	full, f := backup(t, s, 0)
	c.run(t, 2000, 16) // more than the backup writer's buffer
	to, _ := s.CurrentRevision(t.Context())
	want := stateAt(t, s, f.Revision+(to-f.Revision)/2)

	var buf bytes.Buffer
	bw := &blockingWriter{w: &buf, started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	var info storage.BackupInfo
	go func() {
		var err error
		info, err = s.Backup(t.Context(), bw, storage.BackupOptions{Since: f.Revision})
		done <- err
	}()
	<-bw.started
	c.run(t, 500, 17)
	cur, _ := s.CurrentRevision(t.Context())
	if err := s.Compact(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	flushAndFlatten(t, s)
	close(bw.release)
	if err := <-done; err != nil {
		t.Fatalf("backup while history was compacted: %v", err)
	}
	if info.Revision != to {
		t.Fatalf("backup at %d, want %d", info.Revision, to)
	}
	got, _ := restoreTo(t, f.Revision+(to-f.Revision)/2, full, buf.Bytes())
	sameState(t, "restored from the pinned backup", stateAt(t, got, 0), want)

	// Once the backup is over, Badger may drop the compacted history.
	if d := s.backups.discardTs(cur); d != cur || len(s.backups.pins) != 0 {
		t.Fatalf("after the backup: discard timestamp %d, pins %v; want %d and none", d, s.backups.pins, cur)
	}
}

// flushAndFlatten makes Badger write its memtables to tables and compact
// every level, dropping the versions below its discard timestamp. Writes
// must be idle (DropPrefix blocks them).
func flushAndFlatten(t *testing.T, s *Store) {
	t.Helper()
	// DropPrefix flushes the memtables when the prefix has keys.
	txn := s.db.NewTransactionAt(formatRevision, true)
	if err := txn.Set([]byte("zflush"), nil); err != nil {
		t.Fatal(err)
	}
	if err := txn.CommitAt(formatRevision, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.DropPrefix([]byte("zflush")); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flatten(1); err != nil {
		t.Fatal(err)
	}
}

// TestInterruptedRestoreDoesNotOpen: a restore cut short (here: its Badger
// closed after the restore mark, or after the data, without the final
// metadata) leaves a directory that Open refuses rather than serve as an
// empty or partial store.
func TestInterruptedRestoreDoesNotOpen(t *testing.T) {
	s := open(t, backupOptions(t))
	churn{s: s, keys: 10}.run(t, 50, 18)
	full, info := backup(t, s, 0)
	for _, to := range []int64{0, info.Revision} { // 0: nothing but the mark
		dir := t.TempDir()
		o, err := Options{Dir: dir}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		db, err := openBadger(badgerOptions(o))
		if err != nil {
			t.Fatal(err)
		}
		chain, err := openChain(readers(full))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restoreData(t.Context(), db, chain, to); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := Open(testOptions(t, dir)); err == nil || !strings.Contains(err.Error(), "no kapi format marker") {
			if st != nil {
				st.Close()
			}
			t.Fatalf("open after a restore cut short (data up to %d): %v, want a refusal", to, err)
		}
	}
}
