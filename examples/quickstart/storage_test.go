package main

import "testing"

// TestParseMappedMemory: --storage-mapped-memory takes a size or off.
func TestParseMappedMemory(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, "4096": 4096, "off": -1, "OFF": -1, "0": -1} {
		if got, err := parseMappedMemory(in); err != nil || got != want {
			t.Errorf("parseMappedMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "auto", "-1MiB", "12 apples"} {
		if got, err := parseMappedMemory(bad); err == nil {
			t.Errorf("parseMappedMemory(%q) = %d, want an error", bad, got)
		}
	}
}
