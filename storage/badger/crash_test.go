package badger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/kapi-dev/kapi/storage"
)

var soak = flag.Bool("soak", false, "run long soak variants (more crash rounds, longer storms)")

const (
	crashDirEnv = "KAPI_BADGER_CRASH_DIR"
	crashRunEnv = "KAPI_BADGER_CRASH_RUN"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		os.Exit(crashChild(dir, os.Getenv(crashRunEnv)))
	}
	os.Exit(m.Run())
}

// crashValue is the value of a crash-test write, rebuilt by the parent from
// what the child prints. Every 10th write of writer 0 is above chunkSize.
func crashValue(run, writer, seq int) []byte {
	size := 64 + (writer*131+seq*17)%2048
	if writer == 0 && seq%10 == 5 {
		size = chunkSize + 1000 + seq
	}
	v := make([]byte, size)
	copy(v, fmt.Sprintf("r%d-w%d-s%d|", run, writer, seq))
	for i := 32; i < size; i++ {
		v[i] = byte(run + writer*7 + seq*13 + i)
	}
	return v
}

// crashChild is the child process: a write storm with many writers that
// prints every acknowledged write as
//
//	ack <rev> <put|del> <key> <writer> <seq> <previous revision>
//
// until it is killed.
func crashChild(dir, runStr string) int {
	run, err := strconv.Atoi(runStr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad run:", err)
		return 2
	}
	s, err := Open(DefaultOptions(dir).WithMemTableSize(32 << 20))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	var out sync.Mutex
	emit := func(line string) {
		out.Lock()
		defer out.Unlock()
		if _, err := os.Stdout.WriteString(line); err != nil { // one write(2) per line
			os.Exit(3)
		}
	}
	emit("ready\n")
	const writers, keysPerWriter = 32, 3
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			revs := make([]int64, keysPerWriter) // 0: key absent
			for seq := 0; ; seq++ {
				k := seq % keysPerWriter
				key := fmt.Sprintf("crash/r%d/w%d/k%d", run, w, k)
				var (
					rev  int64
					err  error
					kind = "put"
					prev = revs[k]
				)
				switch {
				case revs[k] == 0:
					rev, err = s.Create(ctx, []byte(key), crashValue(run, w, seq))
				case (seq/keysPerWriter)%4 == 3:
					_, rev, err = s.Delete(ctx, []byte(key), revs[k])
					kind = "del"
				default:
					rev, err = s.Update(ctx, []byte(key), crashValue(run, w, seq), revs[k])
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "write:", err)
					os.Exit(4)
				}
				if kind == "del" {
					revs[k] = 0
				} else {
					revs[k] = rev
				}
				emit(fmt.Sprintf("ack %d %s %s %d %d %d\n", rev, kind, key, w, seq, prev))
			}
		}()
	}
	wg.Wait()
	return 0
}

type crashAck struct {
	rev, prev   int64
	del         bool
	key         string
	run, w, seq int
}

// TestCrashRecovery kills a child process in the middle of a write storm
// with SIGKILL, several times on the same directory, and checks after each
// kill that every acknowledged write is there, that the change log and the
// data agree exactly (no half-applied write), that the surviving revisions
// have no gap, and that new writes get higher revisions.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	runs, storm := 4, 400*time.Millisecond
	if *soak {
		runs, storm = 25, 2*time.Second
	}
	var (
		acks     []crashAck
		verified int64 // revisions up to this one were checked in full before
	)
	for run := range runs {
		got := crashRun(t, dir, run, storm+time.Duration(rand.IntN(200))*time.Millisecond)
		if len(got) == 0 {
			t.Fatalf("run %d: the child acknowledged no write", run)
		}
		// This run's writes in full, and a sample of the earlier ones (they
		// were checked in full after their own run).
		check := append([]crashAck(nil), got...)
		for range min(len(acks), 2000) {
			check = append(check, acks[rand.IntN(len(acks))])
		}
		acks = append(acks, got...)
		verified = verifyCrashDir(t, dir, check, verified)
		t.Logf("run %d: %d writes acknowledged before SIGKILL (%d in all), directory verified", run, len(got), len(acks))
	}
}

// crashRun runs the child for about storm, kills it and returns its acks.
func crashRun(t *testing.T, dir string, run int, storm time.Duration) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRunEnv+"="+strconv.Itoa(run))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var acks []crashAck
	parse := func(line string) {
		if line == "ready" {
			return
		}
		var a crashAck
		var kind string
		if _, err := fmt.Sscanf(line, "ack %d %s %s %d %d %d", &a.rev, &kind, &a.key, &a.w, &a.seq, &a.prev); err != nil {
			t.Fatalf("child printed %q: %v", line, err)
		}
		a.del, a.run = kind == "del", run
		acks = append(acks, a)
	}
	// Wait for the child to be ready, let the storm run, then SIGKILL.
	select {
	case line, ok := <-lines:
		if !ok || line != "ready" {
			_ = cmd.Wait()
			t.Fatalf("child did not start: %q, stderr: %s", line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("child did not start within 30s")
	}
	deadline := time.After(storm)
storm:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("child exited during the storm; stderr: %s", stderr.String())
			}
			parse(line)
		case <-deadline:
			break storm
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		parse(line)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL; stderr: %s", err, stderr.String())
	}
	return acks
}

// verifyCrashDir checks acks against the reopened store, and the whole
// store's consistency; events are rebuilt for revisions above since. It
// returns the store's revision.
func verifyCrashDir(t *testing.T, dir string, acks []crashAck, since int64) int64 {
	t.Helper()
	s, err := Open(testOptions(t, dir))
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	ctx := t.Context()
	cur, _ := s.CurrentRevision(ctx)
	var maxAck int64
	for _, a := range acks {
		maxAck = max(maxAck, a.rev)
		if a.rev > cur {
			t.Fatalf("acknowledged revision %d lost: the store's revision is %d", a.rev, cur)
		}
		kv, err := s.Get(ctx, []byte(a.key), a.rev)
		if a.del {
			if !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("acknowledged delete of %s at %d: Get = %v, %v", a.key, a.rev, fmtKV(kv), err)
			}
		} else if want := crashValue(a.run, a.w, a.seq); err != nil || kv.Revision != a.rev || !bytes.Equal(kv.Value, want) {
			t.Fatalf("acknowledged write of %s at %d: Get = rev %d, %d bytes, %v; want %d bytes",
				a.key, a.rev, kv.Revision, len(kv.Value), err, len(want))
		}
		if a.prev != 0 {
			if kv, err := s.Get(ctx, []byte(a.key), a.rev-1); err != nil || kv.Revision != a.prev {
				t.Fatalf("%s before the write at %d: rev %d, %v; want %d", a.key, a.rev, kv.Revision, err, a.prev)
			}
		}
	}
	checkConsistency(t, s, since)

	// New writes go above everything that survived.
	rev, err := s.Create(ctx, []byte(fmt.Sprintf("crash/after/%d", cur)), []byte("x"))
	if err != nil || rev <= cur || rev <= maxAck {
		t.Fatalf("write after recovery: revision %d, %v; want above %d", rev, err, cur)
	}
	return rev
}

func fmtKV(kv storage.KeyValue) string {
	return fmt.Sprintf("{%q rev %d create %d, %d bytes}", kv.Key, kv.Revision, kv.CreateRevision, len(kv.Value))
}

// checkConsistency checks the store's raw Badger content: the change log
// holds every revision from the first retained one to the current one, each
// entry matches a data version (a value or a delete marker of the same key
// at the same revision), and there is no data or chunk version without its
// log entry. The events of revisions above since are rebuilt from the log
// and the data (values with all their chunks, previous values).
func checkConsistency(t *testing.T, s *Store, since int64) {
	t.Helper()
	cur := s.current.Load()
	compacted := s.compacted.Load()
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()

	entries := map[int64]logEntry{}
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: []byte{nsLog}})
	for it.Rewind(); it.Valid(); it.Next() {
		rev, err := parseLogKey(it.Item().Key())
		if err != nil {
			t.Fatal(err)
		}
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			t.Fatal(err)
		}
		e, err := decodeLog(v)
		if err != nil {
			t.Fatalf("log entry %d: %v", rev, err)
		}
		if it.Item().Version() != uint64(rev) {
			t.Fatalf("log entry %d written at version %d", rev, it.Item().Version())
		}
		entries[rev] = e
	}
	it.Close()
	first := max(compacted, formatRevision+1)
	for r := first; r <= cur; r++ {
		if _, ok := entries[r]; !ok {
			t.Fatalf("change log has no entry for revision %d (retained %d..%d)", r, first, cur)
		}
	}
	for r := range entries {
		if r > cur {
			t.Fatalf("change log entry %d above the current revision %d", r, cur)
		}
	}

	// Every data and chunk version has its log entry, and vice versa.
	seen := map[int64]bool{}
	it = txn.NewIterator(bdb.IteratorOptions{AllVersions: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k, ver := item.Key(), int64(item.Version())
		switch k[0] {
		case nsData:
			e, ok := entries[ver]
			if ver < compacted {
				continue // older history may be partly discarded already
			}
			if !ok || string(e.key) != string(k[1:]) {
				t.Fatalf("data version %q@%d has no matching log entry (log: %+v)", k[1:], ver, e)
			}
			if item.IsDeletedOrExpired() != (e.op == logDelete) {
				t.Fatalf("data version %q@%d: deleted=%v but the log says op %c", k[1:], ver, item.IsDeletedOrExpired(), e.op)
			}
			seen[ver] = true
		case nsChunk:
			e, ok := entries[ver]
			if ver >= compacted && (!ok || !strings.HasPrefix(string(k[1:]), string(e.key)) || len(k) != len(e.key)+3) {
				t.Fatalf("chunk version %q@%d has no matching log entry", k, ver)
			}
		}
	}
	for r := range entries {
		if !seen[r] && r >= compacted {
			t.Fatalf("log entry %d (%q) has no data version", r, entries[r].key)
		}
	}
	// The events can be rebuilt (values and chunks).
	for r := max(first, since+1); r <= cur; r++ {
		e := entries[r]
		e.key = bytes.Clone(e.key)
		if _, err := s.eventAt(r, e); err != nil {
			t.Fatalf("event of revision %d: %v", r, err)
		}
	}
}
