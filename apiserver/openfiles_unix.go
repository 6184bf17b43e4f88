//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package apiserver

import "syscall"

// openFileLimit returns the process's limit on open files (as Go raised it
// at start), and whether it is known.
func openFileLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0, false
	}
	return int(rl.Cur), true
}
