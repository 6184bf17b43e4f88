package badger

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSyncerFollowsRotation checks the syncer notices new write-ahead-log
// files (Badger rotates to %05d.mem+1) and survives deleted ones.
func TestSyncerFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	mem := func(id int) string { return filepath.Join(dir, fmt.Sprintf("%05d.mem", id)) }
	writeFile(t, mem(1), []byte("wal 1"))
	writeFile(t, filepath.Join(dir, "000001.vlog"), []byte("x"))
	s, err := newSyncer(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.mem.fid != 1 {
		t.Fatalf("tracking fid %d, want 1", s.mem.fid)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	// Two rotations, and the oldest log flushed and deleted by Badger.
	writeFile(t, mem(2), []byte("wal 2"))
	writeFile(t, mem(3), []byte("wal 3"))
	if err := os.Remove(mem(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	if s.mem.fid != 3 || s.mem.f == nil || s.mem.f.Name() != mem(3) {
		t.Fatalf("tracking fid %d (%v), want 3", s.mem.fid, s.mem.f)
	}
	// A rotated file deleted before the syncer saw it.
	writeFile(t, mem(4), []byte("wal 4"))
	if err := os.Remove(mem(3)); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	if s.mem.fid != 4 {
		t.Fatalf("tracking fid %d, want 4", s.mem.fid)
	}
}
