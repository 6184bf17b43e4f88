package badger

import (
	"os"
	"syscall"
)

// stRdonly is ST_RDONLY in statfs's f_flags.
const stRdonly = 0x1

// volumeState returns the bytes available to the process on dir's file
// system and whether it is mounted read-only.
func volumeState(dir string) (free int64, readOnly bool, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * st.Bsize, st.Flags&stRdonly != 0, nil
}

// writable reports whether the process may create files in dir (EACCES,
// EROFS otherwise).
func writable(dir string) error {
	const wOK = 2
	return syscall.Access(dir, wOK)
}

// linkCount returns the number of names of the open file f: 0 once a
// directory is removed. -1 when unknown.
func linkCount(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int64(st.Nlink)
}
