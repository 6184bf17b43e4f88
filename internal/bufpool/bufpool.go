// Package bufpool keeps byte buffers for reuse across requests: a
// sync.Pool of *[]byte that hands out empty buffers and does not keep one
// that grew past what its user wants to hold on to.
package bufpool

import "sync"

// Pool is a pool of byte buffers. The zero Pool is not ready; use New.
type Pool struct {
	p sync.Pool
}

// New returns a pool whose new buffers have capacity size.
func New(size int) *Pool {
	return &Pool{p: sync.Pool{New: func() any { b := make([]byte, 0, size); return &b }}}
}

// Get returns an empty buffer. The caller stores what it grows to back in
// *b before Put.
func (p *Pool) Get() *[]byte {
	b := p.p.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Put returns b to the pool unless its capacity is above keepUpTo, so that a
// rare large request does not pin a large buffer. Nothing may use *b after.
func (p *Pool) Put(b *[]byte, keepUpTo int) {
	if cap(*b) <= keepUpTo {
		*b = (*b)[:0]
		p.p.Put(b)
	}
}
