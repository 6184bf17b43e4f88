//go:build !linux

package badger

import "os"

// datasync makes f's data durable (fsync where fdatasync is not available).
func datasync(f *os.File) error { return f.Sync() }

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
