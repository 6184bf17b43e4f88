package flowcontrol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// grant starts Acquire in a goroutine and returns a channel that yields its
// ticket, or nothing if it failed.
func grant(t *testing.T, l *Level, flow string, width int) <-chan Ticket {
	t.Helper()
	ch := make(chan Ticket, 1)
	go func() {
		tk, _, err := l.Acquire(context.Background(), flow, width, time.Minute)
		if err != nil {
			close(ch)
			return
		}
		ch <- tk
	}()
	return ch
}

func waitFor(t *testing.T, l *Level, want Stats) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats() != want {
		if time.Now().After(deadline) {
			t.Fatalf("stats = %+v, want %+v", l.Stats(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func must(t *testing.T, ch <-chan Ticket) Ticket {
	t.Helper()
	select {
	case tk, ok := <-ch:
		if !ok {
			t.Fatal("acquire failed")
		}
		return tk
	case <-time.After(5 * time.Second):
		t.Fatal("not granted")
	}
	return Ticket{}
}

func pending(t *testing.T, ch <-chan Ticket) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal("granted or failed, want waiting")
	case <-time.After(20 * time.Millisecond):
	}
}

// One flow holds at most its share, however many requests it sends; the
// others still run.
func TestFlowShare(t *testing.T) {
	l := NewLevel(Limits{Seats: 4, SeatsPerFlow: 2, QueueLength: 10})
	var held []Ticket
	for range 2 {
		tk, queued, err := l.Acquire(context.Background(), "hog", 1, time.Minute)
		if err != nil || queued {
			t.Fatalf("hog within share: queued %v, %v", queued, err)
		}
		held = append(held, tk)
	}
	third := grant(t, l, "hog", 1)
	waitFor(t, l, Stats{Used: 2, Waiting: 1})
	pending(t, third)
	// Another user runs at once, though the hog waits.
	other := must(t, grant(t, l, "other", 1))
	waitFor(t, l, Stats{Used: 3, Waiting: 1})
	held[0].Release()
	must(t, third).Release()
	held[1].Release()
	other.Release()
	waitFor(t, l, Stats{})
	if len(l.flows) != 0 {
		t.Fatalf("flows left: %v", l.flows)
	}
}

// A freed seat goes to the waiting flow that holds the fewest seats.
func TestFairDispatch(t *testing.T) {
	l := NewLevel(Limits{Seats: 3, SeatsPerFlow: 3, QueueLength: 10})
	var a []Ticket
	for range 3 {
		a = append(a, must(t, grant(t, l, "a", 1)))
	}
	a4 := grant(t, l, "a", 1)
	waitFor(t, l, Stats{Used: 3, Waiting: 1})
	b := grant(t, l, "b", 1)
	waitFor(t, l, Stats{Used: 3, Waiting: 2})
	a[0].Release()
	must(t, b) // b holds none: it goes first, though a waited longer
	pending(t, a4)
	a[1].Release()
	must(t, a4)
}

// Queues are bounded per flow and per level; a flow that fills the level's
// queue gives way to the others.
func TestQueueFull(t *testing.T) {
	l := NewLevel(Limits{Seats: 2, SeatsPerFlow: 1, QueueLength: 6}) // 8 may wait
	ta := must(t, grant(t, l, "a", 1))
	tc := must(t, grant(t, l, "c", 1))
	var hogs []<-chan Ticket
	for range 6 {
		hogs = append(hogs, grant(t, l, "a", 1))
	}
	waitFor(t, l, Stats{Used: 2, Waiting: 6})
	if _, _, err := l.Acquire(context.Background(), "a", 1, time.Minute); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("flow queue over its length: %v", err)
	}
	// b's third and fourth waiters take the places of two of a's.
	var bs []<-chan Ticket
	for i := range 4 {
		bs = append(bs, grant(t, l, "b", 1))
		waitFor(t, l, Stats{Used: 2, Waiting: min(7+i, 8)})
	}
	evicted := 0
	for _, h := range hogs {
		select {
		case _, ok := <-h:
			if ok {
				t.Fatal("a waiter got seats while none were free")
			}
			evicted++
		case <-time.After(20 * time.Millisecond):
		}
	}
	if evicted != 2 {
		t.Fatalf("%d of a's waiters evicted, want 2", evicted)
	}
	// Now b's queue is the longest: its fifth is refused.
	if _, _, err := l.Acquire(context.Background(), "b", 1, time.Minute); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("level queue over its bound: %v", err)
	}
	ta.Release()
	tc.Release()
	// Every waiter left runs in turn.
	left := append(hogs, bs...)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
		var still []<-chan Ticket
		for _, ch := range left {
			select {
			case tk, ok := <-ch:
				if ok {
					tk.Release()
				}
			default:
				still = append(still, ch)
			}
		}
		left = still
		time.Sleep(time.Millisecond)
	}
	waitFor(t, l, Stats{})
}

// A waiter whose context ends or whose wait runs out leaves the queue and
// takes nothing.
func TestWaitEnds(t *testing.T) {
	l := NewLevel(Limits{Seats: 1, QueueLength: 5})
	tk := must(t, grant(t, l, "a", 1))
	if _, queued, err := l.Acquire(context.Background(), "b", 1, 10*time.Millisecond); !queued || !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("wait timeout: queued %v, %v", queued, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, _, err := l.Acquire(ctx, "b", 1, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	waitFor(t, l, Stats{Used: 1})
	tk.Release()
	waitFor(t, l, Stats{})
	if len(l.flows) != 0 || len(l.queued) != 0 {
		t.Fatalf("left behind: flows %v, queued %v", l.flows, l.queued)
	}
}

// A wide request is not starved by narrow ones arriving after it.
func TestWideNotStarved(t *testing.T) {
	l := NewLevel(Limits{Seats: 4, QueueLength: 10})
	n1 := must(t, grant(t, l, "n", 1))
	wide := grant(t, l, "w", 4)
	waitFor(t, l, Stats{Used: 1, Waiting: 1})
	narrow := grant(t, l, "x", 1)
	waitFor(t, l, Stats{Used: 1, Waiting: 2})
	pending(t, narrow) // seats are free, but the wide one is ahead
	n1.Release()
	must(t, wide).Release()
	must(t, narrow).Release()
	if l.Width(100) != 4 {
		t.Fatalf("Width clamps to the flow's share: %d", l.Width(100))
	}
}

// Under concurrent use the seats in use never pass the limits, and every
// request eventually runs.
func TestConcurrent(t *testing.T) {
	l := NewLevel(Limits{Seats: 5, SeatsPerFlow: 2, QueueLength: 100})
	var mu sync.Mutex
	perFlow, total, worst := map[string]int{}, 0, 0
	var wg sync.WaitGroup
	flows := []string{"a", "b", "c", "d"}
	running := make(chan struct{}, 5) // at most 5 waiting: the level's bound
	for i := range 200 {
		wg.Add(1)
		running <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-running }()
			f, w := flows[i%len(flows)], 1+i%2
			tk, _, err := l.Acquire(context.Background(), f, w, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			perFlow[f] += w
			total += w
			if perFlow[f] > 2 || total > 5 {
				worst = max(worst, total)
				t.Errorf("flow %s holds %d, level %d", f, perFlow[f], total)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			perFlow[f] -= w
			total -= w
			mu.Unlock()
			tk.Release()
		}()
	}
	wg.Wait()
	if l.Stats() != (Stats{}) || worst != 0 {
		t.Fatalf("after: %+v, worst %d", l.Stats(), worst)
	}
}
