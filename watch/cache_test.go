package watch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

func TestInitialEventsThenChanges(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"b", "b1")
	e.put(testPrefix+"a", "a1")
	e.put("/outside/x", "x")
	e.waitCaughtUp()

	r := e.watch(Options{Initial: true, InitialEventsEnd: true})
	r.expect(t, "ADDED /t/a a1", "ADDED /t/b b1")
	end := r.next(t)
	if end.typ != "BOOKMARK" || end.value != "true" || end.rev < e.current()-1 {
		t.Fatalf("initial-events-end bookmark %v", end)
	}
	r1 := e.put(testPrefix+"a", "a2")
	r2 := e.put(testPrefix+"c", "c1")
	r3 := e.del(testPrefix + "b")
	got := r.expect(t, "MODIFIED /t/a a2", "ADDED /t/c c1", "DELETED /t/b b1")
	if got[0].rev != r1 || got[1].rev != r2 || got[2].rev != r3 {
		t.Fatalf("revisions %v, want %d %d %d", got, r1, r2, r3)
	}

	// A namespace-like prefix sees only its keys.
	e.put(testPrefix+"ns1/x", "1")
	e.put(testPrefix+"ns2/y", "2")
	e.waitCaughtUp()
	rn := e.watch(Options{Prefix: []byte(testPrefix + "ns1/"), Initial: true})
	rn.expect(t, "ADDED /t/ns1/x 1")
	e.put(testPrefix+"ns2/y", "3")
	e.put(testPrefix+"ns1/x", "4")
	rn.expect(t, "MODIFIED /t/ns1/x 4")

	// A prefix outside the cache is refused.
	if _, err := e.cache.Watch(context.Background(), Options{Prefix: []byte("/other/"), Encoder: e.enc}); err == nil {
		t.Fatal("watch outside the cache's prefix succeeded")
	}
}

func TestResumeFromWindowAndFuture(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"a", "1")
	from := e.put(testPrefix+"a", "2")
	e.put(testPrefix+"a", "3")
	e.del(testPrefix + "a")
	e.waitCaughtUp()

	r := e.watch(Options{Revision: from})
	r.expect(t, "MODIFIED /t/a 3", "DELETED /t/a 3")

	// Revision 0 without initial events: changes after the cache's revision.
	r0 := e.watch(Options{})
	e.put(testPrefix+"b", "1")
	r0.expect(t, "ADDED /t/b 1")

	// A future revision: nothing until changes pass it.
	future := e.current() + 3
	rf := e.watch(Options{Revision: future, Bookmarks: true})
	e.put(testPrefix+"b", "2")
	e.put(testPrefix+"b", "3")
	e.put(testPrefix+"b", "4")
	rev := e.put(testPrefix+"b", "5")
	got := rf.expect(t, "MODIFIED /t/b 5")
	if got[0].rev != rev || rev != future+1 {
		t.Fatalf("future watch got %v; want revision %d", got, future+1)
	}
}

// A watch from before the window replays storage history, then continues
// from the cache; one from before storage history gets an Error event.
func TestResumeFromStorageHistory(t *testing.T) {
	e := newEnv(t, Settings{WindowEvents: 5})
	e.waitCaughtUp() // the cache lists before the writes, so that they pass through its window
	first := e.put(testPrefix+"k", "0")
	for i := 1; i < 30; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	e.waitCaughtUp()
	if st := e.cache.Stats(); st.WindowEvents != 5 || st.Oldest <= first {
		t.Fatalf("stats %+v: want a window of 5 events", st)
	}
	r := e.watch(Options{Revision: first})
	for i := 1; i < 30; i++ {
		r.expect(t, fmt.Sprintf("MODIFIED /t/k %d", i))
	}
	// Handed over to the cache: it becomes a synced watcher.
	waitFor(t, "the watcher to be synced", func() bool { return e.cache.Stats().SyncedWatchers == 1 })
	e.put(testPrefix+"k", "30")
	r.expect(t, "MODIFIED /t/k 30")

	// Compacted history: one Error event, then the end.
	if err := e.st.Compact(context.Background(), e.current()); err != nil {
		t.Fatal(err)
	}
	old := e.watch(Options{Revision: first})
	if ev := old.next(t); ev.typ != "ERROR" || !strings.Contains(ev.value, "compacted") {
		t.Fatalf("got %v, want an ERROR event", ev)
	}
	if err := old.ended(t); !errors.Is(err, ErrEnded) {
		t.Fatalf("after the error: %v", err)
	}
}

// watchRecorder records the options of every storage watch.
type watchRecorder struct {
	storage.Store
	mu   sync.Mutex
	opts []storage.WatchOptions
}

func (s *watchRecorder) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	s.mu.Lock()
	s.opts = append(s.opts, opts)
	s.mu.Unlock()
	return s.Store.Watch(ctx, opts)
}

// A watch that replays storage history bounds what storage buffers for it
// while its client does not read (WatchOptions.BufferBytes); the cache's
// own storage watch keeps the store's bound.
func TestHistoryReplayBuffersBounded(t *testing.T) {
	rec := &watchRecorder{Store: newEnv(t, Settings{}).st}
	e := newEnvOn(t, rec, Settings{WindowEvents: 5})
	e.waitCaughtUp()
	first := e.put(testPrefix+"k", "0")
	for i := 1; i < 30; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	e.waitCaughtUp()
	r := e.watch(Options{Revision: first})
	r.expect(t, "MODIFIED /t/k 1")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.opts) != 2 {
		t.Fatalf("%d storage watches, want the cache's and the replay's", len(rec.opts))
	}
	if own, replay := rec.opts[0], rec.opts[1]; own.BufferBytes != 0 || replay.BufferBytes != listPageBytes || replay.FromRevision != first {
		t.Fatalf("the cache's watch %+v, the replay's %+v: want the replay alone bounded, to %d bytes", own, replay, listPageBytes)
	}
}

func TestFilterEnterAndLeave(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"a", "red")
	e.put(testPrefix+"b", "blue")
	e.put(testPrefix+"bad", "noattrs")
	e.waitCaughtUp()
	red := func(a any) bool { return a == "red" }
	r := e.watch(Options{Initial: true, Filter: red})
	r.expect(t, "ADDED /t/a red")
	leave := e.put(testPrefix+"a", "green") // leaves the selection
	e.put(testPrefix+"b", "red")            // enters it
	e.put(testPrefix+"b", "red")            // stays
	e.put(testPrefix+"c", "blue")           // never in it
	e.del(testPrefix + "b")                 // deleted while selected
	got := r.expect(t, "DELETED /t/a red", "ADDED /t/b red", "MODIFIED /t/b red", "DELETED /t/b red")
	if got[0].rev != leave {
		t.Fatalf("leaving event at %d, want the change's revision %d", got[0].rev, leave)
	}
}

// Every event is encoded once per encoder, however many watchers get it.
func TestEncodeOncePerEvent(t *testing.T) {
	e := newEnv(t, Settings{})
	var readers []*reader
	for i := 0; i < 50; i++ {
		readers = append(readers, e.watch(Options{}))
	}
	for i := 0; i < 20; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	for _, r := range readers {
		for i := 0; i < 20; i++ {
			r.expect(t, fmt.Sprintf("%s /t/k %d", map[bool]string{true: "ADDED", false: "MODIFIED"}[i == 0], i))
		}
	}
	if n := e.enc.events.Load(); n != 20 {
		t.Fatalf("%d encodes for 20 events and 50 watchers; want 20", n)
	}
	// Another representation has frames of its own.
	other := &testEncoder{}
	r := e.watch(Options{Encoder: other, Revision: e.current() - 5})
	for i := 15; i < 20; i++ {
		r.expect(t, fmt.Sprintf("MODIFIED /t/k %d", i))
	}
	if n := other.events.Load(); n != 5 {
		t.Fatalf("other encoder: %d encodes, want 5", n)
	}
}

// A watcher whose consumer stalls neither blocks writers nor other
// watchers; it replays from the window when it resumes, and is closed once
// it has fallen behind the window.
func TestSlowWatchers(t *testing.T) {
	e := newEnv(t, Settings{WatcherBuffer: 4, WindowEvents: 30})
	ctx := context.Background()
	// A stalled watcher: nobody calls Next.
	stalled, err := e.cache.Watch(ctx, Options{Encoder: e.enc})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Stop()
	// A slow one that resumes in time, and a fast one.
	slow, err := e.cache.Watch(ctx, Options{Encoder: e.enc})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast := e.watch(Options{})
	// Make the other two synced: a first Next syncs a watcher and
	// returns with the first event.
	var wg sync.WaitGroup
	for _, w := range []*Watcher{slow, stalled} {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = w.Next(nil) }()
	}
	waitFor(t, "all watchers synced", func() bool { return e.cache.Stats().SyncedWatchers == 3 })
	e.put(testPrefix+"k", "0")
	wg.Wait()

	start := time.Now()
	for i := 1; i <= 15; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("writes took %v with a stalled watcher", d)
	}
	for i := 0; i <= 15; i++ {
		ev := fast.nextNonBookmark(t)
		if ev.value != fmt.Sprint(i) {
			t.Fatalf("fast watcher: event %d is %v", i, ev)
		}
	}
	// The slow watcher overflowed its queue of 4: it replays 1..15 from the
	// window, in order, exactly once.
	rs := read(slow)
	for i := 1; i <= 15; i++ {
		rs.expect(t, fmt.Sprintf("MODIFIED /t/k %d", i))
	}
	slow.Stop()
	if err := rs.ended(t); !errors.Is(err, ErrEnded) {
		t.Fatalf("stopped watcher ended with %v", err)
	}
	// The stalled one falls out of the window of 30 and is closed.
	for i := 16; i <= 60; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	rst := read(stalled)
	if err := rst.ended(t); !errors.Is(err, ErrTooSlow) {
		t.Fatalf("stalled watcher ended with %v, want ErrTooSlow", err)
	}
}

func TestBookmarks(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: 50 * time.Millisecond})
	e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	r := e.watch(Options{Bookmarks: true})
	ev := r.next(t)
	if ev.typ != "BOOKMARK" || ev.value != "false" {
		t.Fatalf("got %v, want a bookmark", ev)
	}
	rev := e.put(testPrefix+"a", "2")
	r.expect(t, "MODIFIED /t/a 2")
	// Bookmarks follow the progress of the store, also for writes elsewhere.
	other := e.put("/other/x", "1")
	for {
		ev := r.next(t)
		if ev.typ != "BOOKMARK" || ev.rev < rev {
			t.Fatalf("got %v, want bookmarks at %d or later", ev, rev)
		}
		if ev.rev >= other {
			break
		}
	}

	// Without bookmarks, none; a watch with a deadline gets one 2s before it.
	e2 := newEnv(t, Settings{})
	quietR := e2.watch(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2200*time.Millisecond)
	defer cancel()
	start := time.Now()
	rd := e2.watchCtx(ctx, Options{Bookmarks: true})
	ev = rd.next(t)
	if ev.typ != "BOOKMARK" || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v, want a bookmark before the deadline", ev, time.Since(start))
	}
	if err := rd.ended(t); !errors.Is(err, ErrEnded) {
		t.Fatalf("watch ended with %v at its deadline", err)
	}
	select {
	case ev := <-quietR.ch:
		t.Fatalf("watch without bookmarks got %v", ev)
	default:
	}
}

// A consistent start waits for the cache to reach the storage's current
// revision, even when the last write was elsewhere.
func TestConsistentStart(t *testing.T) {
	for _, name := range []string{"cache", "snapshot"} {
		t.Run(name, func(t *testing.T) {
			s := Settings{}
			if name == "snapshot" {
				// Progress too rare to wait for: the start state comes from a
				// storage snapshot.
				s.ProgressInterval, s.ConsistentReadWait = time.Hour, time.Millisecond
			}
			e := newEnv(t, s)
			e.put(testPrefix+"a", "1")
			e.waitCaughtUp()
			cur := e.put("/other/y", "1")
			r := e.watch(Options{Initial: true, Consistent: true, InitialEventsEnd: true})
			r.expect(t, "ADDED /t/a 1")
			if end := r.next(t); end.typ != "BOOKMARK" || end.value != "true" || end.rev < cur {
				t.Fatalf("initial-events-end %v; want a revision of at least %d", end, cur)
			}
			e.put(testPrefix+"a", "2")
			r.expect(t, "MODIFIED /t/a 2")

			// Not older than a revision storage has not reached.
			_, err := e.cache.Watch(context.Background(), Options{Encoder: e.enc, Initial: true, Revision: e.current() + 100})
			var fe *storage.FutureRevisionError
			if !errors.As(err, &fe) {
				t.Fatalf("watch not older than a future revision: %v", err)
			}
		})
	}
}

func TestStateLimitAndGetList(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"b", "2")
	e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	objs, rev, ok, err := e.cache.List(context.Background(), []byte(testPrefix))
	if err != nil || !ok || len(objs) != 2 || string(objs[0].Key) != "/t/a" || rev < objs[1].Revision {
		t.Fatalf("list: %v %v %d %v", objs, ok, rev, err)
	}
	o, _, ok, err := e.cache.Get(context.Background(), []byte(testPrefix+"b"))
	if err != nil || !ok || o == nil || string(o.Value) != "2" {
		t.Fatalf("get: %v %v %v", o, ok, err)
	}

	// A state over its bound is dropped: reads go to storage snapshots.
	small := newEnv(t, Settings{StateBytes: 300})
	small.put(testPrefix+"a", "1")
	small.put(testPrefix+"b", "2")
	small.waitCaughtUp()
	small.put(testPrefix+"c", "3")
	small.waitCaughtUp()
	if _, _, ok, _ := small.cache.List(context.Background(), []byte(testPrefix)); ok {
		t.Fatal("list served from a state over its bound")
	}
	if st := small.cache.Stats(); st.StateObjects != -1 {
		t.Fatalf("stats %+v: want no state", st)
	}
	r := small.watch(Options{Initial: true, InitialEventsEnd: true})
	r.expect(t, "ADDED /t/a 1", "ADDED /t/b 2", "ADDED /t/c 3")
	if end := r.next(t); end.typ != "BOOKMARK" || end.value != "true" {
		t.Fatalf("got %v, want the initial-events-end bookmark", end)
	}
	small.put(testPrefix+"d", "4")
	r.expect(t, "ADDED /t/d 4")
}

func TestWindowAge(t *testing.T) {
	e := newEnv(t, Settings{WindowAge: 20 * time.Millisecond, ProgressInterval: 10 * time.Millisecond})
	e.put(testPrefix+"a", "1")
	e.put(testPrefix+"a", "2")
	e.waitCaughtUp()
	// Progress events drive the eviction of old events when idle.
	waitFor(t, "the window to empty", func() bool { return e.cache.Stats().WindowEvents == 0 })
}

func TestEncodeError(t *testing.T) {
	e := newEnv(t, Settings{})
	r := e.watch(Options{})
	e.put(testPrefix+"a", "corrupt")
	if ev := r.next(t); ev.typ != "ERROR" {
		t.Fatalf("got %v, want an ERROR event", ev)
	}
	if err := r.ended(t); !errors.Is(err, ErrEnded) {
		t.Fatalf("ended with %v", err)
	}
}

func TestStopAndStorageClose(t *testing.T) {
	e := newEnv(t, Settings{})
	r := e.watch(Options{})
	e.cache.Stop()
	if err := r.ended(t); !errors.Is(err, ErrStopped) {
		t.Fatalf("watch ended with %v after Stop, want ErrStopped", err)
	}
	if _, err := e.cache.Watch(context.Background(), Options{Encoder: e.enc}); !errors.Is(err, ErrStopped) {
		t.Fatalf("watch on a stopped cache: %v", err)
	}

	e2 := newEnv(t, Settings{})
	r2 := e2.watch(Options{})
	e2.st.Close()
	if err := r2.ended(t); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("watch ended with %v after the store closed, want ErrClosed", err)
	}
	select {
	case <-e2.cache.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cache did not stop when the store closed")
	}
}

// failingStore injects a compaction error into the cache's storage watch.
type failingStore struct {
	storage.Store
	mu     sync.Mutex
	inject chan storage.Event
}

// compact makes the cache's storage watch fail as after a compaction past
// its revision. The cache may have caught up from its list before its
// storage watch started: compact waits for the watch.
func (s *failingStore) compact(t *testing.T) {
	t.Helper()
	var inject chan storage.Event
	waitFor(t, "the cache's storage watch", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		inject = s.inject
		return inject != nil
	})
	inject <- storage.Event{Type: storage.EventError, Err: &storage.CompactedError{Requested: 1, Oldest: 2}}
}

func (s *failingStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	in, err := s.Store.Watch(ctx, opts)
	if err != nil || string(opts.Prefix) != testPrefix {
		return in, err
	}
	out := make(chan storage.Event)
	inject := make(chan storage.Event, 1)
	s.mu.Lock()
	s.inject = inject
	s.mu.Unlock()
	go func() {
		defer close(out)
		for {
			var ev storage.Event
			var ok bool
			select {
			case ev, ok = <-in:
				if !ok {
					return
				}
			case ev = <-inject:
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Type == storage.EventError {
				return
			}
		}
	}()
	return out, nil
}

// When the cache's own storage watch is compacted away, it lists again and
// ends its watchers, which start over.
func TestResyncAfterCompaction(t *testing.T) {
	base := newEnv(t, Settings{}).st
	fs := &failingStore{Store: base}
	e := newEnvOn(t, fs, Settings{})
	e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	r := e.watch(Options{})
	fs.compact(t)
	if err := r.ended(t); !errors.Is(err, ErrResync) {
		t.Fatalf("watch ended with %v, want ErrResync", err)
	}
	waitFor(t, "the second list", func() bool { return e.cache.Stats().ListsCompleted == 2 })
	r2 := e.watch(Options{Initial: true})
	r2.expect(t, "ADDED /t/a 1")
	e.put(testPrefix+"a", "2")
	r2.expect(t, "MODIFIED /t/a 2")
}

// Thousands of watchers coming and going leave no goroutine, no watcher and
// no memory behind.
func TestManyWatchersNoLeak(t *testing.T) {
	e := newEnv(t, Settings{})
	for i := 0; i < 100; i++ {
		e.put(fmt.Sprintf("%sk%03d", testPrefix, i), "v")
	}
	e.waitCaughtUp()
	measure := func() (int, uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc
	}
	// Warm up (timers, pools), then measure.
	round := func(n int) {
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				opts := Options{Encoder: e.enc, Bookmarks: i%2 == 0}
				switch i % 3 {
				case 0:
					opts.Initial = true
				case 1:
					opts.Revision = 1 // from storage history
				}
				w, err := e.cache.Watch(ctx, opts)
				if err != nil {
					t.Error(err)
					return
				}
				if i%4 != 0 {
					// Some read a little (the client goes away meanwhile),
					// some nothing.
					time.AfterFunc(time.Duration(i%7)*time.Millisecond, cancel)
					_, _ = w.Next(nil)
				}
				if i%2 == 0 {
					w.Stop()
				} else {
					cancel() // the client goes away
				}
			}(i)
		}
		e.put(testPrefix+"k000", "w")
		wg.Wait()
	}
	round(200)
	g0, h0 := measure()
	for i := 0; i < 3; i++ {
		round(1000)
	}
	waitFor(t, "watchers to be released", func() bool { return e.cache.Stats().Watchers == 0 })
	var g1 int
	var h1 uint64
	waitFor(t, "goroutines to end", func() bool {
		g1, h1 = measure()
		return g1 <= g0+2
	})
	if st := e.cache.Stats(); st.Watchers != 0 || st.SyncedWatchers != 0 {
		t.Fatalf("stats after all watchers left: %+v", st)
	}
	if h1 > h0+8<<20 {
		t.Fatalf("heap grew from %d to %d bytes after 3,000 watchers came and went", h0, h1)
	}
	t.Logf("goroutines %d → %d, heap %d KiB → %d KiB", g0, g1, h0>>10, h1>>10)
}

// A burst larger than one batch comes out over several calls to Next, in
// order, each call bounded in size.
func TestLargeBurst(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: time.Millisecond})
	w, err := e.cache.Watch(context.Background(), Options{Encoder: e.enc, Bookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Get synced: the first Next waits for the first event.
	first := make(chan []byte)
	go func() { b, _ := w.Next(nil); first <- b }()
	waitFor(t, "the watcher to be synced", func() bool { return e.cache.Stats().SyncedWatchers == 1 })
	big := strings.Repeat("x", 4096)
	var last int64
	for i := 0; i < 50; i++ {
		last = e.put(fmt.Sprintf("%sk%02d", testPrefix, i), big)
	}
	e.waitCaughtUp()
	got := parseLines(<-first)
	calls := 1
	for len(got) < 50 || got[len(got)-1].typ != "BOOKMARK" {
		b, err := w.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxBatchBytes+8192 {
			t.Fatalf("a batch of %d bytes", len(b))
		}
		got = append(got, parseLines(b)...)
		calls++
	}
	n := 0
	for _, ev := range got {
		if ev.typ == "BOOKMARK" {
			// A bookmark never claims more than what was sent.
			if n < 50 && ev.rev >= last {
				t.Fatalf("bookmark at %d after %d of 50 events", ev.rev, n)
			}
			continue
		}
		if want := fmt.Sprintf("%sk%02d", testPrefix, n); ev.key != want {
			t.Fatalf("event %d is %s, want %s", n, ev.key, want)
		}
		n++
	}
	if calls < 3 {
		t.Fatalf("50 events of 4 KiB came in %d calls", calls)
	}
}

// perWatchEncoder is a testEncoder with per-watch state.
type perWatchEncoder struct{ testEncoder }

func (*perWatchEncoder) PerWatch() {}

// A PerWatchEncoder's frames are encoded for each watch and never cached.
func TestPerWatchEncoder(t *testing.T) {
	e := newEnv(t, Settings{})
	a, b := &perWatchEncoder{}, &perWatchEncoder{}
	ra, rb := e.watch(Options{Encoder: a}), e.watch(Options{Encoder: b})
	shared := e.watch(Options{})
	for i := 0; i < 5; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	for _, r := range []*reader{ra, rb, shared} {
		for i := 0; i < 5; i++ {
			r.nextNonBookmark(t)
		}
	}
	if a.events.Load() != 5 || b.events.Load() != 5 {
		t.Fatalf("per-watch encoders encoded %d and %d events, want 5 each", a.events.Load(), b.events.Load())
	}
	// Only the shared encoder's frames are cached.
	e.cache.mu.RLock()
	defer e.cache.mu.RUnlock()
	for i := 0; i < e.cache.window.len(); i++ {
		ev := e.cache.window.at(i)
		var n int
		if p := ev.frames.Load(); p != nil {
			n = len(*p)
		}
		if n != 1 {
			t.Fatalf("event %d has %d cached frames, want 1", i, n)
		}
	}
}

// funcEncoder is not comparable (a func field).
type funcEncoder struct {
	testEncoder *testEncoder
	hook        func()
}

func (e funcEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	return e.testEncoder.AppendEvent(dst, typ, obj, rev)
}
func (e funcEncoder) AppendBookmark(dst []byte, rev int64, end bool) ([]byte, error) {
	return e.testEncoder.AppendBookmark(dst, rev, end)
}
func (e funcEncoder) AppendError(dst []byte, err error) []byte {
	return e.testEncoder.AppendError(dst, err)
}

// An encoder that is not comparable is refused with an error, not a panic.
func TestWatchRefusesIncomparableEncoder(t *testing.T) {
	e := newEnv(t, Settings{})
	_, err := e.cache.Watch(context.Background(), Options{Encoder: funcEncoder{testEncoder: &testEncoder{}, hook: func() {}}})
	if err == nil || !strings.Contains(err.Error(), "not comparable") {
		t.Fatalf("watch with an incomparable encoder: %v", err)
	}
}

// Without a state, a watch's initial events come from a storage snapshot a
// page at a time: the watcher holds one page, and changes made while it
// sends them follow the last page.
func TestInitialEventsFromStoragePaged(t *testing.T) {
	e := newEnv(t, Settings{StateBytes: -1})
	const n = 2*listPageSize + 500
	for i := range n {
		e.put(fmt.Sprintf("%s%05d", testPrefix, i), "v")
	}
	e.waitCaughtUp()
	w, err := e.cache.Watch(context.Background(), Options{Prefix: []byte(testPrefix), Initial: true, InitialEventsEnd: true, Encoder: e.enc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if len(w.initial) > listPageSize || w.initialNext == nil {
		t.Fatalf("the watcher starts with %d objects and next page %q; want one page", len(w.initial), w.initialNext)
	}
	e.put(testPrefix+"00007", "changed") // after the snapshot, before its events are read
	r := read(w)
	for i := range n {
		if ev := r.next(t); ev.typ != "ADDED" || ev.key != fmt.Sprintf("%s%05d", testPrefix, i) || ev.value != "v" {
			t.Fatalf("initial event %d: %v", i, ev)
		}
	}
	if ev := r.next(t); ev.typ != "BOOKMARK" || ev.value != "true" {
		t.Fatalf("got %v, want the initial-events-end bookmark", ev)
	}
	r.expect(t, "MODIFIED /t/00007 changed")
}

// Pages of initial events read from storage are bounded in bytes too, so
// that a watch of large objects holds about listPageBytes, not
// listPageSize of them.
func TestInitialEventsFromStoragePagedByBytes(t *testing.T) {
	e := newEnv(t, Settings{StateBytes: -1})
	const n, size = 10, 300 << 10
	big := strings.Repeat("x", size)
	for i := range n {
		e.put(fmt.Sprintf("%s%05d", testPrefix, i), big)
	}
	e.waitCaughtUp()
	w, err := e.cache.Watch(context.Background(), Options{Prefix: []byte(testPrefix), Initial: true, Encoder: e.enc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if want := listPageBytes/size + 1; len(w.initial) != want || w.initialNext == nil {
		t.Fatalf("the watcher starts with %d objects and next page %q; want %d and a next page", len(w.initial), w.initialNext, want)
	}
	r := read(w)
	for i := range n {
		if ev := r.next(t); ev.typ != "ADDED" || ev.key != fmt.Sprintf("%s%05d", testPrefix, i) || len(ev.value) != size {
			t.Fatalf("initial event %d: %s %s (%d bytes)", i, ev.typ, ev.key, len(ev.value))
		}
	}
}

// firstEncoder is a RestEncoder: its first frame says "FIRST", later change
// events are rest's (a testEncoder shared by every watch).
type firstEncoder struct {
	rest *testEncoder
	sent bool
}

func (e *firstEncoder) PerWatch()       {}
func (e *firstEncoder) FirstSent() bool { return e.sent }
func (e *firstEncoder) Rest() Encoder   { return e.rest }
func (e *firstEncoder) AppendError(dst []byte, err error) []byte {
	return e.rest.AppendError(dst, err)
}

func (e *firstEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	if !e.sent {
		e.sent = true
		return fmt.Appendf(dst, "%s %s %d FIRST\n", typ, obj.Key, rev), nil
	}
	return fmt.Appendf(dst, "%s %s %d %s\n", typ, obj.Key, rev, obj.Value), nil
}

func (e *firstEncoder) AppendBookmark(dst []byte, rev int64, end bool) ([]byte, error) {
	e.sent = true
	return e.rest.AppendBookmark(dst, rev, end)
}

// A RestEncoder's watches encode their first frame each, and share the
// frames of every change event after it: each event is encoded once for all.
func TestRestEncoderSharesFramesAfterTheFirst(t *testing.T) {
	e := newEnv(t, Settings{})
	e.waitCaughtUp()
	rest := &testEncoder{}
	var readers []*reader
	for range 3 {
		readers = append(readers, e.watch(Options{Encoder: &firstEncoder{rest: rest}}))
	}
	for i := range 5 {
		e.put(fmt.Sprintf("%sk%d", testPrefix, i), "v")
	}
	for _, r := range readers {
		r.expect(t, "ADDED /t/k0 FIRST", "ADDED /t/k1 v", "ADDED /t/k2 v", "ADDED /t/k3 v", "ADDED /t/k4 v")
	}
	if n := rest.events.Load(); n != 4 {
		t.Fatalf("the shared encoder encoded %d frames for 3 watches of 4 events after the first, want 4", n)
	}
}
