package badger

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A kill right after Badger created a new log file, before it sized it,
// leaves an empty *.mem or *.vlog file (the crash soak of examples/e2e hit
// the first: Open panicked on it, and Badger alone refuses such a
// directory for good). Open removes the empty file and opens with every
// write, and the store goes on. A write-ahead log shorter than its header
// is a cut file: Open refuses it, naming it.
func TestOpenEmptyLog(t *testing.T) {
	for _, c := range []struct {
		name string
		ext  string
		size int
		want string // in the Open error; "" opens
	}{
		{"empty write-ahead log", ".mem", 0, ""},
		{"empty value log", ".vlog", 0, ""},
		{"write-ahead log shorter than its header", ".mem", walHeaderSize - 1, "is truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := crashedStore(t, 100)
			logs, _ := filepath.Glob(filepath.Join(dir, "*"+c.ext))
			next := 0
			for _, l := range logs {
				fid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(l), c.ext))
				if err != nil {
					t.Fatal(err)
				}
				next = max(next, fid+1)
			}
			newLog := filepath.Join(dir, fmt.Sprintf("%05d%s", next, c.ext))
			if c.ext == ".vlog" {
				newLog = filepath.Join(dir, fmt.Sprintf("%06d%s", next, c.ext))
			}
			writeFile(t, newLog, bytes.Repeat([]byte{7}, c.size))

			s, err := Open(testOptions(t, dir))
			if c.want != "" {
				if err == nil {
					s.Close()
					t.Fatalf("Open succeeded with a %d-byte write-ahead log", c.size)
				}
				if !strings.Contains(err.Error(), newLog) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Open error %q does not name %s and say %q", err, newLog, c.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if _, err := s.Create(t.Context(), []byte("c/new"), []byte("after")); err != nil {
				t.Fatalf("Create after opening: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open(testOptions(t, dir)); err != nil {
				t.Fatalf("reopening: %v", err)
			}
			defer s.Close()
			res, err := s.List(t.Context(), listAll("c/"))
			if err != nil || len(res.Items) != 101 {
				t.Fatalf("after reopening: %d items, %v; want 101", len(res.Items), err)
			}
			for i, kv := range res.Items[:100] {
				if string(kv.Key) != fmt.Sprintf("c/%03d", i) || !bytes.Equal(kv.Value, bytes.Repeat([]byte{byte(i)}, 3000)) {
					t.Fatalf("item %d: %q is not what was written", i, kv.Key)
				}
			}
		})
	}
}

// crashedStore writes n items to a store and returns a copy of its
// directory taken while it is open: the items are in the write-ahead log
// only, as after a kill.
func crashedStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(testOptions(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		if _, err := s.Create(t.Context(), []byte(fmt.Sprintf("c/%03d", i)), bytes.Repeat([]byte{byte(i)}, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	cp := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
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
