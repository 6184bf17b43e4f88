package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

var lifecycleTests = []test{
	{name: "Close", fn: testClose},
	{name: "CloseWithConcurrentWriters", fn: testCloseConcurrent},
	{name: "Restart", fn: testRestart, needs: func(c config) bool { return c.reopen != nil }},
}

// drainToError reads a watch until it closes and returns the last event,
// which must be an error event.
func (s *suite) drainToError(t *testing.T, ch <-chan storage.Event) error {
	t.Helper()
	deadline := time.After(s.cfg.timeout)
	var last storage.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				if last.Type != storage.EventError {
					t.Fatalf("watch closed after %s, want an error event last", fmtEvent(last))
				}
				return last.Err
			}
			if last.Type == storage.EventError {
				t.Fatalf("event %s after the error event", fmtEvent(ev))
			}
			last = ev
		case <-deadline:
			t.Fatalf("watch not closed within %v", s.cfg.timeout)
		}
	}
}

func testClose(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	r := create(t, st, "cl/a", "1")
	live := watch(t, st, storage.WatchOptions{Prefix: []byte("cl/")})
	replay := watch(t, st, storage.WatchOptions{Prefix: []byte("cl/"), FromRevision: r - 1})
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, ch := range map[string]<-chan storage.Event{"live": live, "replaying": replay} {
		if err := s.drainToError(t, ch); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s watch ended with %v, want ErrClosed", name, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	isClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	_, err := st.Get(ctx, []byte("cl/a"), 0)
	isClosed("Get", err)
	_, err = st.List(ctx, storage.ListOptions{Prefix: []byte("cl/")})
	isClosed("List", err)
	_, err = st.Create(ctx, []byte("cl/b"), []byte("x"))
	isClosed("Create", err)
	_, err = st.Update(ctx, []byte("cl/a"), []byte("x"), 0)
	isClosed("Update", err)
	_, _, err = st.Delete(ctx, []byte("cl/a"), 0)
	isClosed("Delete", err)
	_, err = st.Watch(ctx, storage.WatchOptions{Prefix: []byte("cl/")})
	isClosed("Watch", err)
	_, err = st.CurrentRevision(ctx)
	isClosed("CurrentRevision", err)
	_, err = st.CompactedRevision(ctx)
	isClosed("CompactedRevision", err)
	isClosed("Compact", st.Compact(ctx, r))
}

// testCloseConcurrent closes the store under writers and watchers: every
// write either succeeds or fails with ErrClosed, and every watch ends with
// ErrClosed after delivering only acknowledged writes.
func testCloseConcurrent(t *testing.T, s *suite) {
	st := s.open(t)
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("cc/")})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		acks = map[int64]string{}
		n    int
	)
	started := make(chan struct{})
	var once sync.Once
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("cc/%d-%d", w, i)
				rev, err := st.Create(t.Context(), []byte(key), []byte("v"))
				if errors.Is(err, storage.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Create: %v, want success or ErrClosed", err)
					return
				}
				mu.Lock()
				acks[rev] = key
				n++
				if n == 20 {
					once.Do(func() { close(started) })
				}
				mu.Unlock()
			}
		}()
	}
	<-started
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()

	deadline := time.After(s.cfg.timeout)
	var prev int64
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed without an error event")
			}
			switch ev.Type {
			case storage.EventProgress:
				continue
			case storage.EventError:
				if !errors.Is(ev.Err, storage.ErrClosed) {
					t.Fatalf("watch ended with %v, want ErrClosed", ev.Err)
				}
				return
			}
			mu.Lock()
			key, ok := acks[ev.Revision]
			mu.Unlock()
			if !ok || key != string(ev.Key) || ev.Revision <= prev {
				t.Fatalf("event %s: not an acknowledged write in order (after %d)", fmtEvent(ev), prev)
			}
			prev = ev.Revision
		case <-deadline:
			t.Fatal("watch did not end after Close")
		}
	}
}

func testRestart(t *testing.T, s *suite) {
	st := s.open(t)
	ctx := t.Context()
	r1 := create(t, st, "rs/a", "a1")
	r2 := update(t, st, "rs/a", "a2", r1)
	rb := create(t, st, "rs/b", "b1")
	if err := st.Compact(ctx, r2); err != nil {
		t.Fatal(err)
	}
	_, rbDel := del(t, st, "rs/b", rb)
	r3 := update(t, st, "rs/a", "a3", r2)
	before := current(t, st)

	st = s.cfg.reopen(t, st)
	if cur := current(t, st); cur != before {
		t.Fatalf("CurrentRevision after restart = %d, want %d", cur, before)
	}
	if c, err := st.CompactedRevision(ctx); err != nil || c != r2 {
		t.Fatalf("CompactedRevision after restart = %d, %v; want %d", c, err, r2)
	}
	checkKV(t, "Get after restart", get(t, st, "rs/a", 0), storage.KeyValue{Key: []byte("rs/a"), Value: []byte("a3"), Revision: r3, CreateRevision: r1})
	checkKV(t, "Get at a past revision after restart", get(t, st, "rs/a", r2), storage.KeyValue{Key: []byte("rs/a"), Value: []byte("a2"), Revision: r2, CreateRevision: r1})
	checkKV(t, "Get of a later-deleted key at a past revision", get(t, st, "rs/b", rb), storage.KeyValue{Key: []byte("rs/b"), Value: []byte("b1"), Revision: rb, CreateRevision: rb})
	if _, err := st.Get(ctx, []byte("rs/a"), r1); !isCompacted(err, r1, r2) {
		t.Errorf("Get below the compacted revision after restart: %v", err)
	}

	// A watch resumes from the history kept on disk, then continues live.
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("rs/"), FromRevision: r2})
	r4 := create(t, st, "rs/c", "c1")
	if r4 <= before {
		t.Fatalf("first write after restart got revision %d, not above %d", r4, before)
	}
	s.expectEvents(t, "watch across restart", ch, []storage.Event{
		putEvent("rs/b", "b1", rb, "", 0, rb),
		deleteEvent("rs/b", rbDel, "b1", rb, rb),
		putEvent("rs/a", "a3", r3, "a2", r2, r1),
		putEvent("rs/c", "c1", r4, "", 0, r4),
	})

	// And once more, with a write in between and nothing else.
	st = s.cfg.reopen(t, st)
	if cur := current(t, st); cur != r4 {
		t.Fatalf("CurrentRevision after the second restart = %d, want %d", cur, r4)
	}
	if r5 := update(t, st, "rs/c", "c2", r4); r5 <= r4 {
		t.Fatalf("revision %d after the second restart not above %d", r5, r4)
	}
}
