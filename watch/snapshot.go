package watch

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
)

// Snapshot returns the cache's state as it is, sorted by key; ok is false
// when the cache keeps no state.
func (c *Cache) Snapshot(ctx context.Context) (_ *Snapshot, ok bool, _ error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, false, err
	}
	c.mu.RLock()
	sn, kept := c.snap, c.state != nil
	if !kept {
		c.readmitSoon()
	}
	c.mu.RUnlock()
	if !kept {
		return nil, false, nil
	}
	c.share.touch()
	if sn == nil {
		c.mu.Lock()
		sn = c.snapshotLocked()
		c.mu.Unlock()
		if sn == nil {
			return nil, false, nil
		}
	}
	return sn, true, nil
}

// SnapshotAt returns the state as it was at revision rev, when the cache
// still has it: the current snapshot, or one kept by Retain.
func (c *Cache) SnapshotAt(rev int64) (*Snapshot, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		return nil, false
	}
	c.share.touch()
	if sn := c.snap; sn != nil && sn.covers(rev) {
		return sn, true
	}
	now := time.Now()
	for _, sn := range c.retained {
		if sn.covers(rev) && now.Sub(time.Unix(0, sn.used.Load())) <= c.cfg.RetainFor {
			sn.used.Store(now.UnixNano())
			return sn, true
		}
	}
	return nil, false
}

// Retain keeps sn (from Snapshot or SnapshotAt) for later SnapshotAt
// calls, so that the pages of a list continue from memory even after
// the state has changed. At most Settings.RetainedSnapshots are kept, each
// until it has gone unused for Settings.RetainFor; older ones are dropped
// first.
func (c *Cache) Retain(sn *Snapshot) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireRetainedLocked(now)
	if c.cfg.RetainedSnapshots <= 0 || c.state == nil {
		return
	}
	sn.used.Store(now.UnixNano())
	for _, r := range c.retained {
		if r == sn || (r.from == sn.from && r.rev >= sn.rev) {
			r.used.Store(now.UnixNano())
			return
		}
	}
	if len(c.retained) >= c.cfg.RetainedSnapshots {
		c.retained[0] = nil
		c.retained = c.retained[1:]
	}
	c.retained = append(c.retained, sn)
}

func (c *Cache) expireRetainedLocked(now time.Time) {
	kept := c.retained[:0]
	for _, sn := range c.retained {
		if now.Sub(time.Unix(0, sn.used.Load())) <= c.cfg.RetainFor {
			kept = append(kept, sn)
		}
	}
	clear(c.retained[len(kept):])
	c.retained = kept
}

// snapshotLocked returns a snapshot of the current state, cloning the state
// if a change was applied since the last one (c.mu held for writing).
func (c *Cache) snapshotLocked() *Snapshot {
	if c.state == nil {
		return nil
	}
	if c.snap == nil {
		// A clone is O(1): the state and the clone share their nodes until
		// the state's next change copies the ones it touches.
		c.snap = &Snapshot{from: c.stateRev, rev: c.rev.Load(), tree: c.state.Clone(), memo: &snapshotMemo{}}
	}
	return c.snap
}

// stateUnderLocked returns the state's objects under prefix in key order in a
// new slice (c.mu held for writing; the state is kept).
func (c *Cache) stateUnderLocked(prefix []byte) []*Object {
	return slices.Clone(c.snapshotLocked().Under(prefix))
}

// stateTree is the cache's state: the latest version of every object, by key.
type stateTree = btree.BTreeG[*Object]

func newStateTree() *stateTree {
	return btree.NewG(32, func(a, b *Object) bool { return bytes.Compare(a.Key, b.Key) < 0 })
}

// Snapshot is the state at the revisions from..rev (no change in between):
// a copy-on-write clone of the state's B-tree, read by key range. It is
// shared and never modified.
type Snapshot struct {
	from, rev int64
	tree      *stateTree    // a copy-on-write clone of the state, never written
	memo      *snapshotMemo // shared by the snapshots of the same state
	used      atomic.Int64  // unix nanoseconds of the last use, for Retain
}

// snapshotMemo holds what lists computed once per state (Memo, Under).
type snapshotMemo struct {
	mu    sync.Mutex
	m     map[any]int
	under map[string][]*Object // Under's answers, by prefix
}

// memoized returns m[key], computing it with f and storing it on first use
// (under mu, but not while f runs: concurrent first calls may each compute
// it, and the first to store wins, so every caller sees one value).
func memoized[K comparable, V any](mu *sync.Mutex, m *map[K]V, key K, f func() (V, error)) (V, error) {
	mu.Lock()
	v, ok := (*m)[key]
	mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := f()
	if err != nil {
		return v, err
	}
	mu.Lock()
	defer mu.Unlock()
	if prev, ok := (*m)[key]; ok {
		return prev, nil
	}
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[key] = v
	return v, nil
}

// Memo returns what f computes for key, computing it at most once per
// state (concurrent first calls may each compute it): for facts that depend
// only on the snapshot's objects, such as the total size of some of their
// encodings, that every list of the same state can reuse. key must say
// everything f depends on besides the objects.
func (sn *Snapshot) Memo(key any, f func() (int, error)) (int, error) {
	return memoized(&sn.memo.mu, &sn.memo.m, key, f)
}

func (sn *Snapshot) covers(rev int64) bool { return sn.from <= rev && rev <= sn.rev }

// Revision is the revision of the state (the cache's revision when it was
// taken, or later when nothing changed since).
func (sn *Snapshot) Revision() int64 { return sn.rev }

// Under returns the objects whose keys start with prefix, in key order. The
// slice is shared (every list of the same prefix and state gets the same
// one): do not modify it. It costs the size of the answer, not of the state:
// a namespace's list reads only that namespace.
func (sn *Snapshot) Under(prefix []byte) []*Object {
	objs, _ := memoized(&sn.memo.mu, &sn.memo.under, string(prefix), func() ([]*Object, error) {
		var objs []*Object
		sn.tree.AscendGreaterOrEqual(&Object{Key: prefix}, func(o *Object) bool {
			if !bytes.HasPrefix(o.Key, prefix) {
				return false
			}
			objs = append(objs, o)
			return true
		})
		return objs[:len(objs):len(objs)], nil
	})
	return objs
}
