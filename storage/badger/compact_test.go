package badger

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

// logKeysBelow counts the change-log entries below rev that are still visible.
func logKeysBelow(t *testing.T, s *Store, rev int64) int {
	t.Helper()
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		r, err := parseLogKey(it.Item().Key())
		if err != nil {
			t.Fatal(err)
		}
		if r < rev {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRetentionByRevisions(t *testing.T) {
	s := open(t, testOptions(t, "").WithRetentionRevisions(50).WithRetentionTime(-1).
		WithCompactionInterval(10*time.Millisecond))
	writeN(t, s, "rr/", 200, 4, 60*time.Second)
	cur, _ := s.CurrentRevision(t.Context())
	waitFor(t, "automatic compaction to current-50", 30*time.Second, func() bool {
		c, _ := s.CompactedRevision(t.Context())
		return c == cur-50
	})
	if _, err := s.Get(t.Context(), []byte("rr/000000"), cur-51); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("Get at current-51: %v, want ErrCompacted", err)
	}
	if _, err := s.Get(t.Context(), []byte("rr/000000"), cur-50); err != nil {
		t.Fatalf("Get at current-50: %v", err)
	}
	// The log is trimmed after the compacted revision moves.
	waitFor(t, "the change log below the compacted revision to be trimmed", 30*time.Second, func() bool {
		return logKeysBelow(t, s, cur-50) == 0
	})
}

func TestRetentionByTime(t *testing.T) {
	const keep = 300 * time.Millisecond
	s := open(t, testOptions(t, "").WithRetentionTime(keep).WithRetentionRevisions(-1).
		WithCompactionInterval(10*time.Millisecond))
	before := time.Now()
	rev, err := s.Create(t.Context(), []byte("rt/a"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "automatic compaction by time", 30*time.Second, func() bool {
		c, _ := s.CompactedRevision(t.Context())
		return c >= rev
	})
	if elapsed := time.Since(before); elapsed < keep {
		t.Fatalf("revision %d compacted %v after it was written, before the retention time %v", rev, elapsed, keep)
	}
}

// TestCompactionDiscardsHistory checks compaction reclaims space in Badger:
// after compacting and flattening, only the newest version at or below the
// compacted revision is left, nothing of a key deleted before it (an expired
// event), and no change-log entry below it.
func TestCompactionDiscardsHistory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testOptions(t, dir))
	if _, err := s.Create(t.Context(), []byte("h/gone"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(t.Context(), []byte("h/gone"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delete(t.Context(), []byte("h/gone"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(t.Context(), []byte("h/k"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 100; i++ {
		if _, err := s.Update(t.Context(), []byte("h/k"), []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Delete(t.Context(), []byte("h/k"), 0); err != nil {
		t.Fatal(err)
	}
	last, err := s.Create(t.Context(), []byte("h/k"), []byte("last"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // flushes the memtable into a level-0 table
		t.Fatal(err)
	}
	// Let Badger compact level 0 (a store is too small for that to happen on
	// its own) with the discard timestamp the store sets.
	o, err := testOptions(t, dir).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	db, err := bdb.OpenManaged(badgerOptions(o).WithCompactL0OnClose(true))
	if err != nil {
		t.Fatal(err)
	}
	db.SetDiscardTs(uint64(last))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, testOptions(t, dir))
	versions := 0
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(bdb.IteratorOptions{AllVersions: true, Prefix: []byte{nsData}})
	for it.Rewind(); it.Valid(); it.Next() {
		versions++
		if v := it.Item().Version(); v != uint64(last) {
			t.Errorf("version %d of %q survived compaction to %d", v, it.Item().Key(), last)
		}
	}
	it.Close()
	if versions != 1 {
		t.Fatalf("%d versions left, want 1", versions)
	}
	if kv, err := s.Get(t.Context(), []byte("h/k"), 0); err != nil || string(kv.Value) != "last" {
		t.Fatalf("Get after compaction = %q, %v", kv.Value, err)
	}
	if n := logKeysBelow(t, s, last); n != 0 {
		t.Fatalf("%d change-log entries below the compacted revision", n)
	}
}

// TestValueLogUnused checks that values, large ones included, never go to
// Badger's value log (see chunkSize and sync.go).
func TestValueLogUnused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testOptions(t, dir))
	big := bytes.Repeat([]byte("0123456789abcdef"), DefaultMaxValueSize/16)
	for i := range 5 {
		if _, err := s.Create(t.Context(), []byte(fmt.Sprint("v/big", i)), big[:len(big)-i*1000]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(t.Context(), []byte(fmt.Sprint("v/small", i)), big[:1<<20-i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("no value-log file: the test cannot tell whether one was written")
	}
	for _, f := range vlogs {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 20 { // Badger's value-log header
			t.Errorf("%s holds %d bytes: values were written to the value log", filepath.Base(f), fi.Size())
		}
	}
	s = open(t, testOptions(t, dir))
	for i := range 5 {
		kv, err := s.Get(t.Context(), []byte(fmt.Sprint("v/big", i)), 0)
		if err != nil || !bytes.Equal(kv.Value, big[:len(big)-i*1000]) {
			t.Fatalf("big value %d after reopening: %d bytes, %v", i, len(kv.Value), err)
		}
	}
}

// visibleChunks returns the chunk indexes of key visible at rev.
func visibleChunks(t *testing.T, s *Store, key string, rev int64) []int {
	t.Helper()
	txn := s.db.NewTransactionAt(uint64(rev), false)
	defer txn.Discard()
	var out []int
	for i := 1; i < 8; i++ {
		_, err := txn.Get(chunkKey([]byte(key), i))
		if err == nil {
			out = append(out, i)
		} else if !errors.Is(err, bdb.ErrKeyNotFound) {
			t.Fatal(err)
		}
	}
	return out
}

// TestChunksCleanedUp checks that chunks a value no longer has are deleted
// at the revision of the write that shrank or deleted it, while older
// snapshots keep them.
func TestChunksCleanedUp(t *testing.T) {
	s := open(t, testOptions(t, "").WithMaxValueSize(4<<20)) // 4 parts: above the default limit
	ctx := t.Context()
	big := bytes.Repeat([]byte("x"), 3*chunkSize+10) // 4 parts: chunks 1..3
	r1, err := s.Create(ctx, []byte("ch/k"), big)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Update(ctx, []byte("ch/k"), big[:chunkSize+1], r1) // 2 parts: chunk 1
	if err != nil {
		t.Fatal(err)
	}
	_, r3, err := s.Delete(ctx, []byte("ch/k"), r2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rev  int64
		want string
	}{{r1, "[1 2 3]"}, {r2, "[1]"}, {r3, "[]"}} {
		if got := fmt.Sprint(visibleChunks(t, s, "ch/k", c.rev)); got != c.want {
			t.Errorf("chunks visible at %d = %s, want %s", c.rev, got, c.want)
		}
	}
	if kv, err := s.Get(ctx, []byte("ch/k"), r1); err != nil || !bytes.Equal(kv.Value, big) {
		t.Fatalf("the 4-part value at %d: %d bytes, %v", r1, len(kv.Value), err)
	}
}
