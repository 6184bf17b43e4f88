//go:build linux

package badger

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kapi-dev/kapi/internal/disktest"
	"github.com/kapi-dev/kapi/storage"
)

// diskOptions is a store on a small volume: an 8 MiB memtable and a 16 MiB
// reserve.
func diskOptions(t testing.TB, dir string) Options {
	return testOptions(t, dir).WithMemTableSize(8 << 20).WithMaxValueSize(256 << 10).WithMinFreeSpace(16 << 20)
}

// TestDiskFull fills the real file system under a store (a 64 MiB tmpfs,
// to its last byte): writes fail with storage.ErrNoSpace naming the
// directory, nothing is written, reads and watches go on; once the ballast
// is removed, writes resume in the same store without a restart, and every
// acknowledged write is there after reopening.
func TestDiskFull(t *testing.T) {
	vol := disktest.Tmpfs(t, 64<<20)
	dir := filepath.Join(vol, "store")
	s, err := Open(diskOptions(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string][]byte{}
	put := func(key string, value []byte) (int64, error) {
		rev, err := s.Create(t.Context(), []byte(key), value)
		if err == nil {
			acked[key] = value
		}
		return rev, err
	}
	for i := range 50 {
		if _, err := put(fmt.Sprintf("full/%03d", i), bytes.Repeat([]byte{byte(i)}, 20000)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.CurrentRevision(t.Context())
	w, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("full/")})
	if err != nil {
		t.Fatal(err)
	}

	ballast := disktest.Fill(t, vol)
	_, err = put("full/refused", []byte("x"))
	if !errors.Is(err, storage.ErrNoSpace) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("create on a full disk: %v; want ErrNoSpace naming %s", err, dir)
	}
	t.Logf("refused: %v", err)
	if _, err := s.Update(t.Context(), []byte("full/001"), []byte("y"), 0); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("update on a full disk: %v", err)
	}
	if _, _, err := s.Delete(t.Context(), []byte("full/002"), 0); !errors.Is(err, storage.ErrNoSpace) {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if cur, _ := s.CurrentRevision(t.Context()); cur != before {
		t.Fatalf("refused writes moved the revision from %d to %d", before, cur)
	}
	// Reads: a get, a list, and a watch replaying history.
	if kv, err := s.Get(t.Context(), []byte("full/007"), 0); err != nil || !bytes.Equal(kv.Value, acked["full/007"]) {
		t.Fatalf("get on a full disk: %v", err)
	}
	if res, err := s.List(t.Context(), listAll("full/")); err != nil || len(res.Items) != 50 {
		t.Fatalf("list on a full disk: %d items, %v", len(res.Items), err)
	}
	replay, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("full/"), FromRevision: before - 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if ev := <-replay; ev.Type != storage.EventPut {
			t.Fatalf("replayed event on a full disk: %+v", ev)
		}
	}

	// Space returns: the same store writes again.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	rev, err := put("full/after", []byte("space is back"))
	if err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
	if ev := <-w; ev.Type != storage.EventPut || string(ev.Key) != "full/after" || ev.Revision != rev || rev != before+1 {
		t.Fatalf("watch after space returned: %+v (revision %d, before %d)", ev, rev, before)
	}
	for i := range 20 {
		if _, err := put(fmt.Sprintf("full/more%02d", i), bytes.Repeat([]byte{'m'}, 20000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, diskOptions(t, dir))
	checkConsistency(t, s, 0)
	res, err := s.List(t.Context(), listAll("full/"))
	if err != nil || len(res.Items) != len(acked) {
		t.Fatalf("after reopening: %d items, %v; want %d", len(res.Items), err, len(acked))
	}
	for _, kv := range res.Items {
		if !bytes.Equal(kv.Value, acked[string(kv.Key)]) {
			t.Fatalf("%s: value differs after reopening", kv.Key)
		}
	}
}

// TestDiskFullBelowReserve: the reserve is kept, not just the last byte. A
// volume with some space, but less than MinFreeSpace, refuses writes too.
func TestDiskFullBelowReserve(t *testing.T) {
	vol := disktest.Tmpfs(t, 64<<20)
	dir := filepath.Join(vol, "store")
	s := open(t, diskOptions(t, dir).WithMinFreeSpace(70<<20))
	_, err := s.Create(t.Context(), []byte("k"), []byte("v"))
	if !errors.Is(err, storage.ErrNoSpace) || !strings.Contains(err.Error(), "MinFreeSpace") {
		t.Fatalf("create with less than MinFreeSpace free: %v", err)
	}
	if free := disktest.Free(t, vol); free < 30<<20 {
		t.Fatalf("the volume has only %d bytes free; the test means a half-empty one", free)
	}
}

// TestDiskFullWithoutReserve shows why the reserve exists: with the check
// off (MinFreeSpace < 0), a write on a really full volume reaches Badger,
// whose write into its memory-mapped write-ahead log cannot be backed by the
// file system: the kernel sends SIGBUS and the process dies. It runs in a
// child process; the parent then frees the space, reopens the store and finds
// every write the child had acknowledged.
func TestDiskFullWithoutReserve(t *testing.T) {
	if dir := os.Getenv("KAPI_TEST_SIGBUS_DIR"); dir != "" {
		diskFullChild(t, dir)
		return
	}
	vol := disktest.Tmpfs(t, 64<<20)
	dir := filepath.Join(vol, "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullWithoutReserve$", "-test.v")
	cmd.Env = append(os.Environ(), "KAPI_TEST_SIGBUS_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "SIGBUS") || strings.Contains(line, "fatal error") || strings.Contains(line, "unexpected fault") || strings.Contains(line, "--- FAIL") {
			t.Logf("child: %s", line)
		}
	}
	if err == nil || !strings.Contains(out.String(), "SIGBUS") {
		t.Fatalf("the child exited with %v; want it killed by SIGBUS on the full volume", err)
	}
	var acked []int64
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "ACKED "); ok {
			rev, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			acked = append(acked, rev)
		}
	}
	if len(acked) == 0 {
		t.Fatal("the child acknowledged nothing")
	}
	if err := os.Remove(filepath.Join(vol, "ballast")); err != nil {
		t.Fatal(err)
	}
	s := open(t, diskOptions(t, dir))
	checkConsistency(t, s, 0)
	for _, rev := range acked {
		key := fmt.Sprintf("sigbus/%06d", rev)
		if kv, err := s.Get(t.Context(), []byte(key), 0); err != nil || kv.Revision != rev {
			t.Fatalf("acknowledged write %s at revision %d: %v (revision %d)", key, rev, err, kv.Revision)
		}
	}
	t.Logf("all %d acknowledged writes survived the SIGBUS", len(acked))
}

// diskFullChild writes acknowledged keys (named after their revision),
// fills the volume, and goes on writing until the process dies.
func diskFullChild(t *testing.T, dir string) {
	s, err := Open(diskOptions(t, dir).WithMinFreeSpace(-1))
	if err != nil {
		t.Fatal(err)
	}
	write := func() error {
		cur, _ := s.CurrentRevision(t.Context())
		rev, err := s.Create(t.Context(), fmt.Appendf(nil, "sigbus/%06d", cur+1), bytes.Repeat([]byte{'s'}, 50000))
		if err == nil {
			if rev != cur+1 {
				t.Fatalf("revision %d, want %d", rev, cur+1)
			}
			fmt.Printf("ACKED %d\n", rev)
		}
		return err
	}
	for range 20 {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	disktest.Fill(t, filepath.Dir(dir))
	for i := range 10000 {
		if err := write(); err != nil {
			t.Fatalf("write %d on the full volume returned %v instead of killing the process", i, err)
		}
	}
	t.Fatal("10000 writes on a full volume, and the process still lives")
}
