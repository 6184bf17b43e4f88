package badger

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/storage"
)

// TestTornWAL cuts the memtable write-ahead log at many byte offsets, the
// state a crash leaves it in, and checks that every cut opens to a
// consistent store: the writes that survive are exactly the first k
// revisions for some k (a prefix), each whole (data, chunks and change-log
// entry together), and k never decreases as the cut moves later.
//
// Unlike TestCrashRecovery, which kills a process at a random moment, this
// deterministically tries cuts inside transactions, including inside the
// multi-entry transactions of chunked values.
func TestTornWAL(t *testing.T) {
	src := t.TempDir()
	opts := func(t *testing.T, dir string) Options {
		return testOptions(t, dir).WithMemTableSize(16 << 20).WithMaxValueSize(2 << 20)
	}
	s, err := Open(opts(t, src))
	if err != nil {
		t.Fatal(err)
	}
	type write struct {
		rev   int64
		key   string
		del   bool
		value []byte
	}
	var writes []write
	revs := map[string]int64{}
	for i := range 100 {
		key := fmt.Sprintf("torn/k%d", i%5)
		value := bytes.Repeat([]byte{byte(i)}, 100+i)
		if i%25 == 7 {
			value = bytes.Repeat([]byte{byte(i)}, chunkSize+5000) // two chunks
		}
		var rev int64
		del := false
		switch {
		case revs[key] == 0:
			rev, err = s.Create(t.Context(), []byte(key), value)
		case i%7 == 3:
			_, rev, err = s.Delete(t.Context(), []byte(key), revs[key])
			del, value = true, nil
		default:
			rev, err = s.Update(t.Context(), []byte(key), value, revs[key])
		}
		if err != nil {
			t.Fatal(err)
		}
		if del {
			revs[key] = 0
		} else {
			revs[key] = rev
		}
		writes = append(writes, write{rev, key, del, value})
	}
	// Copy the directory while the store is open: the writes are only in
	// the write-ahead log.
	files := map[string][]byte{}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wal     string
		walSize int64 // Badger preallocates the log file; cut files keep its size
	)
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".mem") && len(bytes.TrimRight(b, "\x00")) > 0 {
			if wal != "" {
				t.Fatalf("more than one write-ahead log with data: %s, %s", wal, e.Name())
			}
			wal, walSize = e.Name(), int64(len(b))
			b = bytes.TrimRight(b, "\x00")
		}
		files[e.Name()] = b
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if wal == "" {
		t.Fatal("no write-ahead log with data")
	}
	end := len(files[wal])

	// Cut points: spread over the log (the large values take most of it,
	// so many cuts land inside the transactions of chunked values), plus
	// cuts a few bytes apart near the start, among small transactions.
	var cuts []int
	for i := 0; i <= 20; i++ {
		cuts = append(cuts, end*i/20)
	}
	for off := 20; off < 20+8*97; off += 97 {
		cuts = append(cuts, off)
	}
	last := int64(0)
	for _, cut := range sortedUnique(cuts) {
		dir := t.TempDir()
		for name, b := range files {
			if name == wal {
				b = b[:cut]
			}
			writeFile(t, filepath.Join(dir, name), b)
			if name == wal { // zeros after the cut, as in a preallocated file
				if err := os.Truncate(filepath.Join(dir, name), walSize); err != nil {
					t.Fatal(err)
				}
			}
		}
		s, err := Open(opts(t, dir))
		if err != nil {
			t.Fatalf("cut at %d of %d: Open: %v", cut, end, err)
		}
		cur, _ := s.CurrentRevision(t.Context())
		if cur < last {
			t.Fatalf("cut at %d: revision %d, below %d at an earlier cut", cut, cur, last)
		}
		last = cur
		checkConsistency(t, s, 0) // contiguous log, data and log agree
		for _, w := range writes {
			if w.rev > cur {
				break
			}
			kv, err := s.Get(t.Context(), []byte(w.key), w.rev)
			if w.del && !errors.Is(err, storage.ErrNotFound) ||
				!w.del && (err != nil || kv.Revision != w.rev || !bytes.Equal(kv.Value, w.value)) {
				t.Fatalf("cut at %d (revision %d): write at %d of %s: %v, rev %d", cut, cur, w.rev, w.key, err, kv.Revision)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if last != writes[len(writes)-1].rev {
		t.Fatalf("the uncut log recovered revision %d, want %d", last, writes[len(writes)-1].rev)
	}
}

func sortedUnique(xs []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
