package watch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// testRoom is a Room of a fixed number of bytes that counts its waiters.
type testRoom struct {
	mu      sync.Mutex
	size    int64
	free    int64
	waiting int
	changed chan struct{}
}

func newTestRoom(n int64) *testRoom {
	return &testRoom{size: n, free: n, changed: make(chan struct{})}
}

func (r *testRoom) Reserve(ctx context.Context, n int64) (func(), error) {
	n = min(n, r.size)
	r.mu.Lock()
	defer r.mu.Unlock()
	for n > r.free {
		ch := r.changed
		r.waiting++
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.waiting--
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return r.takeLocked(n), nil
}

func (r *testRoom) TryReserve(n int64) (func(), bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > r.free {
		return nil, false
	}
	return r.takeLocked(n), true
}

func (r *testRoom) takeLocked(n int64) func() {
	r.free -= n
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.free += n
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		})
	}
}

func (r *testRoom) state() (free int64, waiting int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.free, r.waiting
}

// bigValue is a value of n KiB, distinct per i.
func bigValue(i, kib int) string {
	return fmt.Sprintf("%d%s", i, strings.Repeat("v", kib<<10))
}

// putBig writes n values of kib KiB under k0..k(n-1) and waits for the
// cache to have them.
func (e *env) putBig(n, kib int) {
	e.t.Helper()
	for i := range n {
		e.put(fmt.Sprintf("%sk%d", testPrefix, i), bigValue(i, kib))
	}
	e.waitCaughtUp()
}

// startWatch starts a watch of the cache, stopped when the test ends.
func (e *env) startWatch(ctx context.Context, opts Options) *Watcher {
	e.t.Helper()
	w, err := e.cache.Watch(ctx, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	return w
}

// expectFree fails unless want bytes of the room are free.
func (r *testRoom) expectFree(t *testing.T, want int64, when string) {
	t.Helper()
	if free, _ := r.state(); free != want {
		t.Fatalf("%d bytes free %s, want %d", free, when, want)
	}
}

// Frames of large objects a watch encodes for itself are reserved before
// they are encoded, one per batch, and given back once the next batch is
// asked for or the watch stops; a watch without room waits for it, holding
// none itself.
func TestRoomBoundsOwnFrames(t *testing.T) {
	e := newEnv(t, Settings{})
	e.putBig(3, 100)
	const size = 150 << 10 // one frame of 100 KiB at a time
	room := newTestRoom(size)
	start := func() *Watcher {
		return e.startWatch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
	}
	w1 := start()
	if b, err := w1.Next(nil); err != nil || len(parseLines(b)) != 1 || !strings.HasPrefix(string(b), "ADDED /t/k0") {
		t.Fatalf("first batch %.20q (%d events), %v: want k0 alone", b, len(parseLines(b)), err)
	}
	room.expectFree(t, size-(100<<10+1+frameOverhead), "while one 100 KiB frame is out")
	w2 := start()
	got := make(chan string, 1)
	go func() {
		b, _ := w2.Next(nil)
		got <- string(b)
	}()
	waitFor(t, "the second watch to wait for room", func() bool { _, n := room.state(); return n == 1 })
	w1.Stop() // gives its frame's room back: the second watch goes on
	select {
	case b := <-got:
		if evs := parseLines([]byte(b)); len(evs) != 1 || evs[0].key != "/t/k0" {
			t.Fatalf("the second watch's first batch: %v", evs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second watch still waits after the first stopped")
	}
	w2.Stop()
	if free, waiting := room.state(); free != size || waiting != 0 {
		t.Fatalf("%d of %d bytes free, %d waiting after both watches stopped", free, size, waiting)
	}
}

// rowEncoder is a per-watch encoder of small frames, whatever the object's
// size (like a Table watch's rows).
type rowEncoder struct{ perWatchEncoder }

func (e *rowEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	return fmt.Appendf(dst, "%s %s %d %d\n", typ, obj.Key, rev, len(obj.Value)), nil
}

// A frame that turns out small holds no room: the initial rows of large
// objects go out in one batch, with little room.
func TestRoomSmallFramesOfLargeObjects(t *testing.T) {
	e := newEnv(t, Settings{})
	e.putBig(3, 1024)
	room := newTestRoom(2 << 20)
	w := e.startWatch(context.Background(), Options{Initial: true, Encoder: &rowEncoder{}, Room: room})
	b, err := w.Next(nil)
	if evs := parseLines(b); err != nil || len(evs) != 3 {
		t.Fatalf("first batch: %v, %v: want the three rows", evs, err)
	}
	room.expectFree(t, 2<<20, "with only small frames out")
}

// blockingRoom grants a reservation only once grant is closed, whatever
// the caller's context: a grant racing the watch's end.
type blockingRoom struct {
	*testRoom
	asked chan struct{}
	grant chan struct{}
}

func (r *blockingRoom) Reserve(_ context.Context, n int64) (func(), error) {
	close(r.asked)
	<-r.grant
	release, _ := r.TryReserve(n)
	return release, nil
}

// A reservation granted as the watch is stopped is given back, though
// its caller, done with the watch, calls neither Next nor Stop again.
func TestRoomReservationRacingStop(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"k0", bigValue(0, 100))
	e.waitCaughtUp()
	room := &blockingRoom{testRoom: newTestRoom(1 << 20), asked: make(chan struct{}), grant: make(chan struct{})}
	w, err := e.cache.Watch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Next(nil) // its caller has stopped the watch: no more calls
	}()
	<-room.asked
	w.Stop()
	close(room.grant)
	<-done
	if free, _ := room.state(); free != 1<<20 {
		t.Fatalf("%d of %d bytes free after the watch stopped", free, 1<<20)
	}
}

// A frame that the cache keeps and shares gives back its own reservation
// only, never that of the batch's earlier frame.
func TestRoomSharedFrameKeepsEarlierReservation(t *testing.T) {
	// Frames kept for initial events may use an eighth of the budget:
	// 12.5 KiB, enough for b's frame, not for a's.
	e := newEnv(t, Settings{StateBytes: 100 << 10})
	e.put(testPrefix+"a", bigValue(0, 20))
	e.put(testPrefix+"b", bigValue(1, 8))
	e.waitCaughtUp()
	room := newTestRoom(1 << 20)
	w := e.startWatch(context.Background(), Options{Initial: true, Encoder: e.enc, Room: room})
	b, shared, err := w.NextShared(nil, nil, 1<<10)
	if err != nil || len(shared) != 1 || !strings.HasPrefix(string(b), "ADDED /t/a") || !strings.HasPrefix(string(shared[0].Frame), "ADDED /t/b") {
		t.Fatalf("batch %.12q with %d shared frames, %v: want a copied and b shared", b, len(shared), err)
	}
	room.expectFree(t, 1<<20-(20<<10+1+frameOverhead), "while a's frame is out")
}

// Events replayed from storage history (under the storage reservation),
// then from the window and from the queue with at most one reserved frame
// per batch, none lost or repeated.
func TestRoomOneLargeFramePerBatch(t *testing.T) {
	e := newEnv(t, Settings{WindowEvents: 5})
	e.waitCaughtUp()
	first := e.put(testPrefix+"k", "small")
	var want []string
	for i := range 8 { // 3 from storage history, 5 from the window
		v := bigValue(i, 20)
		e.put(testPrefix+"k", v)
		want = append(want, "MODIFIED /t/k "+v)
	}
	e.waitCaughtUp()
	room := newTestRoom(1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang fails, not stalls
	defer cancel()
	w := e.startWatch(ctx, Options{Revision: first, Encoder: &perWatchEncoder{}, Room: room})
	var got []string
	batch := func() {
		t.Helper()
		b, err := w.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseLines(b)
		if len(evs) > 1 && len(got) >= 3 { // the first 3 come from storage (storageRoom)
			t.Fatalf("a batch of %d large frames", len(evs))
		}
		for _, ev := range evs {
			got = append(got, ev.typ+" "+ev.key+" "+ev.value)
		}
	}
	for len(got) < len(want) {
		batch()
	}
	// Caught up: the next call makes it synced, and waits.
	next := make(chan []byte)
	go func() {
		b, _ := w.Next(nil)
		next <- b
	}()
	waitFor(t, "the watcher to be synced", func() bool { return e.cache.Stats().SyncedWatchers == 1 })
	want = append(want, "MODIFIED /t/k small")
	e.put(testPrefix+"k", "small")
	for _, ev := range parseLines(<-next) {
		got = append(got, ev.typ+" "+ev.key+" "+ev.value)
	}
	for i := range 3 { // queued together
		v := bigValue(10+i, 20)
		e.put(testPrefix+"k", v)
		want = append(want, "MODIFIED /t/k "+v)
	}
	e.waitCaughtUp()
	for len(got) < len(want) {
		batch()
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %.30q, want %.30q", i, got[i], want[i])
		}
	}
	w.Stop()
	room.expectFree(t, 1<<20, "after the watch stopped")
}

// Initial events that each need room go out one per batch, in order, and
// the initial-events-end bookmark after the last.
func TestRoomInitialEventsInOrder(t *testing.T) {
	e := newEnv(t, Settings{})
	e.putBig(5, 20)
	room := newTestRoom(1 << 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a lost event fails, not stalls
	defer cancel()
	w := e.startWatch(ctx, Options{Initial: true, InitialEventsEnd: true, Encoder: &perWatchEncoder{}, Room: room})
	var got []string
	for len(got) < 6 {
		b, err := w.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseLines(b)
		if len(evs) == 0 || len(evs) > 2 || (len(evs) == 2 && evs[1].typ != "BOOKMARK") {
			t.Fatalf("batch %v: want one large frame (and the bookmark after the last)", evs)
		}
		for _, ev := range evs {
			got = append(got, ev.typ+" "+ev.key)
		}
	}
	if want := "ADDED /t/k0,ADDED /t/k1,ADDED /t/k2,ADDED /t/k3,ADDED /t/k4,BOOKMARK -"; strings.Join(got, ",") != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}

// A watcher with frames in its batch does not wait for room: the batch
// goes out, and the next one waits.
func TestRoomWaitsOnlyWithEmptyBatch(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"a", "small")
	e.put(testPrefix+"b", bigValue(0, 100))
	e.waitCaughtUp()
	room := newTestRoom(1 << 20)
	stalled, _ := room.TryReserve(1 << 20) // the user's other watches hold it all
	w := e.startWatch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
	next := func() chan []tev {
		ch := make(chan []tev, 1)
		go func() {
			b, _ := w.Next(nil)
			ch <- parseLines(b)
		}()
		return ch
	}
	select {
	case evs := <-next():
		if len(evs) != 1 || evs[0].key != "/t/a" {
			t.Fatalf("first batch %v: want a alone", evs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch waits for room with a frame in its batch")
	}
	second := next()
	waitFor(t, "the second batch to wait for room", func() bool { _, n := room.state(); return n == 1 })
	stalled()
	if evs := <-second; len(evs) != 1 || evs[0].key != "/t/b" {
		t.Fatalf("second batch %v: want b", evs)
	}
}

// The cache's frame of an event in the window is shared, not copied: it
// needs no room, even when the user's room is full.
func TestRoomSharedWindowFrameNeedsNone(t *testing.T) {
	e := newEnv(t, Settings{})
	e.waitCaughtUp()
	room := newTestRoom(64 << 10)
	stalled, _ := room.TryReserve(64 << 10)
	defer stalled()
	w := e.startWatch(context.Background(), Options{Encoder: e.enc, Room: room})
	got := make(chan []SharedFrame, 1)
	go func() {
		_, shared, _ := w.NextShared(nil, nil, 16<<10)
		got <- shared
	}()
	waitFor(t, "the watcher to be synced", func() bool { return e.cache.Stats().SyncedWatchers == 1 })
	e.put(testPrefix+"big", bigValue(0, 20))
	select {
	case s := <-got:
		if len(s) != 1 {
			t.Fatalf("%d shared frames, want the event's", len(s))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a frame shared from the cache waits for room")
	}
}

// The end of the watch's context does not give back the room of the batch
// its caller may still be writing: the caller's Stop does.
func TestRoomHeldUntilStop(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"k0", bigValue(0, 100))
	e.waitCaughtUp()
	room := newTestRoom(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.cache.Watch(ctx, Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := w.Next(nil); err != nil || len(parseLines(b)) != 1 {
		t.Fatalf("first batch %.20q, %v", b, err)
	}
	cancel()
	waitFor(t, "the watch to end", func() bool { return e.cache.Stats().Watchers == 0 })
	if free, _ := room.state(); free == 1<<20 {
		t.Fatal("the room of the batch being written was given back when the context ended")
	}
	w.Stop()
	room.expectFree(t, 1<<20, "after Stop")
}

// A watcher reading from storage reserves its storage room before it
// starts, waiting in Watch, and keeps it until the batch with the last of
// storage is written; its frames need none of their own.
func TestRoomStorageReads(t *testing.T) {
	t.Run("initial events from a snapshot", func(t *testing.T) {
		e := newEnv(t, Settings{StateBytes: -1})
		e.putBig(3, 100)
		const size = storageRoom + 1<<20/2
		room := newTestRoom(size)
		a := e.startWatch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
		started := make(chan *Watcher, 1)
		go func() {
			b, err := e.cache.Watch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
			if err != nil {
				t.Error(err)
			}
			started <- b
		}()
		waitFor(t, "the second watch to wait for room", func() bool { _, n := room.state(); return n == 1 })
		var got int
		for got < 3 {
			b, err := a.Next(nil)
			if err != nil {
				t.Fatal(err)
			}
			got += len(parseLines(b))
			if free, _ := room.state(); free != size-storageRoom {
				t.Fatalf("%d bytes free with %d initial events sent from storage", free, got)
			}
		}
		select {
		case <-started:
			t.Fatal("the second watch started before the first's last batch was written")
		default:
		}
		go func() { _, _ = a.Next(nil) }() // the last batch is written
		select {
		case b := <-started:
			b.Stop()
		case <-time.After(10 * time.Second):
			t.Fatal("the second watch still waits after the first sent the last of storage")
		}
	})
	t.Run("history replay", func(t *testing.T) {
		e := newEnv(t, Settings{WindowEvents: 5})
		e.waitCaughtUp()
		first := e.put(testPrefix+"k", "0")
		for i := 1; i < 10; i++ {
			e.put(testPrefix+"k", fmt.Sprint(i))
		}
		e.waitCaughtUp()
		room := newTestRoom(4 << 20)
		w := e.startWatch(context.Background(), Options{Revision: first, Encoder: e.enc, Room: room})
		room.expectFree(t, 4<<20-storageRoom, "for a watch replaying history")
		r := read(w)
		for i := 1; i < 10; i++ {
			r.expect(t, fmt.Sprintf("MODIFIED /t/k %d", i))
		}
		waitFor(t, "the storage room back once handed over to the cache", func() bool { free, _ := room.state(); return free == 4<<20 })
	})
}
