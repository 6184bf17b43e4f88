package badger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

func TestOpenRefusesForeignDirectories(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // in the error
	}{
		{
			name: "another program's files",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "config.json"), []byte(`{"app": "something else"}`))
				writeFile(t, filepath.Join(dir, "data.db"), bytes.Repeat([]byte{0xde, 0xad}, 4096))
			},
			want: "not a kapi data directory",
		},
		{
			name: "garbage named like Badger's files",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest at all"))
				writeFile(t, filepath.Join(dir, "000001.sst"), bytes.Repeat([]byte("garbage"), 1000))
				writeFile(t, filepath.Join(dir, "000001.vlog"), bytes.Repeat([]byte{0xff}, 5000))
				writeFile(t, filepath.Join(dir, "00001.mem"), bytes.Repeat([]byte{0x01}, 5000))
			},
			want: "manifest",
		},
		{
			name: "a Badger database of another program",
			setup: func(t *testing.T, dir string) {
				db, err := bdb.Open(bdb.DefaultOptions(dir).WithLogger(nil))
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(func(txn *bdb.Txn) error { return txn.Set([]byte("user:1"), []byte("alice")) }); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			},
			want: "external magic",
		},
		{
			name: "a managed Badger database with kapi's magic but no marker",
			setup: func(t *testing.T, dir string) {
				db, err := bdb.OpenManaged(bdb.DefaultOptions(dir).WithLogger(nil).WithExternalMagic(externalMagic))
				if err != nil {
					t.Fatal(err)
				}
				txn := db.NewTransactionAt(5, true)
				if err := txn.Set([]byte("dsomething"), []byte("x")); err != nil {
					t.Fatal(err)
				}
				if err := txn.CommitAt(5, nil); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			},
			want: "no kapi format marker",
		},
		{
			name: "a kapi store of an unknown format version",
			setup: func(t *testing.T, dir string) {
				db, err := bdb.OpenManaged(bdb.DefaultOptions(dir).WithLogger(nil).WithExternalMagic(externalMagic))
				if err != nil {
					t.Fatal(err)
				}
				txn := db.NewTransactionAt(1, true)
				if err := txn.Set(metaFormatKey, []byte("kapi-storage-badger/99")); err != nil {
					t.Fatal(err)
				}
				if err := txn.CommitAt(1, nil); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			},
			want: "unsupported storage format",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			before := snapshotDir(t, dir)
			s, err := Open(testOptions(t, dir))
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Open error %q does not mention %q and the directory", err, c.want)
			}
			// Refusing must not have changed the other program's files.
			if c.name != "a managed Badger database with kapi's magic but no marker" &&
				c.name != "a kapi store of an unknown format version" {
				if after := snapshotDir(t, dir); after != before {
					t.Fatalf("directory changed:\nbefore %s\nafter  %s", before, after)
				}
			}
		})
	}
}

// TestOpenCorruptStore corrupts the files of a real store: Open must fail
// with an error naming the damaged file and saying what to do, never start
// on partial data; a corruption that spares kapi's data (the preallocated
// rest of a log, the unused value log) opens with every item.
func TestOpenCorruptStore(t *testing.T) {
	// build writes a store; with wal set, it returns a copy of the
	// directory taken while the store was open, whose data is still in the
	// memtable's write-ahead log (as after a crash).
	small := func(t *testing.T, dir string) Options {
		return testOptions(t, dir).WithMemTableSize(8 << 20).WithMaxValueSize(256 << 10)
	}
	build := func(t *testing.T, wal bool) string {
		dir := t.TempDir()
		s, err := Open(small(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range 200 {
			if _, err := s.Create(t.Context(), []byte(fmt.Sprintf("c/%03d", i)), bytes.Repeat([]byte{byte(i)}, 3000)); err != nil {
				t.Fatal(err)
			}
		}
		if wal {
			cp := t.TempDir()
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() == "LOCK" {
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(cp, e.Name()), b)
			}
			return cp
		}
		if err := s.db.Flatten(1); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// want is what the Open error must contain (with the file's name and
	// "restore"); "" means the corruption spares kapi's data and the store
	// must open with every item intact.
	corruptions := []struct {
		name string
		glob string
		fn   func(b []byte) []byte
		wal  bool
		want string
	}{
		{"truncated MANIFEST", "MANIFEST", func(b []byte) []byte { return b[:5] }, false, "MANIFEST"},
		{"MANIFEST garbage", "MANIFEST", func(b []byte) []byte { return bytes.Repeat([]byte{0x5a}, len(b)) }, false, "MANIFEST"},
		{"MANIFEST bit flip", "MANIFEST", func(b []byte) []byte { b[len(b)-3] ^= 0xff; return b }, false, "MANIFEST"},
		{"KEYREGISTRY garbage", "KEYREGISTRY", func(b []byte) []byte { return bytes.Repeat([]byte{0x33}, len(b)) }, false, "KEYREGISTRY"},
		{"WAL garbage in the middle", "*.mem", func(b []byte) []byte {
			for i := 300_000; i < len(b) && i < 400_000; i += 7 {
				b[i] ^= 0xa5
			}
			return b
		}, true, ".mem is corrupt at offset"},
		{"WAL one bit flipped", "*.mem", func(b []byte) []byte { b[200_000] ^= 0x01; return b }, true, ".mem is corrupt at offset"},
		{"WAL cut inside its data", "*.mem", func(b []byte) []byte { return b[:len(bytes.TrimRight(b, "\x00"))/2] }, true, ".mem is truncated"},
		{"WAL preallocated zeros cut", "*.mem", func(b []byte) []byte { return b[:len(bytes.TrimRight(b, "\x00"))+1000] }, true, ""},
		{"WAL intact", "*.mem", func(b []byte) []byte { return b }, true, ""},
		{"value log garbage", "*.vlog", func(b []byte) []byte { return bytes.Repeat([]byte{0x42}, len(b)) }, true, ".vlog"},
		{"table garbage", "*.sst", func(b []byte) []byte { return bytes.Repeat([]byte{0x77}, len(b)) }, false, ".sst"},
		{"table truncated", "*.sst", func(b []byte) []byte { return b[:len(b)/2] }, false, ".sst"},
		{"table intact", "*.sst", func(b []byte) []byte { return b }, false, ""},
		{"table data bit flips", "*.sst", func(b []byte) []byte {
			for i := 100; i < len(b)/2; i += 997 {
				b[i] ^= 0x10
			}
			return b
		}, false, ".sst"},
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			dir := build(t, c.wal)
			files, _ := filepath.Glob(filepath.Join(dir, c.glob))
			if len(files) == 0 {
				t.Fatalf("no %s file in the store", c.glob)
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, f, c.fn(b))
			}
			s, err := Open(small(t, dir))
			if c.want != "" {
				if err == nil {
					s.Close()
					t.Fatalf("Open succeeded on a damaged store (%s)", c.name)
				}
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "restore") {
					t.Fatalf("Open error %q does not name the file (%q) and the remedy", err, c.want)
				}
				t.Logf("Open: %v", err)
				if c.glob == "*.vlog" {
					// kapi keeps no data in Badger's value log (every value is
					// below its threshold): moving the file away salvages all.
					for _, f := range files {
						if err := os.Remove(f); err != nil {
							t.Fatal(err)
						}
					}
					if s, err = Open(small(t, dir)); err != nil {
						t.Fatalf("Open without the damaged value log: %v", err)
					}
					defer s.Close()
					if res, err := s.List(t.Context(), listAll("c/")); err != nil || len(res.Items) != 200 {
						t.Fatalf("without the damaged value log: %d items, %v", len(res.Items), err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			res, err := s.List(t.Context(), listAll("c/"))
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			for i, kv := range res.Items {
				if string(kv.Key) != fmt.Sprintf("c/%03d", i) || !bytes.Equal(kv.Value, bytes.Repeat([]byte{byte(i)}, 3000)) {
					t.Fatalf("item %d: corrupt key-value served for %q", i, kv.Key)
				}
			}
			if len(res.Items) != 200 {
				t.Fatalf("%d items, want 200", len(res.Items))
			}
		})
	}
}

func TestOpenLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	open(t, testOptions(t, dir))
	if s, err := Open(testOptions(t, dir)); err == nil {
		s.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
}

func TestOpenResumesRevision(t *testing.T) {
	dir := t.TempDir()
	s := open(t, testOptions(t, dir))
	var last int64
	for i := range 10 {
		r, err := s.Create(t.Context(), []byte{'k', byte(i)}, []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, testOptions(t, dir))
	if cur, _ := s.CurrentRevision(t.Context()); cur != last {
		t.Fatalf("revision after reopening %d, want %d", cur, last)
	}
	if r, err := s.Create(t.Context(), []byte("next"), nil); err != nil || r != last+1 {
		t.Fatalf("next write got %d, %v; want %d", r, err, last+1)
	}
}

func TestOptions(t *testing.T) {
	d := DefaultOptions("/data")
	if d.Dir != "/data" || d.InMemory || d.NoSync || d.MaxValueSize != 2<<20 || d.MemTableSize != 16<<20 || d.RetentionTime != 10*time.Minute ||
		d.RetentionRevisions != 1_000_000 || d.MaxKeySize != 4096 {
		t.Fatalf("DefaultOptions = %+v", d)
	}
	m := InMemoryOptions()
	if !m.InMemory || m.Dir != "" {
		t.Fatalf("InMemoryOptions = %+v", m)
	}
	// A literal with only Dir gets the defaults.
	o, err := Options{Dir: "/data"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	o.Logger = nil
	if o != d {
		t.Fatalf("Options{Dir}.withDefaults() = %+v, want %+v", o, d)
	}
	bad := []Options{
		{},                                  // no Dir
		{InMemory: true, Dir: "/x"},         // both
		{Dir: "/x", MaxKeySize: 100_000},    // key limit
		{Dir: "/x", MaxValueSize: 20 << 20}, // above the memtable's transaction limit
		{Dir: "/x", MemTableSize: 1 << 20},
		{Dir: "/x", MaxValueSize: 3 << 20}, // 3 MiB needs a 22 MiB memtable
		{Dir: "/x", MaxBatchWrites: -1},
		{Dir: "/x", WatchBufferSize: -5},
		{Dir: "/x", WatchBufferBytes: -1},
		{Dir: "/x", CompactionInterval: -time.Second},
	}
	for _, b := range bad {
		if _, err := Open(b); err == nil {
			t.Errorf("Open(%+v) succeeded", b)
		}
	}
	// A larger memtable allows larger values.
	if _, err := (Options{Dir: "/x", MaxValueSize: 20 << 20, MemTableSize: 256 << 20}).withDefaults(); err != nil {
		t.Errorf("20 MiB values with a 256 MiB memtable: %v", err)
	}
	if _, err := (Options{Dir: "/x", MaxValueSize: 3 << 20, MemTableSize: 22 << 20}).withDefaults(); err != nil {
		t.Errorf("3 MiB values with a 22 MiB memtable: %v", err)
	}
}

// TestBadgerLogsToSlog checks Badger's logger is routed to the slog logger:
// its info messages at debug level, nothing at info level.
func TestBadgerLogsToSlog(t *testing.T) {
	h := &recordHandler{}
	s, err := Open(testOptions(t, t.TempDir()).WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var badgerDebug int
	for _, r := range h.records() {
		if r.component == "badger" {
			if r.level > slog.LevelDebug && r.level < slog.LevelWarn {
				t.Errorf("Badger record at level %v: %q", r.level, r.msg)
			}
			badgerDebug++
		}
	}
	if badgerDebug == 0 {
		t.Fatal("no Badger log record reached the slog logger")
	}
}

type logRecord struct {
	level     slog.Level
	msg       string
	component string
}

type recordHandler struct {
	mu  sync.Mutex
	all []logRecord
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	lr := logRecord{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" {
			lr.component = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.all = append(h.all, lr)
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) records() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), h.all...)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// snapshotDir describes a directory's files: names, sizes and content hashes.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d:%x; ", e.Name(), len(data), sha256.Sum256(data))
	}
	return b.String()
}

func listAll(prefix string) storage.ListOptions {
	return storage.ListOptions{Prefix: []byte(prefix)}
}

// Tables keep the compression they were written with: a store written with
// Compress reads back without it, and the other way round.
func TestCompressionChangesBetweenRuns(t *testing.T) {
	dir := t.TempDir()
	value := bytes.Repeat([]byte("compressible json "), 120)
	write := func(s *Store, from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Create(t.Context(), fmt.Appendf(nil, "k%05d", i), value); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(s *Store, n int) {
		t.Helper()
		res, err := s.List(t.Context(), storage.ListOptions{Prefix: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != n {
			t.Fatalf("%d keys, want %d", len(res.Items), n)
		}
		for _, kv := range res.Items {
			if !bytes.Equal(kv.Value, value) {
				t.Fatalf("%s: value differs", kv.Key)
			}
		}
	}
	for run, compress := range []bool{true, false, true} {
		s, err := Open(testOptions(t, dir).WithCompress(compress).WithBlockCacheSize(0))
		if err != nil {
			t.Fatalf("run %d (compress %v): %v", run, compress, err)
		}
		check(s, run*500)
		write(s, run*500, (run+1)*500)
		check(s, (run+1)*500)
		if err := s.Close(); err != nil { // flushes the memtable to a table
			t.Fatal(err)
		}
		if tables, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(tables) <= run {
			t.Fatalf("after run %d: %d tables on disk; the test means to read tables of each kind", run, len(tables))
		}
	}
}
