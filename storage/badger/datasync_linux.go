package badger

import (
	"errors"
	"os"
	"syscall"
)

// datasync makes f's data durable with fdatasync(2): unlike fsync it skips
// the inode's timestamps, which a write-ahead log does not need, and still
// writes the metadata needed to read the data back (the size of a file that
// grew). Badger's WAL files are written through mmap at a fixed size, so a
// group commit's fdatasync is usually data pages only, without a journal
// commit for the modification time.
func datasync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if !errors.Is(serr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// fileExists reports whether path names an existing file, with access(2):
// the syncer asks once per group commit, and os.Stat would build a FileInfo
// it does not need.
func fileExists(path string) bool {
	return syscall.Access(path, 0) == nil // F_OK
}
