package badger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// TestBackupPinSurvivesRecovery: an incremental backup pins the history it
// reads, and a failed fsync makes the store reopen Badger while the backup
// runs (history compacted meanwhile). The recovery cancels the backup and
// waits for it before it closes the Badger the backup reads: the backup
// either ended first, complete and correct, or fails with ErrUnavailable;
// it never reads a closed Badger or history discarded under it.
func TestBackupPinSurvivesRecovery(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	fail := false
	o := backupOptions(t)
	o.Dir = dir
	o = o.WithRecoveryInterval(5 * time.Millisecond)
	o.hooks = &testHooks{sync: func() error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return &os.PathError{Op: "fdatasync", Path: filepath.Join(dir, "00001.mem"), Err: syscall.EIO}
		}
		return nil
	}}
	s := open(t, o)
	c := churn{s: s, keys: 50}
	c.run(t, 100, 21)
	full, f := backup(t, s, 0)
	c.run(t, 2000, 22)
	to, _ := s.CurrentRevision(t.Context())
	want := stateAt(t, s, to)

	var buf bytes.Buffer
	bw := &blockingWriter{w: &buf, started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Backup(t.Context(), bw, storage.BackupOptions{Since: f.Revision})
		done <- err
	}()
	<-bw.started
	c.run(t, 500, 23)
	cur, _ := s.CurrentRevision(t.Context())
	if err := s.Compact(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := s.Create(t.Context(), []byte("x/failed"), []byte("f")); err == nil {
		t.Fatal("the write whose fsync failed succeeded")
	}
	close(bw.release) // the recovery waits for the backup, which waits for its writer
	// Give the store time to recover (it reopens Badger every 5ms once the
	// probe works).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Create(t.Context(), []byte("x/after"), []byte("a"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	flushAndFlatten(t, s) // Badger drops what the discard timestamp allows
	if err := <-done; err != nil {
		// Failing is allowed, as an error that says why.
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("backup across a recovery: %v", err)
		}
	} else {
		got, _ := restoreTo(t, to, full, buf.Bytes())
		sameState(t, "restored from the backup taken across a recovery", stateAt(t, got, 0), want)
	}
	if len(s.backups.pins) != 0 {
		t.Fatalf("pins left after the backup: %v", s.backups.pins)
	}
	// A backup after the recovery works.
	backup(t, s, cur)
}

// TestBackupsWhileRecovering takes incremental backups in a loop while
// failed fsyncs make the store reopen Badger again and again (run with
// -race: the backups must not read s.db while a recovery replaces it).
// Every backup succeeds or fails with storage.ErrUnavailable.
func TestBackupsWhileRecovering(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	o := backupOptions(t)
	o.Dir = dir
	o = o.WithRecoveryInterval(time.Millisecond)
	o.hooks = &testHooks{sync: func() error {
		if fail.CompareAndSwap(true, false) {
			return &os.PathError{Op: "fdatasync", Path: filepath.Join(dir, "00001.mem"), Err: syscall.EIO}
		}
		return nil
	}}
	s := open(t, o)
	c := churn{s: s, keys: 50}
	c.run(t, 300, 31)
	since, _ := s.CurrentRevision(t.Context())
	c.run(t, 300, 32)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Backup(t.Context(), io.Discard, storage.BackupOptions{Since: since}); err != nil &&
				!errors.Is(err, storage.ErrUnavailable) {
				errs <- err
				return
			}
		}
	}()
	for i := range 5 {
		fail.Store(true)
		_, _ = s.Create(t.Context(), fmt.Appendf(nil, "x/%d", i), []byte("v"))
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := s.Create(t.Context(), fmt.Appendf(nil, "y/%d", i), []byte("v"))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not recovered: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("backup while the store recovers: %v", err)
	}
}
