package main

import (
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want memoryLimit
	}{
		{"auto", memoryLimit{auto: true}},
		{"AUTO", memoryLimit{auto: true}},
		{"off", memoryLimit{}},
		{"0", memoryLimit{}},
		{"1048576", memoryLimit{fixed: 1 << 20}},
		{"512MiB", memoryLimit{fixed: 512 << 20}},
		{"2GiB", memoryLimit{fixed: 2 << 30}},
		{"64KiB", memoryLimit{fixed: 64 << 10}},
		{"100B", memoryLimit{fixed: 100}},
	} {
		got, err := parseMemoryLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseMemoryLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "lots", "-1MiB", "1.5GiB", "512MB", "9999999999GiB"} {
		if got, err := parseMemoryLimit(bad); err == nil {
			t.Errorf("parseMemoryLimit(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestParseBound(t *testing.T) {
	for in, want := range map[string]int64{"off": -1, "OFF": -1, "64MiB": 64 << 20, "1024": 1024} {
		if got, err := parseBound(in); err != nil || got != want {
			t.Errorf("parseBound(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "none", "-1"} {
		if got, err := parseBound(bad); err == nil {
			t.Errorf("parseBound(%q) = %d, want an error", bad, got)
		}
	}
}

func TestAutoLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, nonHeap uint64
		want          int64
	}{
		{0, 0, autoFloor},                                       // before the first collection
		{20 * mib, 10 * mib, 160 * mib},                         // small heap: the floor
		{118 * mib, 12 * mib, 162 * mib},                        // 32 MiB of headroom
		{128 * mib, 10 * mib, 170 * mib},                        // 128 MiB: both headrooms are 32 MiB
		{1000 * mib, 20 * mib, 1270 * mib},                      // large heap: a quarter of it
		{math.MaxUint64 / 2, math.MaxUint64 / 2, math.MaxInt64}, // no overflow
	} {
		if got := autoLimit(tc.live, tc.nonHeap); got != tc.want {
			t.Errorf("autoLimit(%d, %d) = %d, want %d", tc.live, tc.nonHeap, got, tc.want)
		}
	}
}

// The auto limit is set at once, follows the heap across collections and is
// lifted by stop.
func TestApplyMemoryLimitAuto(t *testing.T) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set")
	}
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	stop := applyMemoryLimit(memoryLimit{auto: true}, slog.New(slog.DiscardHandler))
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 || got < autoFloor {
		t.Fatalf("limit after start = %d, want a finite limit of at least %d", got, autoFloor)
	}

	// Grow the live heap by 256 MiB: after a collection the limit follows.
	ballast := make([]byte, 256<<20)
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) < 256<<20*5/4 {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d did not follow a live heap of 256 MiB", debug.SetMemoryLimit(-1))
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(ballast)

	stop()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after stop = %d, want none", got)
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // the last finalizer, if any, must not set it again
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after stop and a collection = %d, want none", got)
	}
}

func TestApplyMemoryLimitFixed(t *testing.T) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set")
	}
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	applyMemoryLimit(memoryLimit{fixed: 3 << 30}, slog.New(slog.DiscardHandler))()
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("limit = %d, want %d", got, 3<<30)
	}
}
