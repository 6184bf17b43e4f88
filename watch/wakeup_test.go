package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A synced watcher waits on one channel (wait): dispatch, Stop, the end of its
// context and its bookmark timer all wake it. Events written close together
// and one at a time all arrive, in order and promptly, to watchers with and
// without bookmarks, sharing one encoder (numbered once by the cache).
func TestWatcherWakeups(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: time.Hour})
	e.put(testPrefix+"k", "v0")
	e.waitCaughtUp()
	var rs []*reader
	for i := 0; i < 8; i++ {
		rs = append(rs, e.watch(Options{Bookmarks: i%2 == 0}))
	}
	if n := len(e.cache.encIDs); n != 1 {
		t.Fatalf("%d encoder ids for one encoder", n)
	}
	// One at a time: each arrives before the next write.
	for i := 1; i <= 20; i++ {
		e.put(testPrefix+"k", fmt.Sprint("v", i))
		for _, r := range rs {
			r.expect(t, fmt.Sprintf("MODIFIED %sk v%d", testPrefix, i))
		}
	}
	// A burst.
	for i := 21; i <= 300; i++ {
		e.put(testPrefix+"k", fmt.Sprint("v", i))
	}
	for _, r := range rs {
		for i := 21; i <= 300; i++ {
			r.expect(t, fmt.Sprintf("MODIFIED %sk v%d", testPrefix, i))
		}
	}
	// Frames were encoded once per event, not per watcher.
	if n := e.enc.events.Load(); n > 300 {
		t.Fatalf("%d encodes for 300 events", n)
	}

	// Stop and the end of the context wake a waiting watcher at once.
	w, err := e.cache.Watch(context.Background(), Options{Encoder: e.enc, Bookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	r := read(w)
	time.Sleep(20 * time.Millisecond) // let it wait
	start := time.Now()
	w.Stop()
	if err := r.ended(t); err != ErrEnded {
		t.Fatalf("after Stop: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r = e.watchCtx(ctx, Options{})
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := r.ended(t); err != ErrEnded {
		t.Fatalf("after cancel: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("ending two waiting watches took %v", d)
	}
}

// The bookmark timer wakes an idle watcher when a bookmark is due, and keeps
// doing so interval after interval.
func TestWatcherBookmarkTimer(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: 30 * time.Millisecond})
	rev := e.put(testPrefix+"k", "v0")
	e.waitCaughtUp()
	r := e.watch(Options{Revision: rev, Bookmarks: true})
	for i := 0; i < 3; i++ {
		if ev := r.next(t); ev.typ != "BOOKMARK" || ev.rev < rev {
			t.Fatalf("bookmark %d: %v", i, ev)
		}
	}
	rev = e.put(testPrefix+"k", "v1")
	if got := r.nextNonBookmark(t); got.rev != rev {
		t.Fatalf("%v, want rev %d", got, rev)
	}
	if ev := r.next(t); ev.typ != "BOOKMARK" || ev.rev < rev {
		t.Fatalf("bookmark after the event: %v", ev)
	}
}

// valueEncoder is a comparable encoder value: two with the same fields are
// the same encoder.
type valueEncoder struct {
	enc *testEncoder
	tag string
}

func (v valueEncoder) AppendEvent(dst []byte, typ EventType, obj *Object, rev int64) ([]byte, error) {
	return v.enc.AppendEvent(dst, typ, obj, rev)
}
func (v valueEncoder) AppendBookmark(dst []byte, rev int64, end bool) ([]byte, error) {
	return v.enc.AppendBookmark(dst, rev, end)
}
func (v valueEncoder) AppendError(dst []byte, err error) []byte { return v.enc.AppendError(dst, err) }

// Past maxEncoderIDs, encoders get no id and their cached frames are found by
// comparing encoder values: equal values share a frame, different ones do
// not. Below it, equal values share one id.
func TestEncoderFramesByValue(t *testing.T) {
	for _, numbered := range []bool{true, false} {
		t.Run(fmt.Sprint("numbered=", numbered), func(t *testing.T) {
			e := newEnv(t, Settings{})
			if !numbered {
				e.cache.encMu.Lock()
				e.cache.encIDs = map[Encoder]uint32{}
				for i := range maxEncoderIDs {
					e.cache.encIDs[&testEncoder{}] = uint32(i + 1)
				}
				e.cache.encMu.Unlock()
			}
			shared, other := &testEncoder{}, &testEncoder{}
			a := e.watch(Options{Encoder: valueEncoder{enc: shared, tag: "a"}})
			b := e.watch(Options{Encoder: valueEncoder{enc: shared, tag: "a"}})
			c := e.watch(Options{Encoder: valueEncoder{enc: other, tag: "c"}})
			for _, r := range []*reader{a, b, c} {
				if got := r.w.encID != 0; got != numbered {
					t.Fatalf("encoder id %d, numbered %v", r.w.encID, numbered)
				}
			}
			for i := range 5 {
				e.put(testPrefix+"k", fmt.Sprint("v", i))
			}
			for _, r := range []*reader{a, b, c} {
				for range 5 {
					r.nextNonBookmark(t)
				}
			}
			if shared.events.Load() != 5 || other.events.Load() != 5 {
				t.Fatalf("encoded %d and %d times, want 5 each (equal encoders share frames)", shared.events.Load(), other.events.Load())
			}
		})
	}
}

// failingBookmarks is testEncoder whose bookmarks do not encode.
type failingBookmarks struct{ testEncoder }

func (e *failingBookmarks) AppendBookmark(dst []byte, _ int64, _ bool) ([]byte, error) {
	return dst, errors.New("no bookmark")
}

// A bookmark that does not encode ends the watch with its Error event at
// once, not at the watcher's next wake. The watch's only bookmark is the
// one 2s before its deadline: without the Error event at once, the watch
// would send it only when the deadline ends it, 2s later.
func TestBookmarkFailureEndsWatch(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: time.Hour})
	rev := e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	w := e.startWatch(ctx, Options{Encoder: &failingBookmarks{}, Revision: rev, Bookmarks: true})
	start := time.Now()
	got, err := w.Next(nil)
	if err != nil || !strings.HasPrefix(string(got), "ERROR") {
		t.Fatalf("Next: %q, %v; want the Error event", got, err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("the Error event came after %v, with the deadline: not with the bookmark", took)
	}
}
