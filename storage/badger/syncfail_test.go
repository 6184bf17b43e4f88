package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// TestFailedCompactionSyncIsSticky: the compactor fsyncs the write-ahead
// log concurrently with the group commits. When its fsync fails, Linux may
// have dropped pages that hold a group commit's writes and reports the
// error to that one fsync only, so the group commit's own fsync that
// follows can succeed. The next group commit must therefore fail as after
// its own failed fsync (outcome unknown, writes refused until the store has
// reopened Badger), not be acknowledged; the store then recovers by itself.
func TestFailedCompactionSyncIsSticky(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	o := testOptions(t, dir).WithRecoveryInterval(10 * time.Millisecond)
	o.hooks = &testHooks{datasync: func() error {
		if fail.CompareAndSwap(true, false) {
			return &os.PathError{Op: "fdatasync", Path: filepath.Join(dir, "00001.mem"), Err: syscall.EIO}
		}
		return nil
	}}
	s := open(t, o)
	var rev int64
	for i := range 10 {
		var err error
		if rev, err = s.Create(t.Context(), fmt.Appendf(nil, "r/%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	fail.Store(true) // the compactor's fsync fails once; the next ones succeed
	if err := s.Compact(t.Context(), rev); err == nil {
		t.Fatal("a compaction whose fsync failed succeeded")
	}
	_, err := s.Create(t.Context(), []byte("r/next"), []byte("n"))
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "may or may not have been applied") {
		t.Fatalf("the first write after a failed fsync: %v; want the outcome unknown (storage.ErrUnavailable)", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.Create(t.Context(), []byte("r/after"), []byte("a"))
		if err == nil {
			break
		}
		if !errors.Is(err, storage.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("write after the failed fsync: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, testOptions(t, dir))
	checkConsistency(t, s, 0)
}
