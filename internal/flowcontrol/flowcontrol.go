// Package flowcontrol shares a fixed number of seats fairly between flows
// (users): the core of kapi's request fairness, after kube-apiserver's API
// Priority and Fairness. A Level is one priority level. A request takes one
// or more seats while it runs; when the level is full, or its flow already
// holds its share, it waits in its flow's queue, and a freed seat goes to
// the waiting flow that holds the fewest seats (the longest-waiting head
// among equals). No flow can hold more than its share, so one flow cannot
// take the whole level from the others, however long its requests last.
package flowcontrol

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrQueueFull is Acquire's error when the flow's queue, or the level's, is
// full.
var ErrQueueFull = errors.New("flowcontrol: queue full")

// Limits configure a Level.
type Limits struct {
	// Seats are the seats of the level: what its requests running at once
	// may take together. At least 1.
	Seats int
	// SeatsPerFlow bounds the seats one flow holds at once (1..Seats).
	SeatsPerFlow int
	// QueueLength bounds the requests one flow has waiting. 0: no queue, a
	// request that cannot run at once is refused. The level holds at most
	// 4×Seats waiting in all; when full, the flow with the longest queue
	// gives up its newest waiter to a flow with a shorter one.
	QueueLength int
}

// Level is one priority level. It is safe for concurrent use.
type Level struct {
	lim Limits

	mu      sync.Mutex
	used    int              // seats taken
	waiting int              // requests queued
	seq     uint64           // arrival order of waiters
	flows   map[string]*flow // flows that hold seats or wait
	queued  []*flow          // flows with waiters, in no particular order
	idle    *flow            // a forgotten flow, to reuse
}

type flow struct {
	id    string
	used  int
	queue []*waiter // FIFO
	inQ   bool      // in Level.queued
}

type waiter struct {
	width   int
	seq     uint64
	ready   chan struct{} // closed when granted or evicted
	granted bool
	evicted bool
}

// NewLevel returns a level with lim, corrected into range.
func NewLevel(lim Limits) *Level {
	lim.Seats = max(lim.Seats, 1)
	if lim.SeatsPerFlow <= 0 || lim.SeatsPerFlow > lim.Seats {
		lim.SeatsPerFlow = lim.Seats
	}
	lim.QueueLength = max(lim.QueueLength, 0)
	return &Level{lim: lim, flows: map[string]*flow{}}
}

// Limits returns the level's limits as corrected by NewLevel.
func (l *Level) Limits() Limits { return l.lim }

// Stats are a level's current counts.
type Stats struct {
	Used, Waiting int // seats taken, requests queued
}

// Stats returns the level's current counts.
func (l *Level) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Used: l.used, Waiting: l.waiting}
}

// Width is the seats a request of width w takes on l: at least 1, at most
// a flow's share.
func (l *Level) Width(w int) int { return min(max(w, 1), l.lim.SeatsPerFlow) }

// Ticket holds seats of a level; Release gives them back, once.
type Ticket struct {
	l     *Level
	f     *flow
	width int
}

// Release gives the ticket's seats back.
func (t Ticket) Release() { t.l.release(t.f, t.width) }

// ErrWaitTimeout is Acquire's error when a request waited maxWait.
var ErrWaitTimeout = errors.New("flowcontrol: waited too long")

// Acquire takes Width(width) seats for a request of flowID, waiting in the
// flow's queue until they are free, ctx ends or maxWait passes. It returns
// the ticket that holds them, ErrQueueFull when the request can neither run
// nor wait, ErrWaitTimeout after maxWait, or ctx's error (queued reports
// whether it had to wait at all).
func (l *Level) Acquire(ctx context.Context, flowID string, width int, maxWait time.Duration) (t Ticket, queued bool, err error) {
	width = l.Width(width)
	l.mu.Lock()
	f := l.flows[flowID]
	if f == nil {
		if f = l.idle; f != nil {
			l.idle = nil
			f.id = flowID
		} else {
			f = &flow{id: flowID}
		}
		l.flows[flowID] = f
	}
	// Run at once when nobody waits (waiters go first) and it fits.
	if l.waiting == 0 && l.fits(f, width) {
		l.take(f, width)
		l.mu.Unlock()
		return Ticket{l, f, width}, false, nil
	}
	// Else queue, and run at once if it is the fairest that fits.
	l.seq++
	w := &waiter{width: width, seq: l.seq, ready: make(chan struct{})}
	l.enqueue(f, w)
	l.dispatch()
	if w.granted {
		l.mu.Unlock()
		return Ticket{l, f, width}, false, nil
	}
	if len(f.queue) > l.lim.QueueLength || (l.waiting > l.maxWaiting() && !l.evictFor(f)) {
		l.dequeue(f, w)
		l.forget(f)
		l.mu.Unlock()
		return Ticket{}, false, ErrQueueFull
	}
	l.mu.Unlock()

	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	err = ErrWaitTimeout
	select {
	case <-w.ready:
		if w.granted {
			return Ticket{l, f, width}, true, nil
		}
		return Ticket{}, true, ErrQueueFull // evicted for another flow
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
	}
	l.mu.Lock()
	if w.granted {
		// Granted as the wait ended: give the seats back.
		l.mu.Unlock()
		l.release(f, width)
		return Ticket{}, true, err
	}
	if !w.evicted {
		l.dequeue(f, w)
		l.dispatch() // a head behind this one may fit now
		l.forget(f)
	}
	l.mu.Unlock()
	return Ticket{}, true, err
}

// maxWaiting is how many requests the level holds waiting in all.
func (l *Level) maxWaiting() int { return 4 * l.lim.Seats }

func (l *Level) enqueue(f *flow, w *waiter) {
	f.queue = append(f.queue, w)
	l.waiting++
	if !f.inQ {
		f.inQ = true
		l.queued = append(l.queued, f)
	}
}

// dequeue removes a waiter that was neither granted nor evicted.
func (l *Level) dequeue(f *flow, w *waiter) {
	for i, q := range f.queue {
		if q == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			break
		}
	}
	l.waiting--
	l.unqueueIfEmpty(f)
}

// evictFor makes room in a full level for a waiter of f: the newest waiter
// of the flow with the longest queue leaves, if that queue is longer than
// f's. So a flow that fills the level's queue loses its place to the others
// instead of keeping them out.
func (l *Level) evictFor(f *flow) bool {
	var longest *flow
	for _, q := range l.queued {
		if longest == nil || len(q.queue) > len(longest.queue) {
			longest = q
		}
	}
	if longest == nil || longest == f || len(longest.queue) <= len(f.queue) {
		return false
	}
	last := len(longest.queue) - 1
	w := longest.queue[last]
	longest.queue[last] = nil
	longest.queue = longest.queue[:last]
	l.waiting--
	l.unqueueIfEmpty(longest)
	l.forget(longest)
	w.evicted = true
	close(w.ready)
	return true
}

func (l *Level) fits(f *flow, width int) bool {
	return l.used+width <= l.lim.Seats && f.used+width <= l.lim.SeatsPerFlow
}

func (l *Level) take(f *flow, width int) {
	l.used += width
	f.used += width
}

func (l *Level) release(f *flow, width int) {
	l.mu.Lock()
	l.used -= width
	f.used -= width
	l.dispatch()
	l.forget(f)
	l.mu.Unlock()
}

// dispatch grants seats to waiters while the fairest one fits: among the
// flows whose head is within their share, the one holding the fewest seats,
// then the earliest head. When that head does not fit the level, nothing
// else runs before it (a wide request is not starved by narrow ones).
func (l *Level) dispatch() {
	for l.waiting > 0 {
		var best *flow
		for _, f := range l.queued {
			h := f.queue[0]
			if f.used+h.width > l.lim.SeatsPerFlow {
				continue
			}
			if best == nil || f.used < best.used || (f.used == best.used && h.seq < best.queue[0].seq) {
				best = f
			}
		}
		if best == nil || l.used+best.queue[0].width > l.lim.Seats {
			return
		}
		w := best.queue[0]
		best.queue[0] = nil
		best.queue = best.queue[1:]
		l.waiting--
		l.unqueueIfEmpty(best)
		l.take(best, w.width)
		w.granted = true
		close(w.ready)
	}
}

func (l *Level) unqueueIfEmpty(f *flow) {
	if len(f.queue) > 0 || !f.inQ {
		return
	}
	f.inQ = false
	f.queue = nil
	for i, q := range l.queued {
		if q == f {
			last := len(l.queued) - 1
			l.queued[i], l.queued[last] = l.queued[last], nil
			l.queued = l.queued[:last]
			return
		}
	}
}

// forget drops a flow that holds and waits for nothing, keeping it to
// reuse for the next new flow: a lone user's flow comes and goes with each
// request.
func (l *Level) forget(f *flow) {
	if f.used == 0 && len(f.queue) == 0 && l.flows[f.id] == f {
		delete(l.flows, f.id)
		f.inQ, f.queue = false, nil
		l.idle = f
	}
}
