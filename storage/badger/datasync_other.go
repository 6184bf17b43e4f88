//go:build !linux

package badger

import "os"

// datasync makes f's data durable (fsync where fdatasync is not available).
func datasync(f *os.File) error { return f.Sync() }
