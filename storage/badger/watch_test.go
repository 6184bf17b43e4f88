package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// writeN writes n keys under prefix with `writers` goroutines and fails the
// test if that takes longer than limit (a blocked writer).
func writeN(t *testing.T, s *Store, prefix string, n, writers int, limit time.Duration) {
	t.Helper()
	writeKeys(t, s, n, writers, limit, func(i int) string { return fmt.Sprintf("%s%06d", prefix, i) })
}

// writeKeys creates key(0..n-1) with `writers` goroutines.
func writeKeys(t *testing.T, s *Store, n, writers int, limit time.Duration, key func(int) string) {
	t.Helper()
	done := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := w; i < n; i += writers {
				if _, err := s.Create(context.Background(), []byte(key(i)), []byte("v")); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	timeout := time.After(limit)
	for range writers {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("writers blocked: %d writes did not finish within %v", n, limit)
		}
	}
}

// readEvents reads n change events and checks they are the creates of
// prefix+000000.. in order with strictly increasing revisions.
func readEvents(t *testing.T, ch <-chan storage.Event, prefix string, n int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	var last int64
	seen := map[string]bool{}
	for i := 0; i < n; {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", i, n)
			}
			switch {
			case ev.Type == storage.EventProgress:
				continue
			case ev.Type != storage.EventPut || ev.Revision <= last || !strings.HasPrefix(string(ev.Key), prefix) || seen[string(ev.Key)]:
				t.Fatalf("event %d: %v %q rev %d (previous %d), err %v", i, ev.Type, ev.Key, ev.Revision, last, ev.Err)
			}
			seen[string(ev.Key)] = true
			last = ev.Revision
			i++
		case <-deadline:
			t.Fatalf("only %d of %d events", len(seen), n)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys, want %d", len(seen), n)
	}
}

// TestSlowWatcherDoesNotBlockWriters lets a watcher fall far behind its
// buffer: writers are not slowed down, and once the consumer reads, the
// watcher catches up from the change log and delivers every event once.
func TestSlowWatcherDoesNotBlockWriters(t *testing.T) {
	h := &recordHandler{}
	s := open(t, testOptions(t, "").WithWatchBufferSize(100).WithLogger(slog.New(h)))
	ch, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("slow/")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	writeN(t, s, "slow/", n, 8, 60*time.Second)
	if fellBehind(h) == 0 {
		t.Fatal("the watcher never overflowed its buffer; the test does not test what it should")
	}
	readEvents(t, ch, "slow/", n)
}

// TestSlowWatcherFallsBehindOnBytes: a watcher of large values falls behind
// on the bytes it holds, long before its event count, and still delivers
// every event once from the change log.
func TestSlowWatcherFallsBehindOnBytes(t *testing.T) {
	h := &recordHandler{}
	s := open(t, testOptions(t, "").WithWatchBufferBytes(256<<10).WithLogger(slog.New(h)))
	ch := watchBigUnread(t, s, storage.WatchOptions{Prefix: []byte("big/")}, h)
	readEvents(t, ch, "big/", bigEvents)
}

// bigEvents events of 16 KiB, 4.7 MiB in all, pass a 256 KiB bound.
const bigEvents = 300

// watchBigUnread starts a watch with opts, writes bigEvents values of 16
// KiB under big/ without reading it, and checks that it fell behind.
func watchBigUnread(t *testing.T, s *Store, opts storage.WatchOptions, h *recordHandler) <-chan storage.Event {
	t.Helper()
	ch, err := s.Watch(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), 16<<10)
	for i := range bigEvents {
		if _, err := s.Create(t.Context(), fmt.Appendf(nil, "big/%06d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if fellBehind(h) == 0 {
		t.Fatalf("%d events of 16 KiB unread did not pass a 256 KiB bound", bigEvents)
	}
	return ch
}

// A watch with its own buffer bound (WatchOptions.BufferBytes) falls behind
// at that bound, not the store's, keeps what its channel holds within it,
// and still delivers every event once, in order, from the change log.
func TestWatchBufferBytesBound(t *testing.T) {
	h := &recordHandler{}
	s := open(t, testOptions(t, "").WithLogger(slog.New(h))) // 64 MiB by default
	ch := watchBigUnread(t, s, storage.WatchOptions{Prefix: []byte("big/"), BufferBytes: 256 << 10}, h)
	// What the channel holds stays within the bound too.
	waitFor(t, "the watcher to send", 10*time.Second, func() bool { return len(ch) > 0 })
	time.Sleep(50 * time.Millisecond) // and fill what it may
	held, k := 0, len(ch)
	for range k {
		ev := <-ch
		held += len(ev.Key) + len(ev.Value) + len(ev.PrevValue)
	}
	if held == 0 || held > 256<<10 {
		t.Fatalf("the channel held %d bytes of events: want some, within 256 KiB", held)
	}
	readEvents(t, ch, "big/", bigEvents-k)
	// readLog, which its catch-up calls with that bound, ends a chunk at the
	// event that reaches it.
	cur, _ := s.CurrentRevision(t.Context())
	events, end, err := s.readLog([]byte("big/"), cur-bigEvents+1, cur, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for i, ev := range events {
		if size += int64(len(ev.Key) + len(ev.Value)); size >= 256<<10 && i < len(events)-1 {
			t.Fatalf("chunk of %d events goes on after %d reached the bound", len(events), i+1)
		}
	}
	if size < 256<<10 || end != events[len(events)-1].Revision {
		t.Fatalf("chunk of %d events, %d bytes, ends at %d: want it to end at the bound", len(events), size, end)
	}
}

// fellBehind counts the watchers that h saw fall behind their buffer.
func fellBehind(h *recordHandler) int {
	n := 0
	for _, r := range h.records() {
		if strings.Contains(r.msg, "fell behind") {
			n++
		}
	}
	return n
}

// TestLaggingWatcherCompacted compacts past a watcher that fell behind: it
// delivers what it had without a gap, then ends with a CompactedError.
func TestLaggingWatcherCompacted(t *testing.T) {
	s := open(t, testOptions(t, "").WithWatchBufferSize(10))
	start, _ := s.CurrentRevision(t.Context())
	ch, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("lag/")})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, s, "lag/", 2000, 1, 60*time.Second)
	cur, _ := s.CurrentRevision(t.Context())
	if err := s.Compact(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	next := start + 1
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed without an error event")
			}
			if ev.Type == storage.EventError {
				var ce *storage.CompactedError
				if !errors.As(ev.Err, &ce) || ce.Oldest != cur || ce.Requested != next-1 {
					t.Fatalf("error event %v, want CompactedError{%d, %d}", ev.Err, next-1, cur)
				}
				if next > cur {
					t.Fatalf("all %d events were delivered before the error", cur-start)
				}
				if _, ok := <-ch; ok {
					t.Fatal("event after the error event")
				}
				return
			}
			if ev.Revision != next {
				t.Fatalf("event at revision %d, want %d (gap)", ev.Revision, next)
			}
			next++
		case <-timeout:
			t.Fatal("no error event")
		}
	}
}

// TestWatchReplayInChunks replays a long history with a narrow prefix: the
// change log is read in bounded chunks, across many unrelated entries.
func TestWatchReplayInChunks(t *testing.T) {
	s := open(t, testOptions(t, ""))
	start, _ := s.CurrentRevision(t.Context())
	// Every 23rd write is under few/: more than two chunks of events, spread
	// over more than two scan limits of unrelated entries.
	const n = 3 * catchUpMaxScan
	const few = (n + 22) / 23
	writeKeys(t, s, n, 8, 120*time.Second, func(i int) string {
		if i%23 == 0 {
			return fmt.Sprintf("few/%06d", i)
		}
		return fmt.Sprintf("noise/%06d", i)
	})
	if few <= 2*catchUpMaxEvents {
		t.Fatalf("test setup: %d events do not span three chunks", few)
	}
	ch, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("few/"), FromRevision: start})
	if err != nil {
		t.Fatal(err)
	}
	readEvents(t, ch, "few/", few)
	// And the replay of the rest, through the same path.
	all, err := s.Watch(t.Context(), storage.WatchOptions{Prefix: []byte("noise/"), FromRevision: start})
	if err != nil {
		t.Fatal(err)
	}
	readEvents(t, all, "noise/", n-few)
}

// TestGroupCommit checks that concurrent durable writes share fsyncs.
func TestGroupCommit(t *testing.T) {
	s := open(t, testOptions(t, t.TempDir()))
	writeN(t, s, "gc/", 64*30, 64, 120*time.Second)
	b, w := s.batches.Load(), s.batchedWrites.Load()
	if w != 64*30 {
		t.Fatalf("%d writes counted, want %d", w, 64*30)
	}
	if avg := float64(w) / float64(b); avg < 4 {
		t.Fatalf("%d writes in %d batches (%.1f per batch); group commit is not batching", w, b, avg)
	} else {
		t.Logf("%d writes in %d batches (%.1f per batch)", w, b, avg)
	}
}
