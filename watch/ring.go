package watch

import "sort"

// ring is the window: events in increasing revision order in a growable
// circular buffer.
type ring struct {
	buf  []*Event
	head int // index of the oldest event
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) *Event { return r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) push(ev *Event) {
	if r.n == len(r.buf) {
		nb := make([]*Event, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = ev
	r.n++
}

// pop removes and returns the oldest event.
func (r *ring) pop() *Event {
	ev := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	// Give memory back after a burst.
	if len(r.buf) > 64 && r.n < len(r.buf)/4 {
		nb := make([]*Event, len(r.buf)/2)
		for i := 0; i < r.n; i++ {
			nb[i] = r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	return ev
}

func (r *ring) reset() { *r = ring{} }

// since appends to dst up to limit events with a revision above rev.
func (r *ring) since(rev int64, limit int, dst []*Event) []*Event {
	i := sort.Search(r.n, func(i int) bool { return r.at(i).Revision > rev })
	for ; i < r.n && limit > 0; i, limit = i+1, limit-1 {
		dst = append(dst, r.at(i))
	}
	return dst
}
