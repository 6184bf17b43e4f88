package watch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// PollShared returns at once with nothing when the watcher has nothing to
// send; Wait returns once it may have: an event, a bookmark due, its end.
func TestPollSharedAndWait(t *testing.T) {
	e := newEnv(t, Settings{BookmarkInterval: time.Second})
	rev := e.put(testPrefix+"a", "1")
	e.waitCaughtUp()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.startWatch(ctx, Options{Encoder: e.enc, Revision: rev, Bookmarks: true})
	poll := func() (string, error) {
		buf, sh, err := w.PollShared(nil, nil, 1<<20)
		if len(sh) > 0 {
			t.Fatalf("%d frames shared below the size asked", len(sh))
		}
		return string(buf), err
	}
	// Catching up may take polls that send nothing, none of which waits.
	for range 3 {
		if got, err := poll(); got != "" || err != nil {
			t.Fatalf("poll of an idle watch: %q, %v", got, err)
		}
	}
	waited := make(chan struct{})
	go func() {
		w.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("Wait returned with nothing to send")
	case <-time.After(50 * time.Millisecond):
	}
	e.put(testPrefix+"b", "2")
	<-waited
	got, err := poll()
	if evs := parseLines([]byte(got)); err != nil || len(evs) == 0 || evs[0].key != testPrefix+"b" {
		t.Fatalf("after Wait: %q, %v; want the event of b", got, err)
	}
	got = ""
	// Idle: Wait returns for the periodic bookmark.
	for got == "" || parseLines([]byte(got))[0].typ != "BOOKMARK" {
		if got, err = poll(); err != nil {
			t.Fatal(err)
		}
		if got == "" {
			w.Wait()
		}
	}
	// The end: Wait returns, and the next poll says so.
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	for {
		got, err = poll()
		if err != nil {
			break
		}
		if got == "" {
			w.Wait()
		}
	}
	if !errors.Is(err, ErrEnded) {
		t.Fatalf("after the context ended: %v, want ErrEnded", err)
	}
}

// An initial object that does not encode ends a polled watch as it ends
// one read with Next: with its Error event, then ErrEnded. (A poll may
// return nothing as it finds the failure; Wait must not wait then.)
func TestPollSharedInitialFailure(t *testing.T) {
	e := newEnv(t, Settings{})
	e.put(testPrefix+"a", "corrupt") // first: the batch that finds it is empty
	e.waitCaughtUp()
	w := e.startWatch(context.Background(), Options{Encoder: e.enc, Initial: true})
	done := make(chan []tev)
	go func() {
		var got []tev
		for {
			buf, _, err := w.PollShared(nil, nil, 1<<20)
			got = append(got, parseLines(buf)...)
			if err != nil {
				done <- got
				return
			}
			if len(buf) == 0 {
				w.Wait()
			}
		}
	}()
	select {
	case got := <-done:
		if len(got) != 1 || got[0].typ != "ERROR" {
			t.Fatalf("events %v; want the Error event alone", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end: Wait waited with its Error event to send")
	}
}

// slowFeedStore hands out every storage watch's events 20 ms apart, so
// that a watcher replaying history finds its feed empty at first.
type slowFeedStore struct{ storage.Store }

func (s slowFeedStore) Watch(ctx context.Context, opts storage.WatchOptions) (<-chan storage.Event, error) {
	in, err := s.Store.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make(chan storage.Event)
	go func() {
		defer close(out)
		defer func() {
			for range in { // the store's watch ends with ctx
			}
		}()
		for ev := range in {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// A polled watch that replays history from storage is woken by its feed:
// Wait waits on it as well as on the cache.
func TestPollSharedWaitsOnStorageFeed(t *testing.T) {
	e := newEnvOn(t, slowFeedStore{newEnv(t, Settings{}).st}, Settings{WindowEvents: 4})
	from := e.put(testPrefix+"k", "0")
	for i := 1; i < 10; i++ {
		e.put(testPrefix+"k", fmt.Sprint(i))
	}
	e.waitCaughtUp()
	w := e.startWatch(context.Background(), Options{Encoder: e.enc, Revision: from})
	done := make(chan []tev)
	go func() {
		var got []tev
		for len(got) < 9 {
			buf, _, err := w.PollShared(nil, nil, 1<<20)
			got = append(got, parseLines(buf)...)
			if err != nil {
				break
			}
			if len(buf) == 0 {
				w.Wait()
			}
		}
		done <- got
	}()
	select {
	case got := <-done:
		if len(got) != 9 || got[0].value != "1" || got[8].value != "9" {
			t.Fatalf("events %v, want the nine changes after the start", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no events: Wait did not wake for the storage feed")
	}
}
