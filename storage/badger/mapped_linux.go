package badger

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Badger reads and writes its tables through MAP_SHARED memory mappings.
// Every page it wrote or read stays mapped, and counts as the process's
// resident memory, until the kernel reclaims it under memory pressure, which
// on a machine with memory to spare never comes. mappedTrimmer bounds those
// pages (Options.MaxMappedResident): each interval it checks how much of the
// data directory's mapped tables is resident and, when over the bound, asks
// the kernel to reclaim the pages of the coldest tables with
// madvise(MADV_PAGEOUT). A later read of such a page faults it back in from
// the page cache or the disk; contents never change.
//
// Measuring: /proc/self/statm's shared pages (RssFile plus RssShmem) is a
// counter the kernel keeps, cheap to read, but it covers every file mapping
// of the process (the binary's text, other stores). The exact figure per
// mapping comes from /proc/self/pagemap (one entry per page with a present
// bit: what the process has resident, the pages MADV_PAGEOUT acts on), which
// walks the page tables of the ranges read. So each check reads statm and
// subtracts the file-backed memory outside the directory found by the last
// exact pass; only when that estimate exceeds the bound, or every
// mappedFullEvery checks, does it read /proc/self/maps and the pagemap of
// the directory's mappings.
//
// The trimmer works from /proc/self/maps and never from Badger's handles, so
// it needs nothing from the store's Badger: a recovery reopen only replaces
// the mappings it finds.
type mappedTrimmer struct {
	dir      string // absolute, symlinks resolved: as /proc/self/maps names the files
	bound    int64
	target   int64 // a page-out pass goes down to this, below bound, so that the next one is not due at once
	interval time.Duration
	log      *slog.Logger
	page     int64
	pagemap  *os.File
	buf      []byte // pagemap entries of one chunk

	other     int64 // file-backed resident bytes outside the directory, at the last exact pass
	stuck     int64 // resident bytes over the bound the last page-out could not release
	holdOff   int   // checks before a level within stuck is measured exactly again
	sinceFull int   // checks since the last exact pass; starts at mappedFullEvery, so the first check is one
	failing   bool  // the last check failed (logged once)

	resident, pagedOut, pageOuts atomic.Int64
	done                         chan struct{}
}

const (
	// mappedFullEvery is how many checks may rely on the statm estimate
	// before an exact pass refreshes it.
	mappedFullEvery = 300
	// mappedStuckEvery is how many checks pass between exact passes while
	// the resident level stays within what the last page-out could not
	// release.
	mappedStuckEvery = 10
	// pagemapChunk is the number of pages whose entries are read at once.
	pagemapChunk = 1 << 15
)

// errNoPageout means the kernel does not know MADV_PAGEOUT (before Linux 5.4).
var errNoPageout = errors.New("madvise(MADV_PAGEOUT) refused on a page of the process's own: the kernel lacks it (before Linux 5.4) or the process locks its memory")

// newMappedTrimmer prepares the trimmer of opts' data directory, or returns
// nil when the bound is off, the store is in memory, or /proc cannot serve
// it (the store then works unbounded, as with the bound off: logged).
func newMappedTrimmer(opts Options) *mappedTrimmer {
	if opts.InMemory || opts.MaxMappedResident <= 0 {
		return nil
	}
	dir, err := filepath.Abs(opts.Dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err == nil {
		err = probePageout()
	}
	var pm *os.File
	if err == nil {
		pm, err = os.Open("/proc/self/pagemap")
	}
	if err != nil {
		opts.Logger.Warn("the memory-mapped tables' resident memory is not bounded", "error", err)
		return nil
	}
	interval := 100 * time.Millisecond // statm costs microseconds: a scan is caught within a tenth of a second
	if opts.hooks != nil && opts.hooks.mappedInterval > 0 {
		interval = opts.hooks.mappedInterval
	}
	return &mappedTrimmer{
		dir:       dir,
		bound:     opts.MaxMappedResident,
		target:    opts.MaxMappedResident - opts.MaxMappedResident/8,
		interval:  interval,
		log:       opts.Logger,
		page:      int64(os.Getpagesize()),
		pagemap:   pm,
		buf:       make([]byte, 8*pagemapChunk),
		sinceFull: mappedFullEvery,
		done:      make(chan struct{}),
	}
}

// run checks every interval until stop is closed.
func (t *mappedTrimmer) run(stop <-chan struct{}) {
	defer close(t.done)
	defer t.pagemap.Close()
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		err := t.check()
		switch {
		case err != nil && !t.failing:
			t.log.Warn("bounding the memory-mapped tables' resident memory failed; retrying", "error", err, "every", t.interval)
		case err == nil && t.failing:
			t.log.Info("bounding the memory-mapped tables' resident memory works again")
		}
		t.failing = err != nil
	}
}

// stats returns what the trimmer measured and did.
func (t *mappedTrimmer) stats() MappedMemory {
	return MappedMemory{
		Bound:    t.bound,
		Resident: t.resident.Load(),
		PagedOut: t.pagedOut.Load(),
		PageOuts: t.pageOuts.Load(),
	}
}

// mapping is one memory mapping of a file in the data directory.
type mapping struct {
	start, end uintptr
	vlog       bool   // a value log (never read: values live in the tables)
	id         uint64 // the file's number: Badger numbers files in creation order
	resident   int64
}

// check measures the directory's mapped resident memory and pages out the
// coldest mappings when it exceeds the bound.
func (t *mappedTrimmer) check() error {
	fileRSS, err := t.fileResident()
	if err != nil {
		return err
	}
	t.sinceFull++
	// Over the bound by no more than the last pass could not release, an
	// exact pass comes only every mappedStuckEvery checks (those pages may
	// have gone since, and others taken their place).
	est := fileRSS - t.other
	within := est <= t.bound || (est <= t.bound+t.stuck && t.holdOff > 0)
	if within && t.sinceFull < mappedFullEvery {
		if est > t.bound {
			t.holdOff--
		}
		t.resident.Store(max(est, 0))
		return nil
	}
	t.sinceFull = 0
	maps, err := t.mappings()
	if err != nil {
		return err
	}
	var total int64
	for i := range maps {
		if maps[i].resident, err = t.residentOf(maps[i]); err != nil {
			return err
		}
		total += maps[i].resident
	}
	t.other = max(fileRSS-total, 0)
	t.stuck = 0
	if total <= t.bound {
		t.resident.Store(total)
		return nil
	}
	// Coldest first: value logs, then tables oldest first. Old tables are
	// the ones compactions moved to the deep levels, where most keys live
	// and few are read often; new ones hold the recent writes.
	slices.SortFunc(maps, func(a, b mapping) int {
		if a.vlog != b.vlog {
			if a.vlog {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	before := total
	var released int64
	for _, m := range maps {
		if total <= t.target {
			break
		}
		if m.resident == 0 {
			continue
		}
		if err := pageout(m.start, m.end); err != nil {
			// Unmapped by Badger meanwhile (ENOMEM: its pages are gone
			// from the process), or a range the kernel will not page out
			// (EINVAL: locked, huge pages): skip it.
			if errors.Is(err, unix.ENOMEM) {
				total -= m.resident
			}
			continue
		}
		after, err := t.residentOf(m)
		if err != nil {
			return err
		}
		released += m.resident - after
		total -= m.resident - after
	}
	// What could not be released (pages another process maps, say) does
	// not make every later check an exact pass: growth past it does, and
	// otherwise one check in mappedStuckEvery.
	t.stuck, t.holdOff = max(total-t.bound, 0), mappedStuckEvery
	t.resident.Store(total)
	t.pagedOut.Add(released)
	t.pageOuts.Add(1)
	t.log.Debug("paged out memory-mapped tables", "dir", t.dir, "residentBefore", before,
		"residentAfter", total, "released", released, "bound", t.bound)
	return nil
}

// pageout asks the kernel to reclaim the resident pages of [start, end).
func pageout(start, end uintptr) error {
	// MADV_PAGEOUT only hints and never changes contents: the range may have
	// been unmapped and reused since /proc/self/maps was read, and
	// MADV_DONTNEED would then zero live memory.
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_PAGEOUT)
	if errno != 0 {
		return errno
	}
	return nil
}

// probePageout reports errNoPageout when the kernel does not know
// MADV_PAGEOUT, tried on a page of its own: on a table's mapping EINVAL can
// also mean a range the kernel will not page out.
func probePageout() error {
	b, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return fmt.Errorf("probe madvise(MADV_PAGEOUT): %w", err)
	}
	defer unix.Munmap(b)
	b[0] = 1
	if err := unix.Madvise(b, unix.MADV_PAGEOUT); errors.Is(err, unix.EINVAL) {
		return errNoPageout // or the process locks its memory (mlockall): its tables too
	} else if err != nil {
		return fmt.Errorf("probe madvise(MADV_PAGEOUT): %w", err)
	}
	return nil
}

// fileResident returns the process's file-backed (and shared-memory)
// resident bytes from /proc/self/statm.
func (t *mappedTrimmer) fileResident() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, fmt.Errorf("read resident memory: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, fmt.Errorf("read resident memory: unexpected /proc/self/statm %q", b)
	}
	shared, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read resident memory: /proc/self/statm: %w", err)
	}
	return shared * t.page, nil
}

// mappings lists the shared mappings of the directory's tables and value
// logs from /proc/self/maps.
func (t *mappedTrimmer) mappings() ([]mapping, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("read memory mappings: %w", err)
	}
	var out []mapping
	for line := range bytes.Lines(b) {
		m, ok := t.parseMapping(string(bytes.TrimSuffix(line, []byte("\n"))))
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseMapping parses one line of /proc/self/maps ("start-end perms offset
// dev inode path") and reports whether it maps a table or value log of the
// directory.
func (t *mappedTrimmer) parseMapping(line string) (mapping, bool) {
	slash := strings.IndexByte(line, '/')
	f := strings.Fields(line)
	if slash < 0 || len(f) < 6 || len(f[1]) < 4 || f[1][3] != 's' {
		return mapping{}, false
	}
	path := strings.TrimSuffix(line[slash:], " (deleted)")
	if filepath.Dir(path) != t.dir {
		return mapping{}, false
	}
	base := filepath.Base(path)
	ext := filepath.Ext(base)
	if ext != ".sst" && ext != ".vlog" {
		return mapping{}, false
	}
	id, err := strconv.ParseUint(strings.TrimSuffix(base, ext), 10, 64)
	lo, hi, ok := strings.Cut(f[0], "-")
	if err != nil || !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, false
	}
	return mapping{start: uintptr(start), end: uintptr(end), vlog: ext == ".vlog", id: id}, true
}

// residentOf returns the resident bytes of m: the pages whose pagemap entry
// has the present bit (63) set.
func (t *mappedTrimmer) residentOf(m mapping) (int64, error) {
	var pages int64
	first, last := int64(m.start)/t.page, int64(m.end)/t.page
	for p := first; p < last; p += pagemapChunk {
		n := min(last-p, pagemapChunk)
		buf := t.buf[:8*n]
		if _, err := t.pagemap.ReadAt(buf, 8*p); err != nil {
			return 0, fmt.Errorf("read /proc/self/pagemap: %w", err)
		}
		for i := 0; i < len(buf); i += 8 {
			pages += int64(binary.NativeEndian.Uint64(buf[i:]) >> 63)
		}
	}
	return pages * t.page, nil
}
