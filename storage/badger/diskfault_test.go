//go:build linux

package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/internal/disktest"
	"github.com/kapi-dev/kapi/storage"
)

// TestReadOnlyDirectoryAtOpen opens a store through a real read-only bind
// mount of its directory: Open fails, naming the directory and what to do,
// and the files are untouched.
func TestReadOnlyDirectoryAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, testOptions(t, dir))
	if _, err := s.Create(t.Context(), []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("DISK FAULT TEST NOT RUN: bind mount needs root: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(ro, syscall.MNT_DETACH) })
	if err := syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	before := snapshotDir(t, dir)
	s2, err := Open(testOptions(t, ro))
	if err == nil {
		s2.Close()
		t.Fatal("Open of a read-only directory succeeded")
	}
	if !strings.Contains(err.Error(), ro) || !strings.Contains(err.Error(), "read-only file system") ||
		!strings.Contains(err.Error(), "mount it read-write") {
		t.Fatalf("Open error %q does not name the directory, the cause and the remedy", err)
	}
	t.Logf("Open: %v", err)
	if after := snapshotDir(t, dir); after != before {
		t.Fatal("refusing to open changed the files")
	}
}

// TestDataDirectoryRemoved removes the data directory under an open store:
// writes fail with storage.ErrUnavailable saying so (not acknowledged into
// files that no longer have a name), reads are still served from the files
// Badger holds open, and Close returns instead of hanging on a flush into a
// directory that is gone.
func TestDataDirectoryRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(testOptions(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.Create(t.Context(), fmt.Appendf(nil, "gone/%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err = s.Create(t.Context(), []byte("gone/new"), []byte("v"))
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "removed or replaced") {
		t.Fatalf("write after the directory was removed: %v", err)
	}
	t.Logf("refused: %v", err)
	if res, err := s.List(t.Context(), listAll("gone/")); err != nil || len(res.Items) != 20 {
		t.Fatalf("list after the directory was removed: %d items, %v", len(res.Items), err)
	}
	// A new, empty directory under the old name is not the store's either.
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(t.Context(), []byte("gone/new"), []byte("v")); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("write after the directory was replaced: %v", err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "Badger left open") {
		t.Fatalf("Close after the directory was removed: %v", err)
	}
}

// TestRecoverAfterFailedSync makes one group commit's fsync fail (injected:
// a real fsync error needs a failing device): the batch's writers get an
// error saying the outcome is unknown, later writes are refused, reads
// continue; the store then reopens Badger by itself, the failed batch's
// write is there (it was in Badger's memtable, which the reopening wrote
// into a synced table) and reached the watchers, and writes resume. An
// ENOSPC from the fsync is reported as storage.ErrNoSpace, others as
// storage.ErrUnavailable.
func TestRecoverAfterFailedSync(t *testing.T) {
	for _, c := range []struct {
		errno syscall.Errno
		kind  error
	}{{syscall.EIO, storage.ErrUnavailable}, {syscall.ENOSPC, storage.ErrNoSpace}} {
		t.Run(c.errno.Error(), func(t *testing.T) { recoverAfterFailedSync(t, c.errno, c.kind) })
	}
}

func recoverAfterFailedSync(t *testing.T, errno syscall.Errno, kind error) {
	dir := t.TempDir()
	var failNext sync.Mutex
	fail := false
	o := testOptions(t, dir).WithRecoveryInterval(10 * time.Millisecond)
	o.hooks = &testHooks{sync: func() error {
		failNext.Lock()
		defer failNext.Unlock()
		if fail {
			fail = false
			return &os.PathError{Op: "fdatasync", Path: filepath.Join(dir, "00001.mem"), Err: errno}
		}
		return nil
	}}
	s := open(t, o)
	for i := range 10 {
		if _, err := s.Create(t.Context(), fmt.Appendf(nil, "r/%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("r/")})
	if err != nil {
		t.Fatal(err)
	}
	failNext.Lock()
	fail = true
	failNext.Unlock()
	_, err = s.Create(t.Context(), []byte("r/failed"), []byte("f"))
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), "may or may not have been applied") {
		t.Fatalf("write whose fsync failed: %v", err)
	}
	// Refused until recovered, or already recovered: never acknowledged
	// into a store that has not recovered.
	deadline := time.Now().Add(time.Minute)
	var rev int64
	for {
		rev, err = s.Create(t.Context(), []byte("r/after"), []byte("a"))
		if err == nil {
			break
		}
		if !errors.Is(err, kind) || time.Now().After(deadline) {
			t.Fatalf("write after a failed fsync: %v", err)
		}
		if _, err := s.Get(t.Context(), []byte("r/03"), 0); err != nil {
			t.Fatalf("read while recovering: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	kv, err := s.Get(t.Context(), []byte("r/failed"), 0)
	if err != nil || kv.Revision != rev-1 {
		t.Fatalf("the failed batch's write after recovery: %v (revision %d, next write %d)", err, kv.Revision, rev)
	}
	for _, want := range []string{"r/failed", "r/after"} {
		if ev := <-w; ev.Type != storage.EventPut || string(ev.Key) != want {
			t.Fatalf("watch event %+v, want a put of %s", ev, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, testOptions(t, dir))
	checkConsistency(t, s, 0)
	if res, err := s.List(t.Context(), listAll("r/")); err != nil || len(res.Items) != 12 {
		t.Fatalf("after reopening: %d items, %v", len(res.Items), err)
	}
}

// TestSlowSync holds a group commit's fsync (injected: the hook blocks
// where a slow disk would): writes queue up to MaxBatchWrites, the next one
// fails after MaxWriteWait with storage.ErrBusy instead of waiting without
// bound, reads and watches are served meanwhile, and once the fsync returns
// the queued writes complete.
func TestSlowSync(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	o := testOptions(t, t.TempDir()).WithMaxBatchWrites(4).WithMaxWriteWait(50 * time.Millisecond)
	o.hooks = &testHooks{sync: func() error {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
		return nil
	}}
	s := open(t, o)
	w, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("slow/")})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 5)
	go func() { _, err := s.Create(t.Context(), []byte("slow/first"), []byte("v")); errs <- err }()
	<-entered // its batch is in the fsync
	for i := range 4 {
		go func() { _, err := s.Create(t.Context(), fmt.Appendf(nil, "slow/q%d", i), []byte("v")); errs <- err }()
	}
	for len(s.queue) < 4 {
		time.Sleep(time.Millisecond)
	}
	_, err = s.Create(t.Context(), []byte("slow/shed"), []byte("v"))
	if !errors.Is(err, storage.ErrBusy) {
		t.Fatalf("write with a full queue behind a stuck fsync: %v", err)
	}
	t.Logf("shed: %v", err)
	if res, err := s.List(t.Context(), listAll("slow/")); err != nil || len(res.Items) != 0 {
		t.Fatalf("list during the fsync: %d items, %v", len(res.Items), err)
	}
	if _, err := s.Get(t.Context(), []byte("slow/first"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get during the fsync: %v (the write is not durable yet)", err)
	}
	if _, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("slow/")}); err != nil {
		t.Fatalf("watch during the fsync: %v", err)
	}
	close(release)
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatalf("queued write: %v", err)
		}
	}
	seen := map[string]bool{}
	for range 5 {
		ev := <-w
		seen[string(ev.Key)] = true
	}
	if len(seen) != 5 || seen["slow/shed"] {
		t.Fatalf("watched %v", seen)
	}
	if _, err := s.Get(t.Context(), []byte("slow/shed"), 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the shed write was applied: %v", err)
	}
}

// TestDataDirectoryNotWritable makes the data directory of a running store
// unwritable for real (the immutable attribute, which stops root too):
// writes fail with storage.ErrUnavailable naming the directory, reads go
// on, and writes resume once the directory is writable again. Open refuses
// an unwritable directory.
func TestDataDirectoryNotWritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := open(t, testOptions(t, dir))
	if _, err := s.Create(t.Context(), []byte("ro/a"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	disktest.SetImmutable(t, dir, true)
	t.Cleanup(func() { disktest.SetImmutable(t, dir, false) })
	_, err := s.Create(t.Context(), []byte("ro/b"), []byte("v"))
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), dir+" is not writable") {
		t.Fatalf("write into an unwritable directory: %v", err)
	}
	t.Logf("refused: %v", err)
	if kv, err := s.Get(t.Context(), []byte("ro/a"), 0); err != nil || string(kv.Value) != "v" {
		t.Fatalf("read from an unwritable directory: %v", err)
	}
	// Opening it again is refused with the remedy (the lock would refuse
	// too; the writability check comes first).
	if _, err := Open(testOptions(t, dir)); err == nil || !strings.Contains(err.Error(), "give the process write permission") {
		t.Fatalf("Open of an unwritable directory: %v", err)
	}
	disktest.SetImmutable(t, dir, false)
	if _, err := s.Create(t.Context(), []byte("ro/b"), []byte("v")); err != nil {
		t.Fatalf("write once the directory is writable again: %v", err)
	}
}
