//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package apiserver

// openFileLimit reports no limit where it is not known.
func openFileLimit() (int, bool) { return 0, false }
