package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
	"github.com/kapi-dev/kapi/storage/badger"
)

// budgetEnv is several caches over one store sharing one budget.
type budgetEnv struct {
	t      *testing.T
	st     storage.Store
	budget *Budget
	caches map[string]*Cache // by prefix
}

func newBudgetEnv(t *testing.T, limit int64, prefixes ...string) *budgetEnv {
	t.Helper()
	st, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &budgetEnv{t: t, st: st, budget: NewBudget(limit), caches: map[string]*Cache{}}
	(&env{t: t, st: st}).put("/other/seed", "x")
	for _, p := range prefixes {
		c, err := New(Config{Settings: Settings{ReadmitInterval: 10 * time.Millisecond}, Storage: st, Prefix: []byte(p), Budget: e.budget})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		e.caches[p] = c
		if _, err := c.Revision(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *budgetEnv) put(key, value string) { (&env{t: e.t, st: e.st}).put(key, value) }
func (e *budgetEnv) del(key string)        { (&env{t: e.t, st: e.st}).del(key) }

// caughtUp waits until every cache has applied every write so far.
func (e *budgetEnv) caughtUp() {
	e.t.Helper()
	rev, err := e.st.CurrentRevision(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for p, c := range e.caches {
		if ok, err := c.WaitForRevision(context.Background(), rev, 10*time.Second); !ok || err != nil {
			e.t.Fatalf("cache %s did not catch up: %v", p, err)
		}
	}
}

// kept reports whether the cache of prefix serves lists from its state,
// and checks what it serves against storage.
func (e *budgetEnv) kept(prefix string) bool {
	e.t.Helper()
	c := e.caches[prefix]
	objs, rev, ok, err := c.List(context.Background(), []byte(prefix))
	if err != nil {
		e.t.Fatal(err)
	}
	if !ok {
		return false
	}
	page, err := e.st.List(context.Background(), storage.ListOptions{Prefix: []byte(prefix), Revision: rev})
	if err != nil {
		e.t.Fatal(err)
	}
	var got, want []string
	for _, o := range objs {
		got = append(got, fmt.Sprintf("%s=%s@%d", o.Key, o.Value, o.Revision))
	}
	for _, kv := range page.Items {
		want = append(want, fmt.Sprintf("%s=%s@%d", kv.Key, kv.Value, kv.Revision))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		e.t.Fatalf("state of %s at %d:\n got %v\nwant %v", prefix, rev, got, want)
	}
	return true
}

// checkAccounts checks, once every cache is quiet, that the budget charges
// each kept state exactly what it holds and holds within its limit.
func (e *budgetEnv) checkAccounts() {
	e.t.Helper()
	var sum, frames int64
	for p, c := range e.caches {
		c.mu.RLock()
		e.budget.mu.Lock()
		held := c.stateBytes.Load() + c.encBytes.Load()
		if c.state != nil && c.share.kept && c.share.bytes != held {
			e.t.Errorf("%s: charged %d, holds %d", p, c.share.bytes, held)
		}
		if c.state != nil && !c.share.kept {
			e.t.Errorf("%s: keeps a state its budget dropped", p)
		}
		if c.state == nil && c.share.kept {
			e.t.Errorf("%s: kept by its budget (%d bytes) without a state", p, c.share.bytes)
		}
		if c.state != nil {
			var kept, frames int64 // what the state's objects keep: encodings, frames
			c.state.Ascend(func(o *Object) bool { kept += o.keptSize(); frames += o.keptFrameSize(); return true })
			if kept != c.encBytes.Load() || frames != c.initBytes.Load() {
				e.t.Errorf("%s: the objects keep %d bytes (%d of frames), %d (%d) accounted", p, kept, frames, c.encBytes.Load(), c.initBytes.Load())
			}
		}
		frames += c.initBytes.Load()
		sum += c.share.bytes
		e.budget.mu.Unlock()
		c.mu.RUnlock()
	}
	if st := e.budget.Stats(); st.Used != sum || st.Used > st.Limit {
		e.t.Errorf("budget %+v: the shares sum to %d", st, sum)
	}
	if got := e.budget.frames.Load(); got != frames {
		e.t.Errorf("budget: %d bytes of frames reserved, the caches keep %d", got, frames)
	}
}

// A state that grows past the shared budget drops the least recently read
// state; that state comes back once a read finds it gone and there is room.
func TestBudgetDropsTheColdestState(t *testing.T) {
	e := newBudgetEnv(t, 2000, "/a/", "/b/")
	val := strings.Repeat("v", 100) // each object about 5 + 100 + 128 bytes
	for i := range 3 {
		e.put(fmt.Sprintf("/a/%d", i), val)
		e.put(fmt.Sprintf("/b/%d", i), val)
	}
	e.caughtUp()
	if !e.kept("/b/") {
		t.Fatal("b's state is not kept")
	}
	time.Sleep(2 * time.Millisecond)
	if !e.kept("/a/") { // a is now the more recently read
		t.Fatal("a's state is not kept")
	}
	for i := 3; i < 7; i++ {
		e.put(fmt.Sprintf("/a/%d", i), val)
	}
	e.put("/b/3", val) // b changes while it is dropped: readmission must see it
	e.caughtUp()
	waitFor(t, "b's state to be dropped", func() bool { return e.caches["/b/"].Stats().StateObjects == -1 })
	if !e.kept("/a/") {
		t.Fatal("a's state was dropped; b was the colder")
	}
	if st := e.budget.Stats(); st.Drops != 1 || st.States != 1 || st.Dropped != 1 {
		t.Fatalf("budget %+v: want one drop, one state kept", st)
	}
	e.checkAccounts()

	// Make room: b comes back on its next reads, with its current objects.
	for i := 3; i < 7; i++ {
		e.del(fmt.Sprintf("/a/%d", i))
	}
	e.caughtUp()
	waitFor(t, "b's state to come back", func() bool { return e.kept("/b/") })
	if st := e.budget.Stats(); st.Readmit != 1 || st.States != 2 {
		t.Fatalf("budget %+v: want b back", st)
	}
	if objs, _, _, _ := e.caches["/b/"].List(context.Background(), []byte("/b/")); len(objs) != 4 {
		t.Fatalf("b came back with %d objects, want 4", len(objs))
	}
	e.put("/b/4", val)
	e.del("/b/0")
	e.caughtUp()
	if !e.kept("/b/") {
		t.Fatal("b's state is not kept after changes")
	}
	e.checkAccounts()
}

// A state larger than the whole budget drops itself and leaves the others;
// it stays out while it does not fit.
func TestBudgetStateLargerThanBudget(t *testing.T) {
	e := newBudgetEnv(t, 1500, "/a/", "/big/")
	e.put("/a/0", "x")
	for i := range 10 {
		e.put(fmt.Sprintf("/big/%d", i), strings.Repeat("v", 200))
	}
	e.caughtUp()
	if !e.kept("/a/") {
		t.Fatal("a's state is not kept")
	}
	for range 3 {
		if e.kept("/big/") {
			t.Fatal("a state larger than the budget is kept")
		}
		time.Sleep(20 * time.Millisecond) // past readmitEvery: attempts find no room
	}
	if st := e.budget.Stats(); st.Readmit != 0 || st.States != 1 {
		t.Fatalf("budget %+v", st)
	}
	// Watches of the dropped type start from storage and see every change.
	c := e.caches["/big/"]
	w, err := c.Watch(context.Background(), Options{Prefix: []byte("/big/"), Initial: true, Encoder: &testEncoder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r := read(w)
	for range 10 {
		if ev := r.next(t); ev.typ != "ADDED" {
			t.Fatalf("got %v, want ADDED", ev)
		}
	}
	e.put("/big/3", "w")
	if ev := r.nextNonBookmark(t); ev.typ != "MODIFIED" || ev.key != "/big/3" || ev.value != "w" {
		t.Fatalf("got %v", ev)
	}
	e.checkAccounts()
}

// Many caches written and read at once: the accounts stay exact and within
// the limit, and every kept state matches storage.
func TestBudgetConcurrent(t *testing.T) {
	prefixes := []string{"/a/", "/b/", "/c/", "/d/"}
	e := newBudgetEnv(t, 6000, prefixes...)
	var wg sync.WaitGroup
	for k, p := range prefixes {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 60 {
				e.put(fmt.Sprintf("%s%d", p, i%(10+5*k)), strings.Repeat("v", 10*(i%7)))
				if i%9 == 8 {
					e.del(fmt.Sprintf("%s%d", p, (i/2)%(10+5*k)))
				}
			}
		}()
		go func() {
			defer wg.Done()
			c := e.caches[p]
			fenc := &testEncoder{}
			for range 100 {
				if objs, _, ok, _ := c.List(context.Background(), []byte(p)); ok && len(objs) > 0 {
					if _, err := c.Encoding(objs[0], "x", func(*Object) ([]byte, error) { return make([]byte, 50), nil }); err != nil {
						t.Error(err)
					}
					o := objs[len(objs)-1]
					frame, _ := fenc.AppendEvent(nil, Added, o, o.Revision)
					c.keepInitialFrame(o, fenc, 0, frame)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	e.caughtUp()
	time.Sleep(20 * time.Millisecond) // drops released asynchronously
	for _, p := range prefixes {
		e.kept(p)
	}
	e.checkAccounts()
	if st := e.budget.Stats(); st.Drops == 0 {
		t.Fatalf("budget %+v: the load was meant to exceed it", st)
	}
}

// A relist charges the new state alone: a state over half the budget
// survives it (the old one is given back first).
func TestBudgetRelistKeepsALargeState(t *testing.T) {
	fs := &failingStore{Store: newEnv(t, Settings{}).st}
	e := newEnvOn(t, fs, Settings{StateBytes: 3000})
	for i := range 8 {
		e.put(fmt.Sprintf("%s%d", testPrefix, i), strings.Repeat("v", 100)) // 8 × 233 bytes
	}
	e.waitCaughtUp()
	if st := e.cache.Stats(); st.StateObjects != 8 {
		t.Fatalf("stats %+v: want the state kept", st)
	}
	fs.compact(t)
	waitFor(t, "the second list", func() bool { return e.cache.Stats().ListsCompleted == 2 })
	if st, b := e.cache.Stats(), e.cache.budget.Stats(); st.StateObjects != 8 || b.Used != st.StateBytes || b.Drops != 0 {
		t.Fatalf("after the relist: stats %+v, budget %+v", st, b)
	}
}

// blockingStore blocks every list that continues a previous page until the
// list's context ends.
type blockingStore struct{ storage.Store }

func (s blockingStore) List(ctx context.Context, opts storage.ListOptions) (storage.ListResult, error) {
	if opts.StartKey != nil && opts.Limit == listPageSize {
		<-ctx.Done()
		return storage.ListResult{}, ctx.Err()
	}
	return s.Store.List(ctx, opts)
}

// A watch stopped while it reads a page of its initial events ends as any
// stopped watch does, without an Error event.
func TestInitialPageStoppedIsNoError(t *testing.T) {
	base := newEnv(t, Settings{}).st
	e := newEnvOn(t, blockingStore{base}, Settings{StateBytes: -1})
	for i := range listPageSize + 200 {
		e.put(fmt.Sprintf("%s%05d", testPrefix, i), "v")
	}
	e.waitCaughtUp()
	w, err := e.cache.Watch(context.Background(), Options{Prefix: []byte(testPrefix), Initial: true, Encoder: e.enc})
	if err != nil {
		t.Fatal(err)
	}
	r := read(w)
	for range listPageSize {
		if ev := r.next(t); ev.typ != "ADDED" {
			t.Fatalf("got %v, want ADDED", ev)
		}
	}
	time.Sleep(20 * time.Millisecond) // the reader waits for the second page
	w.Stop()
	if err := r.ended(t); !errors.Is(err, ErrEnded) {
		t.Fatalf("ended with %v, want ErrEnded", err)
	}
	select {
	case ev := <-r.ch:
		t.Fatalf("an event after the first page: %v", ev)
	default:
	}
}

// A state brought back is read from storage a page at a time: one of
// several pages comes back whole.
func TestBudgetReadmitsSeveralPages(t *testing.T) {
	e := newBudgetEnv(t, 400<<10, "/a/", "/b/")
	for i := range listPageSize + 500 {
		e.put(fmt.Sprintf("/b/%05d", i), "v") // about 140 bytes each: 210 KB
	}
	e.caughtUp()
	if !e.kept("/b/") {
		t.Fatal("b's state is not kept")
	}
	time.Sleep(2 * time.Millisecond)
	e.kept("/a/") // a is read last
	for i := range 10 {
		e.put(fmt.Sprintf("/a/%d", i), strings.Repeat("v", 20<<10)) // 200 KB: b, the colder, goes
	}
	e.caughtUp()
	waitFor(t, "b's state to be dropped", func() bool { return e.caches["/b/"].Stats().StateObjects == -1 })
	for i := range 10 {
		e.del(fmt.Sprintf("/a/%d", i))
	}
	e.caughtUp()
	waitFor(t, "b's state to come back", func() bool { return e.kept("/b/") })
	if st := e.caches["/b/"].Stats(); st.StateObjects != listPageSize+500 {
		t.Fatalf("b came back with %d objects", st.StateObjects)
	}
	e.checkAccounts()
}

// The windows of caches sharing a budget stay within WindowTotalBytes
// together: past it, a window over an equal share evicts down to it (an
// idle one at its next progress report), and a stopped cache's window is
// no longer charged.
func TestBudgetWindowsShareTheirBound(t *testing.T) {
	st, err := badger.Open(badger.InMemoryOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	(&env{t: t, st: st}).put("/other/seed", "x")
	const limit = 64 << 10
	b := NewBudget(0)
	caches := map[string]*Cache{}
	for _, p := range []string{"/a/", "/b/"} {
		c, err := New(Config{Settings: Settings{WindowTotalBytes: limit, ProgressInterval: 10 * time.Millisecond}, Storage: st, Prefix: []byte(p), Budget: b})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
		caches[p] = c
		if _, err := c.Revision(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e := &budgetEnv{t: t, st: st, budget: b, caches: caches}
	value := strings.Repeat("v", 1<<10)
	window := func(p string) int64 { return caches[p].Stats().WindowBytes }
	for i := range 100 {
		e.put(fmt.Sprintf("/a/%03d", i), value)
	}
	e.caughtUp()
	// Alone, /a/'s share is the whole bound.
	if w := window("/a/"); w > limit || w < limit/2 {
		t.Fatalf("/a/ alone: window of %d bytes, want at most %d and most of it", w, limit)
	}
	for i := range 100 {
		e.put(fmt.Sprintf("/b/%03d", i), value)
	}
	e.caughtUp()
	waitFor(t, "both windows within half the bound", func() bool {
		return window("/a/") <= limit/2 && window("/b/") <= limit/2
	})
	wa, wb := window("/a/"), window("/b/")
	if wa < limit/4 || wb < limit/4 {
		t.Fatalf("windows of %d and %d bytes: evicted past their share of %d", wa, wb, limit/2)
	}
	if got := b.Stats().Windows; got != wa+wb {
		t.Fatalf("budget charges %d bytes of windows, they hold %d", got, wa+wb)
	}
	caches["/b/"].Stop()
	if got := b.Stats().Windows; got != wa {
		t.Fatalf("after /b/ stopped: %d bytes of windows charged, want /a/'s %d", got, wa)
	}
	if w := window("/b/"); w != 0 {
		t.Fatalf("a stopped cache reports a window of %d bytes", w)
	}
}

// WindowTotalBytes defaults to 256 MiB, or to WindowBytes when that is
// larger, so that a larger WindowBytes is not capped unasked.
func TestWindowTotalBytesDefault(t *testing.T) {
	for _, c := range []struct{ window, total, want int64 }{
		{0, 0, DefaultWindowTotalBytes},
		{512 << 20, 0, 512 << 20},
		{512 << 20, 1 << 20, 1 << 20},
		{0, -1, -1},
	} {
		s, err := Settings{WindowBytes: c.window, WindowTotalBytes: c.total}.withDefaults()
		if err != nil || s.WindowTotalBytes != c.want {
			t.Errorf("WindowBytes %d, WindowTotalBytes %d: got %d (%v), want %d", c.window, c.total, s.WindowTotalBytes, err, c.want)
		}
	}
}
