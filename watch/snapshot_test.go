package watch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func keysOf(objs []*Object) string {
	var b strings.Builder
	for i, o := range objs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", strings.TrimPrefix(string(o.Key), testPrefix), o.Value)
	}
	return b.String()
}

// TestSnapshots: lists come from immutable sorted snapshots of the state;
// a snapshot covers every revision from its last change to the cache's
// revision; Retain keeps it for ListAt while later changes build new ones,
// until it has gone unused for RetainFor or RetainedSnapshots newer ones
// push it out.
func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{ProgressInterval: 5 * time.Millisecond, RetainedSnapshots: 2, RetainFor: time.Hour})
	for _, k := range []string{"ns2/b", "ns1/c", "ns1/a", "ns10/a", "ns2/a"} {
		e.put(testPrefix+k, "1")
	}
	e.waitCaughtUp()
	objs, rev1, ok, err := e.cache.List(ctx, []byte(testPrefix))
	if err != nil || !ok {
		t.Fatalf("list: %v %v", ok, err)
	}
	if got := keysOf(objs); got != "ns1/a=1,ns1/c=1,ns10/a=1,ns2/a=1,ns2/b=1" {
		t.Fatalf("list: %s", got)
	}
	sub, rev, _, _ := e.cache.List(ctx, []byte(testPrefix+"ns1/"))
	if got := keysOf(sub); got != "ns1/a=1,ns1/c=1" || rev != rev1 {
		t.Fatalf("under ns1/: %s at %d", got, rev)
	}
	if got, _, _, _ := e.cache.List(ctx, []byte(testPrefix+"ns3/")); len(got) != 0 {
		t.Fatalf("under ns3/: %s", keysOf(got))
	}
	// A write elsewhere moves the revision, not the state: the snapshot
	// covers the new revision too.
	other := e.put("/other/x", "y")
	waitFor(t, "progress past the unrelated write", func() bool { return e.cache.Stats().Revision >= other })
	if _, ok := listAt(e.cache, []byte(testPrefix), other); !ok {
		t.Fatal("ListAt: the current snapshot does not cover a revision without changes")
	}

	sn1, _, _ := e.cache.Snapshot(ctx)
	if sn1.Revision() < rev1 {
		t.Fatalf("snapshot at %d, before the list's %d", sn1.Revision(), rev1)
	}
	ra := e.put(testPrefix+"ns1/a", "2")
	e.del(testPrefix + "ns2/b")
	e.waitCaughtUp()
	// Retained after the state changed: it is still the snapshot handed out.
	e.cache.Retain(sn1)
	objs2, rev2, _, _ := e.cache.List(ctx, []byte(testPrefix))
	if got := keysOf(objs2); got != "ns1/a=2,ns1/c=1,ns10/a=1,ns2/a=1" || rev2 <= rev1 {
		t.Fatalf("after changes: %s at %d", got, rev2)
	}
	// The first snapshot is unchanged, and served at its revision.
	if got := keysOf(objs); got != "ns1/a=1,ns1/c=1,ns10/a=1,ns2/a=1,ns2/b=1" {
		t.Fatalf("the old snapshot changed: %s", got)
	}
	old, ok := listAt(e.cache, []byte(testPrefix+"ns2/"), rev1)
	if got := keysOf(old); !ok || got != "ns2/a=1,ns2/b=1" {
		t.Fatalf("ListAt(rev1): %v %s", ok, got)
	}
	// Between the two changes there is a state no snapshot holds.
	if got, ok := listAt(e.cache, []byte(testPrefix), ra); ok {
		t.Fatalf("ListAt(%d), a state between two changes: %s", ra, keysOf(got))
	}
	// Two more retained snapshots push the first one out.
	sn2, _, _ := e.cache.Snapshot(ctx)
	e.cache.Retain(sn2)
	e.put(testPrefix+"ns3/a", "1")
	e.waitCaughtUp()
	sn3, _, _ := e.cache.Snapshot(ctx)
	e.cache.Retain(sn3)
	if _, ok := listAt(e.cache, []byte(testPrefix), rev1); ok {
		t.Fatal("a third retained snapshot did not push out the first (RetainedSnapshots 2)")
	}
	if _, ok := listAt(e.cache, []byte(testPrefix), rev2); !ok {
		t.Fatal("the second retained snapshot is gone")
	}
}

// TestRetainExpires: a retained snapshot unused for RetainFor is dropped.
func TestRetainExpires(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{RetainFor: 20 * time.Millisecond})
	e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	sn1, _, _ := e.cache.Snapshot(ctx)
	rev1 := sn1.Revision()
	e.cache.Retain(sn1)
	e.put(testPrefix+"a", "2")
	e.waitCaughtUp()
	if _, ok := listAt(e.cache, []byte(testPrefix), rev1); !ok {
		t.Fatal("retained snapshot missing")
	}
	time.Sleep(50 * time.Millisecond)
	if _, ok := listAt(e.cache, []byte(testPrefix), rev1); ok {
		t.Fatal("a snapshot unused for longer than RetainFor is still served")
	}
	// The next change drops it (nothing else has to call Retain).
	e.put(testPrefix+"b", "1")
	e.waitCaughtUp()
	e.cache.mu.RLock()
	n := len(e.cache.retained)
	e.cache.mu.RUnlock()
	if n != 0 {
		t.Fatalf("%d expired snapshots still held after a change", n)
	}
}

// TestFreshRequestsProgress: with a progress interval far longer than the
// test, Fresh still catches up with a write under another prefix at once,
// because it asks storage for progress.
func TestFreshRequestsProgress(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{ProgressInterval: time.Hour, ConsistentReadWait: 10 * time.Second})
	e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	for range 5 {
		cur := e.put("/other/b", "x")
		t0 := time.Now()
		fresh, err := e.cache.Fresh(ctx, cur)
		if err != nil || !fresh {
			t.Fatalf("Fresh(%d): %v %v", cur, fresh, err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("Fresh waited %v: the progress request did not work", d)
		}
	}
}

// TestSnapshotsUnderWrites lists while a writer changes the state: every
// list is sorted and consistent with its revision (a key's value never
// comes from after the list's revision).
func TestSnapshotsUnderWrites(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{})
	const n = 200
	for i := range n {
		e.put(fmt.Sprintf("%sk%03d", testPrefix, i), "0")
	}
	e.waitCaughtUp()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("%sk%03d", testPrefix, i%n)
			if i%7 == 3 {
				if _, _, err := e.st.Delete(ctx, []byte(k), 0); err == nil {
					continue
				}
			}
			e.put(k, fmt.Sprint(i))
		}
	}()
	for range 200 {
		objs, rev, ok, err := e.cache.List(ctx, []byte(testPrefix))
		if err != nil || !ok {
			t.Fatalf("list: %v %v", ok, err)
		}
		for i, o := range objs {
			if o.Revision > rev {
				t.Fatalf("object %s at %d in a list at %d", o.Key, o.Revision, rev)
			}
			if i > 0 && string(objs[i-1].Key) >= string(o.Key) {
				t.Fatalf("unsorted: %s then %s", objs[i-1].Key, o.Key)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestEncodingBudget: objects keep their encodings while the state and the
// kept encodings fit in StateBytes together; past that, each call encodes.
func TestEncodingBudget(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{StateBytes: 1500})
	for i := range 4 {
		e.put(fmt.Sprintf("%sk%d", testPrefix, i), "v")
	}
	e.waitCaughtUp()
	objs, _, ok, _ := e.cache.List(ctx, []byte(testPrefix))
	if !ok || len(objs) != 4 {
		t.Fatalf("list: %v %d", ok, len(objs))
	}
	calls := 0
	enc := func(o *Object) ([]byte, error) { calls++; return make([]byte, 300), nil }
	for range 2 {
		for _, o := range objs {
			if _, err := e.cache.Encoding(o, "x", enc); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The state is 4 × (key + value + 128) = 536 bytes: three 300-byte
	// encodings fit in 1,500 bytes with it, the fourth does not.
	if kept := e.cache.encBytes.Load(); kept != 900 || calls != 5 {
		t.Fatalf("kept %d bytes in %d calls, want 900 in 5", kept, calls)
	}
	// Replacing an object gives its budget back.
	e.put(testPrefix+"k0", "w")
	e.waitCaughtUp()
	if kept := e.cache.encBytes.Load(); kept != 600 {
		t.Fatalf("kept %d bytes after a replacement, want 600", kept)
	}
	// A replaced version (still in the older list; it kept nothing while it
	// was current) is encoded but keeps nothing now: its budget would never
	// come back.
	e.put(testPrefix+"k3", "w")
	e.waitCaughtUp()
	calls = 0
	if _, err := e.cache.Encoding(objs[3], "x", enc); err != nil {
		t.Fatal(err)
	}
	if _, ok := objs[3].keptEncoding("x"); ok || calls != 1 {
		t.Fatalf("a replaced version kept its encoding (%d calls)", calls)
	}
	if kept := e.cache.encBytes.Load(); kept != 600 {
		t.Fatalf("kept %d bytes after encoding a replaced version, want 600", kept)
	}
}

// listAt is SnapshotAt(rev).Under(prefix).
func listAt(c *Cache, prefix []byte, rev int64) ([]*Object, bool) {
	sn, ok := c.SnapshotAt(rev)
	if !ok {
		return nil, false
	}
	return sn.Under(prefix), true
}

// TestSnapshotMemo: a memo is computed once per state: kept while only the
// revision moves (a write elsewhere), computed again after a change; a
// failed computation is not remembered.
func TestSnapshotMemo(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Settings{ProgressInterval: 5 * time.Millisecond})
	for _, k := range []string{"a", "b", "c"} {
		e.put(testPrefix+k, "1")
	}
	e.waitCaughtUp()
	calls := 0
	size := func(sn *Snapshot) int {
		t.Helper()
		v, err := sn.Memo("size", func() (int, error) {
			calls++
			n := 0
			for _, o := range sn.Under([]byte(testPrefix)) {
				n += len(o.Value)
			}
			return n, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	snapshot := func() *Snapshot {
		t.Helper()
		sn, ok, err := e.cache.Snapshot(ctx)
		if err != nil || !ok {
			t.Fatalf("snapshot: %v %v", ok, err)
		}
		return sn
	}
	sn1 := snapshot()
	if v := size(sn1); v != 3 || calls != 1 {
		t.Fatalf("first: %d after %d calls", v, calls)
	}
	if v := size(sn1); v != 3 || calls != 1 {
		t.Fatalf("again: %d after %d calls", v, calls)
	}
	other := e.put("/other/x", "y")
	waitFor(t, "progress past the unrelated write", func() bool { return e.cache.Stats().Revision >= other })
	sn2 := snapshot()
	if sn2.Revision() < other {
		t.Fatalf("snapshot at %d, before %d", sn2.Revision(), other)
	}
	if v := size(sn2); v != 3 || calls != 1 {
		t.Fatalf("same state, later revision: %d after %d calls", v, calls)
	}
	rev := e.put(testPrefix+"d", "22")
	waitFor(t, "the change", func() bool { return e.cache.Stats().Revision >= rev })
	if v := size(snapshot()); v != 5 || calls != 2 {
		t.Fatalf("after a change: %d after %d calls", v, calls)
	}
	if _, err := sn1.Memo("failing", func() (int, error) { return 0, fmt.Errorf("no") }); err == nil {
		t.Fatal("error lost")
	}
	if v, err := sn1.Memo("failing", func() (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Fatalf("after a failure: %d %v", v, err)
	}
}

// TestInitialFrameBudget: an object of the state keeps the frame of its
// initial event per encoder (one copy for every watch that starts on it),
// charged to the budget with its encodings; once the object is replaced it
// forgets them and the budget gets them back.
func TestInitialFrameBudget(t *testing.T) {
	e := newEnv(t, Settings{StateBytes: 1 << 20})
	e.put(testPrefix+"k0", strings.Repeat("v", 1000))
	e.waitCaughtUp()
	objs, _, ok, _ := e.cache.List(context.Background(), []byte(testPrefix))
	if !ok || len(objs) != 1 {
		t.Fatalf("list: %v %d", ok, len(objs))
	}
	o := objs[0]
	frame := func(enc Encoder, id uint32) []byte {
		b, err := enc.AppendEvent(nil, Added, o, o.Revision)
		if err != nil {
			t.Fatal(err)
		}
		kept, ok := e.cache.keepInitialFrame(o, enc, id, b)
		if !ok {
			t.Fatalf("a frame of %d bytes was not kept", len(b))
		}
		if cap(kept) != len(kept) {
			t.Errorf("the kept frame holds %d bytes for %d", cap(kept), len(kept))
		}
		return kept
	}
	other := &testEncoder{}
	a, b, c := frame(e.enc, 1), frame(e.enc, 1), frame(other, 2)
	if &a[0] != &b[0] || &a[0] == &c[0] {
		t.Fatal("want one frame per encoder, shared by its callers")
	}
	if got, ok := o.keptFrame(e.enc, 1); !ok || &got[0] != &a[0] {
		t.Fatal("the object does not keep the frame")
	}
	if kept, want := e.cache.encBytes.Load(), int64(len(a)+len(c)); kept != want || e.cache.budget.frames.Load() != want {
		t.Fatalf("kept %d bytes, %d reserved for frames, want %d", kept, e.cache.budget.frames.Load(), want)
	}
	e.put(testPrefix+"k0", "w")
	e.waitCaughtUp()
	if kept, frames := e.cache.encBytes.Load(), e.cache.budget.frames.Load(); kept != 0 || frames != 0 {
		t.Fatalf("kept %d bytes, %d reserved for frames after the object was replaced, want 0", kept, frames)
	}
	if o.keptFrameSize() != 0 {
		t.Fatal("the replaced version, which the window still holds, keeps its frames")
	}
	if _, ok := e.cache.keepInitialFrame(o, e.enc, 1, a); ok {
		t.Fatal("a replaced version kept a frame")
	}
}

// Frames take at most 1/frameShare of the budget: past it they are not
// kept, so that they cannot crowd states out.
func TestInitialFramesShareOfBudget(t *testing.T) {
	e := newEnv(t, Settings{StateBytes: 80 << 10})
	e.put(testPrefix+"a", strings.Repeat("v", 6<<10))
	e.put(testPrefix+"b", strings.Repeat("v", 6<<10))
	e.waitCaughtUp()
	objs, _, ok, _ := e.cache.List(context.Background(), []byte(testPrefix))
	if !ok || len(objs) != 2 {
		t.Fatalf("list: %v %d", ok, len(objs))
	}
	var kept int
	for _, o := range objs {
		b, _ := e.enc.AppendEvent(nil, Added, o, o.Revision)
		if _, ok := e.cache.keepInitialFrame(o, e.enc, 1, b); ok {
			kept++
		}
	}
	// Each frame is over 6 KiB; the frames' share is 10 KiB.
	if kept != 1 || e.cache.budget.frames.Load() > (80<<10)/frameShare {
		t.Fatalf("%d frames kept, %d bytes reserved: want 1 within %d", kept, e.cache.budget.frames.Load(), (80<<10)/frameShare)
	}
}
