package watch

import (
	"errors"
	"fmt"
	"time"

	"github.com/kapi-dev/kapi/storage"
)

// run lists and follows the prefix until the cache is stopped or the store
// closes, recovering from storage watch failures.
func (c *Cache) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	needList := true
	var err error
	for {
		if needList {
			if err = c.list(); err == nil {
				needList = false
				backoff = 100 * time.Millisecond
			}
		}
		if err == nil {
			err = c.follow()
		}
		switch {
		case c.ctx.Err() != nil:
			c.shutdown(ErrStopped)
			return
		case errors.Is(err, storage.ErrClosed):
			c.shutdown(storage.ErrClosed)
			return
		case errors.Is(err, storage.ErrCompacted):
			// The cache fell behind storage history: list again.
			needList = true
		}
		c.log.Warn("watch cache: storage watch failed; retrying", "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			c.shutdown(ErrStopped)
			return
		}
		backoff = min(2*backoff, 5*time.Second)
		err = nil
	}
}

// shutdown ends every watcher with err.
func (c *Cache) shutdown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	for w := range c.watchers {
		w.closeLocked(err)
	}
	clear(c.watchers)
	clear(c.synced)
	c.clearWindowLocked()
	c.clearStateLocked()
	c.budget.leave(c.share)
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// list reads the prefix from a storage snapshot and makes it the cache's
// state, charging it to the budget page by page (a state the budget drops
// is not built; only the revision is read). A list after the first breaks
// the continuity of every watcher.
func (c *Cache) list() error {
	st := c.cfg.Storage
	c.mu.Lock()
	if c.state != nil {
		// A relist: the old state goes now (its watchers are about to end),
		// so that the new one is charged alone.
		c.budget.shrink(c.share, c.stateBytes.Load()+c.encBytes.Load())
		c.clearStateLocked()
	}
	c.mu.Unlock()
	var state *stateTree
	if c.budget.keeps(c.share) {
		state = newStateTree()
	}
	var size, rev int64
	var start []byte
	for {
		opts := storage.ListOptions{Prefix: c.cfg.Prefix, StartKey: start, Revision: rev, Limit: listPageSize, MaxBytes: listPageBytes}
		if state == nil {
			opts.Limit, opts.KeysOnly = 1, true // only the revision is needed
		}
		page, err := st.List(c.ctx, opts)
		if err != nil {
			c.budget.shrink(c.share, size)
			return fmt.Errorf("listing: %w", err)
		}
		rev = page.Revision
		if state != nil {
			var n int64
			for _, kv := range page.Items {
				o := &Object{Key: kv.Key, Value: kv.Value, Revision: kv.Revision}
				state.ReplaceOrInsert(o)
				n += o.size()
			}
			size += n
			if !c.budget.grow(c.share, n) {
				c.mu.Lock()
				c.dropStateLocked(size)
				c.mu.Unlock()
				state, size = nil, 0
			}
		}
		if state == nil || !page.More {
			break
		}
		start = page.NextKey
	}
	if rev == 0 {
		// Nothing was ever written: a watch from revision 0 would start "from
		// now" and could miss a write made meanwhile. Wait for one.
		return fmt.Errorf("listing: the store has no revision yet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists > 0 {
		for w := range c.watchers {
			w.closeLocked(ErrResync)
			delete(c.watchers, w)
		}
		clear(c.synced)
	}
	c.clearWindowLocked()
	if c.state != nil {
		// Brought back while this list ran: the list replaces it.
		c.budget.shrink(c.share, c.stateBytes.Load()+c.encBytes.Load())
		c.clearStateLocked()
	}
	if state != nil && !c.budget.keeps(c.share) {
		// The budget took the share back for another state after the last
		// page: the list was charged and released, never installed.
		c.estimate = size
		c.readmitAt.Store(time.Now().UnixNano())
		state, size = nil, 0
	}
	if state == nil {
		c.budget.release(c.share) // a share without a state can be brought back
	}
	c.state = state
	c.stateBytes.Store(size)
	c.encBytes.Store(0)
	c.stateRev, c.snap, c.retained = rev, nil, nil
	c.rev.Store(rev)
	c.oldest = rev
	c.lists++
	c.advanceLocked()
	if c.lists == 1 {
		close(c.ready)
	}
	return nil
}

// follow applies the storage watch from the cache's revision until it fails.
func (c *Cache) follow() error {
	from := c.rev.Load()
	evs, err := c.cfg.Storage.Watch(c.ctx, storage.WatchOptions{
		Prefix: c.cfg.Prefix, FromRevision: from, ProgressInterval: c.cfg.ProgressInterval,
	})
	if err != nil {
		return err
	}
	batch := make([]storage.Event, 0, 256)
	for {
		var ev storage.Event
		var ok bool
		select {
		case ev, ok = <-evs:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if !ok {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			return errors.New("storage watch ended")
		}
		batch = append(batch[:0], ev)
	drain:
		for len(batch) < cap(batch) {
			select {
			case ev, ok = <-evs:
				if !ok {
					break drain
				}
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		err := c.apply(batch)
		clear(batch)
		if err != nil {
			return err
		}
	}
}

// apply applies a batch of storage events: state, window, dispatch.
func (c *Cache) apply(batch []storage.Event) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for i := range batch {
		sev := &batch[i]
		switch sev.Type {
		case storage.EventProgress:
			if sev.Revision > c.rev.Load() {
				c.rev.Store(sev.Revision)
				if sn := c.snap; sn != nil {
					// No change since: the snapshot is this revision's too.
					c.snap = &Snapshot{from: sn.from, rev: sev.Revision, tree: sn.tree, memo: sn.memo}
				}
			}
		case storage.EventPut, storage.EventDelete:
			if sev.Revision <= c.rev.Load() {
				continue
			}
			var prev *Object
			if c.state != nil {
				prev, _ = c.state.Get(&Object{Key: sev.Key})
			}
			ev := newEvent(sev, prev, now, c.cfg.PrevValue)
			ev.counter = &c.frameBytes
			c.applyStateLocked(ev)
			c.window.push(ev)
			c.windowBytes += ev.size
			c.dispatchLocked(ev)
			c.rev.Store(sev.Revision)
		case storage.EventError:
			if err == nil {
				err = sev.Err
				if err == nil {
					err = errors.New("storage watch failed")
				}
			}
		}
		if err != nil {
			break
		}
	}
	c.evictLocked(now)
	c.expireRetainedLocked(now)
	c.advanceLocked()
	return err
}

func (c *Cache) advanceLocked() {
	close(c.advanced)
	c.advanced = make(chan struct{})
}

func (c *Cache) applyStateLocked(ev *Event) {
	if c.state == nil {
		var d int64
		if ev.Object != nil {
			d = ev.Object.size()
		}
		if ev.Prev != nil {
			d -= ev.Prev.size()
		}
		c.estimate = max(0, c.estimate+d)
		return
	}
	c.stateRev, c.snap = ev.Revision, nil
	var freed, added int64
	if old, ok := applyToState(c.state, ev); ok {
		freed = old.size() + old.keptSize()
		c.stateBytes.Add(-old.size())
		c.encBytes.Add(-old.keptSize())
		if f := old.keptFrameSize(); f > 0 {
			c.initBytes.Add(-f)
			c.budget.releaseFrames(f)
		}
		old.forget()
	}
	if ev.Type != Deleted {
		added = ev.Object.size()
		c.stateBytes.Add(added)
	}
	switch net := added - freed; {
	case net <= 0:
		c.budget.shrink(c.share, -net)
	case !c.budget.grow(c.share, net):
		c.dropStateLocked(c.stateBytes.Load() + c.encBytes.Load())
	}
}

// applyToState applies ev to state and returns the object it replaced or
// deleted, if any.
func applyToState(state *stateTree, ev *Event) (old *Object, ok bool) {
	if ev.Type == Deleted {
		return state.Delete(&Object{Key: ev.Key()})
	}
	return state.ReplaceOrInsert(ev.Object)
}

// dropStateLocked drops the state (its budget share is released already);
// size is about what it took, for a later readmission.
func (c *Cache) dropStateLocked(size int64) {
	if c.state != nil {
		c.log.Info("watch cache: state dropped to keep the memory budget; reads come from storage",
			"objects", c.state.Len(), "bytes", size)
	}
	c.clearStateLocked()
	c.estimate = size
	c.readmitAt.Store(time.Now().UnixNano())
}

// clearStateLocked forgets the state and what it holds, and has its objects
// forget what they keep (the window's events may still hold some).
func (c *Cache) clearStateLocked() {
	if c.state != nil && c.encBytes.Load() > 0 {
		c.state.Ascend(func(o *Object) bool { o.forget(); return true })
	}
	c.budget.releaseFrames(c.initBytes.Swap(0))
	c.state, c.snap, c.retained = nil, nil, nil
	c.stateBytes.Store(0)
	c.encBytes.Store(0)
}

// budgetDropped drops the state after the budget took its share back for
// another cache's state (drop number gen), unless it came back since.
func (c *Cache) budgetDropped(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.budget.dropped(c.share, gen) {
		c.dropStateLocked(c.stateBytes.Load() + c.encBytes.Load())
	}
}

// evictLocked drops the window's oldest events past its bounds (events,
// age, bytes, and its share of the budget's WindowTotalBytes), then charges
// what is left to the budget.
func (c *Cache) evictLocked(now time.Time) {
	for c.window.len() > 0 {
		ev := c.window.at(0)
		held := c.windowBytes + c.frameBytes.Load()
		if c.window.len() <= c.cfg.WindowEvents &&
			held <= c.cfg.WindowBytes &&
			now.Sub(ev.at) <= c.cfg.WindowAge &&
			!c.budget.overWindowShare(c.cfg.WindowTotalBytes, c.windowShare, held) {
			break
		}
		c.window.pop()
		c.windowBytes -= ev.size
		c.frameBytes.Add(-ev.detach())
		c.oldest = ev.Revision
	}
	c.chargeWindowLocked()
}

// clearWindowLocked empties the window (its events' frames detached) and
// charges it as empty.
func (c *Cache) clearWindowLocked() {
	for c.window.len() > 0 {
		c.frameBytes.Add(-c.window.pop().detach())
	}
	c.window.reset()
	c.windowBytes = 0
	c.chargeWindowLocked()
}

// chargeWindowLocked charges the window's bytes as they are now to the
// budget.
func (c *Cache) chargeWindowLocked() {
	held := c.windowBytes + c.frameBytes.Load()
	c.budget.chargeWindow(c.windowShare, held)
	c.windowShare = held
}
