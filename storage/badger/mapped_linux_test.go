package badger

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// smapsResident sums the Rss of the process's mappings of dir's tables and
// value logs from /proc/self/smaps: a measurement independent of the
// trimmer's (statm and pagemap).
func smapsResident(t *testing.T, dir string) int64 {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = false
			if i := strings.IndexByte(line, '/'); i >= 0 {
				p := strings.TrimSuffix(line[i:], " (deleted)")
				ext := filepath.Ext(p)
				in = filepath.Dir(p) == dir && (ext == ".sst" || ext == ".vlog")
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			total += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// mappedValue is the value of key i: distinct per key, so that a page read
// back from the wrong place shows.
func mappedValue(i int) []byte {
	v := bytes.Repeat(fmt.Appendf(nil, "value %08d;", i), benchValueSize/15+1)
	return v[:benchValueSize]
}

// TestMappedResidentBound writes 48 MiB of 2 KiB values into a store whose
// mapped-memory bound is 8 MiB, fails a group commit's fsync so that the
// store reopens Badger, reads every value, and checks, measuring the
// directory's mappings in /proc/self/smaps, that the trimmer brings their
// resident memory under the bound plus a slack (Badger may map a new table
// between a page-out and the measurement), that it paged out, and that
// every value reads back intact. Close then stops the trimmer.
func TestMappedResidentBound(t *testing.T) {
	const (
		bound = 8 << 20
		slack = 2 << 20
		n     = 24 << 10 // 48 MiB of values
	)
	dir := t.TempDir()
	var failOnce atomic.Bool
	o := DefaultOptions(dir).WithNoSync(true).WithMaxMappedResident(bound).
		WithRecoveryInterval(10 * time.Millisecond).
		WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	o.hooks = &testHooks{
		mappedInterval: 20 * time.Millisecond,
		sync: func() error {
			if failOnce.CompareAndSwap(true, false) {
				return &os.PathError{Op: "fdatasync", Path: filepath.Join(dir, "00001.mem"), Err: syscall.EIO}
			}
			return nil
		},
	}
	s := open(t, o)
	ctx := t.Context()

	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if _, err := s.Create(ctx, fmt.Appendf(nil, "m/%06d", i), mappedValue(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// A failed fsync: the store reopens Badger, whose tables are then
	// mapped anew.
	failOnce.Store(true)
	if _, err := s.Create(ctx, []byte("m/failed"), []byte("f")); err == nil {
		t.Fatal("a write whose fsync failed succeeded")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Create(ctx, []byte("m/after"), []byte("a"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after a failed fsync: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	readAll := func() {
		t.Helper()
		for i := range n {
			kv, err := s.Get(ctx, fmt.Appendf(nil, "m/%06d", i), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(kv.Value, mappedValue(i)) {
				t.Fatalf("value %d reads back wrong after page-outs: %.40q", i, kv.Value)
			}
		}
	}
	readAll()
	waitUnder := func() int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := smapsResident(t, dir)
			if got <= bound+slack {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("mapped resident memory %d bytes, bound %d (+%d slack); trimmer says %+v",
					got, bound, slack, s.MappedMemory())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	got := waitUnder()
	st := s.MappedMemory()
	t.Logf("after reading %d MiB: %d bytes resident (smaps); trimmer: %+v", n*benchValueSize>>20, got, st)
	if st.Bound != bound || st.PageOuts == 0 || st.PagedOut < int64(n*benchValueSize)/2 {
		t.Fatalf("trimmer stats %+v: want the bound %d and at least half the data paged out", st, bound)
	}
	readAll() // every value intact after the page-outs, faulted in again
	got = waitUnder()

	// The trimmer's exact measurement (pagemap) agrees with smaps.
	probe := newMappedTrimmer(o.WithMaxMappedResident(1 << 40))
	defer probe.pagemap.Close()
	probe.sinceFull = mappedFullEvery
	if err := probe.check(); err != nil {
		t.Fatal(err)
	}
	if d := probe.resident.Load() - got; d < -slack || d > slack {
		t.Fatalf("pagemap measures %d bytes resident, smaps %d", probe.resident.Load(), got)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.trim.done:
	default:
		t.Fatal("the trimmer still runs after Close")
	}
}

// TestMappedResidentOptions: the bound is on by default, off when negative
// and for in-memory stores.
func TestMappedResidentOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		want int64
	}{
		{"default", Options{Dir: t.TempDir()}, DefaultMaxMappedResident},
		{"set", DefaultOptions(t.TempDir()).WithMaxMappedResident(1 << 20), 1 << 20},
		{"off", DefaultOptions(t.TempDir()).WithMaxMappedResident(-1), 0},
		{"in memory", InMemoryOptions(), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, c.o)
			if got := s.MappedMemory().Bound; got != c.want {
				t.Fatalf("bound %d, want %d", got, c.want)
			}
			if (s.trim != nil) != (c.want > 0) {
				t.Fatalf("trimmer running: %v, want %v", s.trim != nil, c.want > 0)
			}
		})
	}
}

// TestMappedUnreleasable: a table the kernel will not page out (here a
// locked mapping: EINVAL, as for huge pages) is skipped, the others are
// paged out, and what stays over the bound does not make every later check
// an exact pass.
func TestMappedUnreleasable(t *testing.T) {
	dir := t.TempDir()
	page := os.Getpagesize()
	const size = 64 << 10
	mapTable := func(name string) []byte {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Munmap(b) })
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		return b
	}
	locked := mapTable("000001.sst")
	if err := syscall.Mlock(locked); err != nil {
		t.Skipf("mlock of %d bytes refused here (RLIMIT_MEMLOCK): %v", size, err)
	}
	mapTable("000002.sst")
	tr := newMappedTrimmer(Options{Dir: dir, MaxMappedResident: size / 2, Logger: slog.New(slog.DiscardHandler)})
	if tr == nil {
		t.Fatal("no trimmer")
	}
	defer tr.pagemap.Close()
	if err := tr.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	if got := tr.resident.Load(); got != size {
		t.Fatalf("resident after the page-out: %d, want the locked table's %d", got, size)
	}
	if tr.pagedOut.Load() != size || tr.stuck != size/2 {
		t.Fatalf("paged out %d (want %d), stuck %d (want %d)", tr.pagedOut.Load(), size, tr.stuck, size/2)
	}
	// Nothing grew: the next checks read statm only.
	for i := range 3 {
		if err := tr.check(); err != nil {
			t.Fatalf("check: %v", err)
		}
		if tr.sinceFull != i+1 {
			t.Fatalf("check %d after the page-out was an exact pass", i+1)
		}
	}
}

// TestMappedStuckGoesWithItsPages: once an unreleasable table goes (Badger
// unmaps tables a compaction replaced), the level it raised goes with it:
// releasable pages over the bound are paged out at the next checks, not
// after the next scheduled exact pass.
func TestMappedStuckGoesWithItsPages(t *testing.T) {
	dir := t.TempDir()
	page := os.Getpagesize()
	const bound = 1 << 20
	mapTable := func(name string, size int) []byte {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(int64(size)); err != nil {
			t.Fatal(err)
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		return b
	}
	locked := mapTable("000001.sst", 2*bound)
	if err := syscall.Mlock(locked); err != nil {
		t.Skipf("mlock of %d bytes refused here (RLIMIT_MEMLOCK): %v", 2*bound, err)
	}
	tr := newMappedTrimmer(Options{Dir: dir, MaxMappedResident: bound, Logger: slog.New(slog.DiscardHandler)})
	defer tr.pagemap.Close()
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
	if tr.stuck != bound {
		t.Fatalf("after the first pass: stuck %d, want the locked table's excess %d", tr.stuck, bound)
	}
	// The locked table goes (compacted away); a new, releasable one grows
	// to 1.75 times the bound.
	syscall.Munlock(locked)
	syscall.Munmap(locked)
	b := mapTable("000002.sst", bound+3*bound/4)
	defer syscall.Munmap(b)
	// Within mappedStuckEvery checks an exact pass finds the new table's
	// pages releasable and pages them out.
	for i := range mappedStuckEvery + 1 {
		if err := tr.check(); err != nil {
			t.Fatal(err)
		}
		if smapsResident(t, dir) <= bound {
			return
		}
		if tr.sinceFull == 0 {
			t.Fatalf("check %d: an exact pass left %d bytes resident, bound %d", i+1, smapsResident(t, dir), bound)
		}
	}
	t.Fatalf("%d bytes of releasable table pages resident after %d checks, bound %d (stuck %d)", smapsResident(t, dir), mappedStuckEvery+1, bound, tr.stuck)
}

// TestParseMapping reads the lines of /proc/self/maps the trimmer acts on:
// shared mappings of the directory's tables and value logs, deleted or not.
func TestParseMapping(t *testing.T) {
	tr := &mappedTrimmer{dir: "/data/my db"}
	for _, c := range []struct {
		line string
		want mapping
		ok   bool
	}{
		{"7f0000000000-7f0000200000 rw-s 00000000 fd:00 1234   /data/my db/000012.sst", mapping{start: 0x7f0000000000, end: 0x7f0000200000, id: 12}, true},
		{"7f0000000000-7f0000001000 r--s 00000000 fd:00 1234   /data/my db/000003.sst (deleted)", mapping{start: 0x7f0000000000, end: 0x7f0000001000, id: 3}, true},
		{"7f0000000000-7f0000001000 rw-s 00000000 fd:00 1234   /data/my db/000001.vlog", mapping{start: 0x7f0000000000, end: 0x7f0000001000, id: 1, vlog: true}, true},
		{"7f0000000000-7f0000001000 rw-p 00000000 fd:00 1234   /data/my db/000012.sst", mapping{}, false},
		{"7f0000000000-7f0000001000 rw-s 00000000 fd:00 1234   /data/my db/00001.mem", mapping{}, false},
		{"7f0000000000-7f0000001000 rw-s 00000000 fd:00 1234   /data/other/000012.sst", mapping{}, false},
		{"7f0000000000-7f0000001000 rw-s 00000000 fd:00 1234   /data/my db/sub/000012.sst", mapping{}, false},
		{"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ", mapping{}, false},
		{"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]", mapping{}, false},
	} {
		got, ok := tr.parseMapping(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %+v %v, want %+v %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkMappedCheck measures what the trimmer reads per check with 2.5
// GiB of a file mapped and resident (a sparse file: page-cache pages without
// disk writes): the statm estimate of a check under the bound, the exact
// pass (maps and pagemap), and, to compare, /proc/self/smaps and
// /proc/self/status.
func BenchmarkMappedCheck(b *testing.B) {
	const size = 5 << 29
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "000001.sst"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Munmap(mem)
	var sum byte
	for i := 0; i < size; i += os.Getpagesize() {
		sum += mem[i]
	}
	b.Logf("%d MiB mapped and read (checksum %d)", size>>20, sum)
	tr := newMappedTrimmer(DefaultOptions(dir).WithMaxMappedResident(size * 2).WithLogger(slog.New(slog.DiscardHandler)))
	defer tr.pagemap.Close()

	b.Run("statm", func(b *testing.B) {
		for b.Loop() {
			if _, err := tr.fileResident(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			tr.sinceFull = mappedFullEvery
			if err := tr.check(); err != nil {
				b.Fatal(err)
			}
		}
		if r := tr.resident.Load(); r < size {
			b.Fatalf("measured %d resident, want %d", r, size)
		}
	})
	for _, file := range []string{"/proc/self/smaps", "/proc/self/smaps_rollup", "/proc/self/status"} {
		b.Run(filepath.Base(file), func(b *testing.B) {
			for b.Loop() {
				if _, err := os.ReadFile(file); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rssFile returns the process's file-backed resident bytes (RssFile in
// /proc/self/status).
func rssFile() (int64, error) {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(st)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no RssFile in /proc/self/status")
}

// majorFaults returns the process's major page faults (reads from disk).
func majorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Majflt
}

// BenchmarkGetMapped measures random point reads of 2 KiB values among
// 100,000 (about 230 MB of tables) with the mapped-memory bound off and at
// 32 MiB, reopening the same store for each, and reports the process's
// file-backed resident memory sampled every 50 ms (mean and peak), the major
// page faults per read, the CPU time per read (including the trimmer's), and
// the file-backed resident memory once a check has run after the reads.
// The trimmer checks ten times a second.
func BenchmarkGetMapped(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	s, err := Open(DefaultOptions(dir).WithNoSync(true))
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, "get/", n)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		bound int64
	}{{"bound=off", -1}, {"bound=32MiB", 32 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(DefaultOptions(dir).WithNoSync(true).WithSkipTableVerification(true).WithMaxMappedResident(c.bound))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			stop, sampled := make(chan struct{}), make(chan [3]int64)
			go func() {
				var sum, peak, samples int64
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						sampled <- [3]int64{sum, peak, samples}
						return
					case <-tick.C:
					}
					if r, err := rssFile(); err == nil {
						sum, peak, samples = sum+r, max(peak, r), samples+1
					}
				}
			}()
			cpu, faults, ops := startCPU(), majorFaults(), 0
			for b.Loop() {
				if _, err := s.Get(b.Context(), fmt.Appendf(nil, "get/%06d", rand.IntN(n)), 0); err != nil {
					b.Fatal(err)
				}
				ops++
			}
			cpu.report(b, ops)
			b.ReportMetric(float64(majorFaults()-faults)/float64(ops), "majflt/op")
			close(stop)
			if r := <-sampled; r[2] > 0 {
				b.ReportMetric(float64(r[0]/r[2])/1e6, "rss-file-mean-MB")
				b.ReportMetric(float64(r[1])/1e6, "rss-file-peak-MB")
			}
			b.ReportMetric(float64(s.MappedMemory().PagedOut)/1e6, "paged-out-MB")
			time.Sleep(1500 * time.Millisecond) // a check after the reads stop
			if r, err := rssFile(); err == nil {
				b.ReportMetric(float64(r)/1e6, "rss-file-idle-MB")
			}
		})
	}
}
