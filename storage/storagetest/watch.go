package storagetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

var watchTests = []test{
	{name: "WatchLive", fn: testWatchLive},
	{name: "WatchBufferBytes", fn: testWatchBufferBytes},
	{name: "WatchResumeFromEveryRevision", fn: testWatchResume},
	{name: "WatchFromFuture", fn: testWatchFromFuture},
	{name: "WatchCancel", fn: testWatchCancel},
	{name: "WatchProgress", fn: testWatchProgress},
	{name: "WatchProgressNeverAhead", fn: testWatchProgressNeverAhead},
	{name: "WatchProgressRequested", fn: testWatchProgressRequested},
	{name: "WatchProgressRequestedAtOnce", fn: testWatchProgressRequestedAtOnce},
}

func testWatchLive(t *testing.T, s *suite) {
	st := s.open(t)
	rb := create(t, st, "w/before", "x") // before the watch: not delivered
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("w/")})

	r1 := create(t, st, "w/a", "a1")
	create(t, st, "wx/a", "outside")    // shares a textual prefix
	create(t, st, "other/a", "outside") // another prefix
	r2 := update(t, st, "w/a", "a2", r1)
	_, r3 := del(t, st, "w/a", r2)
	r4 := create(t, st, "w/", "the prefix itself")
	_, r5 := del(t, st, "w/before", 0)
	r6 := create(t, st, "w/a", "a3")

	s.expectEvents(t, "live watch", ch, []storage.Event{
		putEvent("w/a", "a1", r1, "", 0, r1),
		putEvent("w/a", "a2", r2, "a1", r1, r1),
		deleteEvent("w/a", r3, "a2", r2, r1),
		putEvent("w/", "the prefix itself", r4, "", 0, r4),
		deleteEvent("w/before", r5, "x", rb, rb),
		putEvent("w/a", "a3", r6, "", 0, r6),
	})
}

// testWatchBufferBytes: a watch with a small buffer bound whose consumer
// reads only after many writes (live, and replaying history) still gets
// every event once, in order: the bound changes what the backend holds,
// never what it delivers.
func testWatchBufferBytes(t *testing.T, s *suite) {
	st := s.open(t)
	start := create(t, st, "bb/start", "x")
	value := strings.Repeat("v", 4<<10)
	live := watch(t, st, storage.WatchOptions{Prefix: []byte("bb/k"), BufferBytes: 16 << 10})
	var want []storage.Event
	for i := range 60 {
		k := fmt.Sprintf("bb/k%02d", i)
		r := create(t, st, k, value)
		want = append(want, putEvent(k, value, r, "", 0, r))
	}
	replay := watch(t, st, storage.WatchOptions{Prefix: []byte("bb/k"), FromRevision: start, BufferBytes: 16 << 10})
	s.expectEvents(t, "bounded live watch", live, want)
	s.expectEvents(t, "bounded replay", replay, want)
}

// script is a sequence of writes under a prefix with its expected events.
type script struct {
	first, last int64 // revision before the first and of the last write
	events      []storage.Event
}

// runScript performs creates, updates and deletes over a few keys, with
// writes under other prefixes in between, and returns the expected events
// under prefix.
func runScript(t *testing.T, st storage.Store, prefix string, steps int) script {
	t.Helper()
	type state struct {
		value        string
		rev, created int64
	}
	live := map[string]*state{}
	sc := script{first: current(t, st)}
	for i := range steps {
		key := fmt.Sprintf("%sk%d", prefix, i%4)
		if i%5 == 2 {
			create(t, st, fmt.Sprintf("%s-other/%d", strings.TrimSuffix(prefix, "/"), i), "noise")
		}
		cur, ok := live[key]
		switch {
		case !ok:
			v := fmt.Sprintf("c%d", i)
			rev := create(t, st, key, v)
			live[key] = &state{v, rev, rev}
			sc.events = append(sc.events, putEvent(key, v, rev, "", 0, rev))
		case i%3 == 0:
			_, rev := del(t, st, key, cur.rev)
			delete(live, key)
			sc.events = append(sc.events, deleteEvent(key, rev, cur.value, cur.rev, cur.created))
		default:
			v := fmt.Sprintf("u%d", i)
			rev := update(t, st, key, v, cur.rev)
			sc.events = append(sc.events, putEvent(key, v, rev, cur.value, cur.rev, cur.created))
			live[key] = &state{v, rev, cur.created}
		}
	}
	sc.last = current(t, st)
	return sc
}

// after returns the script's events with a revision above rev.
func (sc script) after(rev int64) []storage.Event {
	for i, e := range sc.events {
		if e.Revision > rev {
			return sc.events[i:]
		}
	}
	return nil
}

// testWatchResume starts a watch from every revision of a scripted history
// and checks each gets exactly the events after its revision, then continues
// live.
func testWatchResume(t *testing.T, s *suite) {
	st := s.open(t)
	create(t, st, "res/k0", "before") // history before the script
	del(t, st, "res/k0", 0)
	sc := runScript(t, st, "res/", 40)

	chans := map[int64]<-chan storage.Event{}
	for from := sc.first; from <= sc.last; from++ {
		chans[from] = watch(t, st, storage.WatchOptions{Prefix: []byte("res/"), FromRevision: from})
	}
	sentinel := create(t, st, "res/sentinel", "live")
	for from := sc.first; from <= sc.last; from++ {
		want := append(sc.after(from), putEvent("res/sentinel", "live", sentinel, "", 0, sentinel))
		s.expectEvents(t, fmt.Sprintf("watch from %d", from), chans[from], want)
	}
}

func testWatchFromFuture(t *testing.T, s *suite) {
	st := s.open(t)
	create(t, st, "fw/x", "x")
	cur := current(t, st)
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("fw/"), FromRevision: cur + 3})
	var revs []int64
	for i := range 6 {
		revs = append(revs, create(t, st, fmt.Sprintf("fw/k%d", i), "v"))
	}
	var want []storage.Event
	for i, r := range revs {
		if r > cur+3 {
			want = append(want, putEvent(fmt.Sprintf("fw/k%d", i), "v", r, "", 0, r))
		}
	}
	if len(want) == 0 {
		t.Fatalf("test setup: no revision above %d in %v", cur+3, revs)
	}
	s.expectEvents(t, "watch from a future revision", ch, want)
}

func testWatchCancel(t *testing.T, s *suite) {
	st := s.open(t)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := st.Watch(ctx, storage.WatchOptions{Prefix: []byte("wc/")})
	if err != nil {
		t.Fatal(err)
	}
	r := create(t, st, "wc/a", "1")
	if ev := s.next(t, ch); ev.Revision != r {
		t.Fatalf("first event %s, want revision %d", fmtEvent(ev), r)
	}
	cancel()
	deadline := time.After(s.cfg.timeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				goto closed
			}
		case <-deadline:
			t.Fatal("watch channel not closed after its context was cancelled")
		}
	}
closed:
	// The store is unaffected.
	create(t, st, "wc/b", "2")
	if _, err := st.Watch(ctx, storage.WatchOptions{Prefix: []byte("wc/")}); err == nil {
		t.Fatal("Watch with a cancelled context succeeded")
	}
}

// testWatchProgress checks progress events: they arrive without changes
// under the prefix, and their revision advances past unrelated writes.
func testWatchProgress(t *testing.T, s *suite) {
	st := s.open(t)
	create(t, st, "pg/a", "1")
	start := current(t, st)
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("pg/"), ProgressInterval: 20 * time.Millisecond})

	waitProgress := func(atLeast int64) int64 {
		t.Helper()
		deadline := time.After(s.cfg.timeout)
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatal("watch closed")
				}
				if ev.Type != storage.EventProgress {
					t.Fatalf("unexpected event %s while waiting for progress", fmtEvent(ev))
				}
				if cur := current(t, st); ev.Revision > cur || ev.Revision < start {
					t.Fatalf("progress revision %d outside [%d, %d]", ev.Revision, start, cur)
				}
				if ev.Revision >= atLeast {
					return ev.Revision
				}
			case <-deadline:
				t.Fatalf("no progress event at revision >= %d within %v", atLeast, s.cfg.timeout)
			}
		}
	}
	waitProgress(start)
	other := create(t, st, "pgx/unrelated", "x")
	p := waitProgress(other)
	if p < other {
		t.Fatalf("progress %d below the unrelated write %d", p, other)
	}
	r := create(t, st, "pg/b", "2")
	ev := s.next(t, ch)
	checkEvent(t, "event after progress", ev, putEvent("pg/b", "2", r, "", 0, r))
}

// testWatchProgressRequested checks storage.ProgressRequester, for stores
// that implement it: with a progress interval far longer than the test, a
// requested progress event reports a write under another prefix at once,
// and never before the events of the watch's own prefix.
func testWatchProgressRequested(t *testing.T, s *suite) {
	st := s.open(t)
	pr, ok := st.(storage.ProgressRequester)
	if !ok {
		t.Skip("the store does not implement storage.ProgressRequester")
	}
	create(t, st, "rq/a", "1")
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("rq/"), ProgressInterval: time.Hour})
	for round := range 3 {
		mine := create(t, st, fmt.Sprintf("rq/k%d", round), "x")
		other := create(t, st, fmt.Sprintf("rqx/k%d", round), "y")
		if err := pr.RequestProgress(t.Context()); err != nil {
			t.Fatalf("RequestProgress: %v", err)
		}
		sawMine := false
		deadline := time.After(s.cfg.timeout)
	wait:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatal("watch closed")
				}
				switch ev.Type {
				case storage.EventProgress:
					if ev.Revision >= mine && !sawMine {
						t.Fatalf("round %d: progress %d before the event of revision %d", round, ev.Revision, mine)
					}
					if ev.Revision >= other {
						break wait
					}
				case storage.EventPut:
					if ev.Revision != mine {
						t.Fatalf("round %d: unexpected event %s", round, fmtEvent(ev))
					}
					sawMine = true
				default:
					t.Fatalf("round %d: unexpected event %s", round, fmtEvent(ev))
				}
			case <-deadline:
				t.Fatalf("round %d: no progress at revision >= %d within %v of RequestProgress", round, other, s.cfg.timeout)
			}
		}
	}
}

// testWatchProgressRequestedAtOnce asks for progress the moment a watch is
// open, before the store may have set it up (etcd drops a progress request
// that reaches it before the watch is registered on its stream; the store
// must ask again): with a progress interval far longer than the test, the
// progress event must still come, every time.
func testWatchProgressRequestedAtOnce(t *testing.T, s *suite) {
	st := s.open(t)
	pr, ok := st.(storage.ProgressRequester)
	if !ok {
		t.Skip("the store does not implement storage.ProgressRequester")
	}
	for round := range 10 {
		other := create(t, st, fmt.Sprintf("rox/k%d", round), "y")
		// From just before the write under the other prefix, so that the
		// store has something to catch up to: etcd's progress report is
		// the way to learn that the watch's prefix had no change in it.
		ch := watch(t, st, storage.WatchOptions{Prefix: []byte("ro/"), FromRevision: other - 1, ProgressInterval: time.Hour})
		if err := pr.RequestProgress(t.Context()); err != nil {
			t.Fatalf("RequestProgress: %v", err)
		}
		deadline := time.After(s.cfg.timeout)
		for reported := int64(0); reported < other; {
			select {
			case ev, ok := <-ch:
				if !ok || ev.Type != storage.EventProgress {
					t.Fatalf("round %d: got %s (channel open %v), want only progress events", round, fmtEvent(ev), ok)
				}
				reported = ev.Revision
			case <-deadline:
				t.Fatalf("round %d: no progress at revision >= %d within %v of RequestProgress", round, other, s.cfg.timeout)
			}
		}
	}
}

// testWatchProgressNeverAhead reads a busy watch, partly slowly, with
// frequent progress events while writes continue: a progress event must
// never claim a revision whose change under the prefix has not been
// delivered yet.
func testWatchProgressNeverAhead(t *testing.T, s *suite) {
	st := s.open(t)
	ch := watch(t, st, storage.WatchOptions{Prefix: []byte("pa/"), ProgressInterval: time.Millisecond})
	const n = 300
	var (
		mu   sync.Mutex
		revs = make([]int64, 0, n) // acknowledged prefix writes, in order
	)
	written := make(chan error, 1)
	go func() {
		for i := range n {
			r, err := st.Create(t.Context(), []byte(fmt.Sprintf("pa/%04d", i)), []byte("v"))
			if err != nil {
				written <- err
				return
			}
			mu.Lock()
			revs = append(revs, r)
			mu.Unlock()
			if i%10 == 0 {
				if _, err := st.Create(t.Context(), []byte(fmt.Sprintf("pax/%04d", i)), []byte("x")); err != nil {
					written <- err
					return
				}
			}
		}
		written <- nil
	}()
	got, progress := 0, 0
	var last int64
	deadline := time.After(s.cfg.timeout)
	for got < n || progress == 0 {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			switch ev.Type {
			case storage.EventProgress:
				// Every acknowledged prefix write at or below ev.Revision
				// must have been delivered.
				mu.Lock()
				due := 0
				for _, r := range revs {
					if r <= ev.Revision {
						due++
					}
				}
				mu.Unlock()
				if due > got {
					t.Fatalf("progress at %d after %d events; %d writes under the prefix are at or below it", ev.Revision, got, due)
				}
				if got == n {
					progress++
				}
			case storage.EventPut:
				if ev.Revision <= last || string(ev.Key) != fmt.Sprintf("pa/%04d", got) {
					t.Fatalf("event %d: %s after revision %d", got, fmtEvent(ev), last)
				}
				last = ev.Revision
				got++
				if got > n/2 && got%8 == 0 {
					time.Sleep(200 * time.Microsecond) // a slow consumer for a while
				}
			default:
				t.Fatalf("unexpected event %s", fmtEvent(ev))
			}
		case <-deadline:
			t.Fatalf("%d of %d events, %d progress events after them", got, n, progress)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}
