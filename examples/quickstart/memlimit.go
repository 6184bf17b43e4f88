package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// --memory-limit=auto: after every garbage collection the soft memory limit
// is set to the live heap plus autoHeadroom or a quarter of the live heap,
// whichever is more, plus the runtime's memory outside the heap; and never
// below autoFloor, so that a heap whose GOGC goal (twice the live heap) fits
// under it is paced by GOGC alone.
const (
	autoHeadroom = 32 << 20
	autoFloor    = 160 << 20
)

// memoryLimit is the parsed --memory-limit flag.
type memoryLimit struct {
	auto  bool  // follow the live heap (see autoMemoryLimit)
	fixed int64 // a fixed soft limit in bytes; 0 with auto false: Go's default
}

// parseMemoryLimit parses --memory-limit: "auto", "off" (or "0"), or a size
// in bytes with an optional B, KiB, MiB or GiB suffix.
func parseMemoryLimit(s string) (memoryLimit, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return memoryLimit{auto: true}, nil
	case "off", "0":
		return memoryLimit{}, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return memoryLimit{}, fmt.Errorf("--memory-limit: %q is not auto, off or a size such as 512MiB", s)
	}
	return memoryLimit{fixed: n}, nil
}

// parseBound parses a size bound: a size, or "off" (-1, no bound).
func parseBound(s string) (int64, error) {
	if strings.EqualFold(strings.TrimSpace(s), "off") {
		return -1, nil
	}
	n, err := parseSize(s)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("%q: use off for no bound", s)
	}
	return n, err
}

// parseSize parses a size in bytes with an optional B, KiB, MiB or GiB
// suffix.
func parseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size such as 512MiB", s)
	}
	return n * mult, nil
}

// applyMemoryLimit sets the process's soft memory limit
// (runtime/debug.SetMemoryLimit) as the flag says and returns a function
// that stops following the heap. A GOMEMLIMIT environment variable wins
// over the flag: the runtime has applied it already.
func applyMemoryLimit(l memoryLimit, logger *slog.Logger) (stop func()) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		logger.Info("memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return func() {}
	}
	switch {
	case l.auto:
		t := &autoMemoryLimit{}
		t.adjust()
		t.arm()
		logger.Debug("memory limit follows the live heap", "least headroom", autoHeadroom, "floor", autoFloor)
		return t.stop
	case l.fixed > 0:
		debug.SetMemoryLimit(l.fixed)
		logger.Info("memory limit", "bytes", l.fixed)
	}
	return func() {}
}

// autoMemoryLimit keeps the soft memory limit at the live heap plus some
// headroom, at least autoFloor, re-evaluated after every garbage collection
// (a finalizer on a sentinel object runs once per cycle). With GOGC's default the heap may
// grow to twice the live heap before the next collection, and the runtime
// keeps freed pages rather than returning them; a limit below that makes
// the collector run a little earlier and the scavenger return free memory
// to the system. Since the limit always stays above the live heap by at
// least autoHeadroom, the collector never runs back to back the way it
// does when the live heap reaches a fixed limit; and since the headroom
// grows with the heap, a large heap is collected at most four times as
// often as with GOGC alone (as with GOGC=25).
type autoMemoryLimit struct {
	mu      sync.Mutex
	stopped bool
	samples [6]metrics.Sample
}

// stop stops following the heap and lifts the limit.
func (t *autoMemoryLimit) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetMemoryLimit(math.MaxInt64)
}

type gcSentinel struct{ _ [64]byte } // not a tiny allocation: finalizers run

func (t *autoMemoryLimit) arm() {
	s := &gcSentinel{}
	runtime.SetFinalizer(s, func(*gcSentinel) {
		if t.adjust() {
			t.arm()
		}
	})
}

// adjust sets the limit from the heap's current figures; false once
// stopped.
func (t *autoMemoryLimit) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	for i, name := range [...]string{"/gc/heap/live:bytes", "/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes"} {
		t.samples[i].Name = name
	}
	metrics.Read(t.samples[:])
	var v [len(t.samples)]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	live, total, heap := v[0], v[1], v[2]+v[3]+v[4]+v[5]
	debug.SetMemoryLimit(autoLimit(live, total-min(total, heap)))
	return true
}

// autoLimit is the soft memory limit for a live heap and the runtime's
// memory outside the heap (stacks, GC metadata, ...), in bytes.
func autoLimit(live, nonHeap uint64) int64 {
	headroom := max(uint64(autoHeadroom), live/4)
	limit := uint64(math.MaxInt64)
	if live <= limit-headroom && live+headroom <= limit-nonHeap {
		limit = max(autoFloor, live+headroom+nonHeap)
	}
	return int64(limit)
}
