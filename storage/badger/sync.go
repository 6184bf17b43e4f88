package badger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// syncer makes committed Badger writes durable with one fsync (fdatasync on
// Linux, see datasync) per group commit.
//
// Why not Badger's SyncWrites option: with SyncWrites, Badger syncs the
// memtable's write-ahead log once per *transaction* (DB.writeToLSM calls
// SyncWAL for every request). kapi commits one transaction per write (see
// sequencer.go for why), so SyncWrites would cost one fsync per write and
// throughput could not grow with concurrency. Instead Badger runs with
// SyncWrites=false and the sequencer calls syncer.sync once after all the
// transactions of a batch are in Badger, before any of them is acknowledged.
//
// What has to reach the disk: the memtable write-ahead-log files (*.mem)
// written by the batch. Badger's value log (*.vlog) is never written because
// every stored value is below Badger's value threshold (see chunkSize); that
// also avoids two hazards of the value log without SyncWrites: Badger's
// DB.Sync syncs the WAL before the value log it points into, and value-log GC
// deletes a rewritten file without syncing the rewrite.
//
// Badger rotates to a new WAL file when the memtable is full; a rotated file
// is not synced by Badger when SyncWrites is off, and is superseded only once
// its memtable has been flushed to a (synced) table. So the syncer notices
// rotations (Badger names WAL files with increasing numbers, %05d.mem) and
// syncs the rotated files too, oldest first, then the directory.
//
// Files are fsynced through their own descriptors: on Linux fsync writes back
// every dirty page of the file, including pages written through Badger's
// mmap. A file deleted by Badger in the meantime (a WAL whose memtable was
// flushed) no longer needs syncing.
//
// A failed fsync is sticky: every later sync fails with it too, until the
// store replaces the syncer (recover.go reopens Badger). Linux reports a
// write-back error to one fsync only and may drop the pages it could not
// write, so the fsync after a failed one can succeed while writes made
// before it never reach the disk. The compactor and a backup's identity
// write sync too, concurrently with the sequencer: a failure one of them
// sees must still fail the group commit whose writes it may have lost.
type syncer struct {
	dir string

	mu   sync.Mutex
	mem  fileTracker
	err  error        // the first failed sync's error
	fail func() error // test hook (testHooks.datasync), before each fdatasync
}

type fileTracker struct {
	ext    string // ".mem" or ".vlog"
	format string // Badger's file name format
	fid    int    // newest known file id
	f      *os.File
	// next is the path of file fid+1, formatted once per rotation: every
	// group commit looks for it.
	next    string
	nextFid int
}

func newSyncer(dir string, hooks *testHooks) (*syncer, error) {
	s := &syncer{
		dir: dir,
		mem: fileTracker{ext: ".mem", format: "%05d.mem"},
	}
	if hooks != nil {
		s.fail = hooks.datasync
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read data directory: %w", err)
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), s.mem.ext); ok {
			if n, err := strconv.Atoi(id); err == nil && n > s.mem.fid {
				s.mem.fid = n
			}
		}
	}
	return s, nil
}

// sync makes everything written to Badger so far durable.
func (s *syncer) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("an earlier fsync failed, so this one cannot vouch for the writes before it: %w", s.err)
	}
	if s.fail != nil {
		if s.err = s.fail(); s.err != nil {
			return s.err
		}
	}
	rotated, err := s.mem.sync(s.dir)
	if err == nil && rotated {
		err = syncDir(s.dir)
	}
	s.err = err
	return err
}

func (s *syncer) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.close()
}

func (t *fileTracker) path(dir string, fid int) string {
	return filepath.Join(dir, fmt.Sprintf(t.format, fid))
}

// advanced reports whether a file newer than the tracked one exists.
func (t *fileTracker) advanced(dir string) bool {
	if t.next == "" || t.nextFid != t.fid+1 {
		t.next, t.nextFid = t.path(dir, t.fid+1), t.fid+1
	}
	return fileExists(t.next)
}

// sync fsyncs the tracked file and every newer one, oldest first, and
// reports whether a newer file was found.
func (t *fileTracker) sync(dir string) (rotated bool, err error) {
	for {
		if t.f == nil {
			f, err := os.Open(t.path(dir, t.fid))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// Not created yet, or already superseded and deleted.
			case err != nil:
				return rotated, fmt.Errorf("open %s: %w", t.path(dir, t.fid), err)
			default:
				t.f = f
			}
		}
		if t.f != nil {
			if err := datasync(t.f); err != nil {
				return rotated, fmt.Errorf("fdatasync %s: %w", t.f.Name(), err)
			}
		}
		if !t.advanced(dir) {
			return rotated, nil
		}
		if err := t.close(); err != nil {
			return rotated, err
		}
		t.fid++
		rotated = true
	}
}

func (t *fileTracker) close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
