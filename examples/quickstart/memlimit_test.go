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

func TestAutoGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, nonHeap uint64
		limit         int64
		want          int32
	}{
		{0, 0, autoFloor, 100},                      // before the first collection
		{5 * mib, 10 * mib, autoFloor, 100},         // an idle server: GOGC's default
		{16 * mib, 10 * mib, autoFloor, 837},        // from autoPaceFrom on: goal at the limit
		{50 * mib, 10 * mib, autoFloor, 200},        // (160-10-50)/50
		{90 * mib, 10 * mib, autoFloor, 100},        // the default's goal is higher
		{1000 * mib, 20 * mib, 1270 * mib, 100},     // a large heap: the limit paces it anyway
		{20 * mib, 200 * mib, autoFloor, 100},       // no room under the limit
		{16 * mib, 0, math.MaxInt64, 10_000},        // no limit: capped
		{math.MaxUint64 / 2, 0, math.MaxInt64, 100}, // no overflow
	} {
		if got := autoGCPercent(tc.live, tc.nonHeap, tc.limit); got != tc.want {
			t.Errorf("autoGCPercent(%d, %d, %d) = %d, want %d", tc.live, tc.nonHeap, tc.limit, got, tc.want)
		}
	}
}

// gcPercent reads GOGC's current value.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The auto limit is set at once, follows the heap across collections and is
// lifted by stop.
func TestApplyMemoryLimitAuto(t *testing.T) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set")
	}
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	_, gogcSet := os.LookupEnv("GOGC")
	orig := gcPercent()
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	stop := applyMemoryLimit(memoryLimit{auto: true}, slog.New(slog.DiscardHandler))
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 || got < autoFloor {
		t.Fatalf("limit after start = %d, want a finite limit of at least %d", got, autoFloor)
	}

	// A live heap of 40 MiB, over autoPaceFrom: GOGC is raised so that the
	// heap may grow to the 160 MiB floor (unless GOGC is set by hand).
	small := make([]byte, 40<<20)
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for !gogcSet && gcPercent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed %d with a live heap of 40 MiB", gcPercent())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := gcPercent(); !gogcSet && (p < 150 || p > 300) {
		t.Errorf("GOGC = %d with a live heap of 40 MiB, want about (160-40)/40 = 300%% less the runtime's own memory", p)
	}
	runtime.KeepAlive(small)

	// Grow the live heap by 256 MiB: after a collection the limit follows.
	ballast := make([]byte, 256<<20)
	deadline = time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) < 256<<20*5/4 {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d did not follow a live heap of 256 MiB", debug.SetMemoryLimit(-1))
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(ballast)

	if p := gcPercent(); !gogcSet && p != 100 {
		t.Errorf("GOGC = %d with a live heap of 256 MiB, want the default: the limit is below its goal", p)
	}

	stop()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after stop = %d, want none", got)
	}
	if p := gcPercent(); !gogcSet && p != 100 {
		t.Errorf("GOGC after stop = %d, want 100", p)
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
