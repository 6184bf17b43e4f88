package badger

import (
	"fmt"
	"log/slog"
	"time"
)

// Default option values. DefaultOptions and InMemoryOptions start from these,
// and Open uses them for fields left at their zero value.
const (
	DefaultMaxKeySize         = 4 << 10 // 4 KiB
	DefaultMaxValueSize       = 2 << 20 // 2 MiB
	DefaultRetentionTime      = 10 * time.Minute
	DefaultRetentionRevisions = 1_000_000
	DefaultCompactionInterval = 30 * time.Second
	DefaultMaxBatchWrites     = 1024
	DefaultWatchBufferSize    = 10_000
	DefaultWatchBufferBytes   = 64 << 20 // 64 MiB
	DefaultMemTableSize       = 16 << 20 // 16 MiB: a quarter of Badger's default, see MemTableSize
	DefaultBlockCacheSize     = 64 << 20 // with Compress only
	DefaultMinFreeSpace       = 128 << 20
	DefaultMaxWriteWait       = 5 * time.Second
	DefaultRecoveryInterval   = time.Second
	DefaultMaxMappedResident  = 256 << 20 // 256 MiB, see MaxMappedResident

	// maxKeyLimit is Badger's key limit (65000) minus kapi's key prefix and
	// some room; MaxKeySize may not exceed it.
	maxKeyLimit = 60_000
)

// Options configures a Store. Build one with DefaultOptions or
// InMemoryOptions and adjust it with the WithX methods, or write a literal:
// Open treats every zero numeric field as its default, so Options{Dir: dir}
// is a durable store with default settings.
type Options struct {
	// Dir is the data directory (created if missing). Required unless InMemory.
	Dir string

	// InMemory keeps everything in memory (Badger's own in-memory mode):
	// nothing touches the disk and everything is lost on Close. Dir must be
	// empty.
	InMemory bool

	// NoSync acknowledges writes without waiting for fsync. A process crash
	// still loses nothing (the write-ahead log is in the page cache), but a
	// machine crash or power loss can lose acknowledged writes. Default false:
	// every acknowledged write is on stable storage.
	NoSync bool

	// Logger receives the store's and Badger's log records. Badger's errors and
	// warnings are logged at those levels, its info messages at debug level,
	// its debug messages not at all. Default: discard.
	Logger *slog.Logger

	// MaxKeySize is the largest accepted key in bytes. Default 4 KiB; at most
	// 60,000.
	MaxKeySize int

	// MaxValueSize is the largest accepted value in bytes. Default 2 MiB
	// (above the API's 1.5 MiB object limit). It may not exceed 15% of
	// MemTableSize minus 256 KiB (Badger's transaction size limit: about 2.15
	// MiB with the default memtable; 3 MiB values need a memtable of 22 MiB).
	MaxValueSize int

	// RetentionTime bounds history by age: revisions older than this become
	// eligible for automatic compaction. Default 10 minutes; negative means no
	// age limit.
	RetentionTime time.Duration

	// RetentionRevisions bounds history by count: revisions more than this
	// many behind the current one become eligible for automatic compaction.
	// Default 1,000,000; negative means no count limit. History is compacted
	// when either limit says so; with both negative, only Compact compacts.
	RetentionRevisions int64

	// CompactionInterval is how often the retention limits are applied.
	// Default 30 seconds. The time limit is applied with this granularity:
	// history is kept for at least RetentionTime.
	CompactionInterval time.Duration

	// MaxBatchWrites caps the number of writes committed in one group commit.
	// Default 1024.
	MaxBatchWrites int

	// WatchBufferSize is the number of events buffered per watcher before the
	// watcher is considered hopelessly behind; it then drops its buffer and
	// catches up from the change log (see Store.Watch). Default 10,000.
	WatchBufferSize int

	// WatchBufferBytes bounds the same buffer by the bytes of its events'
	// keys and values: a watcher of large values falls behind on bytes long
	// before it has 10,000 of them. Default 64 MiB.
	WatchBufferBytes int64

	// MemTableSize is Badger's memtable size in bytes. Default 16 MiB; at
	// least 8 MiB. It bounds MaxValueSize (see there). Each memtable's arena
	// (about 1.3 times this size) is allocated up front on the Go heap, where
	// the garbage collector counts it as live, and flushing a full memtable
	// builds its table on the heap (about twice this size) while the next
	// memtable fills: a smaller memtable lowers the process's memory by
	// several times the difference, for more frequent (smaller) flushes to
	// disk.
	MemTableSize int64

	// Compress stores Badger's tables Snappy-compressed: smaller on disk
	// when objects compress well, at the CPU cost of compressing at every
	// flush and compaction and decompressing blocks on reads, which then
	// need a block cache (BlockCacheSize). Default false: tables are read
	// straight from their memory-mapped files, with nothing to cache and no
	// heap memory spent on blocks. Tables keep the compression they were
	// written with, so the setting can change between runs.
	Compress bool

	// BlockCacheSize is Badger's cache of decompressed blocks, in bytes.
	// Default: 64 MiB with Compress, none without (blocks are read in place).
	BlockCacheSize int64

	// SkipTableVerification skips reading every table and checking its
	// checksums at Open (one sequential read of the data). Default false:
	// Open fails on a corrupt table rather than serve incomplete lists later
	// (Badger's iterators end silently at a corrupt block).
	SkipTableVerification bool

	// MinFreeSpace is the free space, in bytes, that writes leave on the
	// volume of Dir. Before each group commit the store checks the volume:
	// when the batch would leave less free, its writes fail with
	// storage.ErrNoSpace (nothing is written, no revision is used) and reads
	// continue; writes resume by themselves once space is freed. The reserve
	// is room for what Badger writes in the background (a memtable flush, its
	// LSM compactions): Badger writes through memory-mapped files, and a write
	// into one on a full volume kills the process (SIGBUS). Default 128 MiB
	// (about eight times MemTableSize: a write-ahead log, its flush and a
	// level-0 compaction); negative disables the check.
	MinFreeSpace int64

	// MaxWriteWait bounds how long a write waits for room in the full write
	// queue (MaxBatchWrites writes wait for the group commit in progress)
	// before it fails with storage.ErrBusy, not applied. A slow disk thus
	// sheds writes instead of piling up callers. Default 5 seconds; negative
	// waits as long as the caller's context allows.
	MaxWriteWait time.Duration

	// RecoveryInterval is how often a store whose commit or fsync failed
	// probes its data directory (free space, a test write) and, once the
	// probe succeeds, reopens Badger and resumes writes. Default 1 second.
	RecoveryInterval time.Duration

	// MaxMappedResident bounds the resident memory, in bytes, of the data
	// directory's memory-mapped tables and value logs (Linux only; not
	// in-memory stores). Badger reads and writes its tables through shared
	// memory mappings, and every page it wrote or read stays resident
	// until the kernel needs the memory: the process's resident size grows
	// with the data. Every second the store checks that memory and, over
	// the bound, asks the kernel to reclaim the pages of the oldest tables
	// (madvise MADV_PAGEOUT) until it is an eighth below the bound. A later
	// read of a reclaimed page faults it back in, from the page cache while
	// the kernel keeps it there, from the disk otherwise. The write-ahead
	// logs (at most a few memtables) are not counted. Default 256 MiB: a
	// store's gets, lists and watches run from the recent tables and a few
	// pages of each older one's index; negative turns the bound off (every
	// page stays resident until the kernel reclaims it). See
	// Store.MappedMemory for what it measured and released.
	MaxMappedResident int64

	// hooks injects faults in tests.
	hooks *testHooks
}

// testHooks injects faults that cannot be produced for real in a test.
type testHooks struct {
	// sync runs before each group commit's fsync; a non-nil error fails the
	// batch as a failed fsync would.
	sync func() error
	// datasync runs before each fdatasync of the store's syncer (group
	// commits, compactions); a non-nil error is that fdatasync's.
	datasync func() error
	// mappedInterval replaces the mapped-memory check's interval.
	mappedInterval time.Duration
}

// DefaultOptions returns the default options for a durable store in dir.
func DefaultOptions(dir string) Options {
	return Options{
		Dir:                dir,
		MaxKeySize:         DefaultMaxKeySize,
		MaxValueSize:       DefaultMaxValueSize,
		RetentionTime:      DefaultRetentionTime,
		RetentionRevisions: DefaultRetentionRevisions,
		CompactionInterval: DefaultCompactionInterval,
		MaxBatchWrites:     DefaultMaxBatchWrites,
		WatchBufferSize:    DefaultWatchBufferSize,
		WatchBufferBytes:   DefaultWatchBufferBytes,
		MemTableSize:       DefaultMemTableSize,
		MinFreeSpace:       DefaultMinFreeSpace,
		MaxWriteWait:       DefaultMaxWriteWait,
		RecoveryInterval:   DefaultRecoveryInterval,
		MaxMappedResident:  DefaultMaxMappedResident,
	}
}

// InMemoryOptions returns the default options for an in-memory store.
func InMemoryOptions() Options {
	o := DefaultOptions("")
	o.InMemory = true
	return o
}

// WithDir returns o with Dir set. There is no default.
func (o Options) WithDir(dir string) Options { o.Dir = dir; return o }

// WithInMemory returns o with InMemory set. Default false.
func (o Options) WithInMemory(v bool) Options { o.InMemory = v; return o }

// WithNoSync returns o with NoSync set. Default false (durable writes).
func (o Options) WithNoSync(v bool) Options { o.NoSync = v; return o }

// WithLogger returns o with Logger set. Default: discard.
func (o Options) WithLogger(l *slog.Logger) Options { o.Logger = l; return o }

// WithMaxKeySize returns o with MaxKeySize set. Default 4 KiB.
func (o Options) WithMaxKeySize(n int) Options { o.MaxKeySize = n; return o }

// WithMaxValueSize returns o with MaxValueSize set. Default 2 MiB.
func (o Options) WithMaxValueSize(n int) Options { o.MaxValueSize = n; return o }

// WithRetentionTime returns o with RetentionTime set. Default 10 minutes;
// negative means no age limit.
func (o Options) WithRetentionTime(d time.Duration) Options { o.RetentionTime = d; return o }

// WithRetentionRevisions returns o with RetentionRevisions set. Default
// 1,000,000; negative means no count limit.
func (o Options) WithRetentionRevisions(n int64) Options { o.RetentionRevisions = n; return o }

// WithCompactionInterval returns o with CompactionInterval set. Default 30 seconds.
func (o Options) WithCompactionInterval(d time.Duration) Options {
	o.CompactionInterval = d
	return o
}

// WithMaxBatchWrites returns o with MaxBatchWrites set. Default 1024.
func (o Options) WithMaxBatchWrites(n int) Options { o.MaxBatchWrites = n; return o }

// WithWatchBufferSize returns o with WatchBufferSize set. Default 10,000 events.
func (o Options) WithWatchBufferSize(n int) Options { o.WatchBufferSize = n; return o }

// WithWatchBufferBytes returns o with WatchBufferBytes set. Default 64 MiB.
func (o Options) WithWatchBufferBytes(n int64) Options { o.WatchBufferBytes = n; return o }

// WithMemTableSize returns o with MemTableSize set. Default 16 MiB.
func (o Options) WithMemTableSize(n int64) Options { o.MemTableSize = n; return o }

// WithCompress returns o with Compress set. Default false.
func (o Options) WithCompress(v bool) Options { o.Compress = v; return o }

// WithBlockCacheSize returns o with BlockCacheSize set. Default 64 MiB with
// Compress, none without.
func (o Options) WithBlockCacheSize(n int64) Options { o.BlockCacheSize = n; return o }

// WithSkipTableVerification returns o with SkipTableVerification set.
// Default false (tables are verified at Open).
func (o Options) WithSkipTableVerification(v bool) Options { o.SkipTableVerification = v; return o }

// WithMinFreeSpace returns o with MinFreeSpace set. Default 128 MiB;
// negative disables the free-space check.
func (o Options) WithMinFreeSpace(n int64) Options { o.MinFreeSpace = n; return o }

// WithMaxWriteWait returns o with MaxWriteWait set. Default 5 seconds;
// negative waits as long as the caller's context allows.
func (o Options) WithMaxWriteWait(d time.Duration) Options { o.MaxWriteWait = d; return o }

// WithRecoveryInterval returns o with RecoveryInterval set. Default 1 second.
func (o Options) WithRecoveryInterval(d time.Duration) Options { o.RecoveryInterval = d; return o }

// WithMaxMappedResident returns o with MaxMappedResident set. Default 256
// MiB; negative turns the bound off.
func (o Options) WithMaxMappedResident(n int64) Options { o.MaxMappedResident = n; return o }

// withDefaults fills zero fields with defaults and validates the result.
func (o Options) withDefaults() (Options, error) {
	def := DefaultOptions(o.Dir)
	if o.MaxKeySize == 0 {
		o.MaxKeySize = def.MaxKeySize
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = def.MaxValueSize
	}
	if o.RetentionTime == 0 {
		o.RetentionTime = def.RetentionTime
	}
	if o.RetentionRevisions == 0 {
		o.RetentionRevisions = def.RetentionRevisions
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = def.CompactionInterval
	}
	if o.MaxBatchWrites == 0 {
		o.MaxBatchWrites = def.MaxBatchWrites
	}
	if o.WatchBufferSize == 0 {
		o.WatchBufferSize = def.WatchBufferSize
	}
	if o.WatchBufferBytes == 0 {
		o.WatchBufferBytes = def.WatchBufferBytes
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = def.MemTableSize
	}
	if o.MinFreeSpace == 0 {
		o.MinFreeSpace = def.MinFreeSpace
	}
	if o.MaxWriteWait == 0 {
		o.MaxWriteWait = def.MaxWriteWait
	}
	if o.RecoveryInterval == 0 {
		o.RecoveryInterval = def.RecoveryInterval
	}
	if o.MaxMappedResident == 0 {
		o.MaxMappedResident = def.MaxMappedResident
	}
	if o.BlockCacheSize == 0 && o.Compress {
		o.BlockCacheSize = DefaultBlockCacheSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}

	switch {
	case o.InMemory && o.Dir != "":
		return o, fmt.Errorf("badger: options: Dir must be empty in memory mode (got %q)", o.Dir)
	case !o.InMemory && o.Dir == "":
		return o, fmt.Errorf("badger: options: Dir is required unless InMemory is set")
	case o.MaxKeySize < 0 || o.MaxKeySize > maxKeyLimit:
		return o, fmt.Errorf("badger: options: MaxKeySize %d out of range (1..%d)", o.MaxKeySize, maxKeyLimit)
	case o.MemTableSize < 8<<20:
		return o, fmt.Errorf("badger: options: MemTableSize %d is below 8 MiB", o.MemTableSize)
	case o.MaxValueSize < 0 || int64(o.MaxValueSize) > maxValueLimit(o.MemTableSize):
		return o, fmt.Errorf("badger: options: MaxValueSize %d out of range (0..%d for MemTableSize %d)",
			o.MaxValueSize, maxValueLimit(o.MemTableSize), o.MemTableSize)
	case o.CompactionInterval < 0:
		return o, fmt.Errorf("badger: options: CompactionInterval %v is negative", o.CompactionInterval)
	case o.MaxBatchWrites < 1:
		return o, fmt.Errorf("badger: options: MaxBatchWrites %d must be positive", o.MaxBatchWrites)
	case o.WatchBufferSize < 1:
		return o, fmt.Errorf("badger: options: WatchBufferSize %d must be positive", o.WatchBufferSize)
	case o.WatchBufferBytes < 1:
		return o, fmt.Errorf("badger: options: WatchBufferBytes %d must be positive", o.WatchBufferBytes)
	case o.RecoveryInterval < 0:
		return o, fmt.Errorf("badger: options: RecoveryInterval %v is negative", o.RecoveryInterval)
	case o.BlockCacheSize < 0:
		return o, fmt.Errorf("badger: options: BlockCacheSize %d is negative", o.BlockCacheSize)
	}
	return o, nil
}

// maxValueLimit is the largest MaxValueSize a memtable size allows: Badger
// rejects a transaction of 15% of the memtable size or more, and one write is
// one transaction (value chunks, change-log entry and their keys).
func maxValueLimit(memTableSize int64) int64 {
	return 15*memTableSize/100 - 256<<10
}
