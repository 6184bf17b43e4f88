//go:build linux

// Package disktest provides real disk faults for tests on Linux: a small
// tmpfs volume that can really fill up, filled by a ballast file.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and unmounts it when
// the test ends. Mounting needs root (CAP_SYS_ADMIN); without it the test
// fails, saying so: these tests prove behaviour on a really full file
// system, and a skip would hide that they did not run.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("DISK FAULT TEST NOT RUN: mounting a %d-byte tmpfs on %s failed: %v. "+
			"These tests fill a real file system and need to mount one: run them as root "+
			"(or with CAP_SYS_ADMIN).", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a ballast file in dir until the file system answers ENOSPC, so
// that no byte is left, and returns the ballast's path: removing it frees
// the space again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", dir, err)
				}
				break
			}
		}
	}
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if free := Free(t, dir); free != 0 {
		t.Fatalf("%s still has %d bytes free after filling it", dir, free)
	}
	return p
}

// Free returns the bytes available on dir's file system.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// SetImmutable sets or clears the immutable attribute of dir (chattr +i):
// nobody, root included, can then create, remove or rename files in it,
// while files already open stay writable. It is how a test makes a
// directory unwritable for a process running as root, whom permission bits
// do not stop.
func SetImmutable(t testing.TB, dir string, on bool) {
	t.Helper()
	const (
		getFlags  = 0x80086601 // FS_IOC_GETFLAGS
		setFlags  = 0x40086602 // FS_IOC_SETFLAGS
		immutable = 0x10       // FS_IMMUTABLE_FL
	)
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var flags int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), getFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("DISK FAULT TEST NOT RUN: reading the attributes of %s: %v", dir, e)
	}
	if on {
		flags |= immutable
	} else {
		flags &^= immutable
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), setFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("DISK FAULT TEST NOT RUN: setting the immutable attribute of %s needs root (CAP_LINUX_IMMUTABLE) "+
			"and a file system that has it: %v", dir, e)
	}
}
