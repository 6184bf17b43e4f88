package badger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kapi-dev/kapi/storage"
)

// diskGuard checks the data directory before each group commit, so that a
// disk fault refuses writes cleanly instead of reaching Badger: Badger
// writes through memory-mapped files, and a write into one that the file
// system cannot back (a full volume) kills the process with SIGBUS, while a
// failed file creation leaves Badger unable to write until it is reopened.
//
// It refuses, in this order: a directory that was removed or replaced (the
// store's files are gone: storage.ErrUnavailable until a restart), a
// read-only or unwritable directory (storage.ErrUnavailable), a volume with
// less than MinFreeSpace bytes free after the batch (storage.ErrNoSpace).
// Each check is a system call or two; a group commit costs an fsync.
type diskGuard struct {
	dir     string
	d       *os.File    // held open: the directory the store was opened in
	id      fs.FileInfo // its identity, to notice a replacement
	minFree int64       // negative: no free-space check
}

func newDiskGuard(dir string, minFree int64) (*diskGuard, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open data directory: %w", err)
	}
	id, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("stat data directory: %w", err)
	}
	return &diskGuard{dir: dir, d: d, id: id, minFree: minFree}, nil
}

// errGone reports a data directory that no longer is the store's: every
// later write would go to files that no longer have a name.
var errGone = errors.New("the data directory was removed or replaced while the store was open")

// check returns nil when a batch of need bytes may be written.
func (g *diskGuard) check(need int64) error { return g.checkFree(need, g.minFree) }

// checkFree is check with another reserve.
func (g *diskGuard) checkFree(need, minFree int64) error {
	if err := g.present(); err != nil {
		return err
	}
	free, ro, err := volumeState(g.dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w: %w", g.dir, storage.ErrUnavailable, err)
	case ro:
		return fmt.Errorf("%s is on a read-only file system: %w", g.dir, storage.ErrUnavailable)
	}
	if err := writable(g.dir); err != nil {
		return fmt.Errorf("%s is not writable: %w: %w", g.dir, storage.ErrUnavailable, err)
	}
	if minFree >= 0 && free >= 0 && free-need < minFree {
		return fmt.Errorf("%w: %s has %s free, the store keeps %s free (MinFreeSpace)",
			storage.ErrNoSpace, g.dir, mib(free), mib(minFree))
	}
	return nil
}

// present reports whether the directory still exists under its name and is
// the one the store was opened in.
func (g *diskGuard) present() error {
	fi, err := os.Stat(g.dir)
	if err == nil && !os.SameFile(fi, g.id) {
		err = errors.New("another directory now has its name")
	}
	if err == nil && linkCount(g.d) == 0 {
		err = errors.New("it has no name any more")
	}
	if err != nil {
		return fmt.Errorf("%s: %w (%w): %w", g.dir, storage.ErrUnavailable, errGone, err)
	}
	return nil
}

// probe writes, syncs and removes a small file in the directory: what the
// store needs the disk to do again before it reopens Badger.
func (g *diskGuard) probe() error {
	if err := g.check(0); err != nil {
		return err
	}
	p := filepath.Join(g.dir, "kapi-write-probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close(), os.Remove(p))
	if err != nil {
		return fmt.Errorf("probe write in %s: %w", g.dir, err)
	}
	return nil
}

func (g *diskGuard) close() error { return g.d.Close() }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
