package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

var concurrencyTests = []test{
	{name: "ConcurrentWritersAndWatchers", fn: testConcurrentWritersWatchers},
	{name: "ConcurrentCAS", fn: testConcurrentCAS},
	{name: "WatchStartDuringWrites", fn: testWatchStartDuringWrites},
}

// ack is an acknowledged write.
type ack struct {
	rev   int64
	typ   storage.EventType
	key   string
	value string
}

// testConcurrentWritersAndWatchers runs many writers and checks that every
// watcher, live or resumed, sees every acknowledged write exactly once, in
// revision order, with the written values.
func testConcurrentWritersWatchers(t *testing.T, s *suite) {
	st := s.open(t)
	const writers, perWriter = 8, 40
	create(t, st, "cc-before", "x")
	start := current(t, st)

	type watchAt struct {
		name string
		ch   <-chan storage.Event
	}
	var watches []watchAt
	for i := range 3 {
		watches = append(watches, watchAt{fmt.Sprintf("live %d", i), watch(t, st, storage.WatchOptions{Prefix: []byte("cc/")})})
	}
	watches = append(watches, watchAt{"from start", watch(t, st, storage.WatchOptions{Prefix: []byte("cc/"), FromRevision: start})})

	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	record := func(a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	midway := make(chan int64, 1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := t.Context()
			var rev int64
			key := fmt.Sprintf("cc/w%d", w)
			for i := range perWriter {
				value := fmt.Sprintf("w%d-%d", w, i)
				var err error
				var typ storage.EventType = storage.EventPut
				switch {
				case i%10 == 0:
					rev, err = st.Create(ctx, []byte(key), []byte(value))
				case i%10 == 9:
					_, rev, err = st.Delete(ctx, []byte(key), rev)
					typ, value = storage.EventDelete, ""
				default:
					rev, err = st.Update(ctx, []byte(key), []byte(value), rev)
				}
				if err != nil {
					t.Errorf("writer %d step %d: %v", w, i, err)
					return
				}
				record(ack{rev, typ, key, value})
				if w == 0 && i == perWriter/2 {
					midway <- rev
				}
			}
		}()
	}
	// A watcher that joins midway, from a revision in the past.
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	var mid int64
	select {
	case mid = <-midway:
	case <-writersDone:
		t.Fatal("writers stopped before midway")
	}
	watches = append(watches, watchAt{"from midway", watch(t, st, storage.WatchOptions{Prefix: []byte("cc/"), FromRevision: mid - 5})})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(acks, func(a, b ack) int { return int(a.rev - b.rev) })
	for i := 1; i < len(acks); i++ {
		if acks[i].rev == acks[i-1].rev {
			t.Fatalf("two writes acknowledged with revision %d", acks[i].rev)
		}
	}
	if cur := current(t, st); cur != acks[len(acks)-1].rev {
		t.Fatalf("CurrentRevision %d, want the last acknowledged %d", cur, acks[len(acks)-1].rev)
	}

	var rg sync.WaitGroup
	for _, w := range watches {
		want := acks
		if w.name == "from midway" {
			i, _ := slices.BinarySearchFunc(acks, mid-5+1, func(a ack, r int64) int { return int(a.rev - r) })
			want = acks[i:]
		}
		rg.Add(1)
		go func() {
			defer rg.Done()
			if err := s.checkStream(w.ch, want); err != nil {
				t.Errorf("watch %s: %v", w.name, err)
			}
		}()
	}
	rg.Wait()
}

// checkStream reads len(want) change events and compares them.
func (s *suite) checkStream(ch <-chan storage.Event, want []ack) error {
	deadline := time.NewTimer(s.cfg.timeout)
	defer deadline.Stop()
	for i := 0; i < len(want); {
		select {
		case ev, ok := <-ch:
			if !ok {
				return fmt.Errorf("closed after %d of %d events", i, len(want))
			}
			if ev.Type == storage.EventProgress {
				continue
			}
			w := want[i]
			if ev.Type != w.typ || ev.Revision != w.rev || string(ev.Key) != w.key || string(ev.Value) != w.value {
				return fmt.Errorf("event %d = %s, want %v %q=%q at %d", i, fmtEvent(ev), w.typ, w.key, w.value, w.rev)
			}
			i++
		case <-deadline.C:
			return fmt.Errorf("timed out after %d of %d events", i, len(want))
		}
	}
	return nil
}

// testConcurrentCAS increments counters with read-modify-write loops from
// several goroutines; a lost update shows as a wrong final count.
func testConcurrentCAS(t *testing.T, s *suite) {
	st := s.open(t)
	const workers, increments, counters = 6, 25, 2
	for c := range counters {
		create(t, st, fmt.Sprintf("cas/%d", c), "0")
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := t.Context()
			for i := range increments {
				key := []byte(fmt.Sprintf("cas/%d", (w+i)%counters))
				for {
					kv, err := st.Get(ctx, key, 0)
					if err != nil {
						t.Errorf("Get: %v", err)
						return
					}
					n, _ := strconv.Atoi(string(kv.Value))
					_, err = st.Update(ctx, key, []byte(strconv.Itoa(n+1)), kv.Revision)
					if err == nil {
						break
					}
					var ce *storage.ConflictError
					if !errors.As(err, &ce) || ce.Expected != kv.Revision || ce.Actual <= kv.Revision || !bytes.Equal(ce.Key, key) {
						t.Errorf("Update: %v, want a ConflictError from revision %d", err, kv.Revision)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for c := range counters {
		n, err := strconv.Atoi(string(get(t, st, fmt.Sprintf("cas/%d", c), 0).Value))
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != workers*increments {
		t.Fatalf("counters sum to %d, want %d (lost or duplicated updates)", total, workers*increments)
	}
}

// testWatchStartDuringWrites starts watches from recent revisions while
// writers are busy, so that replaying the history and switching to live
// events race with new writes; each watch must see exactly the writes after
// its start revision.
func testWatchStartDuringWrites(t *testing.T, s *suite) {
	st := s.open(t)
	create(t, st, "hw-first", "x")
	var (
		mu   sync.Mutex
		acks []ack
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("hw/%d-%d", w, i)
				rev, err := st.Create(t.Context(), []byte(key), []byte("v"))
				if err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{rev, storage.EventPut, key, "v"})
				mu.Unlock()
			}
		}()
	}
	type started struct {
		from int64
		ch   <-chan storage.Event
	}
	var watches []started
	for i := range 40 {
		from := max(current(t, st)-int64(i%4), 1)
		watches = append(watches, started{from, watch(t, st, storage.WatchOptions{Prefix: []byte("hw/"), FromRevision: from})})
		if i%8 == 7 {
			time.Sleep(time.Millisecond) // let some writes through between starts
		}
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(acks, func(a, b ack) int { return int(a.rev - b.rev) })
	for _, w := range watches {
		i, _ := slices.BinarySearchFunc(acks, w.from+1, func(a ack, r int64) int { return int(a.rev - r) })
		if err := s.checkStream(w.ch, acks[i:]); err != nil {
			t.Fatalf("watch from %d: %v", w.from, err)
		}
	}
}
