package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// backupOptions: a durable store that compacts only when told to, so that
// the tests can read the source at every revision they compare with.
func backupOptions(t testing.TB) Options {
	return testOptions(t, t.TempDir()).WithRetentionTime(-1).WithRetentionRevisions(-1)
}

const bkPrefix = "k/"

// state is a store's content under bkPrefix at one revision.
type state map[string]storage.KeyValue

func stateAt(t *testing.T, s *Store, rev int64) state {
	t.Helper()
	res, err := s.List(t.Context(), storage.ListOptions{Prefix: []byte(bkPrefix), Revision: rev})
	if err != nil {
		t.Fatalf("list at %d: %v", rev, err)
	}
	st := state{}
	for _, kv := range res.Items {
		st[string(kv.Key)] = kv
	}
	return st
}

func sameState(t *testing.T, what string, got, want state) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: %q missing", what, k)
		case g.Revision != w.Revision || g.CreateRevision != w.CreateRevision || !bytes.Equal(g.Value, w.Value):
			t.Errorf("%s: %q at revision %d (created %d, %d bytes), want %d (created %d, %d bytes)",
				what, k, g.Revision, g.CreateRevision, len(g.Value), w.Revision, w.CreateRevision, len(w.Value))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected key %q", what, k)
		}
	}
}

func backup(t *testing.T, s *Store, since int64) ([]byte, storage.BackupInfo) {
	t.Helper()
	var buf bytes.Buffer
	info, err := s.Backup(t.Context(), &buf, storage.BackupOptions{Since: since})
	if err != nil {
		t.Fatalf("backup since %d: %v", since, err)
	}
	if info.Bytes != int64(buf.Len()) {
		t.Fatalf("backup reports %d bytes, wrote %d", info.Bytes, buf.Len())
	}
	return buf.Bytes(), info
}

func readers(backups ...[]byte) []io.Reader {
	rs := make([]io.Reader, len(backups))
	for i, b := range backups {
		rs[i] = bytes.NewReader(b)
	}
	return rs
}

// restoreTo restores the chain at revision to into a new directory and opens it.
func restoreTo(t *testing.T, to int64, backups ...[]byte) (*Store, RestoreInfo) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	info, err := Restore(t.Context(), dir, RestoreOptions{ToRevision: to}, readers(backups...)...)
	if err != nil {
		t.Fatalf("restore to %d: %v", to, err)
	}
	return open(t, testOptions(t, dir).WithRetentionTime(-1).WithRetentionRevisions(-1)), info
}

// churn makes random writes under bkPrefix: creates, updates, deletes,
// some values chunked (longer than chunkSize) and some shrinking back.
type churn struct {
	s    *Store
	keys int
}

func (c churn) write(ctx context.Context, r *rand.Rand) error {
	key := []byte(fmt.Sprintf("%s%04d", bkPrefix, r.IntN(c.keys)))
	size := 10 + r.IntN(300)
	if r.IntN(40) == 0 {
		size = chunkSize + r.IntN(chunkSize/2) // two chunks
	}
	value := bytes.Repeat([]byte{byte('a' + r.IntN(26))}, size)
	var err error
	switch r.IntN(4) {
	case 0:
		_, err = c.s.Create(ctx, key, value)
	case 1:
		_, _, err = c.s.Delete(ctx, key, 0)
	default:
		_, err = c.s.Update(ctx, key, value, 0)
	}
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrAlreadyExists) {
		return nil
	}
	return err
}

func (c churn) run(t *testing.T, n int, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		if err := c.write(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupUnderLoad takes a full backup while writers run and restores it
// to its revision and to earlier ones: each restored store holds exactly
// the source's keys, values, revisions and creation revisions at that
// revision, and starts above every revision the source handed out.
func TestBackupUnderLoad(t *testing.T) {
	s := open(t, backupOptions(t))
	c := churn{s: s, keys: 200}
	c.run(t, 600, 1)
	compacted, _ := s.CurrentRevision(t.Context())
	c.run(t, 300, 2)
	if err := s.Compact(t.Context(), compacted); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.write(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
				writes.Add(1)
			}
		})
	}
	waitFor(t, "writers to start", time.Minute, func() bool { return writes.Load() > 50 })
	full, info := backup(t, s, 0)
	before := writes.Load()
	waitFor(t, "writes after the backup", time.Minute, func() bool { return writes.Load() > before+50 })
	close(stop)
	wg.Wait()
	last, _ := s.CurrentRevision(t.Context())
	if info.Since != 0 || info.CompactedRevision != compacted || info.Revision <= compacted || info.Revision >= last {
		t.Fatalf("backup info %+v: want a full backup from compacted %d, its revision below the current %d", info, compacted, last)
	}

	got, ri := restoreTo(t, 0, full)
	sameState(t, "restored at the backup's revision", stateAt(t, got, 0), stateAt(t, s, info.Revision))
	if want := info.Revision + DefaultRestoreBump; ri.StoreRevision != want || ri.Revision != info.Revision {
		t.Fatalf("restore info %+v, want revision %d and store revision %d", ri, info.Revision, want)
	}
	for _, to := range []int64{compacted, compacted + 1, (compacted + info.Revision) / 2, info.Revision - 1} {
		got, _ := restoreTo(t, to, full)
		sameState(t, fmt.Sprintf("restored at %d", to), stateAt(t, got, 0), stateAt(t, s, to))
	}
	for _, to := range []int64{compacted - 1, info.Revision + 1} {
		if _, err := Restore(t.Context(), t.TempDir(), RestoreOptions{ToRevision: to}, bytes.NewReader(full)); err == nil {
			t.Errorf("restore to %d outside the backup's history [%d, %d] succeeded", to, compacted, info.Revision)
		}
	}
}

// TestRestoredStoreFencesOldRevisions: after a restore every revision the
// source handed out is compacted (reads, lists and watches at them fail
// with a CompactedError: the API's 410), and new writes get revisions above
// all of them.
func TestRestoredStoreFencesOldRevisions(t *testing.T) {
	s := open(t, backupOptions(t))
	churn{s: s, keys: 20}.run(t, 100, 3)
	full, info := backup(t, s, 0)
	churn{s: s, keys: 20}.run(t, 100, 4) // handed out, then lost
	lost, _ := s.CurrentRevision(t.Context())

	const bump = 1000
	dir := filepath.Join(t.TempDir(), "r")
	if _, err := Restore(t.Context(), dir, RestoreOptions{ToRevision: info.Revision - 10, BumpRevision: bump}, bytes.NewReader(full)); err != nil {
		t.Fatal(err)
	}
	r := open(t, testOptions(t, dir))
	cur, _ := r.CurrentRevision(t.Context())
	comp, _ := r.CompactedRevision(t.Context())
	if cur != info.Revision+bump || comp != cur {
		t.Fatalf("restored store at revision %d, compacted %d; want both %d", cur, comp, info.Revision+bump)
	}
	for _, rev := range []int64{1, info.Revision - 10, info.Revision, lost} {
		if _, err := r.List(t.Context(), storage.ListOptions{Prefix: []byte(bkPrefix), Revision: rev}); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("list at old revision %d: %v, want ErrCompacted", rev, err)
		}
		if _, err := r.Get(t.Context(), []byte(bkPrefix+"0001"), rev); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("get at old revision %d: %v, want ErrCompacted", rev, err)
		}
		if _, err := r.Watch(t.Context(), storage.WatchOptions{Prefix: []byte(bkPrefix), FromRevision: rev}); !errors.Is(err, storage.ErrCompacted) {
			t.Errorf("watch from old revision %d: %v, want ErrCompacted", rev, err)
		}
	}
	rev, err := r.Create(t.Context(), []byte(bkPrefix+"new"), []byte("v"))
	if err != nil || rev <= lost || rev != cur+1 {
		t.Fatalf("create after restore: revision %d, %v; want %d, above every old revision (%d)", rev, err, cur+1, lost)
	}
	// A backup of the restored store is a new chain: an incremental backup
	// of the source does not continue it.
	_, rinfo := backup(t, r, 0)
	if rinfo.Revision != rev {
		t.Fatalf("backup of the restored store at %d, want %d", rinfo.Revision, rev)
	}
}

// TestIncrementalChain restores a full backup and two incremental ones at
// every revision of the chain, compares with the source, and checks that an
// incremental backup holds exactly the versions a full backup holds for its
// revisions.
func TestIncrementalChain(t *testing.T) {
	s := open(t, backupOptions(t))
	c := churn{s: s, keys: 30}
	c.run(t, 150, 5)
	full, f := backup(t, s, 0)
	c.run(t, 150, 6)
	inc1, i1 := backup(t, s, f.Revision)
	c.run(t, 150, 7)
	inc2, i2 := backup(t, s, i1.Revision)
	if i1.Since != f.Revision || i2.Since != i1.Revision || i2.Revision <= i1.Revision {
		t.Fatalf("chain infos %+v %+v %+v", f, i1, i2)
	}

	for to := f.CompactedRevision; to <= i2.Revision; to += 1 + (i2.Revision-f.CompactedRevision)/12 {
		got, _ := restoreTo(t, to, full, inc1, inc2)
		sameState(t, fmt.Sprintf("chain restored at %d", to), stateAt(t, got, 0), stateAt(t, s, to))
	}
	got, _ := restoreTo(t, 0, full, inc1, inc2)
	sameState(t, "chain restored at its end", stateAt(t, got, 0), stateAt(t, s, i2.Revision))

	// The incremental backups hold what a later full backup holds above
	// their since revision, version for version.
	later, _ := backup(t, s, 0)
	want := records(t, later, func(v uint64) bool { return v > uint64(f.Revision) && v <= uint64(i2.Revision) })
	have := records(t, inc1, nil)
	for k, v := range records(t, inc2, nil) {
		have[k] = v
	}
	var chunks, chunkDeletes int
	for k, v := range have {
		if k[1] == nsChunk {
			chunks++
			if v == "<deleted>" {
				chunkDeletes++
			}
		}
	}
	if chunks == 0 || chunkDeletes == 0 {
		t.Errorf("the incremental backups hold %d chunk versions, %d of them deletes: the churn should make both", chunks, chunkDeletes)
	}
	if len(have) != len(want) {
		t.Errorf("incremental backups hold %d versions, the full backup %d for their revisions", len(have), len(want))
	}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			t.Errorf("version %s: incremental %q (present %v), full %q", k, hv, ok, v)
		}
	}
}

// records decodes a backup into "key@version" -> value ("<deleted>" for a
// delete marker), keeping the versions keep accepts.
func records(t *testing.T, backup []byte, keep func(uint64) bool) map[string]string {
	t.Helper()
	b, err := openBackup(bytes.NewReader(backup), "test")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for {
		rec, ok, err := b.next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return m
		}
		if keep != nil && !keep(rec.version) {
			continue
		}
		v := string(rec.value)
		if rec.deleted {
			v = "<deleted>"
		}
		m[fmt.Sprintf("%q@%d", rec.key, rec.version)] = v
	}
}

// TestRestoreRefusesBrokenChains: a restore takes one full backup and then
// the incremental backups that continue it, of the same store, in order.
func TestRestoreRefusesBrokenChains(t *testing.T) {
	s := open(t, backupOptions(t))
	c := churn{s: s, keys: 10}
	c.run(t, 30, 8)
	full, f := backup(t, s, 0)
	c.run(t, 30, 9)
	inc1, i1 := backup(t, s, f.Revision)
	c.run(t, 30, 10)
	inc2, _ := backup(t, s, i1.Revision)

	other := open(t, backupOptions(t))
	churn{s: other, keys: 10}.run(t, 200, 11)
	foreign, _ := backup(t, other, f.Revision)

	for name, chain := range map[string][][]byte{
		"incremental first":    {inc1},
		"gap":                  {full, inc2},
		"out of order":         {full, inc2, inc1},
		"two full backups":     {full, full},
		"another store's":      {full, foreign},
		"an incremental twice": {full, inc1, inc1},
	} {
		dir := filepath.Join(t.TempDir(), "r")
		_, err := Restore(t.Context(), dir, RestoreOptions{}, readers(chain...)...)
		if !errors.Is(err, ErrBadBackup) {
			t.Errorf("%s: %v, want ErrBadBackup", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
		if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("%s: the refused restore left %s (%v)", name, dir, serr)
		}
	}
}

// TestBackupInMemory: an in-memory store backs up as a durable one does,
// and restores to disk.
func TestBackupInMemory(t *testing.T) {
	s := open(t, testOptions(t, "").WithRetentionTime(-1).WithRetentionRevisions(-1))
	churn{s: s, keys: 20}.run(t, 150, 19)
	full, info := backup(t, s, 0)
	got, _ := restoreTo(t, 0, full)
	sameState(t, "in-memory store restored to disk", stateAt(t, got, 0), stateAt(t, s, info.Revision))
}
