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
	c.window.reset()
	c.state, c.snap, c.retained = nil, nil, nil
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// list reads the prefix from a storage snapshot and makes it the cache's
// state. A list after the first breaks the continuity of every watcher.
func (c *Cache) list() error {
	st := c.cfg.Storage
	var state *stateTree
	c.mu.RLock()
	keep := !c.stateOff
	c.mu.RUnlock()
	if keep {
		state = newStateTree()
	}
	var size, rev int64
	var start []byte
	for {
		opts := storage.ListOptions{Prefix: c.cfg.Prefix, StartKey: start, Revision: rev, Limit: listPageSize}
		if state == nil {
			opts.Limit, opts.KeysOnly = 1, true // only the revision is needed
		}
		page, err := st.List(c.ctx, opts)
		if err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		rev = page.Revision
		if state != nil {
			for _, kv := range page.Items {
				o := &Object{Key: kv.Key, Value: kv.Value, Revision: kv.Revision}
				state.ReplaceOrInsert(o)
				size += o.size()
			}
			if size > c.cfg.StateBytes {
				c.log.Warn("watch cache: the state is larger than Settings.StateBytes; serving initial state from storage",
					"limit", c.cfg.StateBytes)
				state, size = nil, 0
				c.mu.Lock()
				c.stateOff = true
				c.mu.Unlock()
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
	for c.window.len() > 0 {
		c.frameBytes.Add(-c.window.pop().detach())
	}
	c.window.reset()
	c.windowBytes = 0
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
		return
	}
	c.stateRev, c.snap = ev.Revision, nil
	if ev.Type == Deleted {
		if old, ok := c.state.Delete(&Object{Key: ev.Key()}); ok {
			c.stateBytes.Add(-old.size())
			c.encBytes.Add(-old.keptSize())
		}
		return
	}
	if old, ok := c.state.ReplaceOrInsert(ev.Object); ok {
		c.stateBytes.Add(-old.size())
		c.encBytes.Add(-old.keptSize())
	}
	if c.stateBytes.Add(ev.Object.size()) > c.cfg.StateBytes {
		c.log.Warn("watch cache: the state is larger than Settings.StateBytes; serving initial state from storage",
			"limit", c.cfg.StateBytes, "objects", c.state.Len())
		c.state, c.stateOff, c.retained = nil, true, nil
		c.stateBytes.Store(0)
		c.encBytes.Store(0)
	}
}

func (c *Cache) evictLocked(now time.Time) {
	for c.window.len() > 0 {
		ev := c.window.at(0)
		if c.window.len() <= c.cfg.WindowEvents &&
			c.windowBytes+c.frameBytes.Load() <= c.cfg.WindowBytes &&
			now.Sub(ev.at) <= c.cfg.WindowAge {
			return
		}
		c.window.pop()
		c.windowBytes -= ev.size
		c.frameBytes.Add(-ev.detach())
		c.oldest = ev.Revision
	}
}
