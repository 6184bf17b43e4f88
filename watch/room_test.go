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

// Frames of large objects a watch encodes for itself are reserved before
// they are encoded, one per batch, and given back once the next batch is
// asked for or the watch stops; a watch without room waits for it, holding
// none itself.
func TestRoomBoundsOwnFrames(t *testing.T) {
	e := newEnv(t, Settings{})
	for i := range 3 {
		e.put(fmt.Sprintf("%sk%d", testPrefix, i), bigValue(i, 100))
	}
	e.waitCaughtUp()
	const size = 150 << 10 // one frame of 100 KiB at a time
	room := newTestRoom(size)
	start := func() *Watcher {
		w, err := e.cache.Watch(context.Background(), Options{Initial: true, Encoder: &perWatchEncoder{}, Room: room})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	w1 := start()
	if b, err := w1.Next(nil); err != nil || len(parseLines(b)) != 1 || !strings.HasPrefix(string(b), "ADDED /t/k0") {
		t.Fatalf("first batch %.20q (%d events), %v: want k0 alone", b, len(parseLines(b)), err)
	}
	if free, _ := room.state(); free != size-(100<<10+1+frameOverhead) {
		t.Fatalf("%d bytes free while one 100 KiB frame is out", free)
	}
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
	for i := range 3 {
		e.put(fmt.Sprintf("%sk%d", testPrefix, i), bigValue(i, 1024))
	}
	e.waitCaughtUp()
	room := newTestRoom(2 << 20)
	w, err := e.cache.Watch(context.Background(), Options{Initial: true, Encoder: &rowEncoder{}, Room: room})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b, err := w.Next(nil)
	if evs := parseLines(b); err != nil || len(evs) != 3 {
		t.Fatalf("first batch: %v, %v: want the three rows", evs, err)
	}
	if free, _ := room.state(); free != 2<<20 {
		t.Fatalf("%d bytes free with only small frames out", free)
	}
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
	w, err := e.cache.Watch(context.Background(), Options{Initial: true, Encoder: e.enc, Room: room})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b, shared, err := w.NextShared(nil, nil, 1<<10)
	if err != nil || len(shared) != 1 || !strings.HasPrefix(string(b), "ADDED /t/a") || !strings.HasPrefix(string(shared[0].Frame), "ADDED /t/b") {
		t.Fatalf("batch %.12q with %d shared frames, %v: want a copied and b shared", b, len(shared), err)
	}
	if free, _ := room.state(); free != 1<<20-(20<<10+1+frameOverhead) {
		t.Fatalf("%d bytes free while a's frame is out", free)
	}
}

// Events replayed from storage history, from the window and from the
// queue go out with at most one reserved frame per batch, none lost or
// repeated.
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
	w, err := e.cache.Watch(ctx, Options{Revision: first, Encoder: &perWatchEncoder{}, Room: room})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	batch := func() {
		t.Helper()
		b, err := w.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		evs := parseLines(b)
		if len(evs) > 1 {
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
	if free, _ := room.state(); free != 1<<20 {
		t.Fatalf("%d bytes free after the watch stopped", free)
	}
}
