package badger

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkGroupCommitSync compares fsync and fdatasync on a WAL-like file:
// 32 MiB, written through a shared mmap (as Badger writes its memtable WAL),
// 12 writes of 2.5 KiB per sync (a group commit under load). See
// docs/performance.md for what it showed on the benchmark machine.
func BenchmarkGroupCommitSync(b *testing.B) {
	for _, c := range []struct {
		name string
		sync func(f *os.File) error
	}{{"fsync", (*os.File).Sync}, {"fdatasync", datasync}} {
		b.Run(c.name, func(b *testing.B) {
			const size = 32 << 20
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "00001.mem"), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
			if err != nil {
				b.Fatal(err)
			}
			defer syscall.Munmap(m)
			rec := make([]byte, 2500)
			off := 0
			for b.Loop() {
				for range 12 {
					if off+len(rec) > size {
						off = 0
					}
					rec[0]++
					off += copy(m[off:], rec)
				}
				if err := c.sync(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
