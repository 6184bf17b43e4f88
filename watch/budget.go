package watch

import (
	"sync"
	"sync/atomic"
	"time"
)

// Budget bounds the memory of the states of several caches together: in a
// registry, every type and served version of one server shares one. A cache
// whose state grows past the budget takes memory back from the state read
// least recently (its own, if that is the coldest): that state is dropped
// whole, and its cache serves reads from storage as a cache without state
// does. A dropped state comes back when a read finds it missing and the
// budget has room for it again (at most every Settings.ReadmitInterval per cache).
// Encodings objects keep (Cache.Encoding) count too, but never take memory
// back from another state; nor does a state larger than the whole budget,
// which is dropped at once. A Budget is safe for concurrent use.
type Budget struct {
	limit int64

	// The caches' windows, as each charged them at its last eviction
	// check (Settings.WindowTotalBytes), and how many hold events.
	windows, windowCaches atomic.Int64

	// Bytes of the initial-event frames objects keep (Cache.keepInitialFrame),
	// part of used, bounded by limit/frameShare: frames never take memory
	// back from a state, so they may not take all the room either.
	frames atomic.Int64

	mu           sync.Mutex
	used         int64
	shares       map[*share]struct{}
	drops, backs int64
}

// frameShare: at most 1/frameShare of a budget holds initial-event frames.
const frameShare = 8

// reserveFrame reserves n bytes of the frames' part of the budget.
func (b *Budget) reserveFrame(n int64) bool {
	if b.limit < 0 {
		return false
	}
	if b.frames.Add(n) > b.limit/frameShare {
		b.frames.Add(-n)
		return false
	}
	return true
}

// releaseFrames gives back n bytes reserved by reserveFrame.
func (b *Budget) releaseFrames(n int64) {
	if n != 0 {
		b.frames.Add(-n)
	}
}

// NewBudget returns a budget of limit bytes: 0 means DefaultStateBytes,
// negative keeps no state at all.
func NewBudget(limit int64) *Budget {
	if limit == 0 {
		limit = DefaultStateBytes
	}
	return &Budget{limit: limit, shares: map[*share]struct{}{}}
}

// BudgetStats describe a budget at one moment.
type BudgetStats struct {
	Limit   int64 // bytes (negative: no state is kept)
	Used    int64 // bytes of the kept states and their objects' kept encodings
	States  int   // caches whose state is kept
	Dropped int   // caches whose state is dropped
	Drops   int64 // states dropped since the budget was made
	Readmit int64 // dropped states brought back since the budget was made
	Windows int64 // bytes the caches' windows hold (Settings.WindowTotalBytes)
}

// Stats returns the budget's current figures.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := BudgetStats{Limit: b.limit, Used: b.used, Drops: b.drops, Readmit: b.backs, Windows: b.windows.Load()}
	for s := range b.shares {
		if s.kept {
			st.States++
		} else {
			st.Dropped++
		}
	}
	return st
}

// share is one cache's part of a budget.
type share struct {
	c     *Cache
	bytes int64  // charged to the budget (Budget.mu)
	kept  bool   // the cache may keep its state (Budget.mu)
	gen   uint64 // counts the drops (Budget.mu)
	read  atomic.Int64
}

// touch records a read of the state (unix nanoseconds, to the millisecond).
func (s *share) touch() {
	now := time.Now().UnixNano()
	if now-s.read.Load() > int64(time.Millisecond) {
		s.read.Store(now)
	}
}

func (b *Budget) join(c *Cache) *share {
	s := &share{c: c, kept: b.limit >= 0}
	s.read.Store(time.Now().UnixNano())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shares[s] = struct{}{}
	return s
}

func (b *Budget) leave(s *share) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(s)
	delete(b.shares, s)
}

// keeps reports whether s may keep a state.
func (b *Budget) keeps(s *share) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.kept
}

// grow charges n more bytes to s, dropping the least recently read states
// until the budget holds. It reports false when s itself was dropped (or
// was already): its cache must drop its state. Other dropped states are
// released by their caches asynchronously (a cache's lock is never taken
// under another's).
func (b *Budget) grow(s *share, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.kept {
		return false
	}
	s.bytes += n
	b.used += n
	if s.bytes > b.limit { // it cannot fit: take nothing from the others
		b.dropLocked(s)
		return false
	}
	for b.used > b.limit {
		v := b.coldestLocked()
		if v == nil || v == s {
			b.dropLocked(s)
			return false
		}
		b.dropLocked(v)
		go v.c.budgetDropped(v.gen)
	}
	return true
}

// coldestLocked returns the kept state with bytes read least recently.
func (b *Budget) coldestLocked() *share {
	var v *share
	for s := range b.shares {
		if s.kept && s.bytes > 0 && (v == nil || s.read.Load() < v.read.Load()) {
			v = s
		}
	}
	return v
}

func (b *Budget) dropLocked(s *share) {
	b.used -= s.bytes
	s.bytes, s.kept = 0, false
	s.gen++
	b.drops++
}

// shrink gives n bytes of s back.
func (b *Budget) shrink(s *share, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.kept {
		s.bytes -= n
		b.used -= n
	}
}

// fits charges n bytes to s only if the budget holds them as it is.
func (b *Budget) fits(s *share, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.kept || b.used+n > b.limit {
		return false
	}
	s.bytes += n
	b.used += n
	return true
}

// room returns how many bytes the budget has left.
func (b *Budget) room() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit - b.used
}

// readmit takes s back with a state of n bytes if the budget has room.
func (b *Budget) readmit(s *share, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.kept || b.limit < 0 || b.used+n > b.limit {
		return false
	}
	s.kept, s.bytes = true, n
	b.used += n
	b.backs++
	return true
}

// release takes s out of the budget without counting a drop: its cache has
// no state (a list that built none, or replaced one brought back meanwhile).
func (b *Budget) release(s *share) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(s)
}

func (b *Budget) releaseLocked(s *share) {
	if s.kept {
		b.used -= s.bytes
	}
	s.bytes, s.kept = 0, false
}

// dropped reports whether s is still dropped since drop number gen.
func (b *Budget) dropped(s *share, gen uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !s.kept && s.gen == gen
}

// chargeWindow records that a cache's window, which held old bytes at its
// last charge, holds now bytes.
func (b *Budget) chargeWindow(old, now int64) {
	if now == old {
		return
	}
	b.windows.Add(now - old)
	switch {
	case old == 0:
		b.windowCaches.Add(1)
	case now == 0:
		b.windowCaches.Add(-1)
	}
}

// overWindowShare reports whether a window of mine bytes (charged as
// charged) must shrink: all windows together are past limit, and it holds
// more than an equal share of limit.
func (b *Budget) overWindowShare(limit, charged, mine int64) bool {
	if limit < 0 || b.windows.Load()-charged+mine <= limit {
		return false
	}
	n := b.windowCaches.Load()
	if charged == 0 && mine > 0 {
		n++
	}
	return mine > limit/max(n, 1)
}
